// evaluatePolicy: every action, the wait's own endings, cancel winning, and a decision recorded once.

import { describe, expect, it } from 'vitest';
import { InMemoryJobStore } from '../../../../lib/adapters/memory-job-store.ts';
import { InvalidInputError, NoCapacityError } from '../../../../lib/errors.ts';
import type { JobRecord } from '../../../../lib/model.ts';
import type { AttemptOutcome, RecoveryCounters } from '../../../../lib/policy/types.ts';
import type { RecoveryPolicy } from '../../../../lib/task-file/types.ts';
import type { JobStore } from '../../../../lib/ports.ts';
import { evaluatePolicy } from '../../../../lib/usecases/evaluate-policy.ts';
import { launchAttempt } from '../../../../lib/usecases/launch-attempt.ts';
import { MAX_ATTEMPTS_PER_EXECUTION, WorkflowError, type WorkflowState } from '../../../../lib/workflow/contract.ts';
import { givenJob, givenLaunched, harness, initialState, JOB_ID, launchAndAwait, report, taskSpec, type Harness } from '../../../support/usecases-harness.ts';

/** A job whose attempt 1 is running and awaited, under this policy. */
async function attemptRunning(h: Harness, recovery: Partial<RecoveryPolicy> = {}): Promise<WorkflowState> {
  return givenLaunched(h, taskSpec({ recovery }));
}

async function ended(h: Harness, outcome: AttemptOutcome): Promise<void> {
  await h.store.endAttempt(JOB_ID, 1, outcome, h.clock.now().toISOString());
}

