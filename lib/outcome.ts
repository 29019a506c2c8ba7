// How an attempt ended, read from its nodes' reports and what EC2 said about its instances:
// pure, so the rule is testable as a table, and one rule for every path that ends an attempt.

import { isAgentFailure, isPhaseEnd, isStopped, type AgentFailureReport, type AttemptRecord, type NodeReport, type PhaseReport } from './model.ts';
import type { AttemptOutcome, NodeExit } from './policy/types.ts';

/** What EC2 said about an attempt's instances, besides the nodes' own reports. */
export interface AttemptFacts {
  /** When EC2 warned that an instance of the attempt will be reclaimed; null when it has not. */
  readonly interruptionNoticedAt: string | null;
  /**
   * The rank of the node that warning named, when known: a preemption names it among the
   * nodes that went (its instance is reclaimed), though it reported a code first.
   */
  readonly warnedNode?: number;
  /** Nodes whose instance went away (terminated, stopped), as far as the caller knows. */
  readonly gone: readonly GoneNode[];
  /**
   * Exit codes the user said are final (the task's `fail_on_exit_codes`): one reported
   * before its instance went decides the attempt even after a warning. @default none
   */
  readonly finalCodes?: readonly number[];
  /**
   * When the decision is taken (ISO 8601). Given, a failure reported while peers still run
   * waits up to PEER_REPORT_WAIT_MS for their codes (undecided until then); absent, the
   * codes on record decide at once (`relaunch simulate`, which has them all).
   */
  readonly now?: string;
}

/**
 * How long after a node's failing report its peers' codes are waited for before the
 * attempt is decided without them: nodes that end together (one exits 42, another 3 at the
 * same moment) are decided on both codes, whichever report arrives first. A peer that has
 * not reported by then is stopped with the attempt (killed by relaunch, code unknown).
 */
export const PEER_REPORT_WAIT_MS = 3_000;

/** A node whose instance went away, and how (`terminated`, `stopped`), for the outcome's reason. */
export interface GoneNode {
  readonly nodeRank: number;
  readonly instanceId: string;
  readonly how: string;
}

/*
 * Which fact decides an attempt (DESIGN.md section 1), first match wins. A node's final
 * report is its `run` report, or a non-zero `setup` report, or its agent's failure before
 * setup (run is then skipped); "non-zero" below counts an agent's failure too. "Gone"
 * counts only a node whose instance went away while its final report was not stored: an
 * agent shuts its instance down once its final report is in, so its instance going after
 * that is expected and decides nothing.
 *
 * | # | every node's final report stored | a final code non-zero | warning on record | a node gone before its final report | outcome                                          |
 * |---|----------------------------------|-----------------------|-------------------|-------------------------------------|--------------------------------------------------|
 * | 1 | yes                              | no                    | any               | (none can be)                       | EXITED in run, every code 0: the job succeeded   |
 * | F | any                              | one in fail_on_exit_codes | any           | any                                 | as row 5 (W included): the user said that code is final |
 * | 2 | any                              | yes                   | yes               | any                                 | PREEMPTED                                        |
 * | 3 | no                               | any                   | yes               | yes                                 | PREEMPTED                                        |
 * | 4 | no                               | any                   | no                | yes                                 | LOST: that node's instance went away             |
 * | W | no                               | yes (an exit code)    | no                | no                                  | null for PEER_REPORT_WAIT_MS after the first failing report (with `now`): its peers' codes are waited for; an agent's failure is not |
 * | 5 | any                              | yes                   | no                | no                                  | EXITED, or AGENT_FAILED, as `outcomeFromReports` says, on the set of codes |
 * | 6 | no                               | no                    | any               | no                                  | null: undecided, the attempt runs on             |
 *
 * - Row F: a code in `fail_on_exit_codes` stored before its instance went is final even
 *   inside a warning's window; any other non-zero code after a warning stays row 2.
 * - Row 2 on a single node: a warning on record and then a non-zero report ends the
 *   attempt PREEMPTED at once, without waiting for the instance to go: the node is going
 *   anyway, and its code is most likely the reclaim killing the job. The report is kept.
 * - Rows 2 to 4 override every non-zero code the nodes reported (SkyPilot checks the
 *   cluster's health before exit codes: a peer that vanished makes the others fail too).
 *   The reports stay stored on the attempt, so their codes are still shown.
 * - Row 1 beats a warning: a job that finished before the reclaim has succeeded.
 * - Row 6 with a warning: the attempt runs until an instance goes (row 3) or every node
 *   reports (row 1 or 2).
 *
 * The outcome is decided on the facts on record when the deciding message is stored; a
 * message that arrives after the attempt ended changes nothing. A non-zero report that is
 * stored before any word that a peer's instance went away (and before any warning) ends
 * the attempt EXITED once every peer has reported or PEER_REPORT_WAIT_MS has passed (row
 * W): ending it is what stops the peers, which may otherwise hang, and no later message
 * can undo it. Within that bound the order of the reports changes nothing: every failing
 * code stored decides as a set, as `relaunch simulate` decides `exit:42+3`.
 */

