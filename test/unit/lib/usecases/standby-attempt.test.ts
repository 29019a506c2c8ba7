// launch_on_warning through the use cases: the warning asks for a standby, LaunchStandby
// starts it, its agents hold, and the relaunch takes it or the job lets it go; counters and
// reasons are those of the same job without the option, whatever order messages come in.

import { describe, expect, it } from 'vitest';
import { DynamoJobStore } from '../../../../lib/adapters/dynamo-job-store/index.ts';
import { InMemoryJobStore } from '../../../../lib/adapters/memory-job-store.ts';
import type { JobStore } from '../../../../lib/ports.ts';
import { NoCapacityError, StaleAttemptError } from '../../../../lib/errors.ts';
import type { RecoveryPolicy } from '../../../../lib/task-file/types.ts';
import { StateName, WorkflowError, type WorkflowState } from '../../../../lib/workflow/contract.ts';
import { awaitAttempt } from '../../../../lib/usecases/await-attempt.ts';
import { cancelJob } from '../../../../lib/usecases/cancel-job.ts';
import { evaluatePolicy } from '../../../../lib/usecases/evaluate-policy.ts';
import { heartbeat } from '../../../../lib/usecases/heartbeat.ts';
import { onInstanceEvent } from '../../../../lib/usecases/instance-event.ts';
import { launchAttempt } from '../../../../lib/usecases/launch-attempt.ts';
import { releaseInstances } from '../../../../lib/usecases/release-instances.ts';
import { holdOrRun, launchStandby } from '../../../../lib/usecases/standby-attempt.ts';
import { fakeInstanceId } from '../../../support/fakes/fake-compute.ts';
import { useDynalite } from '../../../support/fixtures/dynalite.ts';
import { givenJob, givenLaunched, harness, initialState, JOB_ID, report, taskSpec, tokenFor, type Harness } from '../../../support/usecases-harness.ts';

