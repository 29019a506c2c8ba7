// cancelJob in every status: the machine does the cleanup, so cancel only marks and nudges.

import { describe, expect, it } from 'vitest';
import { cancelJob } from '../../../../lib/usecases/cancel-job.ts';
import { evaluatePolicy } from '../../../../lib/usecases/evaluate-policy.ts';
import { launchAttempt } from '../../../../lib/usecases/launch-attempt.ts';
import { WorkflowError } from '../../../../lib/workflow/contract.ts';
import { givenJob, harness, initialState, JOB_ID, launchAndAwait, report, tokenFor } from '../../../support/usecases-harness.ts';

describe('cancelJob', () => {
  it('PENDING: marks CANCELLING; the first launch then ends the job without launching', async () => {
    const h = harness();
    await givenJob(h);

    expect(await cancelJob(JOB_ID, h.deps)).toEqual({ status: 'CANCELLING', alreadyFinished: false });

    const state = await launchAttempt(initialState(), h.deps);
    expect(h.compute.launches).toEqual([]);
    expect((await evaluatePolicy(state, h.deps)).decision).toMatchObject({ action: 'FAIL', status: 'CANCELLED' });
    expect((await h.store.getJob(JOB_ID)).status).toBe('CANCELLED');
  });

  it('STARTING before the token is stored: marks CANCELLING and leaves the failing to AwaitAttempt', async () => {
    const h = harness();
    await givenJob(h);
    await launchAttempt(initialState(), h.deps);

    expect(await cancelJob(JOB_ID, h.deps)).toEqual({ status: 'CANCELLING', alreadyFinished: false });

    expect(h.workflow.closings).toEqual([]);
    expect(await h.store.listEvents(JOB_ID)).toContainEqual(expect.objectContaining({ from: 'STARTING', to: 'CANCELLING', attempt: 1 }));
  });

  it('RUNNING with a token: fails the waiting task with JobCancelled', async () => {
    const h = harness();
    await givenJob(h);
    await launchAndAwait(h, initialState());
    await report(h, 1, 'setup', 0);

    expect(await cancelJob(JOB_ID, h.deps)).toEqual({ status: 'CANCELLING', alreadyFinished: false });

    expect(h.workflow.closings).toEqual([
      { kind: 'fail', taskToken: tokenFor(1), error: WorkflowError.JobCancelled, cause: 'cancelled by the user' },
    ]);
  });

  it('says who cancelled when it was not the user: the job ends CANCELLED with that reason', async () => {
    const h = harness();
    await givenJob(h);
    await launchAndAwait(h, initialState());
    await report(h, 1, 'setup', 0);
    const why = 'cancelled because the local runtime was stopped';

    await cancelJob(JOB_ID, h.deps, why);

    expect(h.workflow.closings).toEqual([{ kind: 'fail', taskToken: tokenFor(1), error: WorkflowError.JobCancelled, cause: why }]);
    const decided = await evaluatePolicy({ jobId: JOB_ID, attempt: 1, attemptsInExecution: 1, awaitError: { Error: WorkflowError.JobCancelled, Cause: why } }, h.deps);
    expect(decided.decision).toMatchObject({ status: 'CANCELLED', reason: `${why}; no restart` });
    expect((await h.store.getJob(JOB_ID)).failureReason).toBe(`${why}; no restart`);
  });

  it('RECOVERING in the backoff Wait: marks CANCELLING; the next launch ends the job', async () => {
    const h = harness();
    await givenJob(h);
    const state = await launchAndAwait(h, initialState());
    await h.store.endAttempt(JOB_ID, 1, { kind: 'PREEMPTED' }, h.clock.now().toISOString());
    const decided = await evaluatePolicy(state, h.deps);
    expect((await h.store.getJob(JOB_ID)).status).toBe('RECOVERING');
    h.workflow.closings.length = 0;

    expect(await cancelJob(JOB_ID, h.deps)).toEqual({ status: 'CANCELLING', alreadyFinished: false });
    expect(h.workflow.closings).toEqual([]); // attempt 1 has ended: there is no task to fail

    const next = await launchAttempt(decided, h.deps);
    expect(h.compute.launches).toHaveLength(1);
    expect((await evaluatePolicy(next, h.deps)).decision).toMatchObject({ status: 'CANCELLED' });
  });

  it('RECOVERING in a Wait: asks the workflow to stop the execution there, once, with the cause', async () => {
    const h = harness();
    await givenJob(h);
    await h.store.setExecution(JOB_ID, 'arn:execution:job');
    const state = await launchAndAwait(h, initialState());
    await h.store.endAttempt(JOB_ID, 1, { kind: 'PREEMPTED' }, h.clock.now().toISOString());
    await evaluatePolicy(state, h.deps);
    h.workflow.inAWait = true;

    await cancelJob(JOB_ID, h.deps);
    await cancelJob(JOB_ID, h.deps);

    expect(h.workflow.stops).toEqual([{ executionArn: 'arn:execution:job', cause: 'cancelled by the user' }]);
  });

  it('RUNNING with a token: fails the task and stops nothing', async () => {
    const h = harness();
    await givenJob(h);
    await h.store.setExecution(JOB_ID, 'arn:execution:job');
    await launchAndAwait(h, initialState());
    await cancelJob(JOB_ID, h.deps);
    expect(h.workflow.stops).toEqual([]);
  });

  it('is idempotent while cancelling', async () => {
    const h = harness();
    await givenJob(h);
    await cancelJob(JOB_ID, h.deps);
    const events = await h.store.listEvents(JOB_ID);
    expect(await cancelJob(JOB_ID, h.deps)).toEqual({ status: 'CANCELLING', alreadyFinished: false });
    expect(await h.store.listEvents(JOB_ID)).toEqual(events);
  });

  it('answers a job that already ended with its status and changes nothing', async () => {
    const h = harness();
    await givenJob(h);
    const state = await launchAndAwait(h, initialState());
    await report(h, 1, 'run', 0);
    await evaluatePolicy(state, h.deps);
    const events = await h.store.listEvents(JOB_ID);

    expect(await cancelJob(JOB_ID, h.deps)).toEqual({ status: 'SUCCEEDED', alreadyFinished: true });
    expect(await h.store.listEvents(JOB_ID)).toEqual(events);
  });

  it('does not fail a task someone else already resumed', async () => {
    const h = harness();
    await givenJob(h);
    await launchAndAwait(h, initialState());
    await h.workflow.resume(tokenFor(1), { outcome: 'LOST' }); // the token is closed, the attempt still open

    expect(await cancelJob(JOB_ID, h.deps)).toEqual({ status: 'CANCELLING', alreadyFinished: false });
    expect(h.workflow.refused).toEqual([{ method: 'fail', taskToken: tokenFor(1) }]);
  });

  it('an unknown job is JobNotFoundError', async () => {
    await expect(cancelJob('j-missing', harness().deps)).rejects.toThrow('no job with id j-missing');
  });
});