/**
 * The attempt's outcome from its reports and facts, or null while it is undecided (the
 * decision table above). Reports and gone nodes with ranks outside `[0, numNodes)` are
 * ignored (the use cases refuse them), and so is a phase the agent stopped before it exited
 * (a stopped report: its tail, no code), which decides nothing.
 */
export function decideAttempt(numNodes: number, reports: readonly NodeReport[], facts: AttemptFacts): AttemptOutcome | null {
  const inRange = endings(reports).filter((report) => inRangeRank(report.nodeRank, numNodes));
  const finals = ranks(numNodes).map((rank) => finalReport(rank, inRange));
  const failures = finals.filter((report): report is Ending => report !== undefined && failing(report));
  const everyFinal = finals.every((report) => report !== undefined);
  if (failures.length === 0 && everyFinal) return outcomeFromReports(numNodes, inRange);
  const finalCodes = facts.finalCodes ?? [];
  const final = failures.some((report) => !isAgentFailure(report) && finalCodes.includes(report.exitCode));
  const goneEarly = facts.gone.filter((node) => inRangeRank(node.nodeRank, numNodes) && finals[node.nodeRank] === undefined);
  const first = goneEarly[0];
  if (!final) {
    if (facts.interruptionNoticedAt !== null && (failures.length > 0 || first !== undefined)) {
      const warned = facts.warnedNode !== undefined && inRangeRank(facts.warnedNode, numNodes) ? [facts.warnedNode] : [];
      return withNodes({ kind: 'PREEMPTED' }, [...goneEarly.map((node) => node.nodeRank), ...noticed(reports, numNodes, finals), ...warned]);
    }
    if (first !== undefined) return withNodes({ kind: 'LOST', reason: `instance ${first.instanceId} was ${first.how}` }, goneEarly.map((node) => node.nodeRank));
  }
  if (!everyFinal && facts.now !== undefined && Date.parse(facts.now) < peersAwaitedUntil(failures)) return null;
  return outcomeFromReports(numNodes, inRange);
}

/**
 * A preemption or loss with the ranks of the nodes that went (the relaunch replaces those
 * and may keep the others: lib/reuse-rules.ts); without any, as it was (not known which).
 */
function withNodes<T extends Extract<AttemptOutcome, { kind: 'PREEMPTED' | 'LOST' }>>(outcome: T, ranks: readonly number[]): T {
  if (ranks.length === 0) return outcome;
  return { ...outcome, nodes: [...new Set(ranks)].sort((a, b) => a - b) };
}

/**
 * The ranks whose agent stopped its phase on EC2's spot notice (a stopped report, cause
 * `interruption`) and that have no final report: the nodes the warning was about.
 */
function noticed(reports: readonly NodeReport[], numNodes: number, finals: readonly (Ending | undefined)[]): number[] {
  return reports
    .filter((report) => isStopped(report) && report.stopped === 'interruption' && inRangeRank(report.nodeRank, numNodes) && finals[report.nodeRank] === undefined)
    .map((report) => report.nodeRank);
}

/**
 * Until when (ms since the epoch) the peers of the attempt's failing nodes are waited for:
 * PEER_REPORT_WAIT_MS after the first failing report; not at all (0) with no failure, or
 * with an agent's failure among them, which decides whatever the peers report.
 */
function peersAwaitedUntil(failures: readonly Ending[]): number {
  if (failures.length === 0 || failures.some(isAgentFailure)) return 0;
  return Math.min(...failures.map((report) => Date.parse(report.reportedAt))) + PEER_REPORT_WAIT_MS;
}

/**
 * When the attempt's peers stop being waited for (ms since the epoch), or null when no
 * failing report is stored (nothing waits): what a caller sleeps until before deciding
 * again.
 */
export function peerWaitEnds(numNodes: number, reports: readonly NodeReport[]): number | null {
  const inRange = endings(reports).filter((report) => inRangeRank(report.nodeRank, numNodes));
  const failures = ranks(numNodes)
    .map((rank) => finalReport(rank, inRange))
    .filter((report): report is Ending => report !== undefined && failing(report));
  const until = peersAwaitedUntil(failures);
  return until === 0 ? null : until;
}

/**
 * The node's final report: its run report, or its setup report when setup failed or its
 * agent failed before setup (both end the node's part of the attempt).
 */
