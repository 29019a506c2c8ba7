// Restart in place, and replacing only the nodes that went: the decision keeps nodes, the
// release holds them, the relaunch runs on them, and a kept node asks what it does next.

import { describe, expect, it } from 'vitest';
import { NoCapacityError, StaleAttemptError, UnauthorizedError } from '../../../../lib/errors.ts';
import type { RecoveryPolicy } from '../../../../lib/task-file/types.ts';
import { cancelJob } from '../../../../lib/usecases/cancel-job.ts';
import { recordControllerFailure } from '../../../../lib/usecases/controller-failure.ts';
import { evaluatePolicy } from '../../../../lib/usecases/evaluate-policy.ts';
import { onExecutionEnded } from '../../../../lib/usecases/execution-ended.ts';
import { heartbeat } from '../../../../lib/usecases/heartbeat.ts';
import { onInstanceEvent } from '../../../../lib/usecases/instance-event.ts';
import { launchAttempt } from '../../../../lib/usecases/launch-attempt.ts';
import { nextAttempt } from '../../../../lib/usecases/next-attempt.ts';
import { releaseInstances } from '../../../../lib/usecases/release-instances.ts';
import { reportStoppedPhase } from '../../../../lib/usecases/report-phase.ts';
import { holdOrRun, launchStandby } from '../../../../lib/usecases/standby-attempt.ts';
import { awaitAttempt } from '../../../../lib/usecases/await-attempt.ts';
import { StateName } from '../../../../lib/workflow/contract.ts';
import type { WorkflowState } from '../../../../lib/workflow/contract.ts';
import { fakeInstanceId } from '../../../support/fakes/fake-compute.ts';
import { givenLaunched, harness, JOB_ID, launchAndAwait, report, taskSpec, type Harness } from '../../../support/usecases-harness.ts';

/** Reuse on, setup skipped on kept nodes, 29 restarts, 42 means a bad node. */
const REUSE: Partial<RecoveryPolicy> = { reuseNodes: { reuse: true, setup: 'skip' }, recoverOnExitCodes: [29], badNodeExitCodes: [42] };

/** A job of `numNodes` nodes whose attempt 1 runs, under `recovery`. */
async function running(numNodes: number, recovery: Partial<RecoveryPolicy> = REUSE): Promise<{ h: Harness; state: WorkflowState }> {
  const h = harness();
  const state = await givenLaunched(h, taskSpec({ numNodes, recovery }));
  return { h, state };
}

/** Every node's setup 0, then these run codes (undefined: that node does not report). */
async function runCodes(h: Harness, attempt: number, codes: readonly (number | undefined)[]): Promise<void> {
  for (const [rank] of codes.entries()) await report(h, attempt, 'setup', 0, rank);
  for (const [rank, code] of codes.entries()) if (code !== undefined) await report(h, attempt, 'run', code, rank);
}

/** EvaluateRecoveryPolicy then ReleaseInstances, as the machine runs them. */
async function decideAndRelease(h: Harness, state: WorkflowState): Promise<WorkflowState> {
  return releaseInstances(await evaluatePolicy(state, h.deps), h.deps);
}

/** Node `rank` of attempt `attempt` asks what is next, with that attempt's secret. */
function askNext(h: Harness, attempt: number, rank: number, secretOf = attempt) {
  return nextAttempt({ jobId: JOB_ID, attempt, nodeRank: rank, secret: h.compute.secretFor(JOB_ID, secretOf) }, h.deps);
}

/** A spot interruption warning then the termination of node `rank`'s instance. */
async function preempt(h: Harness, attempt: number, rank: number): Promise<void> {
  const instanceId = fakeInstanceId(JOB_ID, attempt, rank);
  const time = h.clock.now().toISOString();
  await onInstanceEvent({ instanceId, kind: 'SPOT_INTERRUPTION_WARNING', time }, h.deps);
  await onInstanceEvent({ instanceId, kind: 'STATE_CHANGE', state: 'terminated', time }, h.deps);
}

