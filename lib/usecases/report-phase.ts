// An agent's report of one phase on one node: store the code once, and end the attempt when its facts decide it.

import { InvalidInputError, StaleAttemptError } from '../errors.ts';
import type { NodeReport } from '../model.ts';
import type { Phase } from '../policy/types.ts';
import { keepTail, storedTailMaxBytes } from '../report-tail.ts';
import { assertLiveAttempt, authorizeAgent, markRunning, type AgentCredentials } from './agent.ts';
import { nowIso, type UseCaseDeps } from './deps.ts';
import { settleAttempt } from './settle-attempt.ts';

/** `POST /jobs/{id}/attempts/{n}/report`: one node's end of one phase. */
export interface ReportPhaseInput extends AgentCredentials {
  readonly phase: Phase;
  readonly exitCode: number;
  readonly outputTail: string;
}

/** `duplicate`: the same report was already stored, and nothing changed. */
export interface ReportPhaseResult {
  readonly status: 'accepted' | 'duplicate';
}

/**
 * Stores a node's report and, when the attempt's facts then decide it (lib/outcome.ts
 * `decideAttempt`: the reports, and a spot interruption warning on record), ends it and
 * resumes the waiting execution.
 *
 * - Wrong secret: UnauthorizedError. Rank outside the job's nodes: InvalidInputError.
 * - A repeat of a stored report (same node, phase and exit code; the agent retries on a
 *   lost answer) is acknowledged as `duplicate` even after the attempt ended. On a live
 *   attempt the repeat also ends it if its facts decide it, so a first try that stopped
 *   between storing the report and ending the attempt is finished by the retry.
 * - Otherwise an attempt that is not the latest, or has ended, is StaleAttemptError: a late
 *   report never changes a decided attempt.
 * - A second, different code for the same node and phase is InvalidInputError.
 * - A non-zero report while a warning is on record ends the attempt PREEMPTED, not EXITED,
 *   even on a single node (the node is going anyway); the report is stored with it.
 *
 * The end is written only on the facts it was decided on (`settleAttempt`), so an EC2
 * event handled at the same moment can neither end the attempt over a stored final report
 * nor be overtaken by a decision that did not see its warning.
 *
 * The job goes STARTING -> RUNNING before the attempt is ended, so the policy never reads
 * a status this call is about to change.
 */
export async function reportPhase(
  input: ReportPhaseInput,
  deps: Pick<UseCaseDeps, 'store' | 'workflow' | 'clock'>,
): Promise<ReportPhaseResult> {
  const { store, clock } = deps;
  const { job, attempt } = await authorizeAgent(store, input);
  const previous = attempt.reports.find((report) => sameSlot(report, input));
  if (previous !== undefined && previous.exitCode === input.exitCode) {
    if (attempt.attempt === job.attemptCount && attempt.outcome === null) {
      await markRunning(store, job, input.attempt, clock);
      await settleAttempt(attempt, job.spec.numNodes, [], nowIso(clock), deps);
    }
    return { status: 'duplicate' };
  }
  assertLiveAttempt(job, attempt);
  if (previous !== undefined) throw conflicting(previous, input);

  const report: NodeReport = {
    nodeRank: input.nodeRank,
    phase: input.phase,
    exitCode: input.exitCode,
    // The end of it, within this job's share of what an attempt may store (lib/report-tail.ts).
    outputTail: keepTail(input.outputTail, storedTailMaxBytes(job.spec.numNodes)),
    reportedAt: nowIso(clock),
  };
  const added = await store.addReport(input.jobId, input.attempt, report);
  if (added.duplicate) {
    // Lost a race with a twin report, or with the attempt's end: say which.
    const stored = added.attempt.reports.find((candidate) => sameSlot(candidate, input));
    if (stored !== undefined && stored.exitCode === input.exitCode) return { status: 'duplicate' };
    if (stored !== undefined) throw conflicting(stored, input);
    throw new StaleAttemptError(`attempt ${input.attempt} of job ${input.jobId} ended before this report was stored`);
  }

  await markRunning(store, job, input.attempt, clock);
  await settleAttempt(added.attempt, job.spec.numNodes, [], nowIso(clock), deps);
  return { status: 'accepted' };
}

function sameSlot(report: NodeReport, input: ReportPhaseInput): boolean {
  return report.nodeRank === input.nodeRank && report.phase === input.phase;
}

function conflicting(stored: NodeReport, input: ReportPhaseInput): InvalidInputError {
  return new InvalidInputError([
    {
      path: 'exitCode',
      message: `node ${input.nodeRank} already reported ${input.phase} exit code ${stored.exitCode}; got ${input.exitCode}`,
    },
  ]);
}
