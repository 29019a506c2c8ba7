// heartbeat: proof of life for the live attempt only, passed on to the waiting task.

import { describe, expect, it } from 'vitest';
import { StaleAttemptError, UnauthorizedError } from '../../../../lib/errors.ts';
import { awaitAttempt } from '../../../../lib/usecases/await-attempt.ts';
import { heartbeat } from '../../../../lib/usecases/heartbeat.ts';
import { launchAttempt } from '../../../../lib/usecases/launch-attempt.ts';
import { StateName } from '../../../../lib/workflow/contract.ts';
import { givenJob, harness, initialState, JOB_ID, launchAndAwait, taskSpec, tokenFor, type Harness } from '../../../support/usecases-harness.ts';

function beat(h: Harness, attempt = 1, secret = h.compute.secretFor(JOB_ID, attempt), nodeRank = 0) {
  return heartbeat({ jobId: JOB_ID, attempt, nodeRank, secret }, h.deps);
}

describe('heartbeat while AwaitBoot waits', () => {
  async function booting(numNodes: number): Promise<Harness> {
    const h = harness();
    await givenJob(h, taskSpec({ numNodes }));
    await launchAttempt(initialState(), h.deps);
    await awaitAttempt({ jobId: JOB_ID, attempt: 1, taskToken: 'boot-1', state: StateName.AwaitBoot, bootTimeoutSeconds: 600 }, h.deps);
    return h;
  }

  it('resumes AwaitBoot with booted at the last node\'s first beat, and sends it no heartbeat', async () => {
    const h = await booting(3);
    for (const rank of [2, 0, 2]) await beat(h, 1, undefined, rank);
    expect(h.workflow.closings).toEqual([]);
    expect((await h.store.getJob(JOB_ID)).status).toBe('RUNNING');

    await beat(h, 1, undefined, 1);

    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: 'boot-1', output: { booted: true } }]);
    expect(h.workflow.heartbeats).toEqual([]);
  });

  it('takes a beat that finds AwaitBoot already resumed (before AwaitAttempt stored its token) quietly', async () => {
    const h = await booting(1);
    await beat(h);
    await expect(beat(h)).resolves.toBeUndefined();
    expect(h.workflow.refused).toEqual([{ method: 'resume', taskToken: 'boot-1' }]);

    await awaitAttempt({ jobId: JOB_ID, attempt: 1, taskToken: tokenFor(1), state: StateName.AwaitAttempt }, h.deps);
    await beat(h);
    expect(h.workflow.heartbeats).toEqual([tokenFor(1)]);
  });
});

describe('heartbeat', () => {
  it('records the beat, moves STARTING to RUNNING, and heartbeats the waiting task', async () => {
    const h = harness();
    await givenJob(h);
    await launchAndAwait(h, initialState());
    h.clock.advance(60);

    await beat(h);

    expect((await h.store.getAttempt(JOB_ID, 1)).lastHeartbeatAt).toBe(h.clock.now().toISOString());
    expect((await h.store.getJob(JOB_ID)).status).toBe('RUNNING');
    expect(h.workflow.heartbeats).toEqual([tokenFor(1)]);
    await beat(h);
    expect(h.workflow.heartbeats).toEqual([tokenFor(1), tokenFor(1)]);
  });

  it('records the beat before the machine is waiting, with no task to heartbeat', async () => {
    const h = harness();
    await givenJob(h);
    await launchAttempt(initialState(), h.deps);
    await beat(h);
    expect((await h.store.getJob(JOB_ID)).status).toBe('RUNNING');
    expect(h.workflow.heartbeats).toEqual([]);
  });

  it('leaves a cancelling job CANCELLING', async () => {
    const h = harness();
    await givenJob(h);
    await launchAndAwait(h, initialState());
    await h.store.changeStatus(JOB_ID, { from: 'STARTING', to: 'CANCELLING', reason: 'user', attempt: 1, at: h.clock.now().toISOString() });
    await beat(h);
    expect((await h.store.getJob(JOB_ID)).status).toBe('CANCELLING');
  });

  it('refuses a wrong secret', async () => {
    const h = harness();
    await givenJob(h);
    await launchAndAwait(h, initialState());
    await expect(beat(h, 1, 'not the secret')).rejects.toThrow(UnauthorizedError);
    expect((await h.store.getAttempt(JOB_ID, 1)).lastHeartbeatAt).toBeNull();
  });

  it('refuses a beat for an attempt that ended', async () => {
    const h = harness();
    await givenJob(h);
    await launchAndAwait(h, initialState());
    await h.store.endAttempt(JOB_ID, 1, { kind: 'PREEMPTED' }, h.clock.now().toISOString());
    await expect(beat(h)).rejects.toThrow(StaleAttemptError);
    expect(h.workflow.heartbeats).toEqual([]);
  });

  it('reports a task that already timed out as stale, so the agent stops', async () => {
    const h = harness();
    await givenJob(h);
    await launchAndAwait(h, initialState());
    await h.workflow.fail(tokenFor(1), 'States.HeartbeatTimeout', '');
    await expect(beat(h)).rejects.toThrow(StaleAttemptError);
  });
});
