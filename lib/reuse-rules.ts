// Which nodes a relaunch runs on again: restart in place on healthy nodes, replace only the
// nodes that were lost or are bad. Pure: the controller (EvaluateRecoveryPolicy) and
// `relaunch simulate` decide with it alike. docs/recovery.md says why each rule is so.

import type { AttemptRecord, InstanceRef, KeptNodes, Placement, WarningKind } from './model.ts';
import { RecoveryAction, type AttemptOutcome, type Market, type RecoveryDecision } from './policy/types.ts';
import type { RecoveryPolicy, ReuseSetup } from './task-file/types.ts';

/**
 * The longest wait before a relaunch for which its nodes are held, in seconds: a held node
 * is paid for, so a longer restart_backoff (or a wait for capacity) releases them instead.
 */
export const MAX_HOLD_SECONDS = 300;

/** Whether a job's relaunches reuse nodes, how setup treats them, and what said so. */
export interface ReuseChoice {
  readonly reuse: boolean;
  readonly setup: ReuseSetup;
  /** `reuse_nodes` when the task set it, else the strategy's default. */
  readonly source: 'reuse_nodes' | 'strategy';
}

/**
 * The effective choice: `reuse_nodes` when given; otherwise SkyPilot's, by strategy:
 * FAILOVER relaunches on the cluster's live nodes and runs setup on them again,
 * EAGER_NEXT_REGION tears the cluster down and launches a fresh one.
 */
export function reuseChoice(policy: RecoveryPolicy): ReuseChoice {
  const given = policy.reuseNodes;
  if (given !== null && given !== undefined) return { reuse: given.reuse, setup: given.setup, source: 'reuse_nodes' };
  return { reuse: policy.strategy === 'FAILOVER', setup: 'rerun', source: 'strategy' };
}

/** The choice in words, as validate and simulate print it. */
export function describeReuseChoice(choice: ReuseChoice, strategy: RecoveryPolicy['strategy']): string {
  const why = choice.source === 'reuse_nodes' ? 'reuse_nodes' : `the ${strategy} strategy's default`;
  if (!choice.reuse) return `relaunches on fresh nodes (${why})`;
  const setup = choice.setup === 'skip' ? 'setup skipped where it ran' : 'setup run again';
  return `relaunches on the healthy nodes, replacing only lost or bad ones, ${setup} (${why})`;
}

/** What nodesToKeep is given: the decided attempt, its decision and the job's policy. */
export interface KeepInput {
  readonly policy: RecoveryPolicy;
  readonly decision: Pick<RecoveryDecision, 'action' | 'delaySeconds' | 'market'>;
  readonly outcome: AttemptOutcome;
  /** The attempt's market (a relaunch to another market keeps nothing). */
  readonly market: Market;
  readonly placement: Placement | null;
  readonly instances: readonly InstanceRef[];
  readonly numNodes: number;
  /**
   * The ranks whose setup exited 0 in the decided attempt, as its reports say, when the
   * caller has them. `setup: skip` holds only when every kept node is among them; otherwise
   * setup runs again on the kept nodes (one value serves them all). Absent: only the
   * outcome is read (an attempt that ended in setup runs it again).
   */
  readonly setupDone?: readonly number[];
  /**
   * Whether a warning on the attempt started a standby of a whole new set of nodes
   * (launch_on_warning without a standby of the warned node alone: standbyBeside): the
   * relaunch takes it, or launches past it, and keeps no node. Absent: none did.
   */
  readonly wholeStandby?: boolean;
}

/** The nodes kept, or why none is, in a sentence. */
export type KeepResult = { readonly keep: KeptNodes; readonly reason: string } | { readonly keep: null; readonly reason: string };

