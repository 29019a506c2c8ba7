// How much of the local runtime its nodes' agents may have at once. The runtime is one
// process over one embedded database that serves one request at a time; every agent call
// (a report, a heartbeat, a standby's ask, data credentials) is a few of its requests. On
// AWS, API Gateway throttles the agent routes and Lambda scales out; here nothing did, and
// 200 nodes whose calls timed out and were tried again piled up work for callers long gone,
// until the runtime answered nothing at all (not even instance metadata) for minutes. Calls
// past the limit wait their turn, oldest first, and a call whose caller hung up while it
// waited is dropped at its turn instead of run. Turning calls away (429) instead let newer
// calls win the free slots at random, so one agent could be refused until it gave up, and
// its healthy attempt ended LOST.

import type { ApiResponse } from '../lib/http/index.ts';

/**
 * Agent calls the local runtime works on at once. Each makes a handful of database
 * requests in turn: with this many, a call waits behind at most a few hundred of them,
 * well within the 30 s an agent gives a report's answer, even on a busy machine.
 */
export const MAX_AGENT_CALLS_IN_FLIGHT = 32;

/** What a call whose caller hung up before its turn is answered; nobody reads it. */
export const CALLER_GONE: ApiResponse = {
  statusCode: 503,
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ error: 'the caller hung up before its turn' }),
};

/** Works on agent calls up to a limit at once; the rest wait their turn, oldest first. */
export class AgentCallGate {
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly limit = MAX_AGENT_CALLS_IN_FLIGHT) {}

  /** Agent calls being worked on now. */
  get busy(): number {
    return this.inFlight;
  }

  /** Agent calls waiting for a turn. */
  get queued(): number {
    return this.waiting.length;
  }

  /**
   * Runs `call` once fewer than the limit are in flight and every call that came before it
   * has had its turn. `callerGone` is asked at that turn: a caller that hung up meanwhile
   * (its agent timed out and will ask again) gets CALLER_GONE, and the call is not run.
   */
  async run(call: () => Promise<ApiResponse>, callerGone: () => boolean = () => false): Promise<ApiResponse> {
    if (this.inFlight < this.limit && this.waiting.length === 0) this.inFlight += 1;
    // The slot is handed over by the call that ends (see finally), so the count stays.
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      if (callerGone()) return CALLER_GONE;
      return await call();
    } finally {
      const next = this.waiting.shift();
      if (next === undefined) this.inFlight -= 1;
      else next();
    }
  }
}
