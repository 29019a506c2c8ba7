// Which nodes a relaunch runs on: reuseChoice's defaults per strategy, and every rule of nodesToKeep.

import { describe, expect, it } from 'vitest';
import type { InstanceRef, Placement } from '../../../lib/model.ts';
import { decideRecovery, initialCounters } from '../../../lib/policy/decide.ts';
import { RecoveryAction, type AttemptOutcome, type Market, type RecoveryDecision } from '../../../lib/policy/types.ts';
import { describeKeep, describeReuseChoice, MAX_HOLD_SECONDS, nodesToKeep, reuseChoice, standbyBeside, type KeepInput } from '../../../lib/reuse-rules.ts';
import type { RecoveryPolicy } from '../../../lib/task-file/types.ts';
import { recoveryPolicy } from '../../support/fixtures/specs.ts';

const PLACEMENT: Placement = { region: 'us-east-1', zone: 'us-east-1b', instanceType: 'p5.48xlarge' };

function instances(numNodes: number): InstanceRef[] {
  return Array.from({ length: numNodes }, (_, nodeRank) => ({ instanceId: `i-node${nodeRank}`, nodeRank, privateIp: `10.0.0.${nodeRank + 10}` }));
}

const FAILOVER = recoveryPolicy({ strategy: 'FAILOVER' });
const EAGER = recoveryPolicy({ strategy: 'EAGER_NEXT_REGION' });
const REUSE_SKIP = recoveryPolicy({ reuseNodes: { reuse: true, setup: 'skip' } });

const RESTART: Pick<RecoveryDecision, 'action' | 'delaySeconds' | 'market'> = { action: RecoveryAction.RESTART, delaySeconds: 0, market: 'spot' };
const RECOVER: Pick<RecoveryDecision, 'action' | 'delaySeconds' | 'market'> = { action: RecoveryAction.RECOVER, delaySeconds: 0, market: 'spot' };

/** Node 2 of 4 exited 42; the controller stopped the other three. */
const PEERS_STOPPED_AFTER_42: AttemptOutcome = {
  kind: 'EXITED',
  phase: 'run',
  nodes: [0, 1, 2, 3].map((rank) => (rank === 2 ? { rank, exitCode: 42 } : { rank, exitCode: null, killedByController: true, unknownReason: 'stopped because node 2 failed' })),
};

/** One node per code, ranks 0, 1, ... */
function exited(phase: 'setup' | 'run', ...codes: (number | null)[]): AttemptOutcome {
  return { kind: 'EXITED', phase, nodes: codes.map((exitCode, rank) => ({ rank, exitCode })) };
}

function input(overrides: Partial<KeepInput> & { readonly numNodes?: number } = {}): KeepInput {
  const numNodes = overrides.numNodes ?? 1;
  return {
    policy: FAILOVER,
    decision: RESTART,
    outcome: exited('run', ...Array.from({ length: numNodes }, () => 29)),
    market: 'spot' as Market,
    placement: PLACEMENT,
    instances: instances(numNodes),
    ...overrides,
    numNodes,
  };
}

/** The kept ranks, the replaced ranks with why, and setup; or the reason nothing is kept. */
function summary(result: ReturnType<typeof nodesToKeep>): unknown {
  if (result.keep === null) return result.reason;
  return { keep: result.keep.nodes.map((node) => node.nodeRank), replace: result.keep.replace, setup: result.keep.setup };
}

