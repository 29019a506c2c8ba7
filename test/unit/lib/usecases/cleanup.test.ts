// ReleaseInstances, RecordControllerFailure and ContinueAsNewExecution.

import { describe, expect, it } from 'vitest';
import { InMemoryJobStore } from '../../../../lib/adapters/memory-job-store.ts';
import type { JobRecord } from '../../../../lib/model.ts';
import type { JobPatch, StatusChange } from '../../../../lib/ports.ts';
import { continueAsNew } from '../../../../lib/usecases/continue-as-new.ts';
import { recordControllerFailure } from '../../../../lib/usecases/controller-failure.ts';
import { launchAttempt } from '../../../../lib/usecases/launch-attempt.ts';
import { releaseInstances } from '../../../../lib/usecases/release-instances.ts';
import { NoCapacityError } from '../../../../lib/errors.ts';
import { fakeInstanceId } from '../../../support/fakes/fake-compute.ts';
import { givenJob, harness, initialState, type Harness, JOB_ID, launchAndAwait, report, taskSpec } from '../../../support/usecases-harness.ts';

describe('releaseInstances', () => {
  it('releases the attempt\'s instances, again when asked again, and returns the state as it was', async () => {
    const h = harness();
    await givenJob(h, taskSpec({ numNodes: 2 }));
    const state = await launchAndAwait(h, initialState());
    const decided = { ...state, decision: { action: 'SUCCEED' as const, status: 'SUCCEEDED' as const, reason: 'ok', delaySeconds: 0, continueAsNew: false } };

    expect(await releaseInstances(decided, h.deps)).toEqual(decided);
    await releaseInstances(decided, h.deps);

    const released = { jobId: JOB_ID, attempt: 1, instances: (await h.store.getAttempt(JOB_ID, 1)).instances };
    expect(released.instances.map((i) => i.instanceId)).toEqual([fakeInstanceId(JOB_ID, 1, 0), fakeInstanceId(JOB_ID, 1, 1)]);
    expect(h.compute.releases).toEqual([released, released]);
  });

  it('asks compute to release an attempt with no recorded instances, and skips the state before any attempt', async () => {
    const h = harness();
    await givenJob(h);
    h.compute.scriptLaunch({ error: new NoCapacityError('none') });
    const state = await launchAttempt(initialState(), h.deps);
    await releaseInstances(state, h.deps);
    await releaseInstances(initialState(), h.deps);
    expect(h.compute.releases).toEqual([{ jobId: JOB_ID, attempt: 1, instances: [] }]);
  });

  it('releases an attempt whose launch died before recording its instances (compute finds them by tag)', async () => {
    const h = harness();
    await givenJob(h);
    await diesMidLaunch(h);
    expect((await h.store.getAttempt(JOB_ID, 1)).instances).toEqual([]);
    await releaseInstances({ ...initialState(), attempt: 1 }, h.deps);
    expect(h.compute.releases).toEqual([{ jobId: JOB_ID, attempt: 1, instances: [] }]);
  });
});

