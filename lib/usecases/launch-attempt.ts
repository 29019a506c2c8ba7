// LaunchAttempt: start the next attempt on the market the counters say, or end it at once.

import { ConcurrentUpdateError } from '../errors.ts';
import { secondsUntil } from '../launch-pace.ts';
import type { AttemptRecord, JobRecord, KeptNodes } from '../model.ts';
import type { JobStore, LaunchRequest } from '../ports.ts';
import { hashSecret, newCallbackSecret } from '../secrets.ts';
import { isHolding, isReleased, whyNotAdopt } from '../standby-rules.ts';
import { assertTransition, JobStatus } from '../status.ts';
import type { WorkflowState } from '../workflow/contract.ts';
import { nodesNotHeardFrom } from './await-attempt.ts';
import { nowIso, type UseCaseDeps } from './deps.ts';
import { bootTimeoutOf, launchFailure, newAttempt, placementHistory, secretsOf } from './launch-request.ts';
import { retryOnConflict } from './retry.ts';
import { standbyOf, WARNING_WORDS } from './standby-attempt.ts';

/** The outcome of an attempt whose launch was cut short by its own Lambda failing (see launchAttempt). */
export const INTERRUPTED_LAUNCH_REASON = 'its launch was interrupted before the instances were recorded; relaunched as a new attempt';

/**
 * Starts attempt `state.attempt + 1`.
 *
 * - When a warning on attempt `state.attempt` started a standby (launch_on_warning), the
 *   relaunch takes it as the next attempt, launching nothing (takeStandby): its nodes have
 *   run setup and go on to run as soon as they ask. A standby of the warned node alone is
 *   joined by the kept nodes it was launched beside. A standby it may not take (another
 *   market, a later task, released, other nodes kept) is let go, and the launch goes on
 *   past its number.
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
 * - When the decision on attempt `state.attempt` kept nodes (`keep`: restart in place, or
 *   the survivors of a partial loss), compute runs the new attempt on them and launches
 *   only the ranks they do not cover (LaunchRequest.keep); only those take from the pace.
 *   Every path that does not launch on them (a standby taken, a cancel, no capacity, a
 *   failed precheck) releases them: a node is never held through a wait; so does a launch
 *   that placed the attempt without some of them (found gone, or launched anew).
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
  given: WorkflowState,
  deps: Pick<UseCaseDeps, 'store' | 'compute' | 'clock' | 'secrets' | 'pace'>,
): Promise<WorkflowState> {
  const { store, compute, clock } = deps;
  const keep = await keptBy(store, given);
  const releaseKept = async (): Promise<void> => {
    if (keep !== null) await compute.release(given.jobId, given.attempt, keep.nodes);
  };
  const taken = await takeStandby(deps, given, keep);
  if ('adopted' in taken) {
    // Kept nodes that joined the standby serve it; any other kept node serves nothing.
    if (!taken.joined) await releaseKept();
    return taken.adopted;
  }
  const { state } = taken;
  const job = await store.getJob(state.jobId);
  const finished = await finishedLaunch(store, state, job);
  if (finished !== null) {
    // Its launch failed or was cancelled after its kept nodes were asked for: let them go.
    if (finished.launched === false) await releaseKept();
    return finished;
  }
  const paced = await paceLaunch(deps, state, job, keep?.nodes.length ?? 0);
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
    await releaseKept();
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
      ...(keep === null ? {} : { keep: { placement: keep.placement, nodes: keep.nodes } }),
    };
    launched = await compute.launch(request);
  } catch (error) {
    const outcome = launchFailure(error);
    if (outcome === null) throw error;
    await store.endAttempt(state.jobId, attempt, outcome, nowIso(clock));
    // A wait for capacity (or a job that cannot launch) never holds nodes: they are paid for.
    await releaseKept();
    return next;
  }
  try {
    await store.setInstances(state.jobId, attempt, launched.placement, launched.instances);
  } catch (error) {
    // Instances nobody can find again would outlive the job: give them back first.
    await compute.release(state.jobId, attempt, launched.instances);
    await releaseKept();
    throw error;
  }
  // A kept node the launch did not run on (found gone, or replaced) serves nothing now.
  const unused = (keep?.nodes ?? []).filter((node) => !launched.instances.some((placed) => placed.instanceId === node.instanceId));
  if (unused.length > 0) await compute.release(given.jobId, given.attempt, unused);
  return { ...next, launched: true, bootTimeoutSeconds: bootTimeoutOf(claim.job) };
}

/**
 * The nodes the decision on attempt `state.attempt` keeps for this launch (its `keep`), or
 * null: none kept, or no attempt before this one.
 */
async function keptBy(store: JobStore, state: WorkflowState): Promise<KeptNodes | null> {
  if (state.attempt < 1) return null;
  return (await store.getAttempt(state.jobId, state.attempt)).decision?.keep ?? null;
}