describe('the decision keeps nodes', () => {
  it('exit 29 on one node: restart in place, kept in the decision\'s own write, the reason says so', async () => {
    const { h, state } = await running(1);
    await runCodes(h, 1, [29]);

    const decided = await evaluatePolicy(state, h.deps);

    const attempt = await h.store.getAttempt(JOB_ID, 1);
    expect(attempt.decision?.keep).toEqual({
      nodes: [{ instanceId: fakeInstanceId(JOB_ID, 1, 0), nodeRank: 0, privateIp: '10.0.0.1' }],
      placement: attempt.placement,
      setup: 'skip',
      replace: [],
    });
    expect(decided.decision?.reason).toMatch(/recover_on_exit_codes.*; relaunch in place on the same node, setup skipped$/);
    expect((await h.store.listEvents(JOB_ID)).at(-1)?.reason).toBe(decided.decision?.reason);
  });

  it('four nodes, node 2 preempted: keeps 0, 1 and 3 and replaces 2', async () => {
    const { h, state } = await running(4);
    await runCodes(h, 1, [undefined, undefined, undefined, undefined]);
    await preempt(h, 1, 2);

    await evaluatePolicy(state, h.deps);

    const { decision, outcome } = await h.store.getAttempt(JOB_ID, 1);
    expect(outcome).toEqual({ kind: 'PREEMPTED', nodes: [2] });
    expect(decision?.keep?.nodes.map((node) => node.nodeRank)).toEqual([0, 1, 3]);
    expect(decision?.keep?.replace).toEqual([{ nodeRank: 2, why: 'preempted' }]);
    expect(decision?.reason).toMatch(/keeps nodes 0, 1, 3 and replaces node 2 \(preempted\)/);
  });

  it('a bad-node exit code on one node of four: only that rank is replaced', async () => {
    const { h, state } = await running(4, { ...REUSE, maxRestartsOnErrors: 1 });
    await runCodes(h, 1, [undefined, 42, undefined, undefined]);
    h.clock.advance(5);

    const decided = await evaluatePolicy(state, h.deps);

    expect(decided.decision?.action).toBe('RESTART');
    const keep = (await h.store.getAttempt(JOB_ID, 1)).decision?.keep;
    expect(keep?.nodes.map((node) => node.nodeRank)).toEqual([0, 2, 3]);
    expect(keep?.replace).toEqual([{ nodeRank: 1, why: 'exited 42, a bad_node_exit_codes code' }]);
  });

  it('setup skip holds only where setup exited 0: a node still in setup when its peer\'s run failed runs it again', async () => {
    const { h, state } = await running(2);
    await report(h, 1, 'setup', 0, 0);
    await report(h, 1, 'run', 29, 0);
    h.clock.advance(5);

    await evaluatePolicy(state, h.deps);

    const keep = (await h.store.getAttempt(JOB_ID, 1)).decision?.keep;
    expect(keep?.nodes.map((node) => node.nodeRank)).toEqual([0, 1]);
    expect(keep?.setup).toBe('rerun');
  });

  it('keeps nothing under the default strategy, nor for a decision that ends the job', async () => {
    const fresh = await running(1, { recoverOnExitCodes: [29] });
    await runCodes(fresh.h, 1, [29]);
    await evaluatePolicy(fresh.state, fresh.h.deps);
    expect((await fresh.h.store.getAttempt(JOB_ID, 1)).decision?.keep).toBeUndefined();

    const failed = await running(1);
    await runCodes(failed.h, 1, [3]);
    await evaluatePolicy(failed.state, failed.h.deps);
    expect((await failed.h.store.getAttempt(JOB_ID, 1)).decision).toMatchObject({ action: 'FAIL' });
    expect((await failed.h.store.getAttempt(JOB_ID, 1)).decision?.keep).toBeUndefined();
  });

  it('an attempt that never booted on one node of two keeps the node that did', async () => {
    const { h, state } = await running(2, { ...REUSE, strategy: 'FAILOVER' });
    await heartbeat({ jobId: JOB_ID, attempt: 1, nodeRank: 0, secret: h.compute.secretFor(JOB_ID, 1) }, h.deps);
    h.clock.advance(700);

    await evaluatePolicy({ ...state, awaitError: { Error: 'States.Timeout', Cause: 'boot' } }, h.deps);

    const { outcome, decision } = await h.store.getAttempt(JOB_ID, 1);
    expect(outcome).toMatchObject({ kind: 'LOST', neverBooted: true, nodes: [1] });
    expect(decision?.keep?.nodes.map((node) => node.nodeRank)).toEqual([0]);
  });
});

