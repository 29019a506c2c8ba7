// The janitor: an execution that ended outside its own Succeed and Fail states (stopped,
// timed out, failed where no Catch saw it) leaves its job to be finished here.

import { JobNotFoundError } from '../errors.ts';
import type { AttemptRecord } from '../model.ts';
import { isTerminal, JobStatus } from '../status.ts';
import { CANCELLED_BY_USER } from './await-attempt.ts';
import { recordControllerFailure } from './controller-failure.ts';
import type { JobEnded } from '../ports.ts';
import { nowIso, type UseCaseDeps } from './deps.ts';
import { retryOnConflict } from './retry.ts';
import { releaseStandbyOf } from './standby-attempt.ts';

/** How Step Functions says an execution ended, for the ends no state of it recorded. */
export type ExecutionEndStatus = 'SUCCEEDED' | 'FAILED' | 'TIMED_OUT' | 'ABORTED';

/** One execution's end ("Execution Status Change"), reduced to what matters. */
export interface ExecutionEnded {
  readonly jobId: string;
  readonly executionArn: string;
  readonly status: ExecutionEndStatus;
  /** The execution's error and cause, when it failed. */
  readonly error?: string;
  readonly cause?: string;
}

/** What the janitor did, and why; `ended` when it ended the job. */
export interface ExecutionEndedResult {
  readonly action: 'ignored' | 'cancelled' | 'failed';
  readonly reason: string;
  readonly ended?: JobEnded;
}

/**
 * Finishes the job of an execution that ended while the job was still live:
 *
 * - an unknown job, or a job another execution now controls (continued as new): ignored;
 * - a job already terminal (its execution ended through JobFailed, or was stopped after
 *   its decision): its latest attempt's instances are released again, in case the stop
 *   came before ReleaseInstances, and nothing else changes;
 * - in each case below as well, a standby a warning started for the latest attempt
 *   (launch_on_warning) is released with it;
 * - a job being cancelled (the cancel stopped the execution in its backoff Wait): its
 *   latest attempt's instances are released and it ends CANCELLED;
 * - any other live job: relaunch's own fault, ended as RecordControllerFailure does
 *   (instances released, FAILED_CONTROLLER with the execution's error as the reason).
 */
export async function onExecutionEnded(
  event: ExecutionEnded,
  deps: Pick<UseCaseDeps, 'store' | 'compute' | 'clock' | 'secrets'>,
): Promise<ExecutionEndedResult> {
  const { store, clock } = deps;
  let job;
  try {
    job = await store.getJob(event.jobId);
  } catch (error) {
    if (error instanceof JobNotFoundError) return { action: 'ignored', reason: `job ${event.jobId} does not exist` };
    throw error;
  }
  if (job.executionArn !== event.executionArn) {
    return { action: 'ignored', reason: `job ${job.jobId} is controlled by another execution` };
  }
  if (isTerminal(job.status)) {
    // Decided, but perhaps stopped before ReleaseInstances ran: release again (idempotent).
    if (job.attemptCount > 0) await releaseLatest(deps, job.jobId, job.attemptCount, `the job has ended (${job.status})`);
    await deps.secrets.delete(job.jobId);
    return { action: 'ignored', reason: `job ${job.jobId} has already ended (${job.status})` };
  }
  if (job.status !== JobStatus.CANCELLING) {
    const controllerError = { Error: `Execution${pascal(event.status)}`, Cause: describe(event) };
    const { decision } = await recordControllerFailure({ jobId: job.jobId, attempt: job.attemptCount, attemptsInExecution: 0, controllerError }, deps);
    const reason = `job ${job.jobId}: its execution ended ${event.status} while the job was ${job.status}`;
    if (decision?.status !== JobStatus.FAILED_CONTROLLER) return { action: 'failed', reason };
    return { action: 'failed', reason, ended: { jobId: job.jobId, status: JobStatus.FAILED_CONTROLLER, reason: decision.reason } };
  }
  if (job.attemptCount > 0) {
    const attempt = await releaseLatest(deps, job.jobId, job.attemptCount, 'the job was cancelled');
    if (attempt.outcome === null) await store.endAttempt(job.jobId, attempt.attempt, { kind: 'CANCELLED' }, nowIso(clock));
  }
  const why = job.failureReason ?? CANCELLED_BY_USER;
  const changed = await retryOnConflict(2, async () => {
    const current = await store.getJob(job.jobId);
    if (isTerminal(current.status)) return false;
    await store.changeStatus(
      job.jobId,
      { from: current.status, to: JobStatus.CANCELLED, reason: why, attempt: current.attemptCount > 0 ? current.attemptCount : null, at: nowIso(clock) },
      { failureReason: why },
    );
    return true;
  });
  await deps.secrets.delete(job.jobId);
  const reason = `job ${job.jobId} cancelled while its execution waited`;
  return changed ? { action: 'cancelled', reason, ended: { jobId: job.jobId, status: JobStatus.CANCELLED, reason: why } } : { action: 'cancelled', reason };
}

/** Releases the latest attempt's instances, and the standby a warning started for it, if any. */
async function releaseLatest(deps: Pick<UseCaseDeps, 'store' | 'compute' | 'clock'>, jobId: string, latest: number, reason: string): Promise<AttemptRecord> {
  const attempt = await deps.store.getAttempt(jobId, latest);
  await deps.compute.release(jobId, attempt.attempt, attempt.instances);
  await releaseStandbyOf(deps, jobId, latest, `not needed: ${reason}`);
  return attempt;
}

function describe(event: ExecutionEnded): string {
  const detail = [event.error, event.cause].filter((part) => part !== undefined && part !== '').join(': ');
  return `the execution ended ${event.status}${detail === '' ? '' : ` (${detail})`}`;
}

function pascal(status: ExecutionEndStatus): string {
  return status
    .toLowerCase()
    .split('_')
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join('');
}
