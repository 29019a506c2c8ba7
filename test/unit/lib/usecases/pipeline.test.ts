// A pipeline through the controller's use cases: a task's success moves the job to the
// next task (its spec, fresh budgets, PENDING), every attempt records its task, and the
// last task's success or any task's failure ends the job.

import { describe, expect, it } from 'vitest';
import { JobStatus } from '../../../../lib/status.ts';
import { evaluatePolicy } from '../../../../lib/usecases/evaluate-policy.ts';
import { submitJob } from '../../../../lib/usecases/submit-job.ts';
import { toJobView } from '../../../../lib/views.ts';
import { harness, initialState, launchAndAwait, report, type Harness } from '../../../support/usecases-harness.ts';

const PIPELINE = `name: p
---
name: first
resources:
  use_spot: true
  job_recovery:
    max_restarts_on_errors: 1
run: a
---
name: second
num_nodes: 2
resources:
  job_recovery:
    max_restarts_on_errors: 2
run: b
`;

async function submitted(h: Harness): Promise<string> {
  const { jobId } = await submitJob({ body: PIPELINE }, h.deps);
  return jobId;
}

/** One attempt of the job's current task, on every node, ending with `code`; returns the decided state. */
async function attemptEnding(h: Harness, jobId: string, after: number, code: number) {
  const launched = await launchAndAwait(h, { ...initialState(jobId), attempt: after, attemptsInExecution: after });
  const nodes = (await h.store.getJob(jobId)).spec.numNodes;
  for (let rank = 0; rank < nodes; rank += 1) {
    await report(h, launched.attempt, 'setup', 0, rank, jobId);
    await report(h, launched.attempt, 'run', code, rank, jobId);
  }
  return evaluatePolicy(launched, h.deps);
}

describe('a pipeline job', () => {
  it("moves to the next task on the first task's success: its spec, fresh budgets, PENDING", async () => {
    const h = harness();
    const jobId = await submitted(h);

    const restarted = await attemptEnding(h, jobId, 0, 1);
    const moved = await attemptEnding(h, jobId, 1, 0);

    expect(restarted.decision).toMatchObject({ action: 'RESTART' });
    expect(moved.decision).toMatchObject({ action: 'NEXT_TASK', status: JobStatus.PENDING, delaySeconds: 0, continueAsNew: false });
    const job = await h.store.getJob(jobId);
    expect(job.spec.name).toBe('second');
    expect(job.pipeline?.current).toBe(1);
    expect(job.counters).toMatchObject({ restartsOnErrors: 0, market: 'on-demand' });
    expect((await h.store.listEvents(jobId)).at(-1)).toMatchObject({ from: JobStatus.RUNNING, to: JobStatus.PENDING, reason: 'task 1 of 2 (first) succeeded; task 2 of 2 (second) starts' });
  });

  it("records each attempt's task, and ends SUCCEEDED with the last task's success", async () => {
    const h = harness();
    const jobId = await submitted(h);

    await attemptEnding(h, jobId, 0, 0);
    const last = await attemptEnding(h, jobId, 1, 0);

    expect(last.decision).toMatchObject({ action: 'SUCCEED', status: JobStatus.SUCCEEDED });
    expect([(await h.store.getAttempt(jobId, 1)).task, (await h.store.getAttempt(jobId, 2)).task]).toEqual([0, 1]);
    expect(h.compute.launches.map((launch) => [launch.spec.name, launch.spec.numNodes, launch.market])).toEqual([
      ['first', 1, 'spot'],
      ['second', 2, 'on-demand'],
    ]);
  });

  it('ends with a failing task, the tasks after it shown CANCELLED', async () => {
    const h = harness();
    const jobId = await submitted(h);

    await attemptEnding(h, jobId, 0, 1);
    const failed = await attemptEnding(h, jobId, 1, 1);

    expect(failed.decision).toMatchObject({ action: 'FAIL', status: JobStatus.FAILED });
    const job = await h.store.getJob(jobId);
    const attempts = [await h.store.getAttempt(jobId, 1), await h.store.getAttempt(jobId, 2)];
    expect(toJobView(job, attempts).tasks).toEqual([
      { task: 0, name: 'first', status: JobStatus.FAILED },
      { task: 1, name: 'second', status: JobStatus.CANCELLED },
    ]);
  });

  it('answers a repeated evaluation of the step that moved it with the same decision, moving it once', async () => {
    const h = harness();
    const jobId = await submitted(h);
    const launched = await launchAndAwait(h, initialState(jobId));
    await report(h, launched.attempt, 'setup', 0, 0, jobId);
    await report(h, launched.attempt, 'run', 0, 0, jobId);

    const first = await evaluatePolicy(launched, h.deps);
    const again = await evaluatePolicy(launched, h.deps);

    expect(again.decision).toEqual(first.decision);
    expect((await h.store.getJob(jobId)).pipeline?.current).toBe(1);
  });
});