describe('recordControllerFailure', () => {
  it('releases and ends the live attempt, marks the job FAILED_CONTROLLER, and returns a FAIL decision', async () => {
    const h = harness();
    await givenJob(h);
    const state = await launchAndAwait(h, initialState());
    const controllerError = {
      Error: 'TypeError',
      Cause: JSON.stringify({ errorType: 'TypeError', errorMessage: "Cannot read properties of undefined (reading 'x')", trace: ['at a', 'at b'] }),
    };

    const next = await recordControllerFailure({ ...state, controllerError }, h.deps);

    const reason = "relaunch's controller failed: TypeError: Cannot read properties of undefined (reading 'x')";
    expect(next.decision).toEqual({ action: 'FAIL', status: 'FAILED_CONTROLLER', reason, delaySeconds: 0, continueAsNew: false });
    expect(await h.store.getJob(JOB_ID)).toMatchObject({ status: 'FAILED_CONTROLLER', failureReason: reason });
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'LOST', reason });
    expect(h.compute.releases.map((r) => r.attempt)).toEqual([1]);
  });

  it('cleans up the attempt the failed launch had already written, newer than the state\'s', async () => {
    const h = harness();
    await givenJob(h);
    await launchAttempt(initialState(), h.deps); // the launch worked, but its Lambda failed to answer
    const next = await recordControllerFailure({ ...initialState(), controllerError: { Error: 'Lambda.Unknown', Cause: 'timed out' } }, h.deps);
    expect(next.decision?.reason).toBe("relaunch's controller failed: Lambda.Unknown: timed out");
    expect(h.compute.releases.map((r) => r.attempt)).toEqual([1]);
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome?.kind).toBe('LOST');
  });

  it('releases the latest attempt even when its launch never recorded instances', async () => {
    const h = harness();
    await givenJob(h);
    await diesMidLaunch(h);
    await recordControllerFailure({ ...initialState(), controllerError: { Error: 'Sandbox.Timedout' } }, h.deps);
    expect(h.compute.releases).toEqual([{ jobId: JOB_ID, attempt: 1, instances: [] }]);
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome?.kind).toBe('LOST');
  });

  it('keeps an attempt\'s stored outcome, and still releases its instances', async () => {
    const h = harness();
    await givenJob(h);
    const state = await launchAndAwait(h, initialState());
    await report(h, 1, 'run', 0);
    await recordControllerFailure({ ...state, controllerError: { Error: 'Boom' } }, h.deps);
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome?.kind).toBe('EXITED');
    expect(h.compute.releases).toHaveLength(1);
  });

  it('leaves a job that already ended as it is', async () => {
    const h = harness();
    await givenJob(h);
    const state = await launchAndAwait(h, initialState());
    await report(h, 1, 'run', 0);
    await h.store.changeStatus(JOB_ID, { from: 'RUNNING', to: 'SUCCEEDED', reason: 'ok', attempt: 1, at: h.clock.now().toISOString() });

    const next = await recordControllerFailure({ ...state, controllerError: { Error: 'ReleaseFailed' } }, h.deps);

    expect(next.decision?.status).toBe('SUCCEEDED');
    expect(await h.store.getJob(JOB_ID)).toMatchObject({ status: 'SUCCEEDED', failureReason: null });
  });

  it('fails a job with no attempt yet', async () => {
    const h = harness();
    await givenJob(h);
    await recordControllerFailure({ ...initialState(), controllerError: { Error: 'Boom', Cause: 'x'.repeat(2000) } }, h.deps);
    const job = await h.store.getJob(JOB_ID);
    expect(job.status).toBe('FAILED_CONTROLLER');
    expect(job.failureReason?.length).toBeLessThanOrEqual(500);
    expect(h.compute.releases).toEqual([]);
  });

  it('tries again on a fresh read when the job moved meanwhile', async () => {
    const h = harness();
    const store = new MovesOnce();
    await givenJob({ ...h, store });
    await recordControllerFailure({ ...initialState(), controllerError: { Error: 'Boom' } }, { ...h.deps, store });
    expect((await store.listEvents(JOB_ID)).map((e) => e.to)).toEqual(['PENDING', 'CANCELLING', 'FAILED_CONTROLLER']);
  });
});

describe('continueAsNew', () => {
  it('starts the execution <jobId>-a<attempt> from the current attempt and records it', async () => {
    const h = harness();
    await givenJob(h);
    const state = { jobId: JOB_ID, attempt: 500, attemptsInExecution: 500 };

    expect(await continueAsNew(state, h.deps)).toEqual(state);

    expect(h.workflow.starts).toEqual([
      { executionName: `${JOB_ID}-a500`, input: { jobId: JOB_ID, attempt: 500, attemptsInExecution: 0 }, executionArn: expect.stringContaining(`${JOB_ID}-a500`) },
    ]);
    expect((await h.store.getJob(JOB_ID)).executionArn).toBe(h.workflow.starts[0]?.executionArn);
  });
});

/** Attempt 1 written, then its Lambda dies inside compute.launch: no instances are ever recorded. */
async function diesMidLaunch(h: Harness): Promise<void> {
  h.compute.scriptLaunch({ error: new Error('Task timed out after 60.00 seconds') });
  await expect(launchAttempt(initialState(), h.deps)).rejects.toThrow('Task timed out');
}

/** A store where a cancel lands just before the first status change. */
class MovesOnce extends InMemoryJobStore {
  #moved = false;
  override async changeStatus(jobId: string, change: StatusChange, patch?: JobPatch): Promise<JobRecord> {
    if (!this.#moved) {
      this.#moved = true;
      await super.changeStatus(jobId, { ...change, to: 'CANCELLING', reason: 'user' });
    }
    return super.changeStatus(jobId, change, patch);
  }
}
