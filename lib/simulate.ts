// `relaunch simulate`: a task's recovery policy replayed over made-up attempt ends, no compute.

import { AGENT_STEPS } from './agent/protocol.ts';
import { InvalidInputError, type InputIssue } from './errors.ts';
import type { InstanceRef, NodeReport, Placement, WarningKind } from './model.ts';
import { decideAttempt, type AttemptFacts } from './outcome.ts';
import { decideRecovery, initialCounters } from './policy/decide.ts';
import { RecoveryAction, type AttemptOutcome, type Phase, type RecoveryCounters, type RecoveryDecision } from './policy/types.ts';
import { nodesToKeep, reuseChoice, standbyBeside } from './reuse-rules.ts';
import { recoveriesLeft } from './standby-rules.ts';
import type { RecoveryPolicy, ReuseSetup, TaskSpec } from './task-file/types.ts';
import { isTerminal, JobStatus } from './status.ts';
import { restartsOnErrorsUsed } from './views.ts';
import { DEFAULT_BOOT_TIMEOUT_SECONDS, formatDuration } from './task-file/bounds.ts';

/** One attempt's decision, as `relaunch simulate --json` prints it (these keys, no others). */
export interface SimulatedDecision {
  /**
   * The event that ended the attempt, exactly as given; a `warn` before it is shown with
   * it, space-separated (`warn exit:0+1`).
   */
  readonly event: string;
  readonly action: RecoveryAction;
  readonly status: JobStatus;
  /** Restarts on errors used, never more than max_restarts_on_errors, as the job's views show them. */
  readonly restartsOnErrors: number;
  readonly recoveryCount: number;
  readonly reason: string;
  /**
   * Only for a task with launch_on_warning: what became of the standby a warning before the
   * event started (`adopted`, taken as the next attempt, its setup done; `released`, not
   * needed, charged to nothing), or null when no warning started one.
   */
  readonly standby?: 'adopted' | 'released' | null;
  /**
   * Only for a task whose relaunches may keep nodes (nodesShown), and only on a relaunch
   * (RESTART or RECOVER): which nodes the next attempt runs on, as the controller picks
   * them (lib/reuse-rules.ts nodesToKeep).
   */
  readonly nodes?: SimulatedNodes;
}

/** The nodes a relaunch runs on: the ones it keeps, the ones it launches, and why. */
export interface SimulatedNodes {
  /** Ranks the next attempt runs on again (restart in place); empty: every node is new. */
  readonly kept: readonly number[];
  /** Ranks the next attempt launches anew. */
  readonly launched: readonly number[];
  /** Whether setup runs again on the kept nodes; null when none is kept. */
  readonly setup: ReuseSetup | null;
  /** The sentence the controller appends to the decision's reason. */
  readonly reason: string;
}

/**
 * Whether `relaunch simulate` says which nodes each relaunch runs on: for a task whose
 * relaunches may keep nodes (strategy FAILOVER, or reuse_nodes true), and for one that
 * names reuse_nodes or bad_node_exit_codes at all. A task on the default strategy without
 * them relaunches on fresh nodes, as it always has, and its output is unchanged.
 */
export function nodesShown(policy: RecoveryPolicy): boolean {
  return reuseChoice(policy).reuse || (policy.reuseNodes ?? null) !== null || policy.badNodeExitCodes !== undefined;
}

/** Where simulated nodes run: nowhere in particular; only their ranks matter. */
const SIMULATED_PLACEMENT: Placement = { region: 'simulated', zone: null, instanceType: 'simulated' };

/** Every decision in event order, and the status the job is left in. */
export interface SimulationResult {
  readonly decisions: readonly SimulatedDecision[];
  readonly final: { readonly status: JobStatus };
}

/** The event forms, as error messages and help text name them. */
export const EVENT_FORMS =
  `exit:N, exit:N+M (one code per node), setup:N, setup:N+M, preempt, lost, preempt@NODE or lost@NODE (NODE a rank, or ranks joined by +), agent:STEP or agent:STEP@NODE (the agent failed before setup; STEP is one of ${AGENT_STEPS.join(', ')}), warn or rebalance (before the event that ends the attempt; warn@NODE or rebalance@NODE: on that node), gone:N, nocap or noboot`;

