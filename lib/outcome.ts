// How an attempt ended, read from its nodes' reports: pure, so the rule is testable as a table.

import type { NodeReport } from './model.ts';
import type { AttemptOutcome, NodeExit } from './policy/types.ts';

/**
 * The attempt's outcome from the reports stored so far, or null while it is undecided.
 *
 * - Any node reporting a non-zero code (setup or run) decides at once: the attempt EXITED
 *   in that report's phase. That node is the root cause and keeps its code. The earliest
 *   failing report (the store keeps reports in arrival order) is the root cause.
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
  const inRange = reports.filter((report) => report.nodeRank >= 0 && report.nodeRank < numNodes);
  const rootCause = inRange.find((report) => report.exitCode !== 0);
  if (rootCause !== undefined) {
    const nodes = ranks(numNodes).map((rank) => nodeAfterFailure(rank, rootCause, inRange));
    return { kind: 'EXITED', phase: rootCause.phase, nodes };
  }
  const runCodes = ranks(numNodes).map((rank) => inRange.find((report) => report.nodeRank === rank && report.phase === 'run'));
  if (runCodes.some((report) => report === undefined)) return null;
  return {
    kind: 'EXITED',
    phase: 'run',
    nodes: runCodes.map((report, rank) => ({ rank, exitCode: report?.exitCode ?? null })),
  };
}

/** What one node's end was, once `rootCause` has failed the attempt. */
function nodeAfterFailure(rank: number, rootCause: NodeReport, reports: readonly NodeReport[]): NodeExit {
  if (rank === rootCause.nodeRank) return { rank, exitCode: rootCause.exitCode };
  const own = reports.filter((report) => report.nodeRank === rank);
  const laterFailure = own.find((report) => report.exitCode !== 0);
  if (laterFailure !== undefined) return { rank, exitCode: laterFailure.exitCode, killedByController: true };
  if (own.some((report) => report.phase === 'run')) return { rank, exitCode: 0 };
  return {
    rank,
    exitCode: null,
    killedByController: true,
    unknownReason: `stopped because node ${rootCause.nodeRank} failed`,
  };
}

function ranks(numNodes: number): number[] {
  return Array.from({ length: numNodes }, (_, rank) => rank);
}