/**
 * The nodes of a decided attempt its relaunch runs on again (reuseChoice), or null with why
 * not. A node is replaced when its instance was preempted or lost (an EC2 event or the
 * runtime named it: the outcome's `nodes`), when its agent failed, when it exited with a
 * code in `bad_node_exit_codes`, or when its code never arrived; every other node is kept.
 * Nothing is kept for a decision that does not relaunch, one that waits longer than
 * MAX_HOLD_SECONDS, one that moves to another market, a launch that found no capacity (the
 * nodes held for it are released), an attempt a standby of a whole set stands in for, or an
 * outcome that does not say which node went (a heartbeat timeout); nor when every node
 * would be replaced.
 */
export function nodesToKeep(input: KeepInput): KeepResult {
  const { policy, decision, outcome, placement, numNodes } = input;
  const none = (reason: string): KeepResult => ({ keep: null, reason });
  if (decision.action !== RecoveryAction.RESTART && decision.action !== RecoveryAction.RECOVER) return none('no relaunch');
  const choice = reuseChoice(policy);
  if (!choice.reuse) return none(describeReuseChoice(choice, policy.strategy));
  // Only the task's ranks count: a rank outside [0, numNodes) names no node to keep or launch.
  const inRange = (rank: number): boolean => Number.isInteger(rank) && rank >= 0 && rank < numNodes;
  if (outcome.kind === 'LAUNCH_FAILED') return none('fresh nodes: the launch placed no node, and a wait for capacity releases the nodes held for it');
  const instances = input.instances.filter((node) => inRange(node.nodeRank));
  if (placement === null || instances.length === 0) return none('fresh nodes: the attempt had no nodes to keep');
  if (decision.delaySeconds > MAX_HOLD_SECONDS) {
    return none(`fresh nodes: the ${decision.delaySeconds} s wait before the relaunch is longer than the ${MAX_HOLD_SECONDS} s a node is held`);
  }
  if (decision.market !== input.market) return none(`fresh nodes: the relaunch moves from ${input.market} to ${decision.market}`);
  if (input.wholeStandby === true) return none('fresh nodes: the standby is a whole new set, launched on the warning');
  const replaced = replacedNodes(outcome, policy.badNodeExitCodes ?? []);
  if (replaced === null) return none('fresh nodes: which node went is not known');
  const replace = [...replaced].filter(([nodeRank]) => inRange(nodeRank)).map(([nodeRank, why]) => ({ nodeRank, why }));
  // One instance per rank: the first on record, should the attempt list a rank twice.
  const survivors = instances.filter((node) => !replaced.has(node.nodeRank)).sort((a, b) => a.nodeRank - b.nodeRank);
  const nodes = survivors.filter((node, index) => survivors.findIndex((other) => other.nodeRank === node.nodeRank) === index);
  for (let rank = 0; rank < numNodes; rank += 1) {
    if (!replaced.has(rank) && !nodes.some((node) => node.nodeRank === rank)) replace.push({ nodeRank: rank, why: 'it has no instance on record' });
  }
  replace.sort((a, b) => a.nodeRank - b.nodeRank);
  if (nodes.length === 0) return none(`fresh nodes: ${replace.map((node) => `node ${node.nodeRank} ${node.why}`).join('; ')}`);
  const unset = choice.setup === 'skip' ? setupNotDone(outcome, nodes, input.setupDone) : null;
  const keep: KeptNodes = { nodes, placement, setup: unset === null ? choice.setup : 'rerun', replace };
  return { keep, reason: `${describeKeep(keep, numNodes)}${unset === null ? '' : ` (${unset})`}` };
}

/**
 * Why setup cannot be skipped on the kept nodes, or null when it can: setup is skipped
 * only where it ran to exit 0, and an attempt that ended in setup, or a kept node whose
 * setup is not known to have exited 0, runs it again.
 */