/**
 * What backoff jitter draws when the caller gives no random source: the midpoint, so the
 * same command prints the same delays every time. With jitter `full` the reason also
 * states the upper bound ("next attempt in 10 s (full jitter, up to 20 s)").
 */
export const MIDPOINT_DRAW = (): number => 0.5;

/** The error a simulated launch without capacity reports. */
const NO_CAPACITY = 'InsufficientInstanceCapacity in every zone tried';

/** Why a simulated attempt never booted: no first heartbeat came on AwaitBoot's clock. */
function neverBooted(bootTimeoutSeconds: number): string {
  return `no node sent a heartbeat within boot_timeout ${formatDuration(bootTimeoutSeconds)}`;
}

/** An attempt as the events describe it: the events that make it up, and how it ended. */
export interface SimulatedAttempt {
  /** Index in the event list of its first event (a `warn` or `rebalance`, or the event that ended it). */
  readonly first: number;
  /** Index of the event that ended it. */
  readonly last: number;
  readonly outcome: AttemptOutcome;
  /** The warning before its end (an interruption warning over a rebalance recommendation), or null. */
  readonly warning: WarningKind | null;
  /** The node that warning named (`warn@NODE`, `rebalance@NODE`); absent when it named none. */
  readonly warnedNode?: number;
}

/**
 * Feeds each attempt the events describe to the recovery policy of `spec`, from fresh
 * counters, as the controller would after each attempt. Simulated time passes only in the
 * waits the policy decides: a wait for capacity has lasted the sum of its gaps so far,
 * which is what launch_timeout is measured against. Pure. Throws InvalidInputError for an
 * event that is not one of EVENT_FORMS, whose code count or node differs from num_nodes,
 * that a warning cannot precede, or that follows a terminal status.
 */
export function simulate(spec: TaskSpec, events: readonly string[], random: () => number = MIDPOINT_DRAW): SimulationResult {
  const policy = spec.resources.jobRecovery;
  const attempts = parseEvents(events, spec.numNodes, policy.bootTimeoutSeconds ?? DEFAULT_BOOT_TIMEOUT_SECONDS, policy.failOnExitCodes);
  let counters = initialCounters(spec.resources.useSpot);
  let status: JobStatus = JobStatus.PENDING;
  let endedAt = 0;
  let waitedForCapacity = 0;
  const decisions: SimulatedDecision[] = [];
  const showNodes = nodesShown(policy);
  for (const { first, last, outcome, warning, warnedNode } of attempts) {
    if (isTerminal(status)) {
      throw new InvalidInputError([
        {
          path: `event ${first + 1}`,
          message: `"${events[first]}" comes after the job ended with ${status} at event ${endedAt}; a finished job takes no more events`,
        },
      ]);
    }
    const decision = decideRecovery({ policy, counters, outcome, random, capacityWaitSeconds: waitedForCapacity });
    const relaunch = decision.action === RecoveryAction.RESTART || decision.action === RecoveryAction.RECOVER;
    const beside = standbyBeside(policy, simulatedWarned(spec.numNodes, counters.market, warning, warnedNode), warning ?? 'interruption', counters.market, spec.numNodes);
    const launched = standbyLaunched(policy, warning, counters);
    const nodes = showNodes && relaunch ? simulatedNodes(policy, decision, outcome, counters.market, spec.numNodes, launched && beside === null) : undefined;
    const standby = standbyFate(policy, warning, decision, counters, beside === null ? null : { warnedNode: warnedNode as number, kept: nodes?.kept ?? [], numNodes: spec.numNodes });
    counters = decision.counters;
    status = decision.status;
    endedAt = last + 1;
    waitedForCapacity = decision.rule === 'WAITING_FOR_CAPACITY' ? waitedForCapacity + decision.delaySeconds : 0;
    decisions.push({
      event: events.slice(first, last + 1).join(' '),
      action: decision.action,
      status: decision.status,
      restartsOnErrors: restartsOnErrorsUsed(counters.restartsOnErrors, policy.maxRestartsOnErrors),
      recoveryCount: counters.recoveryCount,
      reason: decision.reason,
      ...(standby === undefined ? {} : { standby }),
      ...(nodes === undefined ? {} : { nodes }),
    });
  }
  return { decisions, final: { status } };
}