const PLACED = { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm5.large' };

function spec(recovery: Partial<RecoveryPolicy> = {}, numNodes = 1) {
  return taskSpec({ numNodes, recovery: { launchOnWarning: true, ...recovery } });
}

/** Attempt 1 launched, its nodes up and AwaitAttempt waiting on it. */
async function running(h: Harness, recovery: Partial<RecoveryPolicy> = {}, numNodes = 1): Promise<WorkflowState> {
  const launched = await givenLaunched(h, spec(recovery, numNodes));
  for (let rank = 0; rank < numNodes; rank += 1) await heartbeat(agent(h, 1, rank), h.deps);
  await awaitAttempt({ jobId: JOB_ID, attempt: 1, taskToken: 'await-1', state: StateName.AwaitAttempt }, h.deps);
  return launched;
}

function agent(h: Harness, attempt: number, nodeRank = 0) {
  return { jobId: JOB_ID, attempt, nodeRank, secret: h.compute.secretFor(JOB_ID, attempt) };
}

async function warn(h: Harness, attempt: number, rank = 0, kind: 'SPOT_INTERRUPTION_WARNING' | 'REBALANCE_RECOMMENDATION' = 'SPOT_INTERRUPTION_WARNING') {
  return onInstanceEvent({ instanceId: fakeInstanceId(JOB_ID, attempt, rank), kind, time: h.clock.now().toISOString() }, h.deps);
}

async function gone(h: Harness, attempt: number, rank = 0) {
  return onInstanceEvent({ instanceId: fakeInstanceId(JOB_ID, attempt, rank), kind: 'STATE_CHANGE', state: 'terminated', time: h.clock.now().toISOString() }, h.deps);
}

/** The machine after the wait ended: the policy, then the release; returns the decided state. */
async function decideAndRelease(h: Harness, attempt: number, awaitError?: WorkflowState['awaitError']): Promise<WorkflowState> {
  const decided = await evaluatePolicy({ jobId: JOB_ID, attempt, attemptsInExecution: attempt, ...(awaitError === undefined ? {} : { awaitError }) }, h.deps);
  return releaseInstances(decided, h.deps);
}

describe('a warning asks for a standby', () => {
  it('fails the waiting AwaitAttempt with StandbyWanted, saying which warning asked for which attempt', async () => {
    const h = harness();
    await running(h);
    expect((await warn(h, 1)).reason).toContain('asked for attempt 2 as its standby (launch_on_warning)');
    expect(h.workflow.closingOf('await-1')).toEqual({
      kind: 'fail',
      taskToken: 'await-1',
      error: WorkflowError.StandbyWanted,
      cause: `the spot interruption warning on attempt 1 of job ${JOB_ID} asks for attempt 2 as its standby (launch_on_warning)`,
    });
  });

  it.each<[string, Partial<RecoveryPolicy>, 'SPOT_INTERRUPTION_WARNING' | 'REBALANCE_RECOMMENDATION', boolean]>([
    ['no option: a warning is only noted', { launchOnWarning: false }, 'SPOT_INTERRUPTION_WARNING', false],
    ['true: a rebalance recommendation decides nothing', { launchOnWarning: true }, 'REBALANCE_RECOMMENDATION', false],
    ['rebalance: a rebalance recommendation asks', { launchOnWarning: 'rebalance' }, 'REBALANCE_RECOMMENDATION', true],
    ['rebalance: an interruption warning asks too', { launchOnWarning: 'rebalance' }, 'SPOT_INTERRUPTION_WARNING', true],
  ])('%s', async (_name, recovery, kind, asks) => {
    const h = harness();
    await running(h, recovery);
    await warn(h, 1, 0, kind);
    expect(h.workflow.closingOf('await-1')?.kind).toBe(asks ? 'fail' : undefined);
    const attempt = await h.store.getAttempt(JOB_ID, 1);
    // A rebalance recommendation never makes the attempt's failures preemptions.
    expect(attempt.interruptionNoticedAt !== null).toBe(kind === 'SPOT_INTERRUPTION_WARNING');
  });

  it('asks once AwaitAttempt stores its token when the warning came during AwaitBoot, and never again once the standby exists', async () => {
    const h = harness();
    await givenJob(h, spec());
    await launchAttempt(initialState(), h.deps);
    await awaitAttempt({ jobId: JOB_ID, attempt: 1, taskToken: 'boot-1', state: StateName.AwaitBoot }, h.deps);
    await warn(h, 1);
    expect(h.workflow.closings).toEqual([]);
    await heartbeat(agent(h, 1), h.deps);
    await awaitAttempt({ jobId: JOB_ID, attempt: 1, taskToken: 'await-1', state: StateName.AwaitAttempt }, h.deps);
    expect(h.workflow.closingOf('await-1')).toMatchObject({ kind: 'fail', error: WorkflowError.StandbyWanted });
    await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps);
    await awaitAttempt({ jobId: JOB_ID, attempt: 1, taskToken: 'await-1b', state: StateName.AwaitAttempt }, h.deps);
    await warn(h, 1, 0, 'REBALANCE_RECOMMENDATION');
    expect(h.workflow.closingOf('await-1b')).toBeUndefined();
  });
});

