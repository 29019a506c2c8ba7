// A node's first heartbeat comes before its process starts. If the attempt is released
// meanwhile (a cancel, or the runtime closing), the process must never start: nobody would
// be left to kill it.

import * as childProcess from 'node:child_process';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { finish, useLocalRuntimes, yaml, type TestRuntime } from './harness.ts';

// Every process the compute starts is recorded (and killed after the test, should one leak).
vi.mock('node:child_process', async (importOriginal) => {
  const original = await importOriginal<typeof import('node:child_process')>();
  return { ...original, spawn: vi.fn(original.spawn) };
});
const spawn = vi.mocked(childProcess.spawn);

const open = useLocalRuntimes();

afterEach(() => {
  for (const result of spawn.mock.results) {
    const pid = (result.value as childProcess.ChildProcess | undefined)?.pid;
    if (pid === undefined) continue;
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // Already gone, as it should be.
    }
  }
  spawn.mockClear();
});

/**
 * Holds the first heartbeat's write until `release()`; `arrived` resolves when it is held,
 * `done` when the held write has completed.
 */
function holdFirstHeartbeat(t: TestRuntime): { arrived: Promise<void>; release: () => void; done: Promise<unknown> } {
  const { store } = t.runtime.deps;
  const record = store.recordHeartbeat.bind(store);
  let arrive!: () => void;
  let release!: () => void;
  let finished!: (value: unknown) => void;
  const arrived = new Promise<void>((resolve) => (arrive = resolve));
  const gate = new Promise<void>((resolve) => (release = resolve));
  const done = new Promise<unknown>((resolve) => (finished = resolve));
  vi.spyOn(store, 'recordHeartbeat').mockImplementationOnce(async (...args) => {
    arrive();
    await gate;
    try {
      return await record(...args);
    } finally {
      finished(undefined);
    }
  });
  return { arrived, release, done };
}

/** Lets every continuation already queued run (the compute spawns in one, when it does). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('a node released before its process started', () => {
  it('never starts the process when the job was cancelled during the first heartbeat', async () => {
    const t = await open();
    const held = holdFirstHeartbeat(t);
    const { jobId } = await t.runtime.submit(yaml`
      run: sleep 30
    `);
    await held.arrived;

    await t.runtime.cancel(jobId);
    const job = await finish(t, jobId);
    expect(job.view).toMatchObject({ status: 'CANCELLED', attempts: [{ outcome: 'CANCELLED', decision: 'FAIL' }] });

    held.release();
    await held.done;
    await settle();
    expect(spawn.mock.calls.map(([command, args]) => [command, args])).toEqual([]);
  });

  it('never starts the process when the runtime closed during the first heartbeat', async () => {
    const t = await open();
    const held = holdFirstHeartbeat(t);
    await t.runtime.submit(yaml`
      run: sleep 30
    `);
    await held.arrived;

    await t.runtime.close();
    held.release();
    await held.done;
    await settle();
    expect(spawn.mock.calls.map(([command, args]) => [command, args])).toEqual([]);
  });
});