describe('a standby of the warned node alone, and the nodes kept beside it', () => {
  /** Attempt 1 of `numNodes` nodes runs under reuse and `launch_on_warning`, every node heard from and set up, AwaitAttempt waiting. */
  async function warmRunning(numNodes: number, recovery: Partial<RecoveryPolicy> = {}): Promise<{ h: Harness; state: WorkflowState }> {
    const started = await running(numNodes, { ...REUSE, launchOnWarning: true, ...recovery });
    for (let rank = 0; rank < numNodes; rank += 1) {
      await heartbeat({ jobId: JOB_ID, attempt: 1, nodeRank: rank, secret: started.h.compute.secretFor(JOB_ID, 1) }, started.h.deps);
      await report(started.h, 1, 'setup', 0, rank);
    }
    await awaitAttempt({ jobId: JOB_ID, attempt: 1, taskToken: 'await-1', state: StateName.AwaitAttempt }, started.h.deps);
    return started;
  }

  /** EC2's word on node `rank` of attempt 1. */
  function event(h: Harness, rank: number, kind: 'SPOT_INTERRUPTION_WARNING' | 'REBALANCE_RECOMMENDATION' | 'STATE_CHANGE') {
    const instanceId = fakeInstanceId(JOB_ID, 1, rank);
    return onInstanceEvent({ instanceId, kind, ...(kind === 'STATE_CHANGE' ? { state: 'terminated' } : {}), time: h.clock.now().toISOString() }, h.deps);
  }

  it('node 1 of 3 warned: its replacement alone boots during the warning; nodes 0 and 2 are kept, join it, and the job runs on all three', async () => {
    const { h, state } = await warmRunning(3);
    await event(h, 1, 'SPOT_INTERRUPTION_WARNING');
    expect((await h.store.getAttempt(JOB_ID, 1)).interruptionNode).toBe(1);

    const standby = await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps);

    expect(standby.reason).toBe('attempt 2 launched (spot, m5.large in us-east-1a) as the standby of node 1 of attempt 1, beside its other nodes, on its spot interruption warning');
    const old = (await h.store.getAttempt(JOB_ID, 1)).instances;
    expect(h.compute.launches[1]?.beside).toEqual({ placement: (await h.store.getAttempt(JOB_ID, 1)).placement, nodes: [old[0], old[2]] });
    const held = await h.store.getAttempt(JOB_ID, 2);
    expect(held.instances.map((node) => node.nodeRank)).toEqual([1]);
    expect(held.standby).toEqual({ for: 1, on: 'interruption', beside: [old[0], old[2]] });
    // The new node boots and sets up while attempt 1 runs on: it holds.
    await heartbeat({ jobId: JOB_ID, attempt: 2, nodeRank: 1, secret: h.compute.secretFor(JOB_ID, 2) }, h.deps);
    expect(await report(h, 2, 'setup', 0, 1)).toMatchObject({ run: 'hold' });

    await event(h, 1, 'STATE_CHANGE');
    const decided = await decideAndRelease(h, state);
    expect(decided.decision?.reason).toMatch(/keeps nodes 0, 2 and replaces node 1 \(preempted\), setup skipped$/);
    expect(h.compute.holds.map((hold) => hold.nodes.map((node) => node.nodeRank))).toEqual([[0, 2]]);
    expect(await askNext(h, 1, 0)).toMatchObject({ next: 'wait' });

    const next = await launchAttempt(decided, h.deps);

    expect(next).toMatchObject({ attempt: 2, launched: true });
    // Nothing launched: the standby was the replacement, and the kept nodes joined it.
    expect(h.compute.launches).toHaveLength(2);
    const adopted = await h.store.getAttempt(JOB_ID, 2);
    expect(adopted.instances.map((node) => [node.instanceId, node.reusedFrom])).toEqual([
      [old[0]?.instanceId, 1],
      [fakeInstanceId(JOB_ID, 2, 1), undefined],
      [old[2]?.instanceId, 1],
    ]);
    expect(h.compute.joins).toEqual([{ jobId: JOB_ID, attempt: 2, nodes: adopted.instances }]);
    expect(h.compute.isRunning(old[0]?.instanceId as string)).toBe(true);
    expect((await h.store.findAttemptByInstance(old[2]?.instanceId as string))?.attempt).toBe(2);
    expect(await askNext(h, 1, 2)).toMatchObject({ next: 'run', attempt: 2, nodeRank: 2, nodeIps: ['10.0.0.1', '10.0.0.2', '10.0.0.3'], setup: 'skip' });

    // The new node holds until the kept ones have set up (or skipped it), with the standby's secret.
    expect(await holdOrRun({ jobId: JOB_ID, attempt: 2, nodeRank: 1, secret: h.compute.secretFor(JOB_ID, 2) }, h.deps)).toMatchObject({ run: 'hold' });
    await expect(heartbeat({ jobId: JOB_ID, attempt: 2, nodeRank: 0, secret: h.compute.secretFor(JOB_ID, 1) }, h.deps)).rejects.toBeInstanceOf(UnauthorizedError);
    await report(h, 2, 'setup', 0, 0);
    expect(await report(h, 2, 'setup', 0, 2)).toMatchObject({ run: 'go' });
    expect(await holdOrRun({ jobId: JOB_ID, attempt: 2, nodeRank: 1, secret: h.compute.secretFor(JOB_ID, 2) }, h.deps)).toMatchObject({ run: 'go' });
    expect((await h.store.getJob(JOB_ID)).counters).toMatchObject({ recoveryCount: 1, restartsOnErrors: 0 });

    // A retried LaunchAttempt answers the same and joins again, launching nothing.
    expect(await launchAttempt(decided, h.deps)).toEqual(next);
    expect(h.compute.joins).toHaveLength(2);
    expect(h.compute.launches).toHaveLength(2);
  });

  it("report first: a code after the warning is a preemption that names the warned node, so the others are kept and join its standby", async () => {
    const { h, state } = await warmRunning(2);
    await event(h, 1, 'SPOT_INTERRUPTION_WARNING');
    await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps);
    await report(h, 1, 'run', 1, 0);
    h.clock.advance(60);

    const decided = await decideAndRelease(h, state);

    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'PREEMPTED', nodes: [1] });
    expect(await launchAttempt(decided, h.deps)).toMatchObject({ attempt: 2, launched: true });
    expect((await h.store.getAttempt(JOB_ID, 2)).instances.map((node) => [node.nodeRank, node.reusedFrom])).toEqual([[0, 1], [1, undefined]]);
    expect(h.compute.launches).toHaveLength(2);
  });

  it('a relaunch that keeps no node (the heartbeats stopped: which node went is not known) lets the standby go and launches fresh', async () => {
    const { h, state } = await warmRunning(2);
    await event(h, 1, 'SPOT_INTERRUPTION_WARNING');
    await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps);
    h.clock.advance(600);

    const decided = await decideAndRelease(h, { ...state, awaitError: { Error: 'States.HeartbeatTimeout', Cause: 'no heartbeat' } });
    expect((await h.store.getAttempt(JOB_ID, 1)).decision?.keep).toBeUndefined();
    const next = await launchAttempt(decided, h.deps);

    expect((await h.store.getAttempt(JOB_ID, 2)).standby?.releaseReason).toBe('not used: it was launched beside node 0 of attempt 1, and the relaunch keeps none; attempt 3 launches instead');
    expect(next).toMatchObject({ attempt: 3, launched: true });
    expect(h.compute.launches[2]).toMatchObject({ attempt: 3 });
    expect(h.compute.launches[2]?.keep).toBeUndefined();
    expect(h.compute.joins).toEqual([]);
  });

  it('a rebalance recommendation no interruption follows, then exit 29: the relaunch keeps both nodes, so the standby is let go and the job restarts in place', async () => {
    const { h, state } = await warmRunning(2, { launchOnWarning: 'rebalance' });
    await event(h, 1, 'REBALANCE_RECOMMENDATION');
    await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps);
    expect((await h.store.getAttempt(JOB_ID, 2)).standby).toMatchObject({ on: 'rebalance', beside: [{ nodeRank: 0 }] });
    await report(h, 1, 'run', 29, 0);

    const decided = await decideAndRelease(h, state);
    const next = await launchAttempt(decided, h.deps);

    expect((await h.store.getAttempt(JOB_ID, 2)).standby?.releaseReason).toBe('not used: it was launched beside node 0 of attempt 1, and the relaunch keeps nodes 0, 1; attempt 3 launches instead');
    expect(next).toMatchObject({ attempt: 3, launched: true });
    expect((await h.store.getAttempt(JOB_ID, 3)).instances.map((node) => node.reusedFrom)).toEqual([1, 1]);
    expect(h.compute.releases.filter((release) => release.attempt === 2)).toHaveLength(1);
  });

  it('keeps no node when the standby is a whole set (reuse off): the relaunch takes the standby', async () => {
    const { h, state } = await warmRunning(2, { reuseNodes: { reuse: false, setup: 'rerun' } });
    await event(h, 1, 'SPOT_INTERRUPTION_WARNING');
    await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps);
    expect(h.compute.launches[1]?.beside).toBeUndefined();
    await event(h, 1, 'STATE_CHANGE');

    const decided = await decideAndRelease(h, state);

    expect(decided.decision?.action).toBe('RECOVER');
    expect((await h.store.getAttempt(JOB_ID, 1)).decision?.keep).toBeUndefined();
    expect(h.compute.holds).toEqual([]);
    expect(await launchAttempt(decided, h.deps)).toMatchObject({ attempt: 2, launched: true });
    expect((await h.store.getAttempt(JOB_ID, 2)).instances.map((node) => node.nodeRank)).toEqual([0, 1]);
  });
});

