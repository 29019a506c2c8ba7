// AwaitBoot and AwaitAttempt: park the execution on the attempt until it is up (AwaitBoot),
// then until a report, an EC2 event or a cancel ends it (AwaitAttempt).

import type { AttemptRecord } from '../model.ts';
import { JobStatus } from '../status.ts';
import { StateName, WorkflowError, type AwaitPayload } from '../workflow/contract.ts';
import type { UseCaseDeps } from './deps.ts';
import { askForStandby } from './standby-attempt.ts';
import { failTask, resumeTask } from './tasks.ts';

/** The cause AwaitBoot or AwaitAttempt fails with when the user cancelled the job. */
export const CANCELLED_BY_USER = 'cancelled by the user';

/**
 * Stores the task token on the attempt, with the state it belongs to, then closes the
 * races with whoever would resume it:
 *
 * - a report or EC2 event that ended the attempt before the token was stored found no
 *   token to resume, so the outcome is sent here;
 * - a cancel that read the attempt before the token was stored could not fail the task,
 *   so a CANCELLING job fails it here;
 * - (AwaitBoot) the last node's first heartbeat, stored before the token, found none to
 *   resume, so `booted` is sent here;
 * - (AwaitAttempt) a warning that asks for a standby (launch_on_warning) and came while no
 *   AwaitAttempt token was stored (during AwaitBoot, or in the moment between two waits)
 *   found none to fail, so StandbyWanted is sent here; so is one whose standby the machine
 *   never launched. Once the standby exists, nothing more is asked.
 *
 * Each side writes first and reads second, so at least one of them acts; both acting is
 * harmless: the second finds the task ended, and that is not an error here.
 */
export async function awaitAttempt(payload: AwaitPayload, deps: Pick<UseCaseDeps, 'store' | 'workflow'>): Promise<void> {
  const { store, workflow } = deps;
  const state = payload.state ?? StateName.AwaitAttempt;
  const attempt = await store.setTaskToken(payload.jobId, payload.attempt, payload.taskToken, state);
  if (attempt.outcome !== null) {
    await resumeTask(workflow, payload.taskToken, { outcome: attempt.outcome.kind });
    return;
  }
  const job = await store.getJob(payload.jobId);
  if (job.status === JobStatus.CANCELLING) {
    await failTask(workflow, payload.taskToken, WorkflowError.JobCancelled, CANCELLED_BY_USER);
    return;
  }
  if (state === StateName.AwaitBoot && nodesNotHeardFrom(attempt, job.spec.numNodes).length === 0) {
    await resumeTask(workflow, payload.taskToken, { booted: true });
  }
  if (state === StateName.AwaitAttempt) await askForStandby(deps, job, attempt);
}

/** The ranks of the attempt's nodes no heartbeat has come from yet, ascending. */
export function nodesNotHeardFrom(attempt: AttemptRecord, numNodes: number): number[] {
  const heard = new Set(attempt.nodesHeardFrom);
  return Array.from({ length: numNodes }, (_, rank) => rank).filter((rank) => !heard.has(rank));
}