/**
 * The nodes a simulated relaunch runs on, picked as the controller picks them: every rank
 * of the attempt had an instance (none after a launch that found no capacity), and setup
 * had exited 0 on every node that reached run (an exit:N event) or whose setup exited 0
 * (a setup:N event); what other events leave of setup is not known, as in the runtime.
 */
function simulatedNodes(policy: RecoveryPolicy, decision: RecoveryDecision, outcome: AttemptOutcome, market: RecoveryCounters['market'], numNodes: number, wholeStandby: boolean): SimulatedNodes {
  const ranks = Array.from({ length: numNodes }, (_, rank) => rank);
  const instances = outcome.kind === 'LAUNCH_FAILED' ? [] : simulatedInstances(numNodes);
  const setupDone =
    outcome.kind !== 'EXITED' ? undefined : outcome.phase === 'run' ? ranks : outcome.nodes.filter((node) => node.exitCode === 0).map((node) => node.rank);
  const result = nodesToKeep({ policy, decision, outcome, market, placement: SIMULATED_PLACEMENT, instances, numNodes, wholeStandby, ...(setupDone === undefined ? {} : { setupDone }) });
  if (result.keep === null) return { kept: [], launched: ranks, setup: null, reason: result.reason };
  const kept = result.keep.nodes.map((node) => node.nodeRank);
  return { kept, launched: ranks.filter((rank) => !kept.includes(rank)), setup: result.keep.setup, reason: result.reason };
}

/**
 * What the controller does with the standby a warning started (launch_on_warning), as
 * LaunchAttempt decides it: taken by a relaunch on the market it was launched on, let go
 * otherwise; a standby of the warned node alone (`partial`) only by a relaunch that keeps
 * every other node. undefined for a task without the option (the key is left out), null
 * when no warning asked for one, or when max_recoveries left no relaunch after a
 * preemption (`counters` are those before the decision): none is launched then.
 */
function standbyFate(
  policy: RecoveryPolicy,
  warning: WarningKind | null,
  decision: RecoveryDecision,
  counters: RecoveryCounters,
  partial: { readonly warnedNode: number; readonly kept: readonly number[]; readonly numNodes: number } | null,
): 'adopted' | 'released' | null | undefined {
  if ((policy.launchOnWarning ?? false) === false) return undefined;
  if (!standbyLaunched(policy, warning, counters)) return null;
  const relaunch = decision.action === RecoveryAction.RESTART || decision.action === RecoveryAction.RECOVER;
  if (!relaunch || decision.market !== counters.market) return 'released';
  if (partial === null) return 'adopted';
  const others = Array.from({ length: partial.numNodes }, (_, rank) => rank).filter((rank) => rank !== partial.warnedNode);
  const kept = [...partial.kept].sort((a, b) => a - b);
  return kept.length === others.length && kept.every((rank, index) => rank === others[index]) ? 'adopted' : 'released';
}

/**
 * The attempt a simulated warning fell on, as standbyBeside reads it: placed, with one
 * instance per rank, on the job's market, and the rank the warning named.
 */
function simulatedWarned(numNodes: number, market: RecoveryCounters['market'], warning: WarningKind | null, warnedNode: number | undefined): Parameters<typeof standbyBeside>[1] {
  const node = warnedNode === undefined ? {} : warning === 'rebalance' ? { rebalanceNode: warnedNode } : { interruptionNode: warnedNode };
  return { placement: SIMULATED_PLACEMENT, instances: simulatedInstances(numNodes), market, ...node };
}