describe('LaunchStandby', () => {
  it('launches the next attempt beside the live one, on its market, moving away from the warned placement', async () => {
    const h = harness();
    await running(h);
    await warn(h, 1);
    const result = await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps);
    expect(result).toEqual({ attempt: 2, launched: true, reason: 'attempt 2 launched (spot, m5.large in us-east-1a) as the standby of attempt 1, on its spot interruption warning' });
    const request = h.compute.launches[1];
    expect(request).toMatchObject({ attempt: 2, market: 'spot', history: [{ placement: PLACED, outcome: 'PREEMPTED' }] });
    expect((await h.store.getJob(JOB_ID)).attemptCount).toBe(1);
    expect((await h.store.getAttempt(JOB_ID, 2)).standby).toEqual({ for: 1, on: 'interruption' });
    // A second run (a retried Lambda) launches nothing more.
    expect(await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps)).toMatchObject({ attempt: 2, launched: true });
    expect(h.compute.launches).toHaveLength(2);
  });

  it('launches nothing for an attempt that ended, or that no warning asks for', async () => {
    const h = harness();
    await running(h);
    expect(await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps)).toEqual({ attempt: null, launched: false, reason: 'no warning on attempt 1 asks for a standby' });
    await warn(h, 1);
    await report(h, 1, 'run', 0);
    expect(await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps)).toEqual({ attempt: null, launched: false, reason: 'attempt 1 has ended (EXITED)' });
    expect(h.compute.launches).toHaveLength(1);
  });

  it('leaves a standby that found no capacity released, charged to nothing, and asks for no other', async () => {
    const h = harness();
    await running(h);
    await warn(h, 1);
    h.compute.scriptLaunch({ error: new NoCapacityError('InsufficientInstanceCapacity in every zone') });
    const result = await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps);
    expect(result).toEqual({ attempt: null, launched: false, reason: 'not launched: no capacity: InsufficientInstanceCapacity in every zone' });
    expect((await h.store.getAttempt(JOB_ID, 2)).standby).toMatchObject({ releaseReason: result.reason });
    await awaitAttempt({ jobId: JOB_ID, attempt: 1, taskToken: 'await-1b', state: StateName.AwaitAttempt }, h.deps);
    expect(h.workflow.closingOf('await-1b')).toBeUndefined();
  });

  it.each([
    ['max_recoveries 0', { maxRecoveries: 0 }],
  ])('launches none, and the warning asks for none, with %s: the policy could never take it', async (_name, recovery) => {
    const h = harness();
    await running(h, recovery);
    expect((await warn(h, 1)).reason).not.toContain('standby');
    expect(h.workflow.closingOf('await-1')).toBeUndefined();
    const answer = await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps);
    expect(answer).toEqual({ attempt: null, launched: false, reason: 'max_recoveries (0) is used up: a preemption of attempt 1 ends the job, so no standby could be taken' });
    expect(h.compute.launches).toHaveLength(1);
  });

  it('launches none once max_recoveries is spent by earlier preemptions', async () => {
    const h = harness();
    await running(h, { maxRecoveries: 1 });
    await warn(h, 1);
    await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps);
    await gone(h, 1);
    const next = await launchAttempt(await decideAndRelease(h, 1), h.deps);
    expect(next).toMatchObject({ attempt: 2, launched: true });
    expect((await h.store.getJob(JOB_ID)).counters.recoverDecisions).toBe(1);
    await heartbeat(agent(h, 2), h.deps);
    await awaitAttempt({ jobId: JOB_ID, attempt: 2, taskToken: 'await-2', state: StateName.AwaitAttempt }, h.deps);
    await warn(h, 2);
    expect(h.workflow.closingOf('await-2')).toBeUndefined();
    expect((await launchStandby({ jobId: JOB_ID, standbyFor: 2 }, h.deps)).launched).toBe(false);
    expect(h.compute.launches).toHaveLength(2);
  });

  it('gives its slot back and launches nothing when the launch pace has none now', async () => {
    const h = harness();
    await running(h);
    await warn(h, 1);
    // Other launches took the whole bucket: the next slot is minutes away.
    await h.pace.reserve(5_000, h.clock.now().getTime(), 'another-job');
    const result = await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps);
    expect(result.launched).toBe(false);
    expect(result.reason).toMatch(/^not launched: the shared launch pace has no slot for \d+ s; the next attempt launches once attempt 1 is decided$/);
    expect(h.compute.launches).toHaveLength(1);
  });

  it('releases a standby an earlier run wrote and never placed, its instances found by tag', async () => {
    const h = harness();
    await running(h);
    await warn(h, 1);
    h.compute.scriptLaunch({ error: new Error('the Lambda died here') });
    await expect(launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps)).rejects.toThrow('the Lambda died here');
    const retried = await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps);
    expect(retried).toEqual({ attempt: null, launched: false, reason: 'not launched: its launch was interrupted before its instances were recorded' });
    expect(h.compute.releases.at(-1)).toMatchObject({ attempt: 2 });
  });
});

