// onInstanceEvent: EC2's interruption warnings and state changes, applied once to the live attempt.

import { describe, expect, it } from 'vitest';
import { onInstanceEvent, type InstanceEvent } from '../../../../lib/usecases/instance-event.ts';
import { launchAttempt } from '../../../../lib/usecases/launch-attempt.ts';
import { fakeInstanceId } from '../../../support/fakes/fake-compute.ts';
import { InMemoryJobStore } from '../../../../lib/adapters/memory-job-store.ts';
import { StaleAttemptError } from '../../../../lib/errors.ts';
import type { AttemptRecord } from '../../../../lib/model.ts';
import { givenJob, givenLaunched, givenReplacedAttempt, harness, initialState, JOB_ID, report, taskSpec, tokenFor, type Harness } from '../../../support/usecases-harness.ts';

const INSTANCE = fakeInstanceId(JOB_ID, 1, 0);
const warning: InstanceEvent = { instanceId: INSTANCE, kind: 'SPOT_INTERRUPTION_WARNING', time: '2026-03-01T12:05:00.000Z' };
const terminated: InstanceEvent = { instanceId: INSTANCE, kind: 'STATE_CHANGE', state: 'terminated', time: '2026-03-01T12:07:00.000Z' };

describe('onInstanceEvent', () => {
  it('notes an interruption warning and lets the attempt run', async () => {
    const h = harness();
    await givenLaunched(h);

    const result = await onInstanceEvent(warning, h.deps);

    expect(result.action).toBe('noted');
    const attempt = await h.store.getAttempt(JOB_ID, 1);
    expect(attempt.interruptionNoticedAt).toBe(warning.time);
    expect(attempt.outcome).toBeNull();
    expect(h.workflow.closings).toEqual([]);
  });

  it('ends the attempt PREEMPTED when the instance goes after a warning, and resumes the task', async () => {
    const h = harness();
    await givenLaunched(h);
    await onInstanceEvent(warning, h.deps);

    const result = await onInstanceEvent(terminated, h.deps);

    expect(result).toEqual({ action: 'ended', reason: `attempt 1 of job ${JOB_ID} ended: preempted after a spot interruption warning` });
    expect(await h.store.getAttempt(JOB_ID, 1)).toMatchObject({ outcome: { kind: 'PREEMPTED' }, endedAt: terminated.time });
    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'PREEMPTED' } }]);
  });

  it.each(['shutting-down', 'terminated', 'stopping', 'stopped'])('ends the attempt LOST when the instance is %s without a warning', async (state) => {
    const h = harness();
    await givenLaunched(h);
    const result = await onInstanceEvent({ ...terminated, state }, h.deps);
    expect(result.action).toBe('ended');
    const verb = state.startsWith('stop') ? 'stopped' : 'terminated';
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'LOST', reason: `instance ${INSTANCE} was ${verb}`, nodes: [0] });
    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'LOST' } }]);
  });

  it('ignores states in which the instance is alive', async () => {
    const h = harness();
    await givenLaunched(h);
    expect((await onInstanceEvent({ ...terminated, state: 'running' }, h.deps)).action).toBe('ignored');
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toBeNull();
  });

  it('is idempotent: a duplicate warning or termination changes nothing', async () => {
    const h = harness();
    await givenLaunched(h);
    await onInstanceEvent(warning, h.deps);
    expect((await onInstanceEvent({ ...warning, time: '2026-03-01T12:05:30.000Z' }, h.deps)).action).toBe('ignored');
    expect((await h.store.getAttempt(JOB_ID, 1)).interruptionNoticedAt).toBe(warning.time);

    await onInstanceEvent(terminated, h.deps);
    const again = await onInstanceEvent(terminated, h.deps);
    expect(again).toEqual({ action: 'ignored', reason: `attempt 1 of job ${JOB_ID} has already ended (PREEMPTED)` });
    expect(h.workflow.closings).toHaveLength(1);
  });

  it('ignores an instance no attempt owns', async () => {
    const h = harness();
    await givenLaunched(h);
    const result = await onInstanceEvent({ ...terminated, instanceId: 'i-0123456789abcdef0' }, h.deps);
    expect(result).toEqual({ action: 'ignored', reason: 'instance i-0123456789abcdef0 belongs to no attempt' });
  });

  it('keeps the exit code of a report that came in the two minutes after the warning', async () => {
    const h = harness();
    await givenLaunched(h);
    await onInstanceEvent(warning, h.deps);
    await report(h, 1, 'run', 0);

    const result = await onInstanceEvent(terminated, h.deps);

    expect(result.action).toBe('ignored');
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 0 }] });
    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'EXITED' } }]);
  });

  it('ends a single-node attempt PREEMPTED at once on a failing report after a warning; the termination then changes nothing', async () => {
    const h = harness();
    await givenLaunched(h);
    await onInstanceEvent(warning, h.deps);
    await report(h, 1, 'run', 1);

    expect(await onInstanceEvent(terminated, h.deps)).toEqual({
      action: 'ignored',
      reason: `attempt 1 of job ${JOB_ID} has already ended (PREEMPTED)`,
    });
    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'PREEMPTED' } }]);
  });

  it('multi-node: a node\'s instance going after its final report decides nothing; the other node runs on and reports', async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2 }));
    await report(h, 1, 'run', 0, 0);
    const head = fakeInstanceId(JOB_ID, 1, 0);

    for (const state of ['shutting-down', 'terminated']) {
      expect(await onInstanceEvent({ ...terminated, instanceId: head, state }, h.deps)).toEqual({
        action: 'ignored',
        reason: `instance ${head} of node 0 was terminated after its final report: expected, it decides nothing`,
      });
    }
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toBeNull();

    expect(await report(h, 1, 'run', 0, 1)).toEqual({ status: 'accepted' });
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({
      kind: 'EXITED',
      phase: 'run',
      nodes: [
        { rank: 0, exitCode: 0 },
        { rank: 1, exitCode: 0 },
      ],
    });
    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'EXITED' } }]);
  });

  it('multi-node, warned: an instance going before its node\'s final report ends the attempt PREEMPTED, the other node done or not; the warned node is named as going too', async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2 }));
    await onInstanceEvent(warning, h.deps);
    await report(h, 1, 'setup', 0, 0);
    await report(h, 1, 'setup', 0, 1);
    await report(h, 1, 'run', 0, 0);
    const worker = fakeInstanceId(JOB_ID, 1, 1);

    expect((await onInstanceEvent({ ...terminated, instanceId: worker }, h.deps)).action).toBe('ended');
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'PREEMPTED', nodes: [0, 1] });
  });

  it('ends the attempt LOST when an instance goes before its node\'s final report; that node\'s late report is refused', async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2 }));
    await report(h, 1, 'run', 0, 0);
    const worker = fakeInstanceId(JOB_ID, 1, 1);

    expect(await onInstanceEvent({ ...terminated, instanceId: worker }, h.deps)).toEqual({
      action: 'ended',
      reason: `attempt 1 of job ${JOB_ID} ended: instance ${worker} was terminated`,
    });
    // An agent shuts down only once its final report is stored, so this instance did not
    // shut itself down: a report arriving now cannot be told from one racing a reclaim.
    await expect(report(h, 1, 'run', 0, 1)).rejects.toThrow(StaleAttemptError);
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'LOST', reason: `instance ${worker} was terminated`, nodes: [1] });
  });

  it.each([
    ['a warning', warning],
    ['a termination', terminated],
  ])('ignores %s whose attempt a report ended between the event\'s read and its write', async (_what, event) => {
    const h = harness();
    const store = new EndsFirst(h);
    const world = { ...h, store, deps: { ...h.deps, store } };
    await givenLaunched(world);
    store.armed = true;

    const result = await onInstanceEvent(event, world.deps);

    expect(result).toEqual({ action: 'ignored', reason: `attempt 1 of job ${JOB_ID} ended meanwhile (EXITED)` });
    expect((await store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 0 }] });
    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'EXITED' } }]);
  });

  it('ignores an event about an earlier attempt\'s instance', async () => {
    const h = harness();
    await givenLaunched(h);
    await givenReplacedAttempt(h);

    const result = await onInstanceEvent(terminated, h.deps);

    expect(result.reason).toMatch(/is stale: attempt 2 is the live one/);
    expect((await h.store.getAttempt(JOB_ID, 2)).outcome).toBeNull();
  });

  it('ends an attempt the machine is not waiting on yet without resuming anything', async () => {
    const h = harness();
    await givenJob(h);
    await launchAttempt(initialState(), h.deps);
    expect((await onInstanceEvent(terminated, h.deps)).action).toBe('ended');
    expect(h.workflow.closings).toEqual([]);
  });
});

/** A store where, once armed, the node's final report 0 lands (and ends the attempt) just before the event's first write. */
class EndsFirst extends InMemoryJobStore {
  armed = false;

  constructor(private readonly h: Harness) {
    super();
  }

  override async noteInterruption(jobId: string, attempt: number, at: string): Promise<AttemptRecord> {
    await this.#reportFirst();
    return super.noteInterruption(jobId, attempt, at);
  }

  override async endAttempt(...args: Parameters<InMemoryJobStore['endAttempt']>): Promise<{ attempt: AttemptRecord; won: boolean }> {
    await this.#reportFirst();
    return super.endAttempt(...args);
  }

  async #reportFirst(): Promise<void> {
    if (!this.armed) return;
    this.armed = false;
    await report({ ...this.h, store: this, deps: { ...this.h.deps, store: this } }, 1, 'run', 0);
  }
}