/** Every rank's instance in a simulated attempt. */
function simulatedInstances(numNodes: number): InstanceRef[] {
  return Array.from({ length: numNodes }, (_, nodeRank) => ({ instanceId: `simulated node ${nodeRank}`, nodeRank, privateIp: null }));
}

/**
 * Whether the attempt's warning started a standby (launch_on_warning): one that asks for
 * it, while max_recoveries leaves a relaunch after a preemption (`counters` before the decision).
 */
function standbyLaunched(policy: RecoveryPolicy, warning: WarningKind | null, counters: RecoveryCounters): boolean {
  const option = policy.launchOnWarning ?? false;
  if (option === false || warning === null || (warning === 'rebalance' && option !== 'rebalance')) return false;
  return recoveriesLeft(policy, counters) !== 0;
}

/**
 * Reads every event into the attempts they describe, reporting all the bad events at once;
 * `noboot` names the task's boot_timeout, and `finalCodes` (the task's fail_on_exit_codes)
 * are final even after a `warn`, as the runtime decides them.
 */
export function parseEvents(
  events: readonly string[],
  numNodes: number,
  bootTimeoutSeconds = DEFAULT_BOOT_TIMEOUT_SECONDS,
  finalCodes: readonly number[] = [],
): SimulatedAttempt[] {
  if (events.length === 0) {
    throw new InvalidInputError([{ path: 'events', message: `give at least one event: ${EVENT_FORMS}` }]);
  }
  const issues: InputIssue[] = [];
  const attempts: SimulatedAttempt[] = [];
  /** Index of the first `warn` or `rebalance` of the attempt being read, if it has one. */
  let warnedAt: number | undefined;
  /** Whether that attempt had an interruption warning, or a rebalance recommendation only. */
  let interrupted = false;
  /** The node its first interruption warning named, else its first rebalance recommendation's (the first of each is noted, as the runtime notes it). */
  let interruptionNode: number | undefined;
  let rebalanceNode: number | undefined;
  events.forEach((event, index) => {
    const parsed = parseEvent(event, numNodes, bootTimeoutSeconds, finalCodes);
    if (typeof parsed === 'object') {
      if (parsed.warning === 'interruption' && !interrupted) interruptionNode = parsed.node;
      if (parsed.warning === 'rebalance' && warnedAt === undefined) rebalanceNode = parsed.node;
      warnedAt ??= index;
      interrupted ||= parsed.warning === 'interruption';
      return;
    }
    // A rebalance recommendation decides nothing: only an interruption warning is a fact of the end.
    const outcome =
      event === 'nocap' && warnedAt !== undefined
        ? `"${event}" follows a ${events[warnedAt] ?? 'warn'}, but a warning comes from a running instance and nocap is a launch that found none; put ${events[warnedAt] ?? 'warn'} right before the event that ends a running attempt`
        : typeof parsed === 'string'
          ? parsed
          : parsed(interrupted, interrupted ? interruptionNode : undefined);
    const warnedNode = interrupted ? interruptionNode : rebalanceNode;
    if (typeof outcome === 'string') issues.push({ path: `event ${index + 1}`, message: outcome });
    else {
      const warning = interrupted ? 'interruption' : warnedAt === undefined ? null : 'rebalance';
      attempts.push({ first: warnedAt ?? index, last: index, outcome, warning, ...(warning === null || warnedNode === undefined ? {} : { warnedNode }) });
    }
    warnedAt = undefined;
    interrupted = false;
    interruptionNode = undefined;
    rebalanceNode = undefined;
  });
  if (warnedAt !== undefined) {
    const word = events[warnedAt] ?? 'warn';
    issues.push({
      path: `event ${warnedAt + 1}`,
      message: `"${word}" ends nothing by itself: follow it with the event that ends its attempt, e.g. ${word} exit:0 or ${word} gone:0`,
    });
  }
  if (issues.length > 0) throw new InvalidInputError(issues);
  return attempts;
}

/** A `warn` or `rebalance` event, and the node it names (`warn@NODE`). */
interface WarningEvent {
  readonly warning: WarningKind;
  readonly node?: number;
}