describe('counters are the same with and without reuse', () => {
  it.each([
    { name: 'max_restarts_on_errors', recovery: { maxRestartsOnErrors: 2 }, codes: [1, 1, 1] },
    { name: 'recover_on_exit_codes with max_restarts_on_exit_codes', recovery: { recoverOnExitCodes: [29], maxRestartsOnExitCodes: 1 }, codes: [29, 29, 1] },
  ])('$name', async ({ recovery, codes }) => {
    const outcomes = [];
    for (const reuseNodes of [{ reuse: false, setup: 'rerun' as const }, { reuse: true, setup: 'skip' as const }]) {
      const h = harness();
      let state = await givenLaunched(h, taskSpec({ recovery: { ...recovery, reuseNodes } }));
      const seen = [];
      for (const code of codes) {
        await runCodes(h, state.attempt, [code]);
        state = await decideAndRelease(h, state);
        const job = await h.store.getJob(JOB_ID);
        seen.push({ action: state.decision?.action, status: job.status, counters: job.counters });
        if (state.decision?.action !== 'RESTART') break;
        state = await launchAndAwait(h, state);
      }
      outcomes.push({ seen, kept: (await h.store.listAttempts(JOB_ID)).map((a) => a.decision?.keep !== undefined) });
    }
    expect(outcomes[1]?.seen).toEqual(outcomes[0]?.seen);
    expect(outcomes[0]?.kept.some(Boolean)).toBe(false);
    expect(outcomes[1]?.kept.some(Boolean)).toBe(true);
  });

  it('max_recoveries, one node of two preempted each time', async () => {
    const seen = [];
    for (const reuseNodes of [{ reuse: false, setup: 'rerun' as const }, { reuse: true, setup: 'rerun' as const }]) {
      const h = harness();
      let state = await givenLaunched(h, taskSpec({ numNodes: 2, recovery: { maxRecoveries: 1, reuseNodes } }));
      const decisions = [];
      for (;;) {
        await runCodes(h, state.attempt, [undefined, undefined]);
        await preempt(h, state.attempt, 1);
        state = await decideAndRelease(h, state);
        const job = await h.store.getJob(JOB_ID);
        decisions.push({ action: state.decision?.action, counters: job.counters, status: job.status });
        if (state.decision?.action !== 'RECOVER') break;
        state = await launchAndAwait(h, state);
      }
      seen.push(decisions);
      const kept = (await h.store.getAttempt(JOB_ID, 1)).decision?.keep?.nodes.map((node) => node.nodeRank);
      expect(kept).toEqual(reuseNodes.reuse ? [0] : undefined);
    }
    expect(seen[1]).toEqual(seen[0]);
    expect(seen[0]?.map((d) => d.action)).toEqual(['RECOVER', 'FAIL']);
  });
});