describe('reuseChoice', () => {
  it.each([
    ['FAILOVER reuses and reruns setup, as SkyPilot does', FAILOVER, { reuse: true, setup: 'rerun', source: 'strategy' }],
    ['EAGER_NEXT_REGION launches fresh nodes, as SkyPilot does', EAGER, { reuse: false, setup: 'rerun', source: 'strategy' }],
    ['reuse_nodes true turns reuse on under EAGER_NEXT_REGION', recoveryPolicy({ reuseNodes: { reuse: true, setup: 'rerun' } }), { reuse: true, setup: 'rerun', source: 'reuse_nodes' }],
    ['reuse_nodes false turns it off under FAILOVER', recoveryPolicy({ strategy: 'FAILOVER', reuseNodes: { reuse: false, setup: 'rerun' } }), { reuse: false, setup: 'rerun', source: 'reuse_nodes' }],
    ['reuse_nodes {setup: skip} reuses and skips setup', REUSE_SKIP, { reuse: true, setup: 'skip', source: 'reuse_nodes' }],
    ['a stored null reuse_nodes is the strategy default', recoveryPolicy({ strategy: 'FAILOVER', reuseNodes: null }), { reuse: true, setup: 'rerun', source: 'strategy' }],
  ])('%s', (_name, policy: RecoveryPolicy, expected) => {
    expect(reuseChoice(policy)).toEqual(expected);
  });

  it.each([
    [EAGER, "relaunches on fresh nodes (the EAGER_NEXT_REGION strategy's default)"],
    [FAILOVER, "relaunches on the healthy nodes, replacing only lost or bad ones, setup run again (the FAILOVER strategy's default)"],
    [REUSE_SKIP, 'relaunches on the healthy nodes, replacing only lost or bad ones, setup skipped where it ran (reuse_nodes)'],
    [recoveryPolicy({ strategy: 'FAILOVER', reuseNodes: { reuse: false, setup: 'rerun' } }), 'relaunches on fresh nodes (reuse_nodes)'],
  ])('describes %j as %s', (policy, expected) => {
    expect(describeReuseChoice(reuseChoice(policy), policy.strategy)).toBe(expected);
  });
});

