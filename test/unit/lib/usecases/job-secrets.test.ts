// A job's secrets through its life: stored apart at submit (never in the job's record),
// handed to every launch, and deleted once the job ends, whichever way it ends.

import { describe, expect, it } from 'vitest';
import { JobStatus } from '../../../../lib/status.ts';
import { launchAttempt } from '../../../../lib/usecases/launch-attempt.ts';
import { releaseInstances } from '../../../../lib/usecases/release-instances.ts';
import { recordControllerFailure } from '../../../../lib/usecases/controller-failure.ts';
import { submitJob } from '../../../../lib/usecases/submit-job.ts';
import { taskSpec } from '../../../support/fixtures/specs.ts';
import { givenJob, harness, initialState, JOB_ID } from '../../../support/usecases-harness.ts';

const TASK = 'name: t\nrun: train\nsecrets:\n  TOKEN: null\n  FIXED: from-file\n';
const decision = (status: JobStatus) => ({ action: 'FAIL' as const, status, reason: 'r', delaySeconds: 0, continueAsNew: false });

describe("a job's secrets", () => {
  it('are stored apart at submit, with the values given, and the job names them only', async () => {
    const h = harness();

    const { jobId } = await submitJob({ body: TASK, secretOverrides: { TOKEN: 'planted-1' } }, h.deps);

    expect(await h.secrets.get(jobId)).toEqual({ TOKEN: 'planted-1', FIXED: 'from-file' });
    const job = await h.store.getJob(jobId);
    expect(job.spec.secretNames).toEqual(['FIXED', 'TOKEN']);
    expect(JSON.stringify([job, await h.store.listEvents(jobId)])).not.toMatch(/planted-1|from-file/);
  });

  it('are not stored for a submit that is refused, nor for a job without any', async () => {
    const h = harness();

    await expect(submitJob({ body: TASK }, h.deps)).rejects.toMatchObject({ name: 'InvalidTaskSpecError' });
    await submitJob({ body: 'run: x\n' }, h.deps);

    expect(h.secrets.jobs()).toEqual([]);
  });

  it('are stored once for two submits with one key: the second, a replay, leaves nothing behind', async () => {
    const h = harness();
    const idempotency = { key: 'k-1', caller: 'me' };

    const first = await submitJob({ body: TASK, secretOverrides: { TOKEN: 'a' }, idempotency }, h.deps);
    const second = await submitJob({ body: TASK, secretOverrides: { TOKEN: 'a' }, idempotency }, h.deps);

    expect(second).toMatchObject({ jobId: first.jobId, replayed: true });
    expect(h.secrets.jobs()).toEqual([first.jobId]);
  });

  it('go when the job ends because its execution could not start', async () => {
    const h = harness();
    h.workflow.failNextStart(new Error('throttled'));

    await expect(submitJob({ body: TASK, secretOverrides: { TOKEN: 'a' } }, h.deps)).rejects.toThrow('throttled');

    expect(h.secrets.jobs()).toEqual([]);
  });

  it('reach every launch', async () => {
    const h = harness();
    await givenJob(h, { ...taskSpec(), secretNames: ['FIXED', 'TOKEN'] });
    await h.secrets.put(JOB_ID, { TOKEN: 't', FIXED: 'f', STALE: 'not named by the job' });

    await launchAttempt(initialState(), h.deps);

    expect(h.compute.launches[0]?.secrets).toEqual({ FIXED: 'f', TOKEN: 't' });
  });

  it('that are no longer stored fail the launch as a precheck, naming them, and launch nothing', async () => {
    const h = harness();
    await givenJob(h, { ...taskSpec(), secretNames: ['TOKEN'] });

    const next = await launchAttempt(initialState(), h.deps);

    expect(next.launched).toBe(false);
    expect(h.compute.launches).toEqual([]);
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toMatchObject({ kind: 'LAUNCH_FAILED', reason: expect.stringContaining('secrets TOKEN of job') });
  });

  it('go with the release of a decision that ends the job, and stay for one that relaunches', async () => {
    const h = harness();
    await givenJob(h);
    await h.secrets.put(JOB_ID, { TOKEN: 't' });

    await releaseInstances({ ...initialState(), decision: { ...decision(JobStatus.RECOVERING), action: 'RECOVER' } }, h.deps);
    expect(h.secrets.jobs()).toEqual([JOB_ID]);
    await releaseInstances({ ...initialState(), decision: decision(JobStatus.FAILED) }, h.deps);
    expect(h.secrets.jobs()).toEqual([]);
  });

  it("go when the controller's catch-all ends the job", async () => {
    const h = harness();
    await givenJob(h);
    await h.secrets.put(JOB_ID, { TOKEN: 't' });

    await recordControllerFailure({ ...initialState(), controllerError: { Error: 'Lambda.Unknown', Cause: 'oom' } }, h.deps);

    expect(h.secrets.jobs()).toEqual([]);
  });
});

describe('an idempotent submit with secrets', () => {
  it('is another request when a secret has another value: the key cannot reuse the job', async () => {
    const h = harness();
    const idempotency = { key: 'k-2', caller: 'me' };

    await submitJob({ body: TASK, secretOverrides: { TOKEN: 'first' }, idempotency }, h.deps);

    await expect(submitJob({ body: TASK, secretOverrides: { TOKEN: 'second' }, idempotency }, h.deps)).rejects.toMatchObject({ name: 'IdempotencyKeyReusedError' });
    expect(h.secrets.jobs()).toHaveLength(1);
  });
});
