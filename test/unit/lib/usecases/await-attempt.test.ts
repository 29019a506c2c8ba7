// AwaitAttempt: store the token, and close the races with a report or a cancel that came first.

import { describe, expect, it } from 'vitest';
import { awaitAttempt } from '../../../../lib/usecases/await-attempt.ts';
import { launchAttempt } from '../../../../lib/usecases/launch-attempt.ts';
import { StateName, WorkflowError } from '../../../../lib/workflow/contract.ts';
import { givenJob, harness, initialState, JOB_ID, report, taskSpec, tokenFor } from '../../../support/usecases-harness.ts';

describe('awaitAttempt', () => {
  it('stores the token and waits: nothing resumes the task yet', async () => {
    const h = harness();
    await givenJob(h);
    await launchAttempt(initialState(), h.deps);

    await awaitAttempt({ jobId: JOB_ID, attempt: 1, taskToken: tokenFor(1) }, h.deps);

    expect((await h.store.getAttempt(JOB_ID, 1)).taskToken).toBe(tokenFor(1));
    expect(h.workflow.closings).toEqual([]);
  });

  it('resumes at once with the outcome when the report came before the token', async () => {
    const h = harness();
    await givenJob(h);
    await launchAttempt(initialState(), h.deps);
    await report(h, 1, 'run', 3); // ends the attempt; there is no token to resume yet
    expect(h.workflow.closings).toEqual([]);

    await awaitAttempt({ jobId: JOB_ID, attempt: 1, taskToken: tokenFor(1) }, h.deps);

    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'EXITED' } }]);
  });

  it('resumes at once for an attempt the launch already ended (cancelled before launch)', async () => {
    const h = harness();
    await givenJob(h);
    await h.store.changeStatus(JOB_ID, { from: 'PENDING', to: 'CANCELLING', reason: 'user', attempt: null, at: h.clock.now().toISOString() });
    await launchAttempt(initialState(), h.deps);
    await awaitAttempt({ jobId: JOB_ID, attempt: 1, taskToken: tokenFor(1) }, h.deps);
    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'CANCELLED' } }]);
  });

  it('fails the task with JobCancelled when the job was cancelled before the token was stored', async () => {
    const h = harness();
    await givenJob(h);
    await launchAttempt(initialState(), h.deps);
    await h.store.changeStatus(JOB_ID, { from: 'STARTING', to: 'CANCELLING', reason: 'user', attempt: 1, at: h.clock.now().toISOString() });

    await awaitAttempt({ jobId: JOB_ID, attempt: 1, taskToken: tokenFor(1) }, h.deps);

    expect(h.workflow.closings).toEqual([
      { kind: 'fail', taskToken: tokenFor(1), error: WorkflowError.JobCancelled, cause: 'cancelled by the user' },
    ]);
  });

  it('is quiet when another writer resumed the task first', async () => {
    const h = harness();
    await givenJob(h);
    await launchAttempt(initialState(), h.deps);
    await report(h, 1, 'run', 0);
    await h.workflow.resume(tokenFor(1), { outcome: 'EXITED' });

    await expect(awaitAttempt({ jobId: JOB_ID, attempt: 1, taskToken: tokenFor(1) }, h.deps)).resolves.toBeUndefined();
    expect(h.workflow.refused).toEqual([{ method: 'resume', taskToken: tokenFor(1) }]);
  });

  describe('as AwaitBoot', () => {
    const boot = { jobId: JOB_ID, attempt: 1, taskToken: 'boot-1', state: StateName.AwaitBoot, bootTimeoutSeconds: 600 };

    it('stores the token as AwaitBoot\'s and waits while a node has not been heard from', async () => {
      const h = harness();
      await givenJob(h, taskSpec({ numNodes: 2 }));
      await launchAttempt(initialState(), h.deps);
      await h.store.recordHeartbeat(JOB_ID, 1, h.clock.now().toISOString(), 1);

      await awaitAttempt(boot, h.deps);

      expect(await h.store.getAttempt(JOB_ID, 1)).toMatchObject({ taskToken: 'boot-1', tokenState: StateName.AwaitBoot });
      expect(h.workflow.closings).toEqual([]);
    });

    it('resumes at once with booted when every node beat before the token was stored', async () => {
      const h = harness();
      await givenJob(h, taskSpec({ numNodes: 2 }));
      await launchAttempt(initialState(), h.deps);
      for (const rank of [1, 0]) await h.store.recordHeartbeat(JOB_ID, 1, h.clock.now().toISOString(), rank);

      await awaitAttempt(boot, h.deps);

      expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: 'boot-1', output: { booted: true } }]);
    });

    it('sends the outcome, not booted, for an attempt that ended while it booted', async () => {
      const h = harness();
      await givenJob(h);
      await launchAttempt(initialState(), h.deps);
      await h.store.recordHeartbeat(JOB_ID, 1, h.clock.now().toISOString(), 0);
      await report(h, 1, 'run', 0);

      await awaitAttempt(boot, h.deps);

      expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: 'boot-1', output: { outcome: 'EXITED' } }]);
    });

    it('replaces AwaitBoot\'s token with AwaitAttempt\'s, which a payload without a state stands for', async () => {
      const h = harness();
      await givenJob(h);
      await launchAttempt(initialState(), h.deps);
      await awaitAttempt(boot, h.deps);
      await awaitAttempt({ jobId: JOB_ID, attempt: 1, taskToken: tokenFor(1) }, h.deps);
      expect(await h.store.getAttempt(JOB_ID, 1)).toMatchObject({ taskToken: tokenFor(1), tokenState: StateName.AwaitAttempt });
    });
  });
});
