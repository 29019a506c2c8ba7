// LaunchAttempt and the shared launch pace: a launch past the bucket waits for its slot
// (nothing written, nothing launched), then launches on the next run without reserving.

import { describe, expect, it } from 'vitest';
import { InMemoryJobStore } from '../../../../lib/adapters/memory-job-store.ts';
import { cancelJob } from '../../../../lib/usecases/cancel-job.ts';
import { evaluatePolicy } from '../../../../lib/usecases/evaluate-policy.ts';
import { launchAttempt } from '../../../../lib/usecases/launch-attempt.ts';
import { givenJob, harness, initialState, JOB_ID, launchAndAwait, report, taskSpec } from '../../../support/usecases-harness.ts';

/** 4 instances at once, then one a second. */
const PACE = { burst: 4, perSecond: 1 };

describe('launchAttempt with the launch pace', () => {
  it('sends a launch past the burst to WaitForLaunchPace, writing nothing, then launches it after the wait', async () => {
    const h = harness(new InMemoryJobStore(), PACE);
    await h.pace.reserve(3, h.clock.now().getTime());
    await givenJob(h, taskSpec({ numNodes: 3 }));

    const waiting = await launchAttempt(initialState(), h.deps);

    // 3 + 3 instances against a burst of 4: the launch's slot is 2 s away.
    expect(waiting).toEqual({ jobId: JOB_ID, attempt: 0, attemptsInExecution: 0, launchWaitSeconds: 2, launchReserved: true });
    expect(h.compute.launches).toHaveLength(0);
    const job = await h.store.getJob(JOB_ID);
    expect(job).toMatchObject({ status: 'PENDING', attemptCount: 0 });

    h.clock.advance(2);
    const launched = await launchAttempt(waiting, h.deps);
    expect(launched).toEqual({ jobId: JOB_ID, attempt: 1, attemptsInExecution: 1, launched: true, bootTimeoutSeconds: 600 });
    expect(h.compute.launches).toHaveLength(1);
    // The slot was taken once: the next instance's slot is right after this launch's.
    expect(await h.pace.reserve(1, h.clock.now().getTime())).toBe(h.clock.now().getTime() + 1000);
  });

  it('launches at once while the bucket has room', async () => {
    const h = harness(new InMemoryJobStore(), PACE);
    await givenJob(h, taskSpec({ numNodes: 4 }));
    expect(await launchAttempt(initialState(), h.deps)).toMatchObject({ attempt: 1, launched: true });
  });

  it('charges every node: a job larger than the burst waits for the rest of its nodes', async () => {
    const h = harness(new InMemoryJobStore(), PACE);
    await givenJob(h, taskSpec({ numNodes: 7 }));
    expect(await launchAttempt(initialState(), h.deps)).toMatchObject({ launchWaitSeconds: 3 });
  });

  it('takes no slot for a job being cancelled: it ends the attempt CANCELLED at once', async () => {
    const h = harness(new InMemoryJobStore(), PACE);
    await givenJob(h, taskSpec({ numNodes: 4 }));
    await h.store.changeStatus(JOB_ID, { from: 'PENDING', to: 'CANCELLING', reason: 'user', attempt: null, at: h.clock.now().toISOString() });
    expect(await launchAttempt(initialState(), h.deps)).toMatchObject({ attempt: 1, launched: false });
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'CANCELLED' });
    expect(await h.pace.reserve(4, h.clock.now().getTime())).toBeLessThanOrEqual(h.clock.now().getTime());
  });

  it('answers a run repeated after the launch (a retried Lambda) as before, taking no second slot', async () => {
    const h = harness(new InMemoryJobStore(), PACE);
    await givenJob(h, taskSpec({ numNodes: 4 }));
    const first = await launchAttempt(initialState(), h.deps);
    const again = await launchAttempt(initialState(), h.deps);
    expect(again).toEqual(first);
    expect(h.compute.launches).toHaveLength(1);
    expect(await h.pace.reserve(1, h.clock.now().getTime())).toBe(h.clock.now().getTime() + 1000);
  });

  it('takes no second slot when a run that claimed the launch failed after it, and the step runs again', async () => {
    const h = harness(new InMemoryJobStore(), PACE);
    await givenJob(h, taskSpec({ numNodes: 4 }));
    h.compute.scriptLaunch({ error: new Error('the Lambda died here') });
    await expect(launchAttempt(initialState(), h.deps)).rejects.toThrow('the Lambda died here');
    expect(await launchAttempt(initialState(), h.deps)).toMatchObject({ attempt: 2, launched: true });
    // Only the first run took its 4: the next instance's slot is the burst's end plus one.
    expect(await h.pace.reserve(1, h.clock.now().getTime())).toBe(h.clock.now().getTime() + 1000);
  });

  it('sees a cancel that landed while it reserved, and ends the attempt CANCELLED instead of waiting', async () => {
    const h = harness(new InMemoryJobStore(), PACE);
    await givenJob(h, taskSpec({ numNodes: 8 }));
    const reserve = h.pace.reserve.bind(h.pace);
    h.pace.reserve = async (instances, now) => {
      const slot = await reserve(instances, now);
      await h.store.changeStatus(JOB_ID, { from: 'PENDING', to: 'CANCELLING', reason: 'user', attempt: null, at: h.clock.now().toISOString() });
      return slot;
    };
    expect(await launchAttempt(initialState(), h.deps)).toMatchObject({ attempt: 1, launched: false });
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'CANCELLED' });
  });

  it('gives the slot back when the job is cancelled while it waits: the next launch takes it', async () => {
    const h = harness(new InMemoryJobStore(), PACE);
    await givenJob(h, taskSpec({ numNodes: 8 }));
    const waiting = await launchAttempt(initialState(), h.deps);
    expect(waiting).toMatchObject({ launchWaitSeconds: 4, launchReserved: true });

    await cancelJob(JOB_ID, h.deps);

    // The 8 are back: 4 go at once, as from a fresh bucket after its burst of 4 refilled.
    expect(await h.pace.reserve(4, h.clock.now().getTime())).toBe(h.clock.now().getTime());
    // A second cancel gives nothing more back.
    await cancelJob(JOB_ID, h.deps);
    expect(await h.pace.reserve(1, h.clock.now().getTime())).toBe(h.clock.now().getTime() + 1000);
  });

  it('paces a relaunch as a first launch: after a restart the next attempt waits its turn', async () => {
    const h = harness(new InMemoryJobStore(), { burst: 1, perSecond: 1 });
    await givenJob(h, taskSpec({ numNodes: 1, recovery: { maxRestartsOnErrors: 1 } }));
    const first = await launchAndAwait(h, initialState());
    await report(h, 1, 'run', 1);
    const decided = await evaluatePolicy(first, h.deps);
    expect(decided.decision).toMatchObject({ action: 'RESTART' });

    const waiting = await launchAttempt(decided, h.deps);
    expect(waiting).toEqual({ jobId: JOB_ID, attempt: 1, attemptsInExecution: 1, launchWaitSeconds: 1, launchReserved: true });
    h.clock.advance(1);
    expect(await launchAttempt(waiting, h.deps)).toMatchObject({ attempt: 2, launched: true });
  });
});

describe('launchAttempt with the launch pace and kept nodes', () => {
  it('charges only the nodes launched anew: a restart in place on every node takes no slot', async () => {
    const h = harness(new InMemoryJobStore(), PACE);
    await givenJob(h, taskSpec({ numNodes: 4, recovery: { reuseNodes: { reuse: true, setup: 'skip' }, recoverOnExitCodes: [29] } }));
    const first = await launchAndAwait(h, initialState());
    await report(h, 1, 'run', 29, 0);
    const decided = await evaluatePolicy(first, h.deps);
    // The bucket has not refilled: a launch of 4 fresh nodes would wait for a slot.

    expect(await launchAttempt(decided, h.deps)).toMatchObject({ attempt: 2, launched: true });
    expect(h.compute.launches).toHaveLength(2);
  });
});
