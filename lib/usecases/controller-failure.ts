// RecordControllerFailure: relaunch's own fault ends the job, and still gives back its instances.

import type { JobStore } from '../ports.ts';
import { isTerminal, JobStatus } from '../status.ts';
import type { AwaitError, WorkflowState } from '../workflow/contract.ts';
import { nowIso, type UseCaseDeps } from './deps.ts';
import { retryOnConflict } from './retry.ts';
import { releaseStandbyOf } from './standby-attempt.ts';

/** The machine's state when a Task failed: the catch-all puts the error at `controllerError`. */
export interface ControllerFailureState extends WorkflowState {
  readonly controllerError?: AwaitError;
}

/** Long Lambda causes (stack traces) are cut here: the reason is for a person. */
const MAX_REASON_CHARS = 500;

/**
 * Cleans up after a Task failed with an error no Catch expected:
 *
 * 1. the job's latest attempt (which may be newer than `state.attempt` when the launch
 *    itself failed) has its instances released first, so none outlives the job, and so
 *    have the nodes the attempt before it kept for it (a launch that failed before it ran
 *    on them), and it is ended LOST if still open, so late reports and events find it ended;
 *    A standby a warning started for it (launch_on_warning) is released with it;
 * 2. a live job becomes FAILED_CONTROLLER with the reason (one retry on a fresh read if
 *    another writer changed it meanwhile); a job already terminal stays as it is;
 * 3. the job's secrets are deleted.
 *
 * Returns the state with a FAIL decision whose reason names the error.
 */
export async function recordControllerFailure(
  state: ControllerFailureState,
  deps: Pick<UseCaseDeps, 'store' | 'compute' | 'clock' | 'secrets'>,
): Promise<ControllerFailureState> {
  const { store, compute, clock } = deps;
  const reason = truncate(`relaunch's controller failed: ${describeError(state.controllerError)}`);
  const job = await store.getJob(state.jobId);
  if (job.attemptCount > 0) {
    const attempt = await store.getAttempt(state.jobId, job.attemptCount);
    // Always: a launch that never recorded its instances may still have started some, and
    // compute finds an attempt's instances by their tags as well as by the ids given.
    await compute.release(state.jobId, attempt.attempt, attempt.instances);
    await releaseKeptBefore(deps, state.jobId, attempt.attempt);
    if (attempt.outcome === null) {
      await store.endAttempt(state.jobId, attempt.attempt, { kind: 'LOST', reason }, nowIso(clock));
    }
    await releaseStandbyOf(deps, state.jobId, attempt.attempt, `not needed: ${reason}`);
  }
  const status = await markControllerFailed(store, state.jobId, reason, nowIso(clock));
  await deps.secrets.delete(state.jobId);
  return {
    ...state,
    decision: { action: 'FAIL', status, reason, delaySeconds: 0, continueAsNew: false },
  };
}

/**
 * Releases the nodes the decision on the attempt before `latest` kept for the relaunch, in
 * case the launch that was to run on them failed before it did: held, they would outlive
 * the job. Idempotent: nodes already released or moved on are gone or released anyway.
 */
async function releaseKeptBefore(deps: Pick<UseCaseDeps, 'store' | 'compute'>, jobId: string, latest: number): Promise<void> {
  if (latest < 2) return;
  const keep = (await deps.store.getAttempt(jobId, latest - 1)).decision?.keep;
  if (keep !== undefined) await deps.compute.release(jobId, latest - 1, keep.nodes);
}

/** FAILED_CONTROLLER from whatever live status the job is in; returns the job's final status. */
async function markControllerFailed(store: JobStore, jobId: string, reason: string, at: string): Promise<JobStatus> {
  return retryOnConflict(2, async () => {
    const job = await store.getJob(jobId);
    if (isTerminal(job.status)) return job.status;
    const failed = await store.changeStatus(
      jobId,
      { from: job.status, to: JobStatus.FAILED_CONTROLLER, reason, attempt: job.attemptCount > 0 ? job.attemptCount : null, at },
      { failureReason: reason },
    );
    return failed.status;
  });
}

/**
 * `Error: message`. A Lambda's Cause is JSON with `errorMessage` (and a stack trace
 * nobody wants in a status line); any other Cause is used as it is.
 */
function describeError(error: AwaitError | undefined): string {
  if (error === undefined) return 'no error was passed to the catch-all';
  const message = error.Cause === undefined || error.Cause === '' ? '' : `: ${lambdaMessage(error.Cause)}`;
  return `${error.Error}${message}`;
}

function truncate(text: string): string {
  return text.length > MAX_REASON_CHARS ? `${text.slice(0, MAX_REASON_CHARS - 1)}…` : text;
}

function lambdaMessage(cause: string): string {
  try {
    const parsed: unknown = JSON.parse(cause);
    if (typeof parsed === 'object' && parsed !== null && 'errorMessage' in parsed && typeof parsed.errorMessage === 'string') {
      return parsed.errorMessage;
    }
  } catch {
    // Not JSON: a plain message, used as it is.
  }
  return cause;
}