describe('the release holds the kept nodes', () => {
  it('holds the kept nodes and releases the others, never a kept one', async () => {
    const { h, state } = await running(4);
    await runCodes(h, 1, [undefined, undefined, undefined, undefined]);
    await preempt(h, 1, 2);

    await decideAndRelease(h, state);

    const kept = [0, 1, 3].map((rank) => fakeInstanceId(JOB_ID, 1, rank));
    expect(h.compute.holds).toEqual([{ jobId: JOB_ID, attempt: 1, nodes: expect.arrayContaining(kept.map((instanceId) => expect.objectContaining({ instanceId }))) }]);
    expect(h.compute.releases).toEqual([{ jobId: JOB_ID, attempt: 1, instances: [expect.objectContaining({ instanceId: fakeInstanceId(JOB_ID, 1, 2) })], except: kept }]);
    for (const instanceId of kept) expect(h.compute.isRunning(instanceId)).toBe(true);
  });

  it('without a keep, releases every instance as before and holds none', async () => {
    const { h, state } = await running(1, { recoverOnExitCodes: [29] });
    await runCodes(h, 1, [29]);
    await decideAndRelease(h, state);
    expect(h.compute.holds).toEqual([]);
    expect(h.compute.releases).toEqual([{ jobId: JOB_ID, attempt: 1, instances: [expect.objectContaining({ nodeRank: 0 })] }]);
  });
});

