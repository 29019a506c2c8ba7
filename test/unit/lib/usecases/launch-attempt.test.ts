// LaunchAttempt: the market from the counters, launch failures as outcomes, cancel before launch.

import { describe, expect, it } from 'vitest';
import { NoCapacityError, PrecheckError } from '../../../../lib/errors.ts';
import { hashSecret } from '../../../../lib/secrets.ts';
import { evaluatePolicy } from '../../../../lib/usecases/evaluate-policy.ts';
import { launchAttempt } from '../../../../lib/usecases/launch-attempt.ts';
import { DEFAULT_PLACEMENT, fakeInstanceId } from '../../../support/fakes/fake-compute.ts';
import { InMemoryJobStore } from '../../../../lib/adapters/memory-job-store.ts';
import type { InstanceRef, JobRecord, Placement } from '../../../../lib/model.ts';
import type { JobPatch, StatusChange } from '../../../../lib/ports.ts';
import { givenJob, harness, initialState, JOB_ID, launchAndAwait, report, taskSpec } from '../../../support/usecases-harness.ts';

/** A store that fails to record instances, as DynamoDB might after EC2 said yes. */
class InstancesNotStored extends InMemoryJobStore {
  override async setInstances(_jobId: string, _attempt: number, _p: Placement, _i: readonly InstanceRef[]): Promise<void> {
    throw new Error('DynamoDB throttled');
  }
}

/** A store where the user cancels just before the launch's status change lands. */
class CancelledMeanwhile extends InMemoryJobStore {
  #raced = false;
  override async changeStatus(jobId: string, change: StatusChange, patch?: JobPatch): Promise<JobRecord> {
    if (!this.#raced && change.to === 'STARTING') {
      this.#raced = true;
      await super.changeStatus(jobId, { ...change, to: 'CANCELLING', reason: 'user' });
    }
    return super.changeStatus(jobId, change, patch);
  }
}