export function finalReport(nodeRank: number, reports: readonly NodeReport[]): Ending | undefined {
  const own = endings(reports).filter((report) => report.nodeRank === nodeRank);
  return own.find((report) => report.phase === 'run') ?? own.find((report) => report.phase === 'setup' && failing(report));
}

/** A report that says how its node's phase ended: an exit code, or its agent's failure. */
type Ending = PhaseReport | AgentFailureReport;

/** The reports that end a phase, leaving out the phases stopped before they exited. */
function endings(reports: readonly NodeReport[]): Ending[] {
  return reports.filter(isPhaseEnd);
}

/** Whether a report says its node failed: a non-zero exit code, or its agent's own failure. */
function failing(report: Ending): boolean {
  return isAgentFailure(report) || report.exitCode !== 0;
}

/**
 * What an outcome was decided on: how many reports were stored and whether a warning was.
 * Both only ever grow (a report is added once, a warning noted once), so an attempt that
 * still matches its basis holds exactly the facts the decision read.
 */
export interface DecisionBasis {
  readonly reports: number;
  readonly interruptionNoticed: boolean;
}

/** The basis of a decision made on `attempt` as read. */
export function basisOf(attempt: Pick<AttemptRecord, 'reports' | 'interruptionNoticedAt'>): DecisionBasis {
  return { reports: attempt.reports.length, interruptionNoticed: attempt.interruptionNoticedAt !== null };
}

/**
 * The attempt's outcome from the reports stored so far, or null while it is undecided:
 * `decideAttempt` with no warning, no instance gone and no wait. A function of the set of
 * reports: their arrival order changes nothing.
 *
 * - Any node reporting a non-zero code (setup or run) decides: every failing node is a
 *   root cause and keeps its code (the policy matches them all, as `relaunch simulate`
 *   does with `exit:42+3`). The attempt EXITED in setup when a root cause failed setup,
 *   else in run.
 * - An agent's failure before setup among them makes the attempt AGENT_FAILED, with its
 *   node (the lowest rank of those that failed so), step and error: a node that was never
 *   set up says more about the attempt than its peers' codes.
 * - Nodes that already reported run 0 keep 0.
 * - Nodes still running are stopped with the attempt: `exitCode: null`,
 *   `killedByController: true`, and why, so their codes are unknown, never a silent 0.
 * - Every node reported run and none failed: EXITED in run with every code.
 *
 * Reports from ranks outside `[0, numNodes)` are ignored (the use case refuses them).
 */
export function outcomeFromReports(numNodes: number, reports: readonly NodeReport[]): AttemptOutcome | null {
  const inRange = endings(reports).filter((report) => inRangeRank(report.nodeRank, numNodes));
  const failures = ranks(numNodes)
    .map((rank) => finalReport(rank, inRange))
    .filter((report): report is Ending => report !== undefined && failing(report));
  const agentFailure = failures.find(isAgentFailure);
  if (agentFailure !== undefined) {
    return { kind: 'AGENT_FAILED', nodeRank: agentFailure.nodeRank, ...agentFailure.agentFailure };
  }
  const rootCauses = failures.filter((report): report is PhaseReport => !isAgentFailure(report));
  const first = rootCauses[0];
  if (first !== undefined) {
    const nodes = ranks(numNodes).map((rank) => nodeAfterFailure(rank, first.nodeRank, rootCauses, inRange));
    return { kind: 'EXITED', phase: rootCauses.some((report) => report.phase === 'setup') ? 'setup' : 'run', nodes };
  }
  const runCodes = ranks(numNodes).map((rank) => inRange.find((report) => report.nodeRank === rank && report.phase === 'run'));
  if (runCodes.some((report) => report === undefined)) return null;
  return {
    kind: 'EXITED',
    phase: 'run',
    nodes: runCodes.map((report, rank) => ({ rank, exitCode: report === undefined || isAgentFailure(report) ? null : report.exitCode })),
  };
}

/**
 * What one node's end was, once `rootCauses` (phases that exited non-zero; `first` the
 * lowest rank among them) have failed the attempt.
 */
function nodeAfterFailure(rank: number, first: number, rootCauses: readonly PhaseReport[], reports: readonly Ending[]): NodeExit {
  const own = rootCauses.find((report) => report.nodeRank === rank);
  if (own !== undefined) return { rank, exitCode: own.exitCode };
  if (reports.some((report) => report.nodeRank === rank && report.phase === 'run')) return { rank, exitCode: 0 };
  return {
    rank,
    exitCode: null,
    killedByController: true,
    unknownReason: `stopped because node ${first} failed`,
  };
}

function inRangeRank(rank: number, numNodes: number): boolean {
  return rank >= 0 && rank < numNodes;
}

function ranks(numNodes: number): number[] {
  return Array.from({ length: numNodes }, (_, rank) => rank);
}