/**
 * The standby a warning on attempt `state.attempt` started, if any, made the next attempt:
 *
 * - one that whyNotAdopt allows is adopted (the job STARTING, as for any launch; its
 *   attemptCount moved to the standby in the same write as its mark), and the answer is
 *   the state for it, launched, with what is left of its boot_timeout; a standby of the
 *   warned node alone is joined by the kept nodes (`keep`) in that same write, their
 *   instance index moved to it, and then on compute (their tags), and `joined` says so;
 * - one it does not (another market, a later task), or one the job is cancelled under, is
 *   released and retired: the launch goes on as attempt `standby + 1`, from a state that
 *   counts the standby's number as used;
 * - one released earlier (it found no capacity) is retired the same way.
 *
 * A second run of this step finds its first run's work done: an adopted standby is
 * answered as such, a retired one is stepped over. Without a standby, the state as given.
 */
async function takeStandby(
  deps: Pick<UseCaseDeps, 'store' | 'compute' | 'clock'>,
  state: WorkflowState,
  keep: KeptNodes | null,
): Promise<{ adopted: WorkflowState; joined: boolean } | { state: WorkflowState }> {
  const { store, compute, clock } = deps;
  const standby = await standbyOf(store, state.jobId, state.attempt);
  if (standby === null) return { state };
  const past: WorkflowState = { jobId: state.jobId, attempt: standby.attempt, attemptsInExecution: state.attemptsInExecution + 1 };
  let job = await store.getJob(state.jobId);
  if (standby.standby?.adoptedAt !== undefined) return { adopted: adoptedState(job, await joined(compute, standby), past, clock.now()), joined: standby.standby.beside !== undefined };
  if (isHolding(standby)) {
    const why = job.status === JobStatus.CANCELLING ? 'the job was cancelled' : whyNotAdopt(job, standby, keep);
    if (why === null) {
      const claim = await claimLaunch(store, job, standby.attempt, nowIso(clock), `taking standby attempt ${standby.attempt} (${standby.market}), started on the ${WARNING_WORDS[standby.standby?.on ?? 'interruption']} of attempt ${state.attempt}`);
      if (!claim.cancelled) {
        const at = nowIso(clock);
        // The nodes it was launched beside (whyNotAdopt: the ones kept) serve it from now.
        const kept = standby.standby?.beside === undefined ? [] : (keep?.nodes ?? []).map((node) => ({ ...node, reusedFrom: state.attempt, runningAt: at }));
        const adopted = await store.adoptStandby(state.jobId, standby.attempt, at, kept);
        return { adopted: adoptedState(claim.job, await joined(compute, adopted), past, clock.now()), joined: kept.length > 0 };
      }
      job = claim.job;
    }
    const reason = `not used: ${why ?? 'the job was cancelled'}; attempt ${standby.attempt + 1} launches instead`;
    const { attempt } = await store.releaseStandby(state.jobId, standby.attempt, nowIso(clock), reason);
    await compute.release(state.jobId, attempt.attempt, attempt.instances);
  }
  if (isReleased(await store.getAttempt(state.jobId, standby.attempt)) && job.attemptCount === state.attempt) {
    await store.retireStandby(state.jobId, standby.attempt);
  }
  return { state: past };
}

/**
 * Moves the kept nodes of an adopted standby of the warned node alone to it on compute
 * (their tags: Compute.join), again on a retried step; nothing for any other standby.
 * Returns the standby.
 */
async function joined(compute: UseCaseDeps['compute'], standby: AttemptRecord): Promise<AttemptRecord> {
  if (standby.standby?.beside !== undefined && standby.placement !== null && standby.instances.some((node) => node.reusedFrom !== undefined)) {
    await compute.join(standby.jobId, standby.attempt, standby.placement, standby.instances);
  }
  return standby;
}

/**
 * The state for an adopted standby: launched, with the boot_timeout left since its launch
 * (at least 1 s) while a node has not been heard from; AwaitBoot resumes at once otherwise.
 * Nodes that joined it start on this attempt now, so it gets the whole boot_timeout.
 */
function adoptedState(job: JobRecord, standby: AttemptRecord, past: WorkflowState, now: Date): WorkflowState {
  const elapsed = Math.floor((now.getTime() - Date.parse(standby.startedAt)) / 1000);
  const whole = nodesNotHeardFrom(standby, job.spec.numNodes).length === 0 || standby.instances.some((node) => node.reusedFrom !== undefined);
  return { ...past, launched: true, bootTimeoutSeconds: whole ? bootTimeoutOf(job) : Math.max(1, bootTimeoutOf(job) - elapsed) };
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
  kept: number,
): Promise<WorkflowState | null> {
  if (state.launchReserved === true || job.status === JobStatus.CANCELLING || job.status === JobStatus.STARTING) return null;
  // Kept nodes launch nothing: only the ones launched anew take from the pace.
  const launching = job.spec.numNodes - kept;
  if (launching <= 0) return null;
  const now = deps.clock.now().getTime();
  const waitSeconds = secondsUntil(await deps.pace.reserve(launching, now, job.jobId), now);
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
  reason?: string,
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
      reason: reason ?? `launching attempt ${attempt} (${job.counters.market})`,
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
