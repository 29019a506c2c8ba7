// LaunchAttempt: start the next attempt on the market the counters say, or end it at once.

import { ConcurrentUpdateError, NoCapacityError, PrecheckError } from '../errors.ts';
import { secondsUntil } from '../launch-pace.ts';
import type { AttemptRecord, JobRecord } from '../model.ts';
import type { AttemptOutcome } from '../policy/types.ts';
import type { JobStore, LaunchRequest } from '../ports.ts';
import { hashSecret, newCallbackSecret } from '../secrets.ts';
import { DEFAULT_BOOT_TIMEOUT_SECONDS } from '../spec/bounds.ts';
import { assertTransition, JobStatus } from '../status.ts';
import type { WorkflowState } from '../workflow/contract.ts';
import { nowIso, type UseCaseDeps } from './deps.ts';
import { retryOnConflict } from './retry.ts';

/** The outcome of an attempt whose launch was cut short by its own Lambda failing (see launchAttempt). */
export const INTERRUPTED_LAUNCH_REASON = 'its launch was interrupted before the instances were recorded; relaunched as a new attempt';

/**
 * Starts attempt `state.attempt + 1`.
 *
 * - First the launch takes its nodes from the shared launch pace (paceLaunch): when the
 *   pace gives it a later slot, nothing else happens and the machine waits for the slot
 *   in WaitForLaunchPace, then runs this step again, which launches at once.
 * - A job being cancelled gets the attempt written as CANCELLED with nothing launched, so
 *   the policy ends the job through the usual path (evaluate, release, JobFailed).
 * - Otherwise the job goes PENDING|RECOVERING -> STARTING (conditional), the attempt is
 *   written with the hash of a fresh callback secret, and compute launches it on
 *   `job.counters.market`, told where earlier attempts ran (newest first) so a strategy
 *   can move on. No capacity or a failed precheck end the attempt as LAUNCH_FAILED;
 *   the policy turns that into FAILED_NO_RESOURCE or FAILED_PRECHECKS.
 *
 * Safe to run again (the machine retries this Lambda when it dies, times out or is
 * throttled):
 *
 * - after a run that finished (its attempt placed, or ended LAUNCH_FAILED or CANCELLED,
 *   and not yet decided), the same answer is returned and nothing is launched again;
 * - after a run that failed part way, a job already STARTING is not moved again, and an
 *   attempt the earlier run wrote but never placed is retired (its instances released,
 *   by tag too, and ended LOST) and the launch goes on as the next attempt. Not the same attempt: only the hash of its callback
 * secret is stored, so its agent's secret cannot be handed out again, and the port has no
 * write that replaces the hash; a per-attempt EC2 ClientToken also stays single-use.
 *
 * Any other error propagates to the machine's catch-all. Returns the state for the new
 * attempt, without the previous attempt's decision; a launched one carries the job's
 * boot_timeout for AwaitBoot.
 */
export async function launchAttempt(
  state: WorkflowState,
  deps: Pick<UseCaseDeps, 'store' | 'compute' | 'clock' | 'secrets' | 'pace'>,
): Promise<WorkflowState> {
  const { store, compute, clock } = deps;
  const job = await store.getJob(state.jobId);
  const finished = await finishedLaunch(store, state, job);
  if (finished !== null) return finished;
  const paced = await paceLaunch(deps, state, job);
  if (paced !== null) return paced;
  const claim = await claimLaunch(store, job, state.attempt + 1, nowIso(clock));
  const attempt =
    claim.job.attemptCount > state.attempt
      ? (await retireInterruptedLaunch(deps, state.jobId, state.attempt, claim.job.attemptCount)) + 1
      : state.attempt + 1;
  const next: WorkflowState = {
    jobId: state.jobId,
    attempt,
    attemptsInExecution: state.attemptsInExecution + (attempt - state.attempt),
    launched: false,
  };
  const secret = newCallbackSecret();
  await store.putAttempt(newAttempt(claim.job, attempt, hashSecret(secret), nowIso(clock)));

  if (claim.cancelled) {
    await store.endAttempt(state.jobId, attempt, { kind: 'CANCELLED' }, nowIso(clock));
    return next;
  }

  let launched;
  try {
    const request: LaunchRequest = {
      jobId: state.jobId,
      attempt,
      spec: claim.job.spec,
      market: claim.job.counters.market,
      history: await placementHistory(store, state.jobId, attempt),
      callbackSecret: secret,
      ...(await secretsOf(deps, claim.job)),
    };
    launched = await compute.launch(request);
  } catch (error) {
    const outcome = launchFailure(error);
    if (outcome === null) throw error;
    await store.endAttempt(state.jobId, attempt, outcome, nowIso(clock));
    return next;
  }
  try {
    await store.setInstances(state.jobId, attempt, launched.placement, launched.instances);
  } catch (error) {
    // Instances nobody can find again would outlive the job: give them back first.
    await compute.release(state.jobId, attempt, launched.instances);
    throw error;
  }
  return { ...next, launched: true, bootTimeoutSeconds: bootTimeoutOf(claim.job) };
}

