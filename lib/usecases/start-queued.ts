// Jobs whose start Step Functions throttled: submitted (202) and PENDING with no execution,
// in the store's queue. The janitor starts them on its rounds, at the pace StartExecution
// then allows.

import { JobStatus } from '../status.ts';
import { ConcurrentUpdateError, IllegalTransitionError } from '../errors.ts';
import { CANCELLED_BY_USER } from './await-attempt.ts';
import type { JobEnded } from '../ports.ts';
import { errorMessage, nowIso, type UseCaseDeps } from './deps.ts';
import { startController } from './start-controller.ts';

/**
 * How long after its submit a queued job is left to the submit itself: one still
 * starting its execution (or retried by its client) is not started twice.
 */
export const QUEUED_GRACE_SECONDS = 60;

/** The queued jobs read per round, oldest first. */
export const QUEUED_SCAN_LIMIT = 1000;

/** What one round did. */
export interface QueuedStartResult {
  readonly started: readonly string[];
  /** Cancelled while queued: ended CANCELLED, never started. */
  readonly cancelled: readonly JobEnded[];
  /** Throttled again, or started but not recorded: left for the next round. */
  readonly stillQueued: readonly string[];
  /** Refused for good: ended FAILED_CONTROLLER, with why. */
  readonly failed: readonly (JobEnded & { readonly error: string })[];
}

/**
 * Starts queued jobs submitted more than QUEUED_GRACE_SECONDS ago, from the store's
 * queue's oldest QUEUED_SCAN_LIMIT (jobs whose execution is not recorded), oldest first,
 * and stops at the first throttled start (the rest would be throttled too). A start that fails for good ends its job FAILED_CONTROLLER,
 * as a submit's would. A queued job cancelled meanwhile (CANCELLING with no execution to
 * end it) is ended CANCELLED here.
 */
export async function startQueuedJobs(deps: Pick<UseCaseDeps, 'store' | 'workflow' | 'clock' | 'secrets'>): Promise<QueuedStartResult> {
  const now = deps.clock.now().getTime();
  // Every job whose execution is not recorded, oldest first, however many came after it;
  // newest first here, as the steps below take them.
  const waiting = (await deps.store.listQueued({ limit: QUEUED_SCAN_LIMIT }))
    .filter((job) => job.executionArn === null && job.attemptCount === 0 && now - Date.parse(job.createdAt) >= QUEUED_GRACE_SECONDS * 1000)
    .reverse();
  const cancelled: JobEnded[] = [];
  for (const job of waiting.filter((candidate) => candidate.status === JobStatus.CANCELLING)) {
    const ended = await deps.store.changeStatus(job.jobId, { from: JobStatus.CANCELLING, to: JobStatus.CANCELLED, reason: CANCELLED_BY_USER, attempt: null, at: nowIso(deps.clock) }).catch((error: unknown) => {
      // Changed since the list (a late start took it on): its execution ends it.
      if (error instanceof ConcurrentUpdateError || error instanceof IllegalTransitionError) return null;
      throw error;
    });
    if (ended === null) continue;
    await deps.secrets.delete(job.jobId);
    cancelled.push({ jobId: job.jobId, status: JobStatus.CANCELLED, reason: CANCELLED_BY_USER });
  }
  const queued = waiting.filter((job) => job.status === JobStatus.PENDING).reverse();
  const started: string[] = [];
  const failed: (JobEnded & { error: string })[] = [];
  // Started, but not recorded (the store refused the write): the next round's start, by
  // the same execution name, gets the same execution and records it.
  const unrecorded: string[] = [];
  for (const [index, job] of queued.entries()) {
    // Read again: a cancel may have come since the list.
    const current = await deps.store.getJob(job.jobId);
    if (current.status !== JobStatus.PENDING || current.executionArn !== null) continue;
    let ended: JobEnded | undefined;
    try {
      const ok = await startController(job.jobId, deps, async (end) => {
        ended = end;
      });
      if (!ok) return { started, cancelled, stillQueued: [...unrecorded, ...queued.slice(index).map((rest) => rest.jobId)], failed };
      started.push(job.jobId);
    } catch (error) {
      if (ended === undefined) unrecorded.push(job.jobId);
      else failed.push({ ...ended, error: errorMessage(error) });
    }
  }
  return { started, cancelled, stillQueued: unrecorded, failed };
}
