// How an attempt ended, read from its nodes' reports and what EC2 said about its instances:
// pure, so the rule is testable as a table, and one rule for every path that ends an attempt.

import { isAgentFailure, isPhaseEnd, type AgentFailureReport, type AttemptRecord, type NodeReport, type PhaseReport } from './model.ts';
import type { AttemptOutcome, NodeExit } from './policy/types.ts';

/** What EC2 said about an attempt's instances, besides the nodes' own reports. */
export interface AttemptFacts {
  /** When EC2 warned that an instance of the attempt will be reclaimed; null when it has not. */
  readonly interruptionNoticedAt: string | null;
  /** Nodes whose instance went away (terminated, stopped), as far as the caller knows. */
  readonly gone: readonly GoneNode[];
}

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
 * | 2 | any                              | yes                   | yes               | any                                 | PREEMPTED                                        |
 * | 3 | no                               | any                   | yes               | yes                                 | PREEMPTED                                        |
 * | 4 | no                               | any                   | no                | yes                                 | LOST: that node's instance went away             |
 * | 5 | any                              | yes                   | no                | no                                  | EXITED, or AGENT_FAILED, as `outcomeFromReports` says (root cause) |
 * | 6 | no                               | no                    | any               | no                                  | null: undecided, the attempt runs on             |
 *
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
 * message that arrives after the attempt ended changes nothing. So a non-zero report that
 * is stored before any word that a peer's instance went away (and before any warning)
 * ends the attempt EXITED at once: ending it is what stops the peers, which may otherwise
 * hang, and no later message can undo it.
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
  const failed = finals.some((report) => report !== undefined && failing(report));
  if (!failed && finals.every((report) => report !== undefined)) return outcomeFromReports(numNodes, inRange);
  const goneEarly = facts.gone.find((node) => inRangeRank(node.nodeRank, numNodes) && finals[node.nodeRank] === undefined);
  if (facts.interruptionNoticedAt !== null && (failed || goneEarly !== undefined)) return { kind: 'PREEMPTED' };
  if (goneEarly !== undefined) return { kind: 'LOST', reason: `instance ${goneEarly.instanceId} was ${goneEarly.how}` };
  return outcomeFromReports(numNodes, inRange);
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
 * `decideAttempt` with no warning and no instance gone.
 *
 * - Any node reporting a non-zero code (setup or run) decides at once: the attempt EXITED
 *   in that report's phase. That node is the root cause and keeps its code. The earliest
 *   failing report (the store keeps reports in arrival order) is the root cause.
 * - A root cause that is an agent's failure before setup makes the attempt AGENT_FAILED,
 *   with its node, step and error: no code of the job's decides it. A peer's agent failing
 *   after another node's root cause is a casualty: code null, with why.
 * - Nodes that already reported run 0 keep 0.
 * - Nodes still running are stopped with the attempt: `exitCode: null`,
 *   `killedByController: true`, and why, so their codes are unknown, never a silent 0.
 * - A node whose own failure arrived after the root cause's is counted as its casualty
 *   (`killedByController: true`, its code kept): a peer's crash usually takes the others
 *   down, and only the first failure says what went wrong.
 * - Every node reported run and none failed: EXITED in run with every code.
 *
 * Reports from ranks outside `[0, numNodes)` are ignored (the use case refuses them).
 */
export function outcomeFromReports(numNodes: number, reports: readonly NodeReport[]): AttemptOutcome | null {
  const inRange = endings(reports).filter((report) => inRangeRank(report.nodeRank, numNodes));
  const rootCause = inRange.find(failing);
  if (rootCause !== undefined && isAgentFailure(rootCause)) {
    return { kind: 'AGENT_FAILED', nodeRank: rootCause.nodeRank, ...rootCause.agentFailure };
  }
  if (rootCause !== undefined) {
    const nodes = ranks(numNodes).map((rank) => nodeAfterFailure(rank, rootCause, inRange));
    return { kind: 'EXITED', phase: rootCause.phase, nodes };
  }
  const runCodes = ranks(numNodes).map((rank) => inRange.find((report) => report.nodeRank === rank && report.phase === 'run'));
  if (runCodes.some((report) => report === undefined)) return null;
  return {
    kind: 'EXITED',
    phase: 'run',
    nodes: runCodes.map((report, rank) => ({ rank, exitCode: report === undefined || isAgentFailure(report) ? null : report.exitCode })),
  };
}

/** What one node's end was, once `rootCause` (a phase that exited non-zero) has failed the attempt. */
function nodeAfterFailure(rank: number, rootCause: PhaseReport, reports: readonly Ending[]): NodeExit {
  if (rank === rootCause.nodeRank) return { rank, exitCode: rootCause.exitCode };
  const own = reports.filter((report) => report.nodeRank === rank);
  const laterFailure = own.find(failing);
  if (laterFailure !== undefined && isAgentFailure(laterFailure)) {
    return { rank, exitCode: null, killedByController: true, unknownReason: `its agent failed at ${laterFailure.agentFailure.step}` };
  }
  if (laterFailure !== undefined) return { rank, exitCode: laterFailure.exitCode, killedByController: true };
  if (own.some((report) => report.phase === 'run')) return { rank, exitCode: 0 };
  return {
    rank,
    exitCode: null,
    killedByController: true,
    unknownReason: `stopped because node ${rootCause.nodeRank} failed`,
  };
}

function inRangeRank(rank: number, numNodes: number): boolean {
  return rank >= 0 && rank < numNodes;
}

function ranks(numNodes: number): number[] {
  return Array.from({ length: numNodes }, (_, rank) => rank);
}
