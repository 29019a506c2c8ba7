// How much of the local runtime its nodes' agents may have at once. The runtime is one
// process over one embedded database that serves one request at a time; every agent call
// (a report, a heartbeat, a standby's ask, data credentials) is a few of its requests. On
// AWS, API Gateway throttles the agent routes and Lambda scales out; here nothing did, and
// 200 nodes whose calls timed out and were tried again piled up work for callers long gone,
// until the runtime answered nothing at all (not even instance metadata) for minutes. Calls
// past the limit are answered 429 at once, which every agent call tries again after a
// jittered pause, as it does a throttled call on AWS.

import type { ApiResponse } from '../lib/http/index.ts';

/**
 * Agent calls the local runtime works on at once. Each makes a handful of database
 * requests in turn: with this many, a call waits behind at most a few hundred of them,
 * well within the 30 s an agent gives a report's answer, even on a busy machine.
 */
export const MAX_AGENT_CALLS_IN_FLIGHT = 32;

/** Admits agent calls up to a limit and turns the rest away with 429. */
export class AgentCallGate {
  private inFlight = 0;

  constructor(private readonly limit = MAX_AGENT_CALLS_IN_FLIGHT) {}

  /** Agent calls being worked on now. */
  get busy(): number {
    return this.inFlight;
  }

  /** Runs `call` if fewer than the limit are in flight; otherwise answers 429 without running it. */
  async run(call: () => Promise<ApiResponse>): Promise<ApiResponse> {
    if (this.inFlight >= this.limit) {
      return {
        statusCode: 429,
        headers: { 'content-type': 'application/json', 'retry-after': '1' },
        body: JSON.stringify({ error: `the local runtime is busy with ${this.inFlight} agent calls; try again` }),
      };
    }
    this.inFlight += 1;
    try {
      return await call();
    } finally {
      this.inFlight -= 1;
    }
  }
}