describe("a standby's agents", () => {
  async function withStandby(h: Harness, recovery: Partial<RecoveryPolicy> = {}, numNodes = 1): Promise<void> {
    await running(h, recovery, numNodes);
    await warn(h, 1);
    await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps);
    await awaitAttempt({ jobId: JOB_ID, attempt: 1, taskToken: 'await-1b', state: StateName.AwaitAttempt }, h.deps);
  }

  it('beat, report setup and are told to hold, and have no run to report while they hold', async () => {
    const h = harness();
    await withStandby(h);
    await heartbeat(agent(h, 2), h.deps);
    expect((await h.store.getAttempt(JOB_ID, 2)).nodesHeardFrom).toEqual([0]);
    expect(await report(h, 2, 'setup', 0)).toEqual({ status: 'accepted', run: 'hold', reason: `attempt 2 of job ${JOB_ID} is a standby: attempt 1 is still the live one` });
    expect((await holdOrRun(agent(h, 2), h.deps)).run).toBe('hold');
    await expect(report(h, 2, 'run', 0)).rejects.toBeInstanceOf(StaleAttemptError);
    // The live attempt's status is the job's: a standby's messages leave it alone.
    expect((await h.store.getJob(JOB_ID)).status).toBe('RUNNING');
    expect(h.workflow.closingOf('await-1b')).toBeUndefined();
  });

  it('go once the warned attempt ended and the relaunch took their attempt, which launched nothing', async () => {
    const h = harness();
    await withStandby(h);
    await heartbeat(agent(h, 2), h.deps);
    await report(h, 2, 'setup', 0);
    await gone(h, 1);
    const decided = await decideAndRelease(h, 1);
    expect(decided.decision).toMatchObject({ action: 'RECOVER', reason: 'spot preemption; recovery 1, does not count toward max_restarts_on_errors' });
    expect((await holdOrRun(agent(h, 2), h.deps)).run).toBe('hold');
    const next = await launchAttempt(decided, h.deps);
    expect(next).toMatchObject({ attempt: 2, launched: true });
    expect(h.compute.launches).toHaveLength(2);
    expect((await h.store.getJob(JOB_ID)).attemptCount).toBe(2);
    const events = await h.store.listEvents(JOB_ID);
    expect(events.at(-1)).toMatchObject({ to: 'STARTING', reason: 'taking standby attempt 2 (spot), started on the spot interruption warning of attempt 1' });
    h.clock.advance(1);
    expect(await holdOrRun(agent(h, 2), h.deps)).toEqual({ run: 'go', reason: `attempt 2 of job ${JOB_ID} is the live attempt: attempt 1 has ended and the job relaunched` });
    expect((await h.store.getAttempt(JOB_ID, 2)).runStartedAt).toBe(h.clock.now().toISOString());
    expect((await h.store.getJob(JOB_ID)).status).toBe('RUNNING');
    // A repeat of the launch (a retried Lambda) answers the same, taking nothing twice.
    expect(await launchAttempt(decided, h.deps)).toEqual(next);
  });

  it('are told to stop once the warned attempt succeeded: the standby is released, charged to nothing', async () => {
    const h = harness();
    await withStandby(h);
    await report(h, 2, 'setup', 0);
    await report(h, 1, 'run', 0);
    const decided = await decideAndRelease(h, 1);
    expect(decided.decision).toMatchObject({ action: 'SUCCEED', reason: 'exit code 0 (run); job succeeded' });
    const standby = await h.store.getAttempt(JOB_ID, 2);
    expect(standby.standby?.releaseReason).toBe('not needed: attempt 1 was decided SUCCEED (exit code 0 (run); job succeeded)');
    expect(h.compute.releases.map((release) => release.attempt)).toEqual([1, 2]);
    expect(await holdOrRun(agent(h, 2), h.deps)).toMatchObject({ run: 'stop' });
    await expect(heartbeat(agent(h, 2), h.deps)).rejects.toBeInstanceOf(StaleAttemptError);
    const job = await h.store.getJob(JOB_ID);
    expect(job).toMatchObject({ status: 'SUCCEEDED', attemptCount: 1 });
    expect(job.counters).toMatchObject({ recoveryCount: 0, restartsOnErrors: 0, recoverDecisions: 0 });
  });

  it('told to stop by an ended job before the release comes, shut down: the instance going ends nothing, and the release finds the standby unused', async () => {
    const h = harness();
    await withStandby(h);
    await report(h, 2, 'setup', 0);
    await report(h, 1, 'run', 0);
    const decided = await evaluatePolicy({ jobId: JOB_ID, attempt: 1, attemptsInExecution: 1 }, h.deps);
    expect(await holdOrRun(agent(h, 2), h.deps)).toEqual({ run: 'stop', reason: `job ${JOB_ID} is SUCCEEDED` });
    expect((await gone(h, 2)).action).toBe('ignored');
    await releaseInstances(decided, h.deps);
    expect(await h.store.getAttempt(JOB_ID, 2)).toMatchObject({ outcome: null, decision: null, standby: { releaseReason: expect.stringMatching(/^not needed: attempt 1 was decided SUCCEED/) } });
  });

  it('are released with the job when it is cancelled while they hold', async () => {
    const h = harness();
    await withStandby(h);
    await cancelJob(JOB_ID, h.deps);
    expect(h.workflow.closingOf('await-1b')).toMatchObject({ kind: 'fail', error: WorkflowError.JobCancelled });
    await decideAndRelease(h, 1, { Error: WorkflowError.JobCancelled, Cause: 'cancelled by the user' });
    expect((await h.store.getAttempt(JOB_ID, 2)).standby?.releaseReason).toMatch(/^not needed: attempt 1 was decided FAIL \(cancelled by the user/);
    expect(await holdOrRun(agent(h, 2), h.deps)).toMatchObject({ run: 'stop' });
    expect((await h.store.getJob(JOB_ID)).status).toBe('CANCELLED');
  });

  it('whose setup failed make an ordinary setup failure of their attempt once taken, charged as it would be', async () => {
    const h = harness();
    await withStandby(h, { maxRestartsOnErrors: 1 });
    await report(h, 2, 'setup', 1);
    expect((await h.store.getAttempt(JOB_ID, 2)).outcome).toMatchObject({ kind: 'EXITED', phase: 'setup' });
    await gone(h, 1);
    const next = await launchAttempt(await decideAndRelease(h, 1), h.deps);
    expect(next).toMatchObject({ attempt: 2, launched: true });
    await awaitAttempt({ jobId: JOB_ID, attempt: 2, taskToken: tokenFor(2), state: StateName.AwaitBoot }, h.deps);
    expect(h.workflow.closingOf(tokenFor(2))).toEqual({ kind: 'resume', taskToken: tokenFor(2), output: { outcome: 'EXITED' } });
    const decided = await decideAndRelease(h, 2);
    expect(decided.decision).toMatchObject({ action: 'RESTART', reason: 'exit code 1 (setup); restart 1 of 1 on errors, 0 left' });
    expect((await h.store.getJob(JOB_ID)).counters).toMatchObject({ recoveryCount: 2, restartsOnErrors: 1 });
    expect(await launchAttempt(decided, h.deps)).toMatchObject({ attempt: 3, launched: true });
  });

  it.each([
    ['lost', async (h: Harness) => gone(h, 2), 'it was lost while it held (instance '],
    ['reclaimed', async (h: Harness) => { await warn(h, 2); return gone(h, 2); }, 'it was reclaimed while it held (a spot interruption)'],
  ] as const)('%s while they held are never taken: released, charged to nothing, and the relaunch launches fresh', async (_name, end, why) => {
    const h = harness();
    await withStandby(h);
    await report(h, 2, 'setup', 0);
    expect((await end(h)).action).toBe('ended');
    await gone(h, 1);
    const decided = await decideAndRelease(h, 1);
    const next = await launchAttempt(decided, h.deps);
    expect(next).toMatchObject({ attempt: 3, launched: true });
    expect(h.compute.launches.map((launch) => launch.attempt)).toEqual([1, 2, 3]);
    const standby = await h.store.getAttempt(JOB_ID, 2);
    expect(standby.standby?.releaseReason).toContain(`not used: ${why}`);
    expect(standby.decision).toBeNull();
    await report(h, 3, 'setup', 0);
    await report(h, 3, 'run', 0);
    expect((await decideAndRelease(h, 3)).decision).toMatchObject({ action: 'SUCCEED' });
    // The counters of the same job without the option: one preemption, one recovery.
    expect((await h.store.getJob(JOB_ID)).counters).toMatchObject({ recoveryCount: 1, recoverDecisions: 1, restartsOnErrors: 0 });
  });

  it('lost while it held, with max_recoveries 1: the job that succeeds without the option succeeds with it', async () => {
    const h = harness();
    await withStandby(h, { maxRecoveries: 1 });
    await report(h, 2, 'setup', 0);
    await gone(h, 2);
    await gone(h, 1);
    const next = await launchAttempt(await decideAndRelease(h, 1), h.deps);
    await report(h, next.attempt, 'setup', 0);
    await report(h, next.attempt, 'run', 0);
    expect((await decideAndRelease(h, next.attempt)).decision).toMatchObject({ action: 'SUCCEED' });
    expect((await h.store.getJob(JOB_ID)).status).toBe('SUCCEEDED');
  });

  it('are not taken by a relaunch on another market: released and stepped over, the next attempt launches on-demand', async () => {
    const h = harness();
    await withStandby(h, { onDemandFallbackAfter: 1 });
    await gone(h, 1);
    const decided = await decideAndRelease(h, 1);
    expect(decided.decision?.reason).toContain('relaunching on-demand');
    const next = await launchAttempt(decided, h.deps);
    expect(next).toMatchObject({ attempt: 3, launched: true });
    expect(h.compute.launches.at(-1)).toMatchObject({ attempt: 3, market: 'on-demand' });
    expect((await h.store.getAttempt(JOB_ID, 2)).standby?.releaseReason).toBe('not used: the next attempt runs on-demand, and the standby spot; attempt 3 launches instead');
    expect(await holdOrRun(agent(h, 2), h.deps)).toMatchObject({ run: 'stop' });
    expect(await launchAttempt(decided, h.deps)).toEqual(next);
  });
});