describe('nodesToKeep', () => {
  it.each([
    ['FAILOVER restarts in place on the same node, setup run again', input(), { keep: [0], replace: [], setup: 'rerun' }],
    ['EAGER_NEXT_REGION keeps nothing', input({ policy: EAGER }), "relaunches on fresh nodes (the EAGER_NEXT_REGION strategy's default)"],
    ['reuse_nodes true keeps the node under EAGER_NEXT_REGION', input({ policy: recoveryPolicy({ reuseNodes: { reuse: true, setup: 'rerun' } }) }), { keep: [0], replace: [], setup: 'rerun' }],
    ['reuse_nodes false keeps nothing under FAILOVER', input({ policy: recoveryPolicy({ strategy: 'FAILOVER', reuseNodes: { reuse: false, setup: 'rerun' } }) }), 'relaunches on fresh nodes (reuse_nodes)'],
    ['reuse_nodes {setup: skip} keeps the node and skips setup', input({ policy: REUSE_SKIP }), { keep: [0], replace: [], setup: 'skip' }],
    ['a wait of exactly 300 s still holds the nodes', input({ decision: { ...RESTART, delaySeconds: MAX_HOLD_SECONDS } }), { keep: [0], replace: [], setup: 'rerun' }],
    ['a wait longer than 300 s releases them', input({ decision: { ...RESTART, delaySeconds: MAX_HOLD_SECONDS + 1 } }), 'fresh nodes: the 301 s wait before the relaunch is longer than the 300 s a node is held'],
    ['a relaunch on another market keeps nothing', input({ decision: { ...RECOVER, market: 'on-demand' }, outcome: { kind: 'PREEMPTED', nodes: [0] }, numNodes: 2 }), 'fresh nodes: the relaunch moves from spot to on-demand'],
    ['PREEMPTED naming node 2 of 4 keeps the other three', input({ decision: RECOVER, outcome: { kind: 'PREEMPTED', nodes: [2] }, numNodes: 4 }), { keep: [0, 1, 3], replace: [{ nodeRank: 2, why: 'preempted' }], setup: 'rerun' }],
    ['PREEMPTED without nodes keeps nothing: which went is not known', input({ decision: RECOVER, outcome: { kind: 'PREEMPTED' }, numNodes: 4 }), 'fresh nodes: which node went is not known'],
    ['PREEMPTED with an empty node list keeps nothing either', input({ decision: RECOVER, outcome: { kind: 'PREEMPTED', nodes: [] }, numNodes: 4 }), 'fresh nodes: which node went is not known'],
    ['PREEMPTED naming every node keeps nothing', input({ decision: RECOVER, outcome: { kind: 'PREEMPTED', nodes: [1, 0] }, numNodes: 2 }), 'fresh nodes: node 0 preempted; node 1 preempted'],
    ['LOST naming node 1 keeps the others', input({ decision: RECOVER, outcome: { kind: 'LOST', reason: 'instance i-node1 was terminated', nodes: [1] }, numNodes: 3 }), { keep: [0, 2], replace: [{ nodeRank: 1, why: 'lost' }], setup: 'rerun' }],
    ['LOST by heartbeat, no node named, keeps nothing', input({ decision: RECOVER, outcome: { kind: 'LOST', reason: 'heartbeat lost' }, numNodes: 3 }), 'fresh nodes: which node went is not known'],
    ['AGENT_FAILED replaces the node whose agent failed', input({ decision: RECOVER, outcome: { kind: 'AGENT_FAILED', nodeRank: 1, step: 'image-pull', error: 'denied' }, numNodes: 2 }), { keep: [0], replace: [{ nodeRank: 1, why: 'its agent failed at image-pull' }], setup: 'rerun' }],
    ['AGENT_FAILED at previous-attempt replaces that node', input({ decision: RECOVER, outcome: { kind: 'AGENT_FAILED', nodeRank: 0, step: 'previous-attempt', error: 'pid 4242 still alive' }, numNodes: 2 }), { keep: [1], replace: [{ nodeRank: 0, why: 'its agent failed at previous-attempt' }], setup: 'rerun' }],
    ['a bad-node code on node 2 of 4 replaces that node only', input({ policy: recoveryPolicy({ strategy: 'FAILOVER', badNodeExitCodes: [42] }), outcome: PEERS_STOPPED_AFTER_42, numNodes: 4 }), { keep: [0, 1, 3], replace: [{ nodeRank: 2, why: 'exited 42, a bad_node_exit_codes code' }], setup: 'rerun' }],
    ['a code not in bad_node_exit_codes keeps the node', input({ policy: recoveryPolicy({ strategy: 'FAILOVER', badNodeExitCodes: [42] }), outcome: exited('run', 43, 0), numNodes: 2 }), { keep: [0, 1], replace: [], setup: 'rerun' }],
    ['an unknown exit code (never arrived) replaces that node', input({ outcome: { kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 1 }, { rank: 1, exitCode: null, unknownReason: 'no report' }] }, numNodes: 2 }), { keep: [0], replace: [{ nodeRank: 1, why: 'its exit code never arrived' }], setup: 'rerun' }],
    ['a node the controller killed (a peer failed) is kept', input({ outcome: { kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 1 }, { rank: 1, exitCode: null, killedByController: true, unknownReason: 'stopped because node 0 failed' }] }, numNodes: 2 }), { keep: [0, 1], replace: [], setup: 'rerun' }],
    ['the only node exiting a bad-node code leaves nothing to keep', input({ policy: recoveryPolicy({ strategy: 'FAILOVER', badNodeExitCodes: [42] }), outcome: exited('run', 42) }), 'fresh nodes: node 0 exited 42, a bad_node_exit_codes code'],
    ['a rank with no instance on record is launched anew', input({ instances: instances(3).filter((node) => node.nodeRank !== 1), numNodes: 3 }), { keep: [0, 2], replace: [{ nodeRank: 1, why: 'it has no instance on record' }], setup: 'rerun' }],
    ['an attempt with no instances keeps nothing', input({ instances: [] }), 'fresh nodes: the attempt had no nodes to keep'],
    ['an attempt never placed keeps nothing', input({ placement: null }), 'fresh nodes: the attempt had no nodes to keep'],
    ['a launch that found no capacity keeps nothing: a wait for capacity holds no node', input({ decision: RECOVER, outcome: { kind: 'LAUNCH_FAILED', cause: 'NO_RESOURCE', reason: 'none' }, instances: [] }), 'fresh nodes: the launch placed no node, and a wait for capacity releases the nodes held for it'],
    ['a launch that failed its prechecks keeps nothing, whatever instances are listed', input({ decision: RECOVER, outcome: { kind: 'LAUNCH_FAILED', cause: 'PRECHECKS', reason: 'bad AMI' } }), 'fresh nodes: the launch placed no node, and a wait for capacity releases the nodes held for it'],
    ['a decision that fails the job keeps nothing', input({ decision: { ...RESTART, action: RecoveryAction.FAIL } }), 'no relaunch'],
    ['a decision that succeeds keeps nothing', input({ decision: { ...RESTART, action: RecoveryAction.SUCCEED }, outcome: exited('run', 0) }), 'no relaunch'],
    ['a cancelled job keeps nothing', input({ decision: { ...RESTART, action: RecoveryAction.FAIL }, outcome: { kind: 'CANCELLED' } }), 'no relaunch'],
  ])('%s', (_name, given, expected) => {
    expect(summary(nodesToKeep(given))).toEqual(expected);
  });

  it('keeps the instances as the attempt recorded them, and the placement', () => {
    const result = nodesToKeep(input({ decision: RECOVER, outcome: { kind: 'PREEMPTED', nodes: [2] }, numNodes: 4 }));
    expect(result.keep?.nodes).toEqual(instances(4).filter((node) => node.nodeRank !== 2));
    expect(result.keep?.placement).toEqual(PLACEMENT);
    expect(result.reason).toBe('keeps nodes 0, 1, 3 and replaces node 2 (preempted), setup run again');
  });

  it('a restart in place on one node reads as such', () => {
    expect(nodesToKeep(input({ policy: REUSE_SKIP })).reason).toBe('in place on the same node, setup skipped');
    expect(nodesToKeep(input({ policy: REUSE_SKIP, numNodes: 4 })).reason).toBe('in place on nodes 0-3, setup skipped');
  });

  describe('setup skip applies only where setup exited 0', () => {
    it('an attempt that ended in setup runs it again on the kept nodes', () => {
      const result = nodesToKeep(input({ policy: REUSE_SKIP, outcome: exited('setup', 1, 0), numNodes: 2 }));
      expect(summary(result)).toEqual({ keep: [0, 1], replace: [], setup: 'rerun' });
      expect(result.reason).toBe('in place on nodes 0-1, setup run again (not skipped: the attempt ended in setup)');
    });

    it('a kept node whose setup had not exited 0 runs it again', () => {
      const result = nodesToKeep(input({ policy: REUSE_SKIP, decision: RECOVER, outcome: { kind: 'PREEMPTED', nodes: [3] }, numNodes: 4, setupDone: [0, 1, 3] }));
      expect(summary(result)).toEqual({ keep: [0, 1, 2], replace: [{ nodeRank: 3, why: 'preempted' }], setup: 'rerun' });
      expect(result.reason).toBe('keeps nodes 0, 1, 2 and replaces node 3 (preempted), setup run again (not skipped: setup had not exited 0 on node 2)');
    });

    it('every kept node done: setup is skipped', () => {
      const result = nodesToKeep(input({ policy: REUSE_SKIP, decision: RECOVER, outcome: { kind: 'PREEMPTED', nodes: [3] }, numNodes: 4, setupDone: [0, 1, 2] }));
      expect(result.keep?.setup).toBe('skip');
    });
  });

  describe('hostile inputs', () => {
    it('a rank outside the task is neither kept nor launched', () => {
      const result = nodesToKeep(input({ decision: RECOVER, outcome: { kind: 'PREEMPTED', nodes: [1, 7, -1] }, numNodes: 2, instances: [...instances(2), { instanceId: 'i-stray', nodeRank: 5, privateIp: null }] }));
      expect(summary(result)).toEqual({ keep: [0], replace: [{ nodeRank: 1, why: 'preempted' }], setup: 'rerun' });
    });

    it('an agent failure on a rank outside the task replaces nothing', () => {
      const result = nodesToKeep(input({ decision: RECOVER, outcome: { kind: 'AGENT_FAILED', nodeRank: 9, step: 'image-pull', error: 'x' }, numNodes: 2 }));
      expect(summary(result)).toEqual({ keep: [0, 1], replace: [], setup: 'rerun' });
    });

    it('a rank listed twice is kept once, the first instance on record', () => {
      const twice = [...instances(2), { instanceId: 'i-again', nodeRank: 1, privateIp: null }];
      const result = nodesToKeep(input({ instances: twice, numNodes: 2, outcome: exited('run', 1, 1) }));
      expect(result.keep?.nodes.map((node) => node.instanceId)).toEqual(['i-node0', 'i-node1']);
    });
  });

  describe('with the policy deciding', () => {
    function decided(policy: RecoveryPolicy, outcome: AttemptOutcome): RecoveryDecision {
      return decideRecovery({ policy, counters: initialCounters(true), outcome, random: () => 0.5 });
    }

    it('a restart_backoff over 300 s releases the nodes; one under keeps them', () => {
      const long = recoveryPolicy({ strategy: 'FAILOVER', maxRestartsOnErrors: 1, restartBackoff: { initialSeconds: 400, factor: 2, maxSeconds: 400, jitter: 'none' } });
      const short = recoveryPolicy({ ...long, restartBackoff: { initialSeconds: 60, factor: 2, maxSeconds: 60, jitter: 'none' } });
      const outcome = exited('run', 1);
      expect(nodesToKeep(input({ policy: long, decision: decided(long, outcome), outcome })).reason).toBe(
        'fresh nodes: the 400 s wait before the relaunch is longer than the 300 s a node is held',
      );
      expect(nodesToKeep(input({ policy: short, decision: decided(short, outcome), outcome })).keep?.nodes).toHaveLength(1);
    });

    it('a code in recover_on_exit_codes restarts in place under FAILOVER, the stopped peer kept', () => {
      const policy = recoveryPolicy({ strategy: 'FAILOVER', recoverOnExitCodes: [29] });
      const outcome: AttemptOutcome = { kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 29 }, { rank: 1, exitCode: null, killedByController: true }] };
      const decision = decided(policy, outcome);
      expect(decision.action).toBe(RecoveryAction.RESTART);
      expect(summary(nodesToKeep(input({ policy, decision, outcome, numNodes: 2 })))).toEqual({ keep: [0, 1], replace: [], setup: 'rerun' });
    });

    it('a bad-node code that is also in recover_on_exit_codes restarts, replacing that node', () => {
      const policy = recoveryPolicy({ strategy: 'FAILOVER', recoverOnExitCodes: [42], badNodeExitCodes: [42] });
      const decision = decided(policy, PEERS_STOPPED_AFTER_42);
      expect(decision.action).toBe(RecoveryAction.RESTART);
      expect(nodesToKeep(input({ policy, decision, outcome: PEERS_STOPPED_AFTER_42, numNodes: 4 })).reason).toBe(
        'keeps nodes 0, 1, 3 and replaces node 2 (exited 42, a bad_node_exit_codes code), setup run again',
      );
    });

    it('the on-demand fallback after preemptions launches fresh on-demand nodes', () => {
      const policy = recoveryPolicy({ strategy: 'FAILOVER', onDemandFallbackAfter: 1 });
      const outcome: AttemptOutcome = { kind: 'PREEMPTED', nodes: [0] };
      const decision = decided(policy, outcome);
      expect(decision.market).toBe('on-demand');
      expect(nodesToKeep(input({ policy, decision, outcome, numNodes: 2 })).reason).toBe('fresh nodes: the relaunch moves from spot to on-demand');
    });

    it('a standby of a whole set stands in for the relaunch: no node kept', () => {
      const outcome: AttemptOutcome = { kind: 'PREEMPTED', nodes: [1] };
      expect(nodesToKeep(input({ decision: RECOVER, outcome, numNodes: 2, wholeStandby: true }))).toEqual({ keep: null, reason: 'fresh nodes: the standby is a whole new set, launched on the warning' });
      expect(nodesToKeep(input({ decision: RECOVER, outcome, numNodes: 2, wholeStandby: false })).keep?.nodes.map((node) => node.nodeRank)).toEqual([0]);
    });
  });
});