describe('the relaunch runs on the kept nodes', () => {
  it('launches only the missing rank, records which node was reused, and moves the instance index', async () => {
    const { h, state } = await running(4);
    await runCodes(h, 1, [undefined, undefined, undefined, undefined]);
    await preempt(h, 1, 2);
    const decided = await decideAndRelease(h, state);

    const next = await launchAndAwait(h, decided);

    expect(next).toMatchObject({ attempt: 2, launched: true });
    const request = h.compute.launches[1];
    expect(request?.keep?.nodes.map((node) => node.nodeRank)).toEqual([0, 1, 3]);
    const attempt = await h.store.getAttempt(JOB_ID, 2);
    expect(attempt.instances.map((node) => [node.nodeRank, node.instanceId, node.reusedFrom])).toEqual([
      [0, fakeInstanceId(JOB_ID, 1, 0), 1],
      [1, fakeInstanceId(JOB_ID, 1, 1), 1],
      [2, fakeInstanceId(JOB_ID, 2, 2), undefined],
      [3, fakeInstanceId(JOB_ID, 1, 3), 1],
    ]);
    // An EC2 event on a reused instance now ends the attempt it serves: attempt 2.
    expect((await h.store.findAttemptByInstance(fakeInstanceId(JOB_ID, 1, 0)))?.attempt).toBe(2);
    await onInstanceEvent({ instanceId: fakeInstanceId(JOB_ID, 1, 0), kind: 'STATE_CHANGE', state: 'terminated', time: h.clock.now().toISOString() }, h.deps);
    expect((await h.store.getAttempt(JOB_ID, 2)).outcome).toMatchObject({ kind: 'LOST', nodes: [0] });
  });

  it('a survivor preempted while it waits for its replacement is launched anew', async () => {
    const { h, state } = await running(2);
    await runCodes(h, 1, [undefined, undefined]);
    await preempt(h, 1, 1);
    const decided = await decideAndRelease(h, state);
    const survivor = fakeInstanceId(JOB_ID, 1, 0);
    // EC2 reclaims the survivor too: its event finds attempt 1 ended, and changes nothing.
    h.compute.reclaim(survivor);
    const event = await onInstanceEvent({ instanceId: survivor, kind: 'STATE_CHANGE', state: 'terminated', time: h.clock.now().toISOString() }, h.deps);
    expect(event.action).toBe('ignored');

    await launchAndAwait(h, decided);

    const attempt = await h.store.getAttempt(JOB_ID, 2);
    expect(attempt.instances.map((node) => [node.instanceId, node.reusedFrom])).toEqual([
      [fakeInstanceId(JOB_ID, 2, 0), undefined],
      [fakeInstanceId(JOB_ID, 2, 1), undefined],
    ]);
    expect(await askNext(h, 1, 0)).toMatchObject({ next: 'stop', reason: expect.stringMatching(/placed without this node/) });
  });

  it('a kept node the launch did not run on is released once the attempt is placed without it', async () => {
    const { h, state } = await running(2);
    await runCodes(h, 1, [undefined, undefined]);
    await preempt(h, 1, 1);
    const decided = await decideAndRelease(h, state);
    // A compute that launches every rank anew, whatever it is asked to keep.
    const launch = h.compute.launch.bind(h.compute);
    h.compute.launch = async (request) => launch({ ...request, keep: undefined });

    await launchAttempt(decided, h.deps);

    expect((await h.store.getAttempt(JOB_ID, 2)).instances.map((node) => node.reusedFrom)).toEqual([undefined, undefined]);
    expect(h.compute.releases.at(-1)).toEqual({ jobId: JOB_ID, attempt: 1, instances: [expect.objectContaining({ instanceId: fakeInstanceId(JOB_ID, 1, 0) })] });
    expect(h.compute.isRunning(fakeInstanceId(JOB_ID, 1, 0))).toBe(false);
  });

  it('no capacity for the relaunch: the kept nodes are released, not held through the wait', async () => {
    const { h, state } = await running(2);
    await runCodes(h, 1, [undefined, undefined]);
    await preempt(h, 1, 1);
    const decided = await decideAndRelease(h, state);
    h.compute.scriptLaunch({ error: new NoCapacityError('no m5.large in us-east-1a') });

    await launchAttempt(decided, h.deps);

    expect((await h.store.getAttempt(JOB_ID, 2)).outcome?.kind).toBe('LAUNCH_FAILED');
    expect(h.compute.releases.at(-1)).toEqual({ jobId: JOB_ID, attempt: 1, instances: [expect.objectContaining({ instanceId: fakeInstanceId(JOB_ID, 1, 0) })] });
    expect(h.compute.isRunning(fakeInstanceId(JOB_ID, 1, 0))).toBe(false);
    expect(await askNext(h, 1, 0)).toMatchObject({ next: 'stop' });
  });

  it('a cancel while nodes are held: the launch releases them, and next says stop', async () => {
    const { h, state } = await running(1);
    await runCodes(h, 1, [29]);
    const decided = await decideAndRelease(h, state);
    expect(await askNext(h, 1, 0)).toMatchObject({ next: 'wait' });

    await cancelJob(JOB_ID, h.deps);
    await launchAttempt(decided, h.deps);

    expect(h.compute.launches).toHaveLength(1);
    expect(h.compute.isRunning(fakeInstanceId(JOB_ID, 1, 0))).toBe(false);
    expect(await askNext(h, 1, 0)).toMatchObject({ next: 'stop', reason: expect.stringMatching(/CANCELLING|CANCELLED/) });
  });
});