describe('launchAttempt', () => {
  it('launches attempt 1 on spot for a spot job, records its instances, and moves the job to STARTING', async () => {
    const h = harness();
    await givenJob(h, taskSpec({ useSpot: true, numNodes: 2 }));

    const state = await launchAttempt(initialState(), h.deps);

    expect(state).toEqual({ jobId: JOB_ID, attempt: 1, attemptsInExecution: 1, launched: true, bootTimeoutSeconds: 600 });
    expect(h.compute.launches).toHaveLength(1);
    const request = h.compute.launches[0];
    expect(request).toMatchObject({ jobId: JOB_ID, attempt: 1, market: 'spot', history: [] });
    expect(request?.spec.numNodes).toBe(2);
    const attempt = await h.store.getAttempt(JOB_ID, 1);
    expect(attempt).toMatchObject({ market: 'spot', placement: DEFAULT_PLACEMENT, outcome: null, taskToken: null });
    expect(attempt.instances.map((i) => i.instanceId)).toEqual([fakeInstanceId(JOB_ID, 1, 0), fakeInstanceId(JOB_ID, 1, 1)]);
    // Only the hash is stored; the secret went to compute alone.
    expect(attempt.secretHash).toBe(hashSecret(request?.callbackSecret ?? ''));
    expect(JSON.stringify(attempt)).not.toContain(request?.callbackSecret);
    expect((await h.store.getJob(JOB_ID)).status).toBe('STARTING');
  });

  it('launches on-demand when the counters say so (a job without use_spot)', async () => {
    const h = harness();
    await givenJob(h, taskSpec({ useSpot: false }));
    await launchAttempt(initialState(), h.deps);
    expect(h.compute.launches[0]?.market).toBe('on-demand');
    expect((await h.store.getAttempt(JOB_ID, 1)).market).toBe('on-demand');
  });

  it('follows the persisted market, not the spec, after an on-demand fallback', async () => {
    const h = harness();
    const job = await givenJob(h, taskSpec({ useSpot: true }));
    await h.store.changeStatus(
      JOB_ID,
      { from: 'PENDING', to: 'STARTING', reason: 't', attempt: null, at: job.createdAt },
      { counters: { ...job.counters, market: 'on-demand' } },
    );
    await h.store.changeStatus(JOB_ID, { from: 'STARTING', to: 'RECOVERING', reason: 't', attempt: null, at: job.createdAt });
    await launchAttempt(initialState(), h.deps);
    expect(h.compute.launches[0]?.market).toBe('on-demand');
  });

  it('gives compute the earlier placements, newest first, with how each ended', async () => {
    const h = harness();
    await givenJob(h);
    const west = { region: 'us-west-2', zone: 'us-west-2b', instanceType: 'm5.large' };
    h.compute.scriptLaunch({ placement: DEFAULT_PLACEMENT }, { placement: west });
    const first = await launchAttempt(initialState(), h.deps);
    await h.store.endAttempt(JOB_ID, 1, { kind: 'PREEMPTED' }, h.clock.now().toISOString());
    await h.store.changeStatus(JOB_ID, { from: 'STARTING', to: 'RECOVERING', reason: 't', attempt: 1, at: h.clock.now().toISOString() });
    const second = await launchAttempt(first, h.deps);
    await h.store.changeStatus(JOB_ID, { from: 'STARTING', to: 'RECOVERING', reason: 't', attempt: 2, at: h.clock.now().toISOString() });
    await launchAttempt(second, h.deps);

    expect(h.compute.launches.map((l) => l.history)).toEqual([
      [],
      [{ placement: DEFAULT_PLACEMENT, outcome: 'PREEMPTED' }],
      [
        { placement: west, outcome: null },
        { placement: DEFAULT_PLACEMENT, outcome: 'PREEMPTED' },
      ],
    ]);
    expect(new Set(h.compute.launches.map((l) => l.callbackSecret)).size).toBe(3);
  });

  it('ends the attempt LAUNCH_FAILED / NO_RESOURCE when no placement had capacity', async () => {
    const h = harness();
    await givenJob(h);
    h.compute.scriptLaunch({ error: new NoCapacityError('no m5.large spot capacity in us-east-1a, us-east-1b') });

    const state = await launchAttempt(initialState(), h.deps);

    expect(state).toMatchObject({ attempt: 1, attemptsInExecution: 1, launched: false });
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({
      kind: 'LAUNCH_FAILED',
      cause: 'NO_RESOURCE',
      reason: 'no m5.large spot capacity in us-east-1a, us-east-1b',
    });
  });

  it('ends the attempt LAUNCH_FAILED / PRECHECKS when compute cannot run the spec at all', async () => {
    const h = harness();
    await givenJob(h);
    h.compute.scriptLaunch({ error: new PrecheckError('instance type m9.huge does not exist') });
    const state = await launchAttempt(initialState(), h.deps);
    expect(state.launched).toBe(false);
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toMatchObject({ kind: 'LAUNCH_FAILED', cause: 'PRECHECKS' });
  });

  it('lets any other launch error through, for the catch-all', async () => {
    const h = harness();
    await givenJob(h);
    h.compute.scriptLaunch({ error: new Error('EC2 is having a bad day') });
    await expect(launchAttempt(initialState(), h.deps)).rejects.toThrow('EC2 is having a bad day');
  });

  it('writes a CANCELLED attempt and launches nothing when the job is being cancelled', async () => {
    const h = harness();
    await givenJob(h);
    await h.store.changeStatus(JOB_ID, { from: 'PENDING', to: 'CANCELLING', reason: 'user', attempt: null, at: h.clock.now().toISOString() });

    const state = await launchAttempt(initialState(), h.deps);

    expect(state).toEqual({ jobId: JOB_ID, attempt: 1, attemptsInExecution: 1, launched: false });
    expect(h.compute.launches).toEqual([]);
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'CANCELLED' });
    expect((await h.store.getJob(JOB_ID)).status).toBe('CANCELLING');
  });

  it('drops the previous attempt\'s decision from the state it returns', async () => {
    const h = harness();
    await givenJob(h);
    const state = await launchAttempt(
      { ...initialState(), decision: { action: 'RESTART', status: 'RECOVERING', reason: 'x', delaySeconds: 0, continueAsNew: false } },
      h.deps,
    );
    expect(state.decision).toBeUndefined();
  });

  it('answers a replayed step that had finished with its own answer, launching nothing again, even once the job ran on', async () => {
    const h = harness();
    await givenJob(h);
    const first = await launchAttempt(initialState(), h.deps);
    expect(await launchAttempt(initialState(), h.deps)).toEqual(first);
    await h.store.changeStatus(JOB_ID, { from: 'STARTING', to: 'RUNNING', reason: 'agent up', attempt: 1, at: h.clock.now().toISOString() });
    expect(await launchAttempt(initialState(), h.deps)).toEqual(first);
    expect(h.compute.launches).toHaveLength(1);
  });

  it('answers a replayed step whose launch found no capacity with launched: false, trying no launch again', async () => {
    const h = harness();
    await givenJob(h);
    h.compute.scriptLaunch({ error: new NoCapacityError('none anywhere') });
    const first = await launchAttempt(initialState(), h.deps);
    expect(first.launched).toBe(false);
    expect(await launchAttempt(initialState(), h.deps)).toEqual(first);
    expect(h.compute.launches).toHaveLength(1);
  });

  it('refuses to launch over an attempt that was already decided (a step from before the decision)', async () => {
    const h = harness();
    await givenJob(h);
    await launchAndAwait(h, initialState());
    await report(h, 1, 'run', 3);
    await evaluatePolicy({ jobId: JOB_ID, attempt: 1, attemptsInExecution: 1 }, h.deps);
    await expect(launchAttempt(initialState(), h.deps)).rejects.toThrow(/latest attempt is 1, expected 0/);
    expect(h.compute.launches).toHaveLength(1);
  });

  it('releases the new instances when they cannot be recorded, so none is orphaned', async () => {
    const h = harness();
    const store = new InstancesNotStored();
    const deps = { ...h.deps, store };
    await givenJob({ ...h, store });
    await expect(launchAttempt(initialState(), deps)).rejects.toThrow('DynamoDB throttled');
    expect(h.compute.releases).toEqual([{ jobId: JOB_ID, attempt: 1, instances: [expect.objectContaining({ instanceId: fakeInstanceId(JOB_ID, 1, 0) })] }]);
  });

  it('sees a cancel that lands between its read and its write, and launches nothing', async () => {
    const h = harness();
    const store = new CancelledMeanwhile();
    await givenJob({ ...h, store });
    const state = await launchAttempt(initialState(), { ...h.deps, store });
    expect(state.launched).toBe(false);
    expect(h.compute.launches).toEqual([]);
    expect((await store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'CANCELLED' });
  });
});
