import { describe, expect, it } from 'vitest';
import type { ApiResponse } from '../../lib/http/index.ts';
import { AgentCallGate } from '../../local/agent-calls.ts';

const OK: ApiResponse = { statusCode: 200, headers: {}, body: '{}' };

/** A call that runs until `finish` is called. */
function heldCall(): { call: () => Promise<ApiResponse>; started: () => boolean; finish: () => void } {
  let started = false;
  let finish = (): void => undefined;
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  return {
    call: async () => {
      started = true;
      await done;
      return OK;
    },
    started: () => started,
    finish: () => finish(),
  };
}

describe('AgentCallGate', () => {
  it('works on calls up to its limit and answers the next 429 at once, without running it', async () => {
    const gate = new AgentCallGate(2);
    const [a, b, c] = [heldCall(), heldCall(), heldCall()];
    const first = gate.run(a.call);
    const second = gate.run(b.call);
    const turnedAway = await gate.run(c.call);

    expect(turnedAway.statusCode).toBe(429);
    expect(JSON.parse(turnedAway.body)).toEqual({ error: 'the local runtime is busy with 2 agent calls; try again' });
    expect(c.started()).toBe(false);
    expect(gate.busy).toBe(2);

    a.finish();
    await expect(first).resolves.toBe(OK);
    expect(gate.busy).toBe(1);
    const retried = heldCall();
    const third = gate.run(retried.call);
    expect(retried.started()).toBe(true);
    b.finish();
    retried.finish();
    await expect(Promise.all([second, third])).resolves.toEqual([OK, OK]);
    expect(gate.busy).toBe(0);
  });

  it('frees the slot of a call that failed', async () => {
    const gate = new AgentCallGate(1);
    await expect(gate.run(() => Promise.reject(new Error('the store refused')))).rejects.toThrow('the store refused');
    expect(gate.busy).toBe(0);
    await expect(gate.run(async () => OK)).resolves.toBe(OK);
  });
});