function setupNotDone(outcome: AttemptOutcome, nodes: readonly InstanceRef[], setupDone: readonly number[] | undefined): string | null {
  if (outcome.kind === 'EXITED' && outcome.phase === 'setup') return 'not skipped: the attempt ended in setup';
  if (setupDone === undefined) return null;
  const missing = nodes.filter((node) => !setupDone.includes(node.nodeRank)).map((node) => node.nodeRank);
  if (missing.length === 0) return null;
  return `not skipped: setup had not exited 0 on node${missing.length === 1 ? '' : 's'} ${missing.join(', ')}`;
}

/** A kept set in words: `in place on nodes 0-3, setup skipped`, or `keeps nodes 0, 1, 3 and replaces node 2 (preempted), setup run again`. */
export function describeKeep(keep: KeptNodes, numNodes: number): string {
  const setup = keep.setup === 'skip' ? 'setup skipped' : 'setup run again';
  const ranks = keep.nodes.map((node) => node.nodeRank);
  if (keep.replace.length === 0) {
    return numNodes === 1 ? `in place on the same node, ${setup}` : `in place on nodes 0-${numNodes - 1}, ${setup}`;
  }
  const replaced = keep.replace.map((node) => `node ${node.nodeRank} (${node.why})`).join(', ');
  return `keeps node${ranks.length === 1 ? '' : 's'} ${ranks.join(', ')} and replaces ${replaced}, ${setup}`;
}

/** The ranks a relaunch must replace, with why; null when the outcome does not say which. */
function replacedNodes(outcome: AttemptOutcome, badCodes: readonly number[]): Map<number, string> | null {
  const replaced = new Map<number, string>();
  switch (outcome.kind) {
    case 'PREEMPTED':
    case 'LOST':
      if (outcome.nodes === undefined || outcome.nodes.length === 0) return null;
      for (const rank of outcome.nodes) replaced.set(rank, outcome.kind === 'PREEMPTED' ? 'preempted' : 'lost');
      return replaced;
    case 'AGENT_FAILED':
      replaced.set(outcome.nodeRank, `its agent failed at ${outcome.step}`);
      return replaced;
    case 'EXITED':
      for (const node of outcome.nodes) {
        if (node.exitCode === null && node.killedByController !== true) replaced.set(node.rank, 'its exit code never arrived');
        else if (node.exitCode !== null && badCodes.includes(node.exitCode)) replaced.set(node.rank, `exited ${node.exitCode}, a bad_node_exit_codes code`);
      }
      return replaced;
    case 'LAUNCH_FAILED':
    case 'CANCELLED':
      return null;
  }
}

/**
 * The nodes a standby for the `on` warning on live attempt `warned` is launched beside, or
 * null for a standby of a whole new set. With reuse on, a warning that named one node of
 * several gets a standby of that node alone, in the others' placement: when the warned
 * node goes, the relaunch keeps the others (nodesToKeep) and they join the standby, so only
 * the warned node's replacement boots, and it boots during the warning. A whole set when
 * reuse is off, the job has one node, the warning named no node, the relaunch would run on
 * another market, or the attempt does not have one instance for each other rank.
 */
export function standbyBeside(
  policy: RecoveryPolicy,
  warned: Pick<AttemptRecord, 'placement' | 'instances' | 'market' | 'interruptionNode' | 'rebalanceNode'>,
  on: WarningKind,
  market: Market,
  numNodes: number,
): { readonly placement: Placement; readonly nodes: readonly InstanceRef[] } | null {
  const rank = on === 'interruption' ? warned.interruptionNode : warned.rebalanceNode;
  if (!reuseChoice(policy).reuse || numNodes < 2 || warned.placement === null || warned.market !== market) return null;
  if (rank === undefined || !Number.isInteger(rank) || rank < 0 || rank >= numNodes) return null;
  const nodes: InstanceRef[] = [];
  for (let other = 0; other < numNodes; other += 1) {
    if (other === rank) continue;
    const node = warned.instances.find((instance) => instance.nodeRank === other);
    if (node === undefined) return null;
    nodes.push(node);
  }
  return { placement: warned.placement, nodes };
}
