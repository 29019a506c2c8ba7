// An agent's report of one phase on one node: store the code once, and end the attempt when its facts decide it.

import { InvalidInputError, StaleAttemptError } from '../errors.ts';
import type { AgentFailure, StopCause } from '../agent/protocol.ts';
import { isAgentFailure, isStopped, type AttemptRecord, type JobRecord, type NodeReport, type StoppedReport } from '../model.ts';
import type { Phase } from '../policy/types.ts';
import { keepTail, storedTailMaxBytes } from '../report-tail.ts';
import { runSignal, type RunSignal } from '../standby-rules.ts';
import { assertLiveOrHolding, authorizeAgent, markRunning, type AgentCredentials } from './agent.ts';
import { nowIso, type UseCaseDeps } from './deps.ts';
import { settleAfterReport } from './settle-attempt.ts';

/**
 * `POST /jobs/{id}/attempts/{n}/report`: one node's end of one phase, as its exit code, or,
 * in setup's place, the failure of one of its agent's own steps.
 */
export type ReportPhaseInput = AgentCredentials & { readonly phase: Phase; readonly outputTail: string } & (
    | { readonly exitCode: number; readonly agentFailure?: undefined; readonly setupMs?: number }
    | { readonly agentFailure: AgentFailure; readonly exitCode?: undefined; readonly setupMs?: undefined }
  );

/**
 * `duplicate`: the same report was already stored, and nothing changed. A setup report
 * that exited 0 also says what the node does next (runSignal): `go` on to run, or `hold`
 * (a standby, launch_on_warning), or `stop`.
 */
export interface ReportPhaseResult {
  readonly status: 'accepted' | 'duplicate';
  readonly run?: RunSignal;
  /** Why `run` says what it says, for the agent's log. */
  readonly reason?: string;
}

/**
 * Stores a node's report and, when the attempt's facts then decide it (lib/outcome.ts
 * `decideAttempt`: the reports, and a spot interruption warning on record), ends it and
 * resumes the waiting execution.
 *
 * - Wrong secret: UnauthorizedError. Rank outside the job's nodes: InvalidInputError.
 * - A repeat of a stored report (same node, phase and exit code, or the same agent failure;
 *   the agent retries on a lost answer) is acknowledged as `duplicate` even after the attempt ended. On a live
 *   attempt the repeat also ends it if its facts decide it, so a first try that stopped
 *   between storing the report and ending the attempt is finished by the retry.
 * - Otherwise an attempt that is not the latest, or has ended, is StaleAttemptError: a late
 *   report never changes a decided attempt.
 * - A second, different code (or agent failure) for the same node and phase is InvalidInputError.
 * - An agent failure is stored in setup's place; one given for run is InvalidInputError.
 * - A non-zero report while a warning is on record ends the attempt PREEMPTED, not EXITED,
 *   even on a single node (the node is going anyway); the report is stored with it. A
 *   code in `fail_on_exit_codes` is final even then: the attempt EXITED.
 * - A non-zero report while peers still run is answered once they have all reported, or
 *   PEER_REPORT_WAIT_MS after the first failing report (settleAfterReport): the attempt
 *   is decided on every code stored by then, whatever order they came in.
 *
 * The end is written only on the facts it was decided on (`settleAttempt`), so an EC2
 * event handled at the same moment can neither end the attempt over a stored final report
 * nor be overtaken by a decision that did not see its warning.
 *
 * A standby holding after the live attempt (launch_on_warning) reports its setup (or its
 * agent's failure) as any attempt does, and is told to hold; it has no run to report
 * until it is adopted and told to go, so a run report from it is StaleAttemptError. Its
 * reports never change the job's status.
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
  if (input.agentFailure !== undefined && input.phase !== 'setup') {
    throw new InvalidInputError([{ path: 'phase', message: `expected setup with agentFailure (the agent's steps come before it), got ${input.phase}` }]);
  }
  const previous = attempt.reports.find((report) => sameSlot(report, input));
  if (previous !== undefined && sameContent(previous, input)) {
    let now = attempt;
    if (attempt.attempt === job.attemptCount && attempt.outcome === null) {
      await markRunning(store, job, input.attempt, clock);
      now = (await settleAfterReport(attempt, job.spec, deps)).attempt;
    }
    return answer('duplicate', input, job, now, deps);
  }
  const which = assertLiveOrHolding(job, attempt);
  if (which === 'standby' && input.phase === 'run') {
    throw new StaleAttemptError(`attempt ${input.attempt} of job ${input.jobId} is a standby holding before run: it was never told to run`);
  }
  if (previous !== undefined) throw conflicting(previous, input);

  // The end of it, within this job's share of what an attempt may store (lib/report-tail.ts).
  const outputTail = keepTail(input.outputTail, storedTailMaxBytes(job.spec.numNodes));
  const reportedAt = nowIso(clock);
  const report: NodeReport =
    input.agentFailure === undefined
      ? { nodeRank: input.nodeRank, phase: input.phase, exitCode: input.exitCode, ...setupTime(input), outputTail, reportedAt }
      : { nodeRank: input.nodeRank, phase: 'setup', agentFailure: { step: input.agentFailure.step, error: input.agentFailure.error }, outputTail, reportedAt };
  const added = await store.addReport(input.jobId, input.attempt, report);
  if (added.duplicate) {
    // Lost a race with a twin report, or with the attempt's end: say which.
    const stored = added.attempt.reports.find((candidate) => sameSlot(candidate, input));
    if (stored !== undefined && sameContent(stored, input)) return { status: 'duplicate' };
    if (stored !== undefined) throw conflicting(stored, input);
    throw new StaleAttemptError(`attempt ${input.attempt} of job ${input.jobId} ended before this report was stored`);
  }

  if (which === 'live') await markRunning(store, job, input.attempt, clock);
  const settled = await settleAfterReport(added.attempt, job.spec, deps);
  return answer('accepted', input, job, settled.attempt, deps);
}

/** `POST .../report` with `stopped`: a phase the node's agent stopped before it exited. */
export type ReportStoppedInput = AgentCredentials & { readonly phase: Phase; readonly outputTail: string; readonly stopped: StopCause };

