// The JobStore port's rules, once for every adapter: the audit rows a write adds, the checks
// it makes, and the errors (with their wording) a refused write throws.
//
// The adapters differ in how they make a check atomic (a DynamoDB condition, or no await
// between a read and its write) but not in what the check is or how a refusal reads, so
// the same contract suite can hold both to the same messages.

import { isTerminal } from '../status.ts';
import { ConcurrentUpdateError, StaleAttemptError } from '../errors.ts';
import type { AttemptRecord, JobEvent, JobRecord, NodeReport } from '../model.ts';
import type { DecisionBasis } from '../outcome.ts';
import type { IdempotencyClaim, StatusChange } from '../ports.ts';
import { assertTransition } from '../status.ts';

/** The reason on the audit row written when a job is created (its `from` is null). */
export const JOB_CREATED_REASON = 'job created';

/** The audit row of a job's creation. */
export function createdEvent(job: JobRecord): JobEvent {
  return { jobId: job.jobId, at: job.createdAt, from: null, to: job.status, attempt: null, reason: JOB_CREATED_REASON };
}

/** The audit row of a status change. */
export function statusEvent(jobId: string, change: StatusChange): JobEvent {
  return { jobId, at: change.at, from: change.from, to: change.to, attempt: change.attempt, reason: change.reason };
}

/**
 * Throws IllegalTransitionError for a change lib/status.ts does not allow (a bug in the
 * writer, whatever the job's status), then ConcurrentUpdateError unless the job is in the
 * status the change starts from (a lost race).
 */
export function expectStatus(job: JobRecord, change: StatusChange): void {
  assertTransition(change.from, change.to);
  if (job.status !== change.from) {
    throw new ConcurrentUpdateError(
      `job ${job.jobId} is ${job.status}, not ${change.from}; cannot change it to ${change.to}`,
    );
  }
}

/**
 * Whether an idempotency claim no longer holds its key at `now` (ISO 8601, as stored: the
 * fixed-width UTC form compares as text, which is how DynamoDB's condition compares it).
 */
export function claimLapsed(claim: Pick<IdempotencyClaim, 'expiresAt'>, now: string): boolean {
  return claim.expiresAt <= now;
}

/** What listJobs orders by, newest first: creation time, then id (DynamoDB's list index sort key). */
export function listKey(job: Pick<JobRecord, 'createdAt' | 'jobId'>): string {
  return `${job.createdAt}#${job.jobId}`;
}

/** What a node's report is known by: one per node and phase. */
export function reportKey(report: Pick<NodeReport, 'nodeRank' | 'phase'>): string {
  return `${report.nodeRank}:${report.phase}`;
}

/** Whether the attempt already holds a report from this node for this phase. */
export function hasReport(attempt: AttemptRecord, report: Pick<NodeReport, 'nodeRank' | 'phase'>): boolean {
  const key = reportKey(report);
  return attempt.reports.some((r) => reportKey(r) === key);
}

/**
 * Whether the attempt still holds exactly the facts an outcome was decided on (endAttempt's
 * `basis`): as many reports, and a warning noted or not, as then. Both only ever grow.
 */
export function matchesBasis(attempt: Pick<AttemptRecord, 'reports' | 'interruptionNoticedAt'>, basis: DecisionBasis): boolean {
  return attempt.reports.length === basis.reports && (attempt.interruptionNoticedAt !== null) === basis.interruptionNoticed;
}

/** createJob on an id that is taken. */
export function jobExistsError(jobId: string): ConcurrentUpdateError {
  return new ConcurrentUpdateError(`job ${jobId} already exists`);
}

/** putAttempt out of sequence: only attempt attemptCount + 1 may start. */
export function attemptOutOfSequenceError(jobId: string, attemptCount: number, attempt: number): ConcurrentUpdateError {
  return new ConcurrentUpdateError(`job ${jobId} has ${attemptCount} attempt(s); attempt ${attempt} cannot start`);
}

/** An attempt number the job never had. */
export function noAttemptError(jobId: string, attempt: number): StaleAttemptError {
  return new StaleAttemptError(`job ${jobId} has no attempt ${attempt}`);
}

/** setInstances on an attempt that is already placed. */
export function instancesSetError(jobId: string, attempt: number): ConcurrentUpdateError {
  return new ConcurrentUpdateError(`attempt ${attempt} of job ${jobId} already has its instances`);
}

/** recordDecision on an attempt that already has one. */
export function decisionSetError(jobId: string, attempt: number): ConcurrentUpdateError {
  return new ConcurrentUpdateError(`attempt ${attempt} of job ${jobId} already has a decision`);
}

/** A report or heartbeat (`what`) for an attempt whose outcome is set. */
export function endedError(jobId: string, attempt: number, what: string): StaleAttemptError {
  return new StaleAttemptError(`attempt ${attempt} of job ${jobId} has already ended; ${what} changes nothing`);
}

/** A report or heartbeat (`what`) for a standby that was let go unused. */
export function releasedError(jobId: string, attempt: number, what: string): StaleAttemptError {
  return new StaleAttemptError(`attempt ${attempt} of job ${jobId} was a standby, released unused; ${what} changes nothing`);
}

/** putStandby where the live attempt is not the one the standby is for, or the number is taken. */
export function standbyOutOfSequenceError(jobId: string, attemptCount: number, attempt: number): ConcurrentUpdateError {
  return new ConcurrentUpdateError(`job ${jobId} has ${attemptCount} attempt(s); attempt ${attempt} cannot start as its standby`);
}

/** adoptStandby or retireStandby refused: the standby or the job moved on. */
export function standbySettledError(jobId: string, attempt: number, what: string): ConcurrentUpdateError {
  return new ConcurrentUpdateError(`standby attempt ${attempt} of job ${jobId} cannot be ${what}: it is not an open standby after the live attempt`);
}

/** Whether a job is created in the queue of jobs whose execution is not recorded yet: one without an execution that has not ended. */
export function queuedAtCreation(job: JobRecord): boolean {
  return job.executionArn === null && !isTerminal(job.status);
}
