// AwaitAttempt: park the execution on the attempt until a report, an EC2 event or a cancel resumes it.

import { JobStatus } from '../status.ts';
import { WorkflowError, type AwaitPayload } from '../workflow/contract.ts';
import type { UseCaseDeps } from './deps.ts';
import { failTask, resumeTask } from './tasks.ts';

/** The cause AwaitAttempt fails with when the user cancelled the job. */
export const CANCELLED_BY_USER = 'cancelled by the user';

/**
 * Stores the task token on the attempt, then closes the two races with whoever would
 * resume it:
 *
 * - a report or EC2 event that ended the attempt before the token was stored found no
 *   token to resume, so the outcome is sent here;
 * - a cancel that read the attempt before the token was stored could not fail the task,
 *   so a CANCELLING job fails it here.
 *
 * Each side writes first and reads second, so at least one of them acts; both acting is
 * harmless: the second finds the task ended, and that is not an error here.
 */
export async function awaitAttempt(payload: AwaitPayload, deps: Pick<UseCaseDeps, 'store' | 'workflow'>): Promise<void> {
  const { store, workflow } = deps;
  const attempt = await store.setTaskToken(payload.jobId, payload.attempt, payload.taskToken);
  if (attempt.outcome !== null) {
    await resumeTask(workflow, payload.taskToken, { outcome: attempt.outcome.kind });
    return;
  }
  const job = await store.getJob(payload.jobId);
  if (job.status === JobStatus.CANCELLING) {
    await failTask(workflow, payload.taskToken, WorkflowError.JobCancelled, CANCELLED_BY_USER);
  }
}