/**
 * Takes the launch's instances from the shared pace, unless this launch already holds a
 * slot (it waited for it), will launch nothing (the job is being cancelled), or was
 * claimed by an earlier run of this step (STARTING: that run took the slot). Returns the
 * state that sends the machine to WaitForLaunchPace when the slot is later than now; null
 * to launch at once. Nothing is written on the job: it stays as it was (PENDING or
 * RECOVERING) while it waits.
 */
async function paceLaunch(
  deps: Pick<UseCaseDeps, 'store' | 'clock' | 'pace'>,
  state: WorkflowState,
  job: JobRecord,
): Promise<WorkflowState | null> {
  if (state.launchReserved === true || job.status === JobStatus.CANCELLING || job.status === JobStatus.STARTING) return null;
  const now = deps.clock.now().getTime();
  const waitSeconds = secondsUntil(await deps.pace.reserve(job.spec.numNodes, now, job.jobId), now);
  if (waitSeconds === 0) return null;
  // A cancel that landed while this step ran found no Wait to stop: it is seen now, and
  // the launch goes on to end the attempt CANCELLED instead of waiting first.
  if ((await deps.store.getJob(job.jobId)).status === JobStatus.CANCELLING) return null;
  return {
    jobId: state.jobId,
    attempt: state.attempt,
    attemptsInExecution: state.attemptsInExecution,
    launchWaitSeconds: waitSeconds,
    launchReserved: true,
  };
}

/** The job's secrets, for the launch to hand its nodes; a PrecheckError when some are no longer stored. */
async function secretsOf(deps: Pick<UseCaseDeps, 'secrets'>, job: JobRecord): Promise<Pick<LaunchRequest, 'secrets'>> {
  const names = job.spec.secretNames ?? [];
  if (names.length === 0) return {};
  const values = await deps.secrets.get(job.jobId);
  const missing = names.filter((name) => values[name] === undefined);
  if (missing.length > 0) throw new PrecheckError(`secrets ${missing.join(', ')} of job ${job.jobId} are no longer stored; submit the job again`);
  return { secrets: Object.fromEntries(names.map((name) => [name, values[name] as string])) };
}

function bootTimeoutOf(job: JobRecord): number {
  return job.spec.resources.jobRecovery.bootTimeoutSeconds ?? DEFAULT_BOOT_TIMEOUT_SECONDS;
}

/**
 * The answer an earlier run of this same step gave, when it finished: attempt
 * `state.attempt + 1` exists, is undecided, and was placed (launched) or ended without
 * instances (LAUNCH_FAILED, CANCELLED). null when there is no such attempt, or it was
 * interrupted before either (then the launch goes on, see retireInterruptedLaunch).
 */
async function finishedLaunch(store: JobStore, state: WorkflowState, job: JobRecord): Promise<WorkflowState | null> {
  if (job.attemptCount !== state.attempt + 1) return null;
  const attempt = await store.getAttempt(state.jobId, job.attemptCount);
  if (attempt.decision !== null) return null;
  const next = { jobId: state.jobId, attempt: attempt.attempt, attemptsInExecution: state.attemptsInExecution + 1 };
  if (attempt.placement !== null) return { ...next, launched: true, bootTimeoutSeconds: bootTimeoutOf(job) };
  const kind = attempt.outcome?.kind;
  if (kind === 'LAUNCH_FAILED' || kind === 'CANCELLED') return { ...next, launched: false };
  return null;
}