describe('a whole restart in place, in memory', () => {
  it('exit 29, the node held and told to run attempt 2 on itself, then exit 0: the job succeeds and the node goes with it', async () => {
    const { h, state } = await running(2);
    await report(h, 1, 'setup', 0, 0);
    await report(h, 1, 'setup', 0, 1);
    await report(h, 1, 'run', 29, 0);
    h.clock.advance(5);
    const decided = await decideAndRelease(h, state);
    expect(decided.decision).toMatchObject({ action: 'RESTART', reason: expect.stringMatching(/in place on nodes 0-1, setup skipped$/) });
    // The peer's job, stopped by the hold, leaves its last lines on the ended attempt.
    const peer = { jobId: JOB_ID, attempt: 1, nodeRank: 1, secret: h.compute.secretFor(JOB_ID, 1) };
    expect(await reportStoppedPhase({ ...peer, phase: 'run', stopped: 'held', outputTail: 'step 9' }, h.deps)).toEqual({ status: 'accepted' });

    const next = await launchAndAwait(h, decided);
    for (const rank of [0, 1]) expect(await askNext(h, 1, rank)).toMatchObject({ next: 'run', attempt: 2, nodeRank: rank, setup: 'skip' });
    expect(h.compute.launches[1]?.keep?.nodes).toHaveLength(2);
    await report(h, 2, 'setup', 0, 0);
    await report(h, 2, 'setup', 0, 1);
    await report(h, 2, 'run', 0, 0);
    await report(h, 2, 'run', 0, 1);
    const done = await decideAndRelease(h, next);

    expect(done.decision?.action).toBe('SUCCEED');
    expect(h.compute.releases.at(-1)).toMatchObject({ attempt: 2, instances: [expect.objectContaining({ reusedFrom: 1 }), expect.objectContaining({ reusedFrom: 1 })] });
    for (const rank of [0, 1]) expect(h.compute.isRunning(fakeInstanceId(JOB_ID, 1, rank))).toBe(false);
    expect(await askNext(h, 1, 0)).toMatchObject({ next: 'stop' });
  });
});

describe('the attempt on reused nodes starts when every node is up', () => {
  it('a kept node set up first holds until the replacement reports setup 0; then every node goes', async () => {
    const { h, state } = await running(2);
    await runCodes(h, 1, [undefined, undefined]);
    await preempt(h, 1, 1);
    await launchAndAwait(h, await decideAndRelease(h, state));

    expect(await report(h, 2, 'setup', 0, 0)).toMatchObject({ run: 'hold', reason: expect.stringMatching(/waits for node 1 to finish setup/) });
    const asks = { jobId: JOB_ID, attempt: 2, nodeRank: 0, secret: h.compute.secretFor(JOB_ID, 2) };
    expect(await holdOrRun(asks, h.deps)).toMatchObject({ run: 'hold' });
    expect(await report(h, 2, 'setup', 0, 1)).toMatchObject({ run: 'go' });
    expect(await holdOrRun(asks, h.deps)).toMatchObject({ run: 'go' });
  });
});

