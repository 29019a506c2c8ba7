// submitJob: parse, store PENDING with fresh counters, start the execution named by the job id.

import { describe, expect, it, vi } from 'vitest';
import { InvalidTaskSpecError, TransientError } from '../../../../lib/errors.ts';
import { startQueuedJobs } from '../../../../lib/usecases/start-queued.ts';
import { submitJob } from '../../../../lib/usecases/submit-job.ts';
import { harness } from '../../../support/usecases-harness.ts';

const TASK = `
name: train
envs:
  EPOCHS: "10"
  LR: "0.1"
run: python train.py
resources:
  use_spot: true
  job_recovery:
    max_restarts_on_errors: 2
    recover_on_exit_codes: [29]
`;

describe('submitJob', () => {
  it('stores a YAML task as a PENDING job with fresh counters and starts its execution', async () => {
    const h = harness();

    const { jobId, warnings } = await submitJob({ body: TASK }, h.deps);

    expect(jobId).toMatch(/^j-[0-9a-z]{9}-[0-9a-z]{6}$/);
    expect(warnings).toEqual([]);
    const job = await h.store.getJob(jobId);
    expect(job).toMatchObject({
      jobId,
      name: 'train',
      status: 'PENDING',
      attemptCount: 0,
      failureReason: null,
      counters: { restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 0, consecutivePreemptions: 0, market: 'spot' },
    });
    expect(job.spec.resources.jobRecovery).toMatchObject({ maxRestartsOnErrors: 2, recoverOnExitCodes: [29] });
    expect(h.workflow.starts).toEqual([
      { executionName: jobId, input: { jobId, attempt: 0, attemptsInExecution: 0 }, executionArn: expect.stringContaining(jobId) },
    ]);
    expect(job.executionArn).toBe(h.workflow.starts[0]?.executionArn);
  });

  it('accepts a parsed JSON body, on-demand by default', async () => {
    const h = harness();
    const { jobId } = await submitJob({ body: { name: 'hello', run: 'echo hi' } }, h.deps);
    expect((await h.store.getJob(jobId)).counters.market).toBe('on-demand');
  });

  it('returns the spec\'s warnings', async () => {
    const h = harness();
    const body = 'run: python train.py\nresources:\n  job_recovery:\n    recover_on_exit_codes: [137]\n';
    const { warnings } = await submitJob({ body }, h.deps);
    expect(warnings).toEqual([expect.objectContaining({ path: expect.stringContaining('recover_on_exit_codes') })]);
  });

  it('refuses an invalid task with every issue, and stores and starts nothing', async () => {
    const h = harness();
    const bad = 'run: echo\nresources:\n  cloud: gcp\n';
    await expect(submitJob({ body: bad }, h.deps)).rejects.toThrow(InvalidTaskSpecError);
    await expect(submitJob({ body: { run: 'echo', bogus: 1 } }, h.deps)).rejects.toThrow(InvalidTaskSpecError);
    expect(await h.store.listJobs()).toEqual([]);
    expect(h.workflow.starts).toEqual([]);
  });

  it('lets --env overrides win over the file and add new variables', async () => {
    const h = harness();
    const { jobId } = await submitJob({ body: TASK, envOverrides: { LR: '0.01', SEED: '7' } }, h.deps);
    expect((await h.store.getJob(jobId)).spec.envs).toEqual({ EPOCHS: '10', LR: '0.01', SEED: '7' });
  });

  it.each([
    ['named __proto__', JSON.parse('{"__proto__": "x"}') as Record<string, string>, 'envs.__proto__'],
    ['that are not variable names', { 'A=B': 'x' }, 'envs["A=B"]'],
    ['too large for a process environment', { BIG: 'x'.repeat(40_000) }, 'envs.BIG'],
    ['that make the task too large', { A: 'a'.repeat(30_000), B: 'b'.repeat(30_000), C: 'c'.repeat(30_000) }, ''],
  ])('refuses --env overrides %s, naming the env, and stores and starts nothing', async (_what, envOverrides, path) => {
    const h = harness();
    const error = await submitJob({ body: TASK, envOverrides }, h.deps).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidTaskSpecError);
    expect((error as InvalidTaskSpecError).issues).toEqual([expect.objectContaining({ path, message: expect.stringMatching(/^expected /) })]);
    expect(await h.store.listJobs()).toEqual([]);
    expect(h.workflow.starts).toEqual([]);
  });

  it('marks the job FAILED_CONTROLLER with the reason when the execution cannot start, and rethrows', async () => {
    const h = harness();
    h.workflow.failNextStart(new Error('StateMachineDoesNotExist'));

    await expect(submitJob({ body: TASK }, h.deps)).rejects.toThrow('StateMachineDoesNotExist');

    const [job] = await h.store.listJobs();
    expect(job).toMatchObject({
      status: 'FAILED_CONTROLLER',
      failureReason: 'could not start the controller: StateMachineDoesNotExist',
      executionArn: null,
    });
  });

  it('answers a job whose execution started as submitted, even when the database refuses to record the start (a full disk): no failed submit leaves a job that runs', async () => {
    const h = harness();
    const setExecution = vi.spyOn(h.store, 'setExecution').mockRejectedValueOnce(new TransientError("the local database's disk is full"));

    const { jobId } = await submitJob({ body: TASK }, h.deps);

    expect(h.workflow.starts.map((start) => start.executionName)).toEqual([jobId]);
    expect(setExecution).toHaveBeenCalledTimes(1);
    // Left in the queue of jobs whose start is not recorded: the janitor's start finds the
    // running execution (a start is named by its job) and records it.
    h.clock.advance(3600);
    await startQueuedJobs(h.deps);
    expect((await h.store.getJob(jobId)).executionArn).toBe(h.workflow.starts[0]?.executionArn);
    expect(h.workflow.starts).toHaveLength(1);
  });

  it('gives each job its own id', async () => {
    const h = harness();
    const a = await submitJob({ body: TASK }, h.deps);
    const b = await submitJob({ body: TASK }, h.deps);
    expect(a.jobId).not.toBe(b.jobId);
    expect(h.workflow.starts.map((s) => s.executionName)).toEqual([a.jobId, b.jobId]);
  });
});
