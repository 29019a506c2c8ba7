// A submit whose StartExecution Step Functions throttles: answered with the job queued
// (PENDING, no execution), then started by the janitor's round, oldest first.

import { describe, expect, it } from 'vitest';
import { TransientError } from '../../../../lib/errors.ts';
import { JobStatus } from '../../../../lib/status.ts';
import { QUEUED_GRACE_SECONDS, QUEUED_SCAN_LIMIT, startQueuedJobs } from '../../../../lib/usecases/start-queued.ts';
import { submitJob } from '../../../../lib/usecases/submit-job.ts';
import { cancelJob } from '../../../../lib/usecases/cancel-job.ts';
import { harness } from '../../../support/usecases-harness.ts';

const TASK = 'run: echo hi\n';
const throttled = () => new TransientError('Step Functions StartExecution: ThrottlingException: Rate exceeded');

describe('a throttled start', () => {
  it('leaves the submitted job PENDING with no execution, and the submit answers its id', async () => {
    const h = harness();
    h.workflow.failNextStart(throttled());

    const { jobId } = await submitJob({ body: TASK }, h.deps);

    const job = await h.store.getJob(jobId);
    expect(job).toMatchObject({ status: JobStatus.PENDING, executionArn: null });
    expect(h.workflow.starts).toEqual([]);
  });

  it('is started by a janitor round once the submit has had its minute, oldest first; a throttled round stops and leaves the rest', async () => {
    const h = harness();
    h.workflow.failNextStart(throttled()).failNextStart(throttled()).failNextStart(throttled());
    const first = (await submitJob({ body: TASK }, h.deps)).jobId;
    h.clock.advance(1);
    const second = (await submitJob({ body: TASK }, h.deps)).jobId;
    h.clock.advance(1);
    const third = (await submitJob({ body: TASK }, h.deps)).jobId;

    expect(await startQueuedJobs(h.deps)).toEqual({ started: [], cancelled: [], stillQueued: [], failed: [] });

    h.clock.advance(QUEUED_GRACE_SECONDS);
    h.workflow.failNextStart(Object.assign(new Error('User is not authorized to perform: states:StartExecution'), { name: 'AccessDeniedException' })).failNextStart(throttled());
    // A start that fails for good ends its job; the next is throttled, so the round stops.
    const round = await startQueuedJobs(h.deps);
    expect(round.started).toEqual([]);
    expect(round.failed.map((end) => [end.jobId, end.status])).toEqual([[first, JobStatus.FAILED_CONTROLLER]]);
    expect(round.stillQueued).toEqual([second, third]);

    const next = await startQueuedJobs(h.deps);
    expect(next).toEqual({ started: [second, third], cancelled: [], stillQueued: [], failed: [] });
    expect(h.workflow.starts.map((start) => start.executionName)).toEqual([second, third]);
    expect((await h.store.getJob(third)).executionArn).toMatch(/execution:relaunch-controller:/);
  });

  it('starts a queued job however many jobs were submitted after it', async () => {
    const h = harness();
    h.workflow.failNextStart(throttled());
    const queued = (await submitJob({ body: TASK }, h.deps)).jobId;
    // QUEUED_SCAN_LIMIT newer jobs, started as usual: the queued one is not among the newest.
    for (let i = 0; i < QUEUED_SCAN_LIMIT; i += 1) {
      h.clock.advance(0.001);
      await submitJob({ body: TASK }, h.deps);
    }
    expect((await h.store.listJobs({ limit: QUEUED_SCAN_LIMIT })).map((job) => job.jobId)).not.toContain(queued);
    h.clock.advance(QUEUED_GRACE_SECONDS);

    expect(await startQueuedJobs(h.deps)).toEqual({ started: [queued], cancelled: [], stillQueued: [], failed: [] });
    expect(await h.store.listQueued({ limit: 10 })).toEqual([]);
  });

  it('leaves a job whose start the store could not record for the next round, and goes on with the others', async () => {
    const h = harness();
    h.workflow.failNextStart(throttled()).failNextStart(throttled());
    const first = (await submitJob({ body: TASK }, h.deps)).jobId;
    h.clock.advance(1);
    const second = (await submitJob({ body: TASK }, h.deps)).jobId;
    h.clock.advance(QUEUED_GRACE_SECONDS);
    const setExecution = h.store.setExecution.bind(h.store);
    let refusals = 1;
    h.store.setExecution = async (jobId, arn) => {
      if (jobId === first && refusals-- > 0) throw new Error('the database refused the write');
      return setExecution(jobId, arn);
    };

    expect(await startQueuedJobs(h.deps)).toEqual({ started: [second], cancelled: [], stillQueued: [first], failed: [] });
    expect(await startQueuedJobs(h.deps)).toEqual({ started: [first], cancelled: [], stillQueued: [], failed: [] });
    // The same execution name both times: one execution.
    expect(h.workflow.starts.map((start) => start.executionName)).toEqual([first, second]);
  });

  it('never starts a job cancelled while it was queued, and ends it CANCELLED', async () => {
    const h = harness();
    h.workflow.failNextStart(throttled());
    const { jobId } = await submitJob({ body: TASK }, h.deps);
    expect((await cancelJob(jobId, h.deps)).status).toBe(JobStatus.CANCELLING);
    h.clock.advance(QUEUED_GRACE_SECONDS);

    expect(await startQueuedJobs(h.deps)).toEqual({ started: [], cancelled: [{ jobId, status: JobStatus.CANCELLED, reason: expect.any(String) }], stillQueued: [], failed: [] });
    expect(h.workflow.starts).toEqual([]);
    expect((await h.store.getJob(jobId)).status).toBe(JobStatus.CANCELLED);
  });
});
