import { describe, expect, it } from 'vitest';
import type { ApiResponse } from '../../../lib/http/index.ts';
import { AgentCallGate, CALLER_GONE } from '../../../local/agent-calls.ts';

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

/** Lets every settled promise's continuations run. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('AgentCallGate', () => {
  it('works on calls up to its limit and runs the next ones when a place frees, oldest first', async () => {
    const gate = new AgentCallGate(2);
    const [a, b, c, d] = [heldCall(), heldCall(), heldCall(), heldCall()];
    const first = gate.run(a.call);
    const second = gate.run(b.call);
    const third = gate.run(c.call);
    const fourth = gate.run(d.call);
    await settle();

    expect([a.started(), b.started(), c.started(), d.started()]).toEqual([true, true, false, false]);
    expect([gate.busy, gate.queued]).toEqual([2, 2]);

    // A newer call never overtakes the ones already waiting.
    const newest = heldCall();
    const fifth = gate.run(newest.call);
    b.finish();
    await settle();
    expect([c.started(), d.started(), newest.started()]).toEqual([true, false, false]);
    expect([gate.busy, gate.queued]).toEqual([2, 2]);

    a.finish();
    c.finish();
    await settle();
    expect([d.started(), newest.started()]).toEqual([true, true]);
    d.finish();
    newest.finish();
    await expect(Promise.all([first, second, third, fourth, fifth])).resolves.toEqual([OK, OK, OK, OK, OK]);
    expect([gate.busy, gate.queued]).toEqual([0, 0]);
  });

  it('drops, at its turn, a call whose caller hung up while it waited', async () => {
    const gate = new AgentCallGate(1);
    const held = heldCall();
    const running = gate.run(held.call);
    const abandoned = heldCall();
    let hungUp = false;
    const dropped = gate.run(abandoned.call, () => hungUp);
    const waiting = heldCall();
    const next = gate.run(waiting.call);

    hungUp = true;
    held.finish();
    await expect(dropped).resolves.toBe(CALLER_GONE);
    expect(abandoned.started()).toBe(false);
    await settle();
    expect(waiting.started()).toBe(true);
    waiting.finish();
    await expect(Promise.all([running, next])).resolves.toEqual([OK, OK]);
    expect(gate.busy).toBe(0);
  });

  it('frees the place of a call that failed', async () => {
    const gate = new AgentCallGate(1);
    await expect(gate.run(() => Promise.reject(new Error('the store refused')))).rejects.toThrow('the store refused');
    expect(gate.busy).toBe(0);
    await expect(gate.run(async () => OK)).resolves.toBe(OK);
  });
});