describe('a cancel in the backoff wait while nodes are held', () => {
  it('the janitor ends the job CANCELLED and releases the held node with it; next says stop', async () => {
    const { h, state } = await running(1);
    await runCodes(h, 1, [29]);
    await decideAndRelease(h, state);
    await h.store.setExecution(JOB_ID, 'arn:execution');

    await cancelJob(JOB_ID, h.deps);
    await onExecutionEnded({ jobId: JOB_ID, executionArn: 'arn:execution', status: 'ABORTED' }, h.deps);

    expect((await h.store.getJob(JOB_ID)).status).toBe('CANCELLED');
    expect(h.compute.isRunning(fakeInstanceId(JOB_ID, 1, 0))).toBe(false);
    expect(await askNext(h, 1, 0)).toMatchObject({ next: 'stop', reason: expect.stringMatching(/CANCELLED/) });
  });
});

describe("the controller's own failure while nodes are held", () => {
  it('a launch that fails unexpectedly before running on the kept node: the catch-all releases it', async () => {
    const { h, state } = await running(1);
    await runCodes(h, 1, [29]);
    const decided = await decideAndRelease(h, state);
    h.compute.scriptLaunch({ error: new Error('EC2 answered something unexpected') });
    await expect(launchAttempt(decided, h.deps)).rejects.toThrow('EC2 answered something unexpected');

    await recordControllerFailure({ ...decided, attempt: 2, controllerError: { Error: 'Error', Cause: 'EC2 answered something unexpected' } }, h.deps);

    expect((await h.store.getJob(JOB_ID)).status).toBe('FAILED_CONTROLLER');
    expect(h.compute.isRunning(fakeInstanceId(JOB_ID, 1, 0))).toBe(false);
  });
});

describe('next: what a kept node does', () => {
  it('waits until the attempt is decided and the next one placed, then runs it with its new rank and IPs; idempotent', async () => {
    const { h, state } = await running(2, { ...REUSE, reuseNodes: { reuse: true, setup: 'rerun' } });
    await report(h, 1, 'setup', 0, 0);
    await report(h, 1, 'setup', 0, 1);
    await report(h, 1, 'run', 29, 0);
    expect(await askNext(h, 1, 0)).toMatchObject({ next: 'wait' });
    h.clock.advance(5);
    const decided = await decideAndRelease(h, state);
    expect(await askNext(h, 1, 0)).toMatchObject({ next: 'wait', reason: expect.stringMatching(/not launched yet/) });

    await launchAndAwait(h, decided);

    const expected = {
      next: 'run',
      attempt: 2,
      nodeRank: 0,
      numNodes: 2,
      nodeIps: ['10.0.0.1', '10.0.0.2'],
      setup: 'rerun',
    };
    expect(await askNext(h, 1, 0)).toMatchObject(expected);
    expect(await askNext(h, 1, 0)).toEqual(await askNext(h, 1, 0));
    expect(await askNext(h, 1, 1)).toMatchObject({ ...expected, nodeRank: 1 });
  });

  it('a replaced node is told to stop, with why', async () => {
    const { h, state } = await running(2, { ...REUSE, maxRestartsOnErrors: 1 });
    await runCodes(h, 1, [0, 42]);
    await decideAndRelease(h, state);
    expect(await askNext(h, 1, 1)).toMatchObject({ next: 'stop', reason: expect.stringMatching(/exited 42, a bad_node_exit_codes code/) });
  });

  it('a decision without a keep says stop; a wrong secret is refused', async () => {
    const { h, state } = await running(1, { recoverOnExitCodes: [29] });
    await runCodes(h, 1, [29]);
    await decideAndRelease(h, state);
    expect(await askNext(h, 1, 0)).toMatchObject({ next: 'stop' });
    await expect(nextAttempt({ jobId: JOB_ID, attempt: 1, nodeRank: 0, secret: 'not-it' }, h.deps)).rejects.toThrow(UnauthorizedError);
  });

  it('once the next attempt starts: the old secret is refused on its routes, and a late report for the old attempt changes nothing', async () => {
    const { h, state } = await running(1);
    await runCodes(h, 1, [29]);
    await launchAndAwait(h, await decideAndRelease(h, state));
    const before = await h.store.getAttempt(JOB_ID, 1);

    const oldSecret = h.compute.secretFor(JOB_ID, 1);
    await expect(heartbeat({ jobId: JOB_ID, attempt: 2, nodeRank: 0, secret: oldSecret }, h.deps)).rejects.toThrow(UnauthorizedError);
    await expect(report(h, 1, 'run', 3)).rejects.toThrow(StaleAttemptError);

    expect(await h.store.getAttempt(JOB_ID, 1)).toEqual(before);
    expect((await h.store.getAttempt(JOB_ID, 2)).reports).toEqual([]);
  });
});
