// Starting a job's execution: shared by the submit and the janitor's start of queued jobs,
// apart from the submit so the janitor's bundle holds no task parser.

import { TransientError } from '../errors.ts';
import { JobStatus } from '../status.ts';
import type { JobEnded } from '../ports.ts';
import { errorMessage, nowIso, type UseCaseDeps } from './deps.ts';

/**
 * Starts the job's execution and records it; true when it started. A start refused for now
 * (Step Functions throttling StartExecution, or a 5xx: TransientError) leaves the job
 * PENDING with no execution, still in the store's queue of jobs whose execution is not
 * recorded (listQueued), for startQueuedJobs (the janitor) or a retried submit to start: a submit is answered 202 whatever the backlog. Any other failure marks the job
 * FAILED_CONTROLLER with the reason, tells `onJobEnded`, and rethrows.
 *
 * An execution that started but whose record the store refused for now (TransientError: a
 * full disk) runs: the job is submitted, never answered as a failure (a 503 must create
 * nothing), and stays in the queue, where the janitor's start finds the same execution (a
 * start is named by its job) and records it.
 */
export async function startController(
  jobId: string,
  deps: Pick<UseCaseDeps, 'store' | 'workflow' | 'clock' | 'secrets'>,
  onJobEnded: ((ended: JobEnded) => Promise<void>) | undefined,
): Promise<boolean> {
  const { store, workflow, clock } = deps;
  let executionArn: string;
  try {
    executionArn = await workflow.start(jobId, { jobId, attempt: 0, attemptsInExecution: 0 });
  } catch (error) {
    if (error instanceof TransientError) return false;
    const reason = `could not start the controller: ${errorMessage(error)}`;
    await store.changeStatus(
      jobId,
      { from: JobStatus.PENDING, to: JobStatus.FAILED_CONTROLLER, reason, attempt: null, at: nowIso(clock) },
      { failureReason: reason },
    );
    await deps.secrets.delete(jobId);
    await onJobEnded?.({ jobId, status: JobStatus.FAILED_CONTROLLER, reason });
    throw error;
  }
  try {
    await store.setExecution(jobId, executionArn);
  } catch (error) {
    if (!(error instanceof TransientError)) throw error;
  }
  return true;
}