describe('evaluatePolicy', () => {
  it.each<{ name: string; recovery: Partial<RecoveryPolicy>; phase: 'setup' | 'run'; code: number; action: string; status: string; counters: Partial<RecoveryCounters> }>([
    { name: 'exit 0 succeeds', recovery: {}, phase: 'run', code: 0, action: 'SUCCEED', status: 'SUCCEEDED', counters: { recoveryCount: 0 } },
    {
      name: 'a code in recover_on_exit_codes restarts without charging the error budget',
      recovery: { recoverOnExitCodes: [29] },
      phase: 'run',
      code: 29,
      action: 'RESTART',
      status: 'RECOVERING',
      counters: { restartsOnErrors: 0, restartsOnExitCodes: 1, recoveryCount: 1 },
    },
    {
      name: 'an error within max_restarts_on_errors restarts and charges it',
      recovery: { maxRestartsOnErrors: 2 },
      phase: 'run',
      code: 1,
      action: 'RESTART',
      status: 'RECOVERING',
      counters: { restartsOnErrors: 1, recoveryCount: 1 },
    },
    { name: 'an error with no budget fails', recovery: {}, phase: 'run', code: 1, action: 'FAIL', status: 'FAILED', counters: { restartsOnErrors: 1, recoveryCount: 0 } },
    { name: 'a setup error with no budget fails in setup', recovery: {}, phase: 'setup', code: 2, action: 'FAIL', status: 'FAILED_SETUP', counters: { restartsOnErrors: 1 } },
  ])('$name', async ({ recovery, phase, code, action, status, counters }) => {
    const h = harness();
    const state = await attemptRunning(h, recovery);
    await report(h, 1, phase, code);

    const next = await evaluatePolicy({ ...state, awaited: { outcome: 'EXITED' } }, h.deps);

    expect(next.decision).toMatchObject({ action, status, delaySeconds: 0, continueAsNew: false });
    expect(next).not.toHaveProperty('awaited');
    const job = await h.store.getJob(JOB_ID);
    expect(job.status).toBe(status);
    expect(job.counters).toMatchObject(counters);
    const attempt = await h.store.getAttempt(JOB_ID, 1);
    expect(attempt.decision).toMatchObject({ action, status, reason: next.decision?.reason });
    // The counters after each decision stay on its attempt, for the attempt's history.
    expect(attempt.decision?.counters).toEqual(job.counters);
    const events = await h.store.listEvents(JOB_ID);
    expect(events.at(-1)).toMatchObject({ to: status, attempt: 1, reason: next.decision?.reason });
  });

  it('stores the reason of a FAIL as the job\'s failure reason', async () => {
    const h = harness();
    const state = await attemptRunning(h);
    await report(h, 1, 'run', 137);
    const next = await evaluatePolicy(state, h.deps);
    expect(next.decision?.reason).toMatch(/137/);
    expect((await h.store.getJob(JOB_ID)).failureReason).toBe(next.decision?.reason);
  });

  it('recovers a preempted attempt, without charging the error budget', async () => {
    const h = harness();
    const state = await attemptRunning(h);
    await ended(h, { kind: 'PREEMPTED' });
    const next = await evaluatePolicy(state, h.deps);
    expect(next.decision).toMatchObject({ action: 'RECOVER', status: 'RECOVERING' });
    expect((await h.store.getJob(JOB_ID)).counters).toMatchObject({ restartsOnErrors: 0, recoveryCount: 1, consecutivePreemptions: 1 });
  });

  it('ends an attempt whose node was never heard from by its boot_timeout LOST as never booted, then recovers it', async () => {
    const h = harness();
    const state = await attemptRunning(h, { bootTimeoutSeconds: 900 });
    h.clock.advance(900);

    const next = await evaluatePolicy({ ...state, awaitError: { Error: WorkflowError.Timeout, Cause: '' } }, h.deps);

    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({
      kind: 'LOST',
      reason: 'no heartbeat from the node in the 900 s since launch (boot_timeout 15m)',
      neverBooted: true,
    });
    expect(next.decision).toMatchObject({ action: 'RECOVER', status: 'RECOVERING' });
    expect(next.decision?.reason).toMatch(/no heartbeat from the node in the 900 s since launch/);
    expect((await h.store.getJob(JOB_ID)).counters.bootFailuresInARow).toBe(1);
    expect(next).not.toHaveProperty('awaitError');
  });

  it('fails the job FAILED_NO_RESOURCE after max_boot_failures attempts in a row that never came up', async () => {
    const h = harness();
    let state = await attemptRunning(h, { maxBootFailures: 2 });
    for (let attempt = 1; attempt <= 2; attempt += 1) {
      h.clock.advance(300);
      state = await evaluatePolicy({ ...state, awaitError: { Error: WorkflowError.HeartbeatTimeout, Cause: '' } }, h.deps);
      if (attempt === 1) {
        expect(state.decision).toMatchObject({ action: 'RECOVER' });
        state = await launchAndAwait(h, state);
      }
    }
    expect(state.decision).toMatchObject({ action: 'FAIL', status: 'FAILED_NO_RESOURCE' });
    expect(state.decision?.reason).toContain('the instances never reached relaunch');
  });

  it.each([
    { heard: [0, 2], names: 'node 1 of 3', nodes: { nodes: [1] } },
    { heard: [1], names: 'nodes 0, 2 of 3', nodes: { nodes: [0, 2] } },
    { heard: [], names: 'any of the 3 nodes', nodes: {} },
  ])('names the nodes never heard from ($names) when the boot clock runs out, as the nodes that went', async ({ heard, names, nodes }) => {
    const h = harness();
    const state = await givenLaunched(h, taskSpec({ numNodes: 3 }));
    for (const rank of heard) await h.store.recordHeartbeat(JOB_ID, 1, h.clock.now().toISOString(), rank);
    h.clock.advance(600);
    await evaluatePolicy({ ...state, awaitError: { Error: WorkflowError.Timeout, Cause: '' } }, h.deps);
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({
      kind: 'LOST',
      reason: `no heartbeat from ${names} in the 600 s since launch (boot_timeout 10m)`,
      neverBooted: true,
      ...nodes,
    });
  });

  it('counts the silence from the last heartbeat', async () => {
    const h = harness();
    const state = await attemptRunning(h);
    h.clock.advance(100);
    await h.store.recordHeartbeat(JOB_ID, 1, h.clock.now().toISOString(), 0);
    h.clock.advance(310);
    await evaluatePolicy({ ...state, awaitError: { Error: WorkflowError.Timeout } }, h.deps);
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'LOST', reason: 'no heartbeat for 310 s' });
  });

  it('ends a timed-out attempt PREEMPTED when EC2 had warned of an interruption', async () => {
    const h = harness();
    const state = await attemptRunning(h);
    await h.store.noteInterruption(JOB_ID, 1, h.clock.now().toISOString());
    await evaluatePolicy({ ...state, awaitError: { Error: WorkflowError.HeartbeatTimeout } }, h.deps);
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'PREEMPTED' });
  });

  it('keeps the outcome a report stored before the timeout was handled', async () => {
    const h = harness();
    const state = await attemptRunning(h);
    await report(h, 1, 'run', 0);
    const next = await evaluatePolicy({ ...state, awaitError: { Error: WorkflowError.HeartbeatTimeout } }, h.deps);
    expect(next.decision?.action).toBe('SUCCEED');
  });

  it('ends a cancelled wait CANCELLED and the job CANCELLED', async () => {
    const h = harness();
    const state = await attemptRunning(h);
    await h.store.changeStatus(JOB_ID, { from: 'STARTING', to: 'CANCELLING', reason: 'user', attempt: 1, at: h.clock.now().toISOString() });

    const next = await evaluatePolicy({ ...state, awaitError: { Error: WorkflowError.JobCancelled, Cause: 'cancelled by the user' } }, h.deps);

    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'CANCELLED' });
    expect(next.decision).toMatchObject({ action: 'FAIL', status: 'CANCELLED' });
    expect((await h.store.getJob(JOB_ID)).status).toBe('CANCELLED');
  });

  it('lets cancel win over an attempt that finished while the cancel was on its way', async () => {
    const h = harness();
    const state = await attemptRunning(h);
    await report(h, 1, 'run', 0);
    await h.store.changeStatus(JOB_ID, { from: 'RUNNING', to: 'CANCELLING', reason: 'user', attempt: 1, at: h.clock.now().toISOString() });
    const next = await evaluatePolicy(state, h.deps);
    expect(next.decision).toMatchObject({ action: 'FAIL', status: 'CANCELLED' });
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome?.kind).toBe('EXITED');
  });

  it('fails the job FAILED_NO_RESOURCE after a launch with no capacity', async () => {
    const h = harness();
    await givenJob(h);
    const state = await launchAttempt(initialState(), h.deps);
    await ended(h, { kind: 'LAUNCH_FAILED', cause: 'NO_RESOURCE', reason: 'no capacity' });
    const next = await evaluatePolicy(state, h.deps);
    expect(next.decision).toMatchObject({ action: 'FAIL', status: 'FAILED_NO_RESOURCE' });
  });

  it('waits for capacity when a relaunch finds none, and counts the wait from the first launch that found none', async () => {
    const h = harness();
    let state = await attemptRunning(h, { launchTimeoutSeconds: 100 });
    await ended(h, { kind: 'PREEMPTED' });
    state = await evaluatePolicy(state, h.deps);
    for (const [attempt, expected] of [
      [2, { action: 'RECOVER', status: 'RECOVERING', delaySeconds: 60 }],
      [3, { action: 'FAIL', status: 'FAILED_NO_RESOURCE' }],
    ] as const) {
      h.compute.scriptLaunch({ error: new NoCapacityError('InsufficientInstanceCapacity in us-east-1a') });
      state = await launchAttempt(state, h.deps);
      expect(state.attempt).toBe(attempt);
      h.clock.advance(attempt === 2 ? 0 : 101);
      state = await evaluatePolicy(state, h.deps);
      expect(state.decision).toMatchObject(expected);
    }
    expect(state.decision?.reason).toContain('launch_timeout');
    expect(state.decision?.reason).toContain('InsufficientInstanceCapacity');
  });

  it('passes the backoff delay to the Wait', async () => {
    const h = harness();
    const state = await attemptRunning(h, { restartBackoff: { initialSeconds: 30, factor: 2, maxSeconds: 600, jitter: 'none' } });
    await ended(h, { kind: 'PREEMPTED' });
    const next = await evaluatePolicy(state, h.deps);
    expect(next.decision?.delaySeconds).toBe(30);
    expect((await h.store.getAttempt(JOB_ID, 1)).decision?.delaySeconds).toBe(30);
  });

  it('asks to continue as a new execution once this one has run its share of attempts', async () => {
    const h = harness();
    const state = await attemptRunning(h);
    await ended(h, { kind: 'PREEMPTED' });
    const next = await evaluatePolicy({ ...state, attemptsInExecution: MAX_ATTEMPTS_PER_EXECUTION }, h.deps);
    expect(next.decision).toMatchObject({ action: 'RECOVER', continueAsNew: true });
  });

  it('never continues as new to finish a job', async () => {
    const h = harness();
    const state = await attemptRunning(h);
    await report(h, 1, 'run', 0);
    const next = await evaluatePolicy({ ...state, attemptsInExecution: MAX_ATTEMPTS_PER_EXECUTION }, h.deps);
    expect(next.decision).toMatchObject({ action: 'SUCCEED', continueAsNew: false });
  });

  it('answers a re-run with the recorded decision and records nothing twice', async () => {
    const h = harness();
    const state = await attemptRunning(h, { maxRestartsOnErrors: 3 });
    await report(h, 1, 'run', 1);
    const first = await evaluatePolicy(state, h.deps);
    const events = await h.store.listEvents(JOB_ID);
    const counters = (await h.store.getJob(JOB_ID)).counters;

    const again = await evaluatePolicy(state, h.deps);

    expect(again).toEqual(first);
    expect(await h.store.listEvents(JOB_ID)).toEqual(events);
    expect((await h.store.getJob(JOB_ID)).counters).toEqual(counters);
  });

  it('a run that came late and its retry, at the same moment, answer one decision, recorded once', async () => {
    // The late run reads, then writes its decision between the retry's first and second reads.
    const h = harness();
    const state = await attemptRunning(h);
    await ended(h, { kind: 'PREEMPTED' });
    const retryHasRead = deferred();
    const lateRecorded = deferred();
    let retryReads = 0;
    const late = watched(h.store, {
      before: async (method) => (method === 'recordDecision' ? retryHasRead.promise : undefined),
      after: (method) => (method === 'recordDecision' ? lateRecorded.resolve() : undefined),
    });
    const retry = watched(h.store, {
      before: async (method) => {
        if (!method.startsWith('get')) return;
        retryReads += 1;
        if (retryReads === 2) {
          retryHasRead.resolve();
          await lateRecorded.promise;
        }
      },
    });

    const [first, second] = await Promise.all([evaluatePolicy(state, { ...h.deps, store: late }), evaluatePolicy(state, { ...h.deps, store: retry })]);

    expect(first.decision).toMatchObject({ action: 'RECOVER', status: 'RECOVERING' });
    expect(second).toEqual(first);
    expect((await h.store.listEvents(JOB_ID)).map((e) => e.to)).toEqual(['PENDING', 'STARTING', 'RECOVERING']);
    expect((await h.store.getJob(JOB_ID)).counters.recoveryCount).toBe(1);
  });

  it('refuses an attempt that has not ended when the wait ended without an error', async () => {
    const h = harness();
    const state = await attemptRunning(h);
    await expect(evaluatePolicy(state, h.deps)).rejects.toThrow(InvalidInputError);
    await expect(evaluatePolicy({ ...state, awaitError: { Error: 'States.TaskFailed' } }, h.deps)).rejects.toThrow(
      /expected a heartbeat timeout, a timeout or a cancel, got await error States.TaskFailed/,
    );
  });

  it('decides again on a fresh read when a late heartbeat moved the job to RUNNING meanwhile', async () => {
    const h = harness();
    const store = new HeartbeatDuringDecision();
    await givenJob({ ...h, store });
    const state = await launchAndAwait({ ...h, store, deps: { ...h.deps, store } }, initialState());
    await store.endAttempt(JOB_ID, 1, { kind: 'PREEMPTED' }, h.clock.now().toISOString());

    const next = await evaluatePolicy(state, { ...h.deps, store });

    expect(next.decision).toMatchObject({ action: 'RECOVER', status: 'RECOVERING' });
    expect((await store.listEvents(JOB_ID)).map((e) => e.to)).toEqual(['PENDING', 'STARTING', 'RUNNING', 'RECOVERING']);
  });
});

/** A promise and its resolve. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = (): void => undefined;
  const promise = new Promise<void>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

/** `store` as one caller sees it: `before` runs (and is awaited) before each call, `after` once it returned. */
function watched(store: JobStore, hooks: { before?: (method: string) => Promise<unknown>; after?: (method: string) => void }): JobStore {
  return new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        await hooks.before?.(String(property));
        const result: unknown = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        hooks.after?.(String(property));
        return result;
      };
    },
  });
}

/** A store where the agent's first heartbeat lands just before the first decision is written. */
class HeartbeatDuringDecision extends InMemoryJobStore {
  #raced = false;
  override async recordDecision(...args: Parameters<JobStore['recordDecision']>): Promise<JobRecord> {
    const [jobId, , , , change] = args;
    if (!this.#raced) {
      this.#raced = true;
      await this.changeStatus(jobId, { ...change, to: 'RUNNING', reason: 'heartbeat' });
    }
    return super.recordDecision(...args);
  }
}