describe('describeKeep', () => {
  it('names each replaced node with why, and the kept ones', () => {
    const keep = { nodes: instances(4).filter((node) => node.nodeRank === 3), placement: PLACEMENT, setup: 'skip' as const, replace: [{ nodeRank: 0, why: 'lost' }, { nodeRank: 1, why: 'lost' }, { nodeRank: 2, why: 'preempted' }] };
    expect(describeKeep(keep, 4)).toBe('keeps node 3 and replaces node 0 (lost), node 1 (lost), node 2 (preempted), setup skipped');
  });
});

describe('standbyBeside', () => {
  /** Attempt 1 of four nodes on spot, node 2 warned of an interruption. */
  const warned = { placement: PLACEMENT, instances: instances(4), market: 'spot' as Market, interruptionNode: 2 };

  it('a warning on node 2 of 4 with reuse on: a standby of node 2 alone, beside nodes 0, 1 and 3 in their placement', () => {
    const beside = standbyBeside(FAILOVER, warned, 'interruption', 'spot', 4);
    expect(beside?.placement).toBe(PLACEMENT);
    expect(beside?.nodes.map((node) => node.instanceId)).toEqual(['i-node0', 'i-node1', 'i-node3']);
  });

  it('the rebalance recommendation names its own node', () => {
    expect(standbyBeside(REUSE_SKIP, { ...warned, rebalanceNode: 0 }, 'rebalance', 'spot', 4)?.nodes.map((node) => node.nodeRank)).toEqual([1, 2, 3]);
    expect(standbyBeside(REUSE_SKIP, warned, 'rebalance', 'spot', 4)).toBeNull();
  });

  it.each<[string, RecoveryPolicy, Partial<typeof warned> & { interruptionNode?: number }, Market, number]>([
    ['reuse off (the default strategy): a whole set', EAGER, {}, 'spot', 4],
    ['one node: a whole set', FAILOVER, { instances: instances(1), interruptionNode: 0 }, 'spot', 1],
    ['the warning named no node', FAILOVER, { interruptionNode: undefined }, 'spot', 4],
    ['the warning named a rank outside the task', FAILOVER, { interruptionNode: 4 }, 'spot', 4],
    ['the relaunch would run on another market', FAILOVER, {}, 'on-demand', 4],
    ['the attempt was never placed', FAILOVER, { placement: null as unknown as Placement }, 'spot', 4],
    ['a rank other than the warned one has no instance on record', FAILOVER, { instances: instances(4).filter((node) => node.nodeRank !== 1) }, 'spot', 4],
  ])('%s', (_name, policy, fields, market, numNodes) => {
    const { interruptionNode, ...rest } = { ...warned, ...fields };
    expect(standbyBeside(policy, { ...rest, ...(interruptionNode === undefined ? {} : { interruptionNode }) }, 'interruption', market, numNodes)).toBeNull();
  });
});