const dynalite = useDynalite();
const STORES = [
  { name: 'InMemoryJobStore', make: async (): Promise<JobStore> => new InMemoryJobStore() },
  { name: 'DynamoJobStore on dynalite', make: async (): Promise<JobStore> => new DynamoJobStore({ client: dynalite.client(), tableName: await dynalite.freshTable('standby') }) },
];

describe.each(STORES)('counters and reasons are those of the job without the option ($name)', ({ make }) => {
  /**
   * A job warned on attempt 1, whose node then exits 1 as it is stopped while its instance
   * goes, in `order`; attempt 2 succeeds. Returns each decision, the counters, and how the
   * two messages were answered.
   */
  async function drive(launchOnWarning: boolean, order: 'report first' | 'termination first' | 'both at once') {
    const h = harness(await make());
    await running(h, { launchOnWarning, maxRestartsOnErrors: 1 });
    await warn(h, 1);
    if (launchOnWarning) {
      await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps);
      await awaitAttempt({ jobId: JOB_ID, attempt: 1, taskToken: 'await-1b', state: StateName.AwaitAttempt }, h.deps);
      await report(h, 2, 'setup', 0);
    }
    // The warned node's job exits 1 as it is stopped, and its instance goes: in both orders.
    const reported = () => report(h, 1, 'run', 1).catch((error: unknown) => (error instanceof StaleAttemptError ? 'stale' : Promise.reject(error)));
    const answers =
      order === 'report first' ? [await reported(), await gone(h, 1)] : order === 'termination first' ? [await gone(h, 1), await reported()] : await Promise.all([reported(), gone(h, 1)]);
    const first = await decideAndRelease(h, 1);
    const next = await launchAttempt(first, h.deps);
    if (!launchOnWarning) await report(h, 2, 'setup', 0);
    await report(h, next.attempt, 'run', 0);
    const second = await decideAndRelease(h, next.attempt);
    const job = await h.store.getJob(JOB_ID);
    return { answers: answers.map((a) => (typeof a === 'string' ? a : 'action' in a ? a.action : a.status)), decisions: [first.decision, second.decision], counters: job.counters, status: job.status, launches: h.compute.launches.length };
  }

  it.each(['report first', 'termination first', 'both at once'] as const)('%s', async (order) => {
    const without = await drive(false, order);
    const withStandby = await drive(true, order);
    expect(withStandby.decisions).toEqual(without.decisions);
    expect(withStandby.counters).toEqual(without.counters);
    expect(withStandby.status).toBe('SUCCEEDED');
    expect(without.decisions[0]).toMatchObject({ action: 'RECOVER', reason: 'spot preemption; recovery 1, does not count toward max_restarts_on_errors' });
    // The same launches: the standby is the relaunch, launched early.
    expect(withStandby.launches).toBe(without.launches);
    if (order !== 'both at once') expect(withStandby.answers).toEqual(without.answers);
  });
});