/**
 * How an attempt ended, given whether EC2 warned of an interruption first (and which node
 * the warning named, if it did), or what is wrong with that warning.
 */
type AttemptEnd = (warned: boolean, warnedNode?: number) => AttemptOutcome | string;

const WARNING_EVENT = /^(warn|rebalance)(?:@(\d+))?$/;

const EXIT_EVENT = /^(exit|setup):(\d+(?:\+\d+)*)$/;
const GONE_EVENT = /^gone:(\d+)$/;
const NAMED_EVENT = /^(preempt|lost)@(\d+(?:\+\d+)*)$/;
const AGENT_EVENT = /^agent:([a-z-]+)(?:@(\d+))?$/;

/** The error a simulated agent failure reports. */
const SIMULATED_AGENT_ERROR = 'simulated';

/** Facts of a simulated attempt: a warning on record or not (and the node it named), and the nodes whose instance went. */
function facts(warned: boolean, finalCodes: readonly number[], warnedNode: number | undefined, goneRank?: number): AttemptFacts {
  const gone = goneRank === undefined ? [] : [{ nodeRank: goneRank, instanceId: `of node ${goneRank}`, how: 'terminated' }];
  const named = warned && warnedNode !== undefined ? { warnedNode } : {};
  return { interruptionNoticedAt: warned ? '1970-01-01T00:00:00.000Z' : null, gone, finalCodes, ...named };
}

/**
 * The outcome `decideAttempt` (the runtime's rule) makes of reports and facts. Simulated
 * attempts always hold a deciding fact, so null never comes back.
 */
function decided(numNodes: number, reports: readonly NodeReport[], attemptFacts: AttemptFacts): AttemptOutcome {
  const outcome = decideAttempt(numNodes, reports, attemptFacts);
  if (outcome === null) throw new Error('a simulated attempt was left undecided');
  return outcome;
}

