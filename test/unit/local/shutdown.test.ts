// Closing the runtime while jobs wait on their attempts: every engine step in flight
// settles, so no timer of the state machine engine (a Task's timeout can be 2^31-1 ms,
// about 24.8 days) keeps the process alive after its work is done.

import { afterEach, describe, expect, it, vi } from 'vitest';
import { useLocalRuntimes, waitFor, waitUntilAwaiting, yaml } from '../../support/local-harness.ts';

const open = useLocalRuntimes();

afterEach(() => {
  vi.restoreAllMocks();
});

/** Every timer of a minute or more set from now on, and whether it was cleared or fired. */
function watchLongTimers(): { readonly pending: () => number[] } {
  const live = new Map<NodeJS.Timeout, number>();
  const set = globalThis.setTimeout;
  const clear = globalThis.clearTimeout;
  vi.spyOn(globalThis, 'setTimeout').mockImplementation(((callback: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const timer = set((...given: unknown[]) => {
      live.delete(timer);
      callback(...given);
    }, ms, ...args);
    if ((ms ?? 0) >= 60_000) live.set(timer, ms as number);
    return timer;
  }) as typeof setTimeout);
  vi.spyOn(globalThis, 'clearTimeout').mockImplementation(((timer?: NodeJS.Timeout) => {
    if (timer !== undefined) live.delete(timer);
    clear(timer);
  }) as typeof clearTimeout);
  return { pending: () => [...live.entries()].filter(([timer]) => timer.hasRef()).map(([, ms]) => ms) };
}

describe('closing the runtime', () => {
  it('with one job awaited and another launching leaves no long timer that keeps the process up', async () => {
    const timers = watchLongTimers();
    const t = await open();
    const { jobId } = await t.runtime.submit(yaml`
      run: sleep 60
    `);
    await waitUntilAwaiting(t, jobId, 1);
    await t.runtime.submit('run: sleep 60\n');
    expect(timers.pending().length).toBeGreaterThan(0);
    await t.runtime.close();
    // The engine clears a Task's timer once the task's promise settles, on the next turns.
    await waitFor('the engine to clear its timers', () => (timers.pending().length === 0 ? true : undefined), 5_000).catch(() => undefined);
    expect(timers.pending()).toEqual([]);
  });
});
