// The janitor: an execution that ended outside its own end states leaves its job to
// onExecutionEnded. Every end, and every repeat of one, must leave the job terminal with
// its instances released, or change nothing.

import { describe, expect, it } from 'vitest';
import { onExecutionEnded, type ExecutionEnded } from '../../../../lib/usecases/execution-ended.ts';
import { cancelJob } from '../../../../lib/usecases/cancel-job.ts';
import { givenJob, givenLaunched, harness, JOB_ID, report, type Harness } from '../../../support/usecases-harness.ts';

const ARN = `arn:aws:states:us-east-1:000000000000:execution:relaunch:${JOB_ID}`;

async function withExecution(h: Harness): Promise<void> {
  await h.store.setExecution(JOB_ID, ARN);
}

function ended(status: ExecutionEnded['status'], extra: Partial<ExecutionEnded> = {}): ExecutionEnded {
  return { jobId: JOB_ID, executionArn: ARN, status, ...extra };
}

describe('onExecutionEnded', () => {
  it('ends a cancelled job stopped between attempts CANCELLED, releasing its latest attempt', async () => {
    const h = harness();
    await givenLaunched(h);
    await withExecution(h);
    await report(h, 1, 'setup', 0);
    await cancelJob(JOB_ID, h.deps);

    expect(await onExecutionEnded(ended('ABORTED'), h.deps)).toEqual({
      action: 'cancelled',
      reason: `job ${JOB_ID} cancelled while its execution waited`,
      ended: { jobId: JOB_ID, status: 'CANCELLED', reason: 'cancelled by the user' },
    });
    const job = await h.store.getJob(JOB_ID);
    expect(job).toMatchObject({ status: 'CANCELLED', failureReason: 'cancelled by the user' });
    expect(h.compute.releases.map((r) => r.attempt)).toEqual([1]);
    expect((await h.store.listEvents(JOB_ID)).at(-1)).toMatchObject({ from: 'CANCELLING', to: 'CANCELLED', attempt: 1 });
    // A repeat ends nothing more, so nothing is announced twice.
    expect(await onExecutionEnded(ended('ABORTED'), h.deps)).not.toHaveProperty('ended');
  });

  it('ends a live job whose execution failed or timed out FAILED_CONTROLLER, with the execution\'s error', async () => {
    const h = harness();
    await givenLaunched(h);
    await withExecution(h);

    const result = await onExecutionEnded(ended('TIMED_OUT', { error: 'States.Timeout', cause: 'the machine ran out of time' }), h.deps);

    expect(result.action).toBe('failed');
    const job = await h.store.getJob(JOB_ID);
    expect(job.status).toBe('FAILED_CONTROLLER');
    expect(job.failureReason).toBe(
      "relaunch's controller failed: ExecutionTimedOut: the execution ended TIMED_OUT (States.Timeout: the machine ran out of time)",
    );
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome?.kind).toBe('LOST');
    expect(h.compute.releases.map((r) => r.attempt)).toEqual([1]);
  });

  it('releases again, and changes nothing else, for a job already terminal (stopped after its decision)', async () => {
    const h = harness();
    await givenLaunched(h);
    await withExecution(h);
    await report(h, 1, 'setup', 0);
    await report(h, 1, 'run', 0);
    await h.store.changeStatus(JOB_ID, { from: 'RUNNING', to: 'SUCCEEDED', reason: 'done', attempt: 1, at: h.clock.now().toISOString() });
    const before = await h.store.getJob(JOB_ID);

    const result = await onExecutionEnded(ended('ABORTED'), h.deps);

    expect(result).toEqual({ action: 'ignored', reason: `job ${JOB_ID} has already ended (SUCCEEDED)` });
    expect(await h.store.getJob(JOB_ID)).toEqual(before);
    expect(h.compute.releases.map((r) => r.attempt)).toEqual([1]);
  });

  it('ignores an unknown job and a job another execution controls, and is a no-op when delivered twice', async () => {
    const h = harness();
    await givenJob(h);
    await h.store.setExecution(JOB_ID, `${ARN}-a500`);

    expect((await onExecutionEnded(ended('FAILED'), h.deps)).action).toBe('ignored');
    expect((await onExecutionEnded({ ...ended('FAILED'), jobId: 'j-00mm8abcd-nojob0' }, h.deps)).action).toBe('ignored');
    expect((await h.store.getJob(JOB_ID)).status).toBe('PENDING');

    await h.store.setExecution(JOB_ID, ARN);
    await onExecutionEnded(ended('FAILED', { error: 'Lambda.Unknown' }), h.deps);
    const once = await h.store.getJob(JOB_ID);
    await onExecutionEnded(ended('FAILED', { error: 'Lambda.Unknown' }), h.deps);
    expect(await h.store.getJob(JOB_ID)).toEqual(once);
    expect(once.status).toBe('FAILED_CONTROLLER');
  });
});
