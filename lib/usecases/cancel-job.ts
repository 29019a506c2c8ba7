// Cancelling a job: mark it CANCELLING and let the machine end it where cleanup lives.

import type { JobRecord } from '../model.ts';
import type { JobStore } from '../ports.ts';
import { isEnding, isTerminal, JobStatus } from '../status.ts';
import { WorkflowError } from '../workflow/contract.ts';
import { CANCELLED_BY_USER } from './await-attempt.ts';
import { nowIso, type UseCaseDeps } from './deps.ts';
import { retryOnConflict } from './retry.ts';
import { failTask } from './tasks.ts';

/** The job's status after the request; `alreadyFinished` when it had ended and nothing changed. */
export interface CancelJobResult {
  readonly status: JobStatus;
  readonly alreadyFinished: boolean;
}

/** Tries at the status change when the machine keeps moving the job under us. */
const MAX_CANCEL_TRIES = 3;

/**
 * Asks for a job to stop, for `reason` (the user's cancel unless said: the local runtime
 * stopping gives its own, which the job's CANCELLED reason then says). Idempotent:
 * cancelling again changes nothing, and a job that has already ended is answered with its
 * status and `alreadyFinished: true`.
 *
 * A live job becomes CANCELLING; the machine does the rest, so cleanup (evaluate,
 * release, the CANCELLED status) runs in one place:
 *
 * - AwaitAttempt waiting on the attempt's token: that task is failed with JobCancelled.
 * - STARTING or RUNNING before the token is stored: AwaitAttempt sees CANCELLING when it
 *   stores the token.
 * - PENDING, or RECOVERING in a Wait (a backoff, a wait for capacity or for a launch
 *   slot, which is given back to the launch pace): the execution is stopped there at
 *   once (`stopBetweenSteps`), and the janitor (`onExecutionEnded`, on the execution's
 *   end) releases what is left and ends the job CANCELLED. Between two steps, the next
 *   LaunchAttempt sees CANCELLING and ends the job without launching.
 */
export async function cancelJob(
  jobId: string,
  deps: Pick<UseCaseDeps, 'store' | 'workflow' | 'clock' | 'pace'>,
  reason: string = CANCELLED_BY_USER,
): Promise<CancelJobResult> {
  const { store, workflow, clock } = deps;
  const { job, repeated } = await markCancelling(store, jobId, nowIso(clock), reason);
  if (isTerminal(job.status)) return { status: job.status, alreadyFinished: true };
  if (job.attemptCount > 0) {
    const attempt = await store.getAttempt(jobId, job.attemptCount);
    if (attempt.taskToken !== null && attempt.outcome === null) {
      await failTask(workflow, attempt.taskToken, WorkflowError.JobCancelled, reason);
      return { status: job.status, alreadyFinished: false };
    }
  }
  // A repeated cancel stops nothing: the first one did, and a stop that landed after the
  // decision would cut off the machine's own cleanup.
  if (!repeated && job.executionArn !== null) await workflow.stopBetweenSteps(job.executionArn, reason);
  // A launch slot still ahead will not be used (a CANCELLING job launches nothing): the
  // launches after it may go sooner. A repeated cancel finds it given back already.
  if (!repeated) await deps.pace.release(jobId, clock.now().getTime());
  return { status: job.status, alreadyFinished: false };
}

/**
 * The job CANCELLING (or already ended), and whether an earlier cancel got there first;
 * retried on a fresh read when a step changed its status first.
 */
async function markCancelling(store: JobStore, jobId: string, at: string, reason: string): Promise<{ job: JobRecord; repeated: boolean }> {
  return retryOnConflict(MAX_CANCEL_TRIES, async () => {
    const job = await store.getJob(jobId);
    if (isEnding(job.status)) return { job, repeated: true };
    const cancelling = await store.changeStatus(
      jobId,
      { from: job.status, to: JobStatus.CANCELLING, reason, attempt: job.attemptCount > 0 ? job.attemptCount : null, at },
      // Kept with the job until it ends, for every path that ends it CANCELLED to say why.
      reason === CANCELLED_BY_USER ? undefined : { failureReason: reason },
    );
    return { job: cancelling, repeated: false };
  });
}