/**
 * Stores the last lines of a phase the node's agent stopped before it exited (a spot
 * notice, the node shutting down), so the attempt's record names the phase it was in and
 * keeps how far it got. It decides nothing and resumes nothing: the attempt ends on EC2's
 * events, the cancel or the heartbeat's silence, as it would without it. So it is taken
 * for any attempt the secret opens, the live one or one that has already ended (a cancel
 * ends the attempt before the node is told to stop), but a standby let go unused.
 *
 * - A repeat (same node, phase and cause) is `duplicate`.
 * - A node that already reported that phase otherwise is InvalidInputError: its exit code
 *   stands.
 */
export async function reportStoppedPhase(input: ReportStoppedInput, deps: Pick<UseCaseDeps, 'store' | 'clock'>): Promise<ReportPhaseResult> {
  const { job, attempt } = await authorizeAgent(deps.store, input);
  const previous = attempt.reports.find((report) => sameSlot(report, input));
  if (previous !== undefined) return repeatOrConflict(previous, input);
  const report: StoppedReport = {
    nodeRank: input.nodeRank,
    phase: input.phase,
    stopped: input.stopped,
    outputTail: keepTail(input.outputTail, storedTailMaxBytes(job.spec.numNodes)),
    reportedAt: nowIso(deps.clock),
  };
  const added = await deps.store.addReport(input.jobId, input.attempt, report);
  if (!added.duplicate) return { status: 'accepted' };
  const stored = added.attempt.reports.find((candidate) => sameSlot(candidate, input));
  if (stored === undefined) throw new StaleAttemptError(`attempt ${input.attempt} of job ${input.jobId} refused this stopped report`);
  return repeatOrConflict(stored, input);
}

function repeatOrConflict(stored: NodeReport, input: ReportStoppedInput): ReportPhaseResult {
  if (isStopped(stored) && stored.stopped === input.stopped) return { status: 'duplicate' };
  throw new InvalidInputError([{ path: 'stopped', message: `node ${input.nodeRank} already reported ${input.phase} ${said(stored)}; got stopped (${input.stopped})` }]);
}

/** What a report said, for a message. */
function said(report: { exitCode?: number; agentFailure?: AgentFailure; stopped?: StopCause }): string {
  if (report.agentFailure !== undefined) return `its agent's failure at ${report.agentFailure.step}`;
  if (report.stopped !== undefined) return `stopped (${report.stopped})`;
  return `exit code ${report.exitCode}`;
}

/**
 * The answer to a report: with a setup report that exited 0, what the node does next, as
 * the records read say (runSignal). A `go` to a standby already adopted notes when its run
 * started; a `hold` read before an adoption is corrected by the node's next ask.
 */
async function answer(
  status: ReportPhaseResult['status'],
  input: ReportPhaseInput,
  job: JobRecord,
  attempt: AttemptRecord,
  deps: Pick<UseCaseDeps, 'store' | 'clock'>,
): Promise<ReportPhaseResult> {
  if (input.phase !== 'setup' || input.exitCode !== 0) return { status };
  const { run, reason } = runSignal(job, attempt);
  if (run === 'go' && attempt.standby !== null && attempt.standby !== undefined) await deps.store.noteRunStart(job.jobId, attempt.attempt, nowIso(deps.clock));
  return { status, run, reason };
}

/** A setup report's `setupMs`, when its agent sent one (only setup's is stored: it dates setup's start). */
function setupTime(input: ReportPhaseInput): { setupMs?: number } {
  return input.phase === 'setup' && input.setupMs !== undefined ? { setupMs: input.setupMs } : {};
}

function sameSlot(report: NodeReport, input: Pick<ReportPhaseInput, 'nodeRank' | 'phase'>): boolean {
  return report.nodeRank === input.nodeRank && report.phase === input.phase;
}

/** Whether a stored report says what this one says: the same exit code, or the same agent failure. */
function sameContent(stored: NodeReport, input: ReportPhaseInput): boolean {
  if (isStopped(stored)) return false;
  if (isAgentFailure(stored)) return input.agentFailure?.step === stored.agentFailure.step && input.agentFailure.error === stored.agentFailure.error;
  return input.exitCode === stored.exitCode;
}

function conflicting(stored: NodeReport, input: ReportPhaseInput): InvalidInputError {
  const got = input.agentFailure === undefined && !isAgentFailure(stored) && !isStopped(stored) ? String(input.exitCode) : said(input);
  return new InvalidInputError([
    {
      path: input.agentFailure === undefined ? 'exitCode' : 'agentFailure',
      message: `node ${input.nodeRank} already reported ${input.phase} ${said(stored)}; got ${got}`,
    },
  ]);
}
