// Job statuses and the one table of legal transitions between them.

import { IllegalTransitionError } from './errors.ts';

/** Every status a job can be in (DESIGN.md section 2). */
export const JobStatus = {
  PENDING: 'PENDING',
  STARTING: 'STARTING',
  RUNNING: 'RUNNING',
  RECOVERING: 'RECOVERING',
  SUCCEEDED: 'SUCCEEDED',
  FAILED: 'FAILED',
  FAILED_SETUP: 'FAILED_SETUP',
  FAILED_PRECHECKS: 'FAILED_PRECHECKS',
  FAILED_NO_RESOURCE: 'FAILED_NO_RESOURCE',
  FAILED_CONTROLLER: 'FAILED_CONTROLLER',
  CANCELLING: 'CANCELLING',
  CANCELLED: 'CANCELLED',
} as const;

/** A job status. */
export type JobStatus = (typeof JobStatus)[keyof typeof JobStatus];

/** All statuses, in lifecycle order. */
export const JOB_STATUSES: readonly JobStatus[] = Object.values(JobStatus);

const TERMINAL: ReadonlySet<JobStatus> = new Set<JobStatus>([
  JobStatus.SUCCEEDED,
  JobStatus.FAILED,
  JobStatus.FAILED_SETUP,
  JobStatus.FAILED_PRECHECKS,
  JobStatus.FAILED_NO_RESOURCE,
  JobStatus.FAILED_CONTROLLER,
  JobStatus.CANCELLED,
]);

/** Whether a job in this status is finished for good. */
export function isTerminal(status: JobStatus): boolean {
  return TERMINAL.has(status);
}

/** Whether a job in this status is finished or being cancelled: no attempt of it will run again. */
export function isEnding(status: JobStatus): boolean {
  return isTerminal(status) || status === JobStatus.CANCELLING;
}

const FAILURES_ANY_TIME = [JobStatus.FAILED_CONTROLLER, JobStatus.CANCELLING, JobStatus.CANCELLED] as const;

/**
 * The legal transitions. A terminal status has none. FAILED_CONTROLLER (relaunch's own
 * fault) and cancellation are reachable from every live status.
 */
export const TRANSITIONS: Readonly<Record<JobStatus, readonly JobStatus[]>> = {
  PENDING: [JobStatus.STARTING, ...FAILURES_ANY_TIME],
  STARTING: [
    // A pipeline's task done (one with no run succeeds before a heartbeat): the next waits to start.
    JobStatus.PENDING,
    JobStatus.RUNNING,
    JobStatus.RECOVERING,
    JobStatus.SUCCEEDED,
    JobStatus.FAILED,
    JobStatus.FAILED_SETUP,
    JobStatus.FAILED_PRECHECKS,
    JobStatus.FAILED_NO_RESOURCE,
    ...FAILURES_ANY_TIME,
  ],
  RUNNING: [
    JobStatus.PENDING,
    JobStatus.RECOVERING,
    JobStatus.SUCCEEDED,
    JobStatus.FAILED,
    JobStatus.FAILED_SETUP,
    // A multi-node attempt some of whose nodes never came up, the max_boot_failures-th in
    // a row: the others' heartbeats had made the job RUNNING.
    JobStatus.FAILED_NO_RESOURCE,
    ...FAILURES_ANY_TIME,
  ],
  RECOVERING: [JobStatus.STARTING, ...FAILURES_ANY_TIME],
  CANCELLING: [JobStatus.CANCELLED, JobStatus.FAILED_CONTROLLER],
  SUCCEEDED: [],
  FAILED: [],
  FAILED_SETUP: [],
  FAILED_PRECHECKS: [],
  FAILED_NO_RESOURCE: [],
  FAILED_CONTROLLER: [],
  CANCELLED: [],
};

/** Whether `from -> to` is a legal transition. */
export function canTransition(from: JobStatus, to: JobStatus): boolean {
  return TRANSITIONS[from].includes(to);
}

/** Refuses an illegal transition with an error naming both ends. */
export function assertTransition(from: JobStatus, to: JobStatus): void {
  if (!canTransition(from, to)) throw new IllegalTransitionError(from, to);
}