/** One event: a warning, how an attempt ended, or what is wrong with the event. */
function parseEvent(event: string, numNodes: number, bootTimeoutSeconds: number, finalCodes: readonly number[]): WarningEvent | AttemptEnd | string {
  // A heartbeat deadline with a warning on record ends the attempt PREEMPTED, as the
  // controller decides it (lib/usecases/evaluate-policy.ts).
  const unlessWarned = (outcome: AttemptOutcome): AttemptEnd => (warned) => (warned ? { kind: 'PREEMPTED' } : outcome);
  const warning = WARNING_EVENT.exec(event);
  if (warning !== null) {
    const kind: WarningKind = warning[1] === 'warn' ? 'interruption' : 'rebalance';
    if (warning[2] === undefined) return { warning: kind };
    const rank = Number(warning[2]);
    if (rank >= numNodes) return `"${event}": node ${rank} is not one of the task's ${plural(numNodes, 'node')} (ranks 0 to ${numNodes - 1})`;
    return { warning: kind, node: rank };
  }
  switch (event) {
    case 'nocap':
      return () => ({ kind: 'LAUNCH_FAILED', cause: 'NO_RESOURCE', reason: NO_CAPACITY });
    case 'preempt':
      return () => ({ kind: 'PREEMPTED' });
    case 'lost':
      return unlessWarned({ kind: 'LOST', reason: 'heartbeat lost' });
    case 'noboot':
      return unlessWarned({ kind: 'LOST', reason: neverBooted(bootTimeoutSeconds), neverBooted: true });
  }
  const agent = AGENT_EVENT.exec(event);
  if (agent !== null) {
    const step = AGENT_STEPS.find((known) => known === agent[1]);
    if (step === undefined) return `"${event}": expected one of the agent's steps (${AGENT_STEPS.join(', ')}), got ${agent[1]}`;
    const rank = Number(agent[2] ?? 0);
    if (rank >= numNodes) {
      return `"${event}": node ${rank} is not one of the task's ${plural(numNodes, 'node')} (ranks 0 to ${numNodes - 1})`;
    }
    // As the runtime decides it: AGENT_FAILED, or PREEMPTED with a warning on record.
    const report: NodeReport = { nodeRank: rank, phase: 'setup', agentFailure: { step, error: SIMULATED_AGENT_ERROR }, outputTail: '', reportedAt: '' };
    return (warned, warnedNode) => decided(numNodes, [report], facts(warned, finalCodes, warnedNode));
  }
  const gone = GONE_EVENT.exec(event);
  if (gone !== null) {
    const rank = Number(gone[1]);
    if (rank >= numNodes) {
      return `"${event}": node ${rank} is not one of the task's ${plural(numNodes, 'node')} (ranks 0 to ${numNodes - 1})`;
    }
    // The instance-event use case knows which node's instance went: the outcome names it.
    return (warned, warnedNode) => {
      const outcome = decided(numNodes, [], facts(warned, finalCodes, warnedNode, rank));
      return outcome.kind === 'PREEMPTED' ? outcome : naming(outcome, [rank]);
    };
  }
  const named = NAMED_EVENT.exec(event);
  if (named !== null) {
    const ranks = (named[2] as string).split('+').map(Number);
    const outside = ranks.find((rank) => rank >= numNodes);
    if (outside !== undefined) {
      return `"${event}": node ${outside} is not one of the task's ${plural(numNodes, 'node')} (ranks 0 to ${numNodes - 1})`;
    }
    const repeated = ranks.find((rank, index) => ranks.indexOf(rank) !== index);
    if (repeated !== undefined) return `"${event}": node ${repeated} is named twice; name each node once`;
    // The warned node goes too (its instance is reclaimed), as the runtime names it.
    const withWarned = (warnedNode: number | undefined): number[] => (warnedNode === undefined ? ranks : [...new Set([...ranks, warnedNode])].sort((a, b) => a - b));
    if (named[1] === 'preempt') return (warned, warnedNode) => ({ kind: 'PREEMPTED', nodes: withWarned(warned ? warnedNode : undefined) });
    return (warned, warnedNode) => (warned ? { kind: 'PREEMPTED', nodes: withWarned(warnedNode) } : { kind: 'LOST', reason: 'heartbeat lost', nodes: ranks });
  }
  const match = EXIT_EVENT.exec(event);
  if (match === null) return `expected ${EVENT_FORMS}; got "${event}"`;
  const phase: Phase = match[1] === 'setup' ? 'setup' : 'run';
  const codes = (match[2] as string).split('+').map(Number);
  const outOfRange = codes.find((code) => code > 255);
  if (outOfRange !== undefined) return `"${event}": exit code ${outOfRange} is out of range, expected 0-255`;
  if (codes.length !== numNodes) {
    const example = `${match[1]}:${Array.from({ length: numNodes }, (_, rank) => codes[rank] ?? 0).join('+')}`;
    return (
      `"${event}" has ${plural(codes.length, 'exit code')}, but the task has ${plural(numNodes, 'node')}` +
      ` (num_nodes: ${numNodes}); give one code per node, e.g. ${example}`
    );
  }
  if (phase === 'setup' && codes.every((code) => code === 0)) {
    return `"${event}": a setup that exits 0 goes on to run, so it does not end an attempt; use exit:N for how the run ended`;
  }
  const exited: AttemptOutcome = { kind: 'EXITED', phase, nodes: codes.map((exitCode, rank) => ({ rank, exitCode })) };
  // With a warning on record, the runtime's rule decides (PREEMPTED unless every code is 0
  // or one is in fail_on_exit_codes);
  // without one, every node's own code stands, none taken for a casualty of another.
  const reports = codes.map((exitCode, nodeRank): NodeReport => ({ nodeRank, phase, exitCode, outputTail: '', reportedAt: '' }));
  return (warned, warnedNode) => (warned ? decided(numNodes, reports, facts(true, finalCodes, warnedNode)) : exited);
}

/** A preemption or a loss with the ranks of the nodes it took; any other outcome as it is. */
function naming(outcome: AttemptOutcome, nodes: readonly number[]): AttemptOutcome {
  return outcome.kind === 'PREEMPTED' || outcome.kind === 'LOST' ? { ...outcome, nodes } : outcome;
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}