/**
 * Moves the job to STARTING, or finds it being cancelled, starting from `read` (the job as
 * launchAttempt read it). A cancel can land between the read and the write, so a lost
 * race is retried once with a fresh read. A job already
 * STARTING with attempt `attempt - 1` or later was claimed by an earlier run of this
 * launch: the machine only launches after a decision moved the job out of STARTING.
 */
async function claimLaunch(
  store: JobStore,
  read: JobRecord,
  attempt: number,
  at: string,
): Promise<{ job: JobRecord; cancelled: boolean }> {
  const { jobId } = read;
  return retryOnConflict(2, async (tryNumber) => {
    const job = tryNumber === 1 ? read : await store.getJob(jobId);
    if (job.status === JobStatus.CANCELLING) return { job, cancelled: true };
    if (job.attemptCount < attempt - 1 || (job.attemptCount > attempt - 1 && job.status !== JobStatus.STARTING)) {
      throw new ConcurrentUpdateError(
        `cannot launch attempt ${attempt} of ${jobId}: the job's latest attempt is ${job.attemptCount}, expected ${attempt - 1}`,
      );
    }
    if (job.status === JobStatus.STARTING) return { job, cancelled: false };
    assertTransition(job.status, JobStatus.STARTING);
    const started = await store.changeStatus(jobId, {
      from: job.status,
      to: JobStatus.STARTING,
      reason: `launching attempt ${attempt} (${job.counters.market})`,
      attempt,
      at,
    });
    return { job: started, cancelled: false };
  });
}

/**
 * Retires attempt `latest`, written by an earlier run of this launch that failed before it
 * recorded instances: releases whatever compute started for it, ends it LOST if still
 * open, and returns its number. An attempt that was placed, decided, or ended otherwise is
 * not an interrupted launch: ConcurrentUpdateError, as before.
 */
async function retireInterruptedLaunch(
  deps: Pick<UseCaseDeps, 'store' | 'compute' | 'clock'>,
  jobId: string,
  expected: number,
  latest: number,
): Promise<number> {
  const { store, compute, clock } = deps;
  const found = await store.getAttempt(jobId, latest);
  const interrupted =
    found.placement === null &&
    found.decision === null &&
    (found.outcome === null || (found.outcome.kind === 'LOST' && found.outcome.reason === INTERRUPTED_LAUNCH_REASON));
  if (!interrupted) {
    throw new ConcurrentUpdateError(
      `cannot launch attempt ${expected + 1} of ${jobId}: the job's latest attempt is ${latest}, expected ${expected}, and it was placed, ended or decided`,
    );
  }
  await compute.release(jobId, latest, found.instances);
  if (found.outcome === null) {
    await store.endAttempt(jobId, latest, { kind: 'LOST', reason: INTERRUPTED_LAUNCH_REASON }, nowIso(clock));
  }
  return latest;
}

function newAttempt(job: JobRecord, attempt: number, secretHash: string, at: string): AttemptRecord {
  const task = job.pipeline === null || job.pipeline === undefined ? {} : { task: job.pipeline.current };
  return {
    jobId: job.jobId,
    attempt,
    market: job.counters.market,
    placement: null,
    instances: [],
    taskToken: null,
    tokenState: null,
    secretHash,
    reports: [],
    outcome: null,
    decision: null,
    startedAt: at,
    lastHeartbeatAt: null,
    nodesHeardFrom: [],
    interruptionNoticedAt: null,
    endedAt: null,
    ...task,
  };
}

/** Where earlier attempts ran and how each ended, newest first; attempts never placed are left out. */
async function placementHistory(store: JobStore, jobId: string, attempt: number): Promise<LaunchRequest['history']> {
  const attempts = await store.listAttempts(jobId);
  return attempts
    .filter((earlier) => earlier.attempt < attempt)
    .sort((a, b) => b.attempt - a.attempt)
    .flatMap((earlier) =>
      earlier.placement === null ? [] : [{ placement: earlier.placement, outcome: earlier.outcome?.kind ?? null }],
    );
}

/** The outcome a launch error ends the attempt with; null for an error that is relaunch's own fault. */
function launchFailure(error: unknown): AttemptOutcome | null {
  if (error instanceof NoCapacityError) return { kind: 'LAUNCH_FAILED', cause: 'NO_RESOURCE', reason: error.message };
  if (error instanceof PrecheckError) return { kind: 'LAUNCH_FAILED', cause: 'PRECHECKS', reason: error.message };
  return null;
}
