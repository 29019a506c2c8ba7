// launch_on_warning: the standby attempt a warning asks for, from its launch (LaunchStandby)
// to the relaunch that takes it, or to its release when the job does not need it.

import { ConcurrentUpdateError, StaleAttemptError } from '../errors.ts';
import { secondsUntil } from '../launch-pace.ts';
import type { AttemptRecord, JobRecord, WarningKind } from '../model.ts';
import type { JobStore, LaunchRequest } from '../ports.ts';
import { hashSecret, newCallbackSecret } from '../secrets.ts';
import { standbyBeside } from '../reuse-rules.ts';
import { isHolding, isReleased, recoveriesLeft, runSignal, standbyAskedBy, type RunAnswer } from '../standby-rules.ts';
import { JobStatus } from '../status.ts';
import { StateName, WorkflowError, type LaunchStandbyInput, type StandbyResult } from '../workflow/contract.ts';
import { markRunning, authorizeAgent, type AgentCredentials } from './agent.ts';
import { nowIso, type UseCaseDeps } from './deps.ts';
import { launchFailure, newAttempt, placementHistory, secretsOf } from './launch-request.ts';
import { failTask } from './tasks.ts';

/** How a warning is named in reasons. */
export const WARNING_WORDS: Readonly<Record<WarningKind, string>> = {
  interruption: 'spot interruption warning',
  rebalance: 'rebalance recommendation',
};

/**
 * The standby of live attempt `live`: attempt `live + 1` when it was started as one for
 * `live`, else null (none was, or that number is an ordinary attempt).
 */
export async function standbyOf(store: JobStore, jobId: string, live: number): Promise<AttemptRecord | null> {
  try {
    const found = await store.getAttempt(jobId, live + 1);
    return found.standby?.for === live ? found : null;
  } catch (error) {
    if (error instanceof StaleAttemptError) return null;
    throw error;
  }
}

/**
 * Asks the execution for a standby when a warning on `attempt` (the job's live attempt, as
 * just noted or read) asks for one and none was started yet: AwaitAttempt's task is failed
 * with StandbyWanted, whose Catch goes to LaunchStandby. A token of AwaitBoot is left alone:
 * AwaitAttempt asks when it stores its own. Returns whether it asked; false when the task
 * had ended (whoever resumed it first wins; AwaitAttempt asks again when it waits next).
 */
export async function askForStandby(deps: Pick<UseCaseDeps, 'store' | 'workflow'>, job: JobRecord, attempt: AttemptRecord): Promise<boolean> {
  const asked = standbyAskedBy(job.spec.resources.jobRecovery, attempt, job.counters);
  if (asked === null || attempt.taskToken === null || attempt.tokenState !== StateName.AwaitAttempt) return false;
  if ((await standbyOf(deps.store, job.jobId, attempt.attempt)) !== null) return false;
  const cause = `the ${WARNING_WORDS[asked]} on attempt ${attempt.attempt} of job ${job.jobId} asks for attempt ${attempt.attempt + 1} as its standby (launch_on_warning)`;
  return failTask(deps.workflow, attempt.taskToken, WorkflowError.StandbyWanted, cause);
}

/**
 * LaunchStandby: launches attempt `standbyFor + 1` as the standby of the live attempt
 * `standbyFor`, which a warning asked for (standbyAskedBy), with LaunchAttempt's own
 * machinery: the job's market and candidates, the strategy's placement (the warned attempt
 * counts as preempted, so EAGER_NEXT_REGION moves away from its zone and type), and the
 * shared launch pace. Its nodes run setup and hold before run (runSignal). With reuse on
 * and a warning that named one node of several (standbyBeside), the standby is that
 * node's replacement alone, launched beside the attempt's other nodes in their placement,
 * which join it if the relaunch keeps them (LaunchAttempt's takeStandby).
 *
 * - Nothing is launched when the warned attempt has ended or is no longer the live one,
 *   no warning asks for a standby, max_recoveries leaves no relaunch after a preemption
 *   (the policy could never take it), or the job is being cancelled.
 * - The standby is written first (so its agents can prove themselves), then launched. A
 *   launch the pace cannot take now, or that finds no capacity or fails a precheck, leaves
 *   the standby released with why ("not launched: ..."), charged to nothing: the next
 *   attempt then launches as usual once the warned one has been decided. Its slot in the
 *   pace is given back.
 * - Safe to run again: a standby already launched is answered as launched; one an earlier
 *   run wrote but never placed is released (its instances, by tag too) as not launched.
 *
 * Any other error propagates to the machine's catch-all, as LaunchAttempt's do.
 */
export async function launchStandby(
  input: LaunchStandbyInput,
  deps: Pick<UseCaseDeps, 'store' | 'compute' | 'clock' | 'secrets' | 'pace'>,
): Promise<StandbyResult> {
  const { store, compute, clock } = deps;
  const { jobId, standbyFor: live } = input;
  const number = live + 1;
  const notLaunched = (reason: string): StandbyResult => ({ attempt: null, launched: false, reason });
  const job = await store.getJob(jobId);
  const earlier = await standbyOf(store, jobId, live);
  if (earlier !== null) return finishedStandby(deps, earlier);
  if (job.attemptCount !== live) return notLaunched(`attempt ${live} is no longer the live one (attempt ${job.attemptCount} is)`);
  if (job.status !== JobStatus.STARTING && job.status !== JobStatus.RUNNING) return notLaunched(`the job is ${job.status}`);
  const warned = await store.getAttempt(jobId, live);
  const asked = standbyAskedBy(job.spec.resources.jobRecovery, warned, job.counters);
  if (asked === null) {
    if (warned.outcome !== null) return notLaunched(`attempt ${live} has ended (${warned.outcome.kind})`);
    if (recoveriesLeft(job.spec.resources.jobRecovery, job.counters) === 0) {
      return notLaunched(`max_recoveries (${String(job.spec.resources.jobRecovery.maxRecoveries)}) is used up: a preemption of attempt ${live} ends the job, so no standby could be taken`);
    }
    return notLaunched(`no warning on attempt ${live} asks for a standby`);
  }

  // With reuse on, the warned node's replacement alone, beside the attempt's other nodes.
  const beside = standbyBeside(job.spec.resources.jobRecovery, warned, asked, job.counters.market, job.spec.numNodes);
  const secret = newCallbackSecret();
  const mark = { for: live, on: asked, ...(beside === null ? {} : { beside: beside.nodes }) };
  const standby: AttemptRecord = { ...newAttempt(job, number, hashSecret(secret), nowIso(clock)), standby: mark };
  try {
    await store.putStandby(standby);
  } catch (error) {
    if (!(error instanceof ConcurrentUpdateError)) throw error;
    const raced = await standbyOf(store, jobId, live);
    if (raced === null) return notLaunched(`attempt ${live} is no longer the live one`);
    return finishedStandby(deps, raced);
  }

  const now = clock.now().getTime();
  const seconds = secondsUntil(await deps.pace.reserve(job.spec.numNodes - (beside?.nodes.length ?? 0), now, jobId), now);
  if (seconds > 0) {
    await deps.pace.release(jobId, now);
    return released(deps, standby, `not launched: the shared launch pace has no slot for ${seconds} s; the next attempt launches once attempt ${live} is decided`);
  }
  let launched;
  try {
    const request: LaunchRequest = {
      jobId,
      attempt: number,
      spec: job.spec,
      market: job.counters.market,
      // The warned attempt's placement counts as preempted: the strategy moves away from it.
      history: [
        ...(warned.placement === null ? [] : [{ placement: warned.placement, outcome: 'PREEMPTED' as const }]),
        ...(await placementHistory(store, jobId, live)),
      ],
      callbackSecret: secret,
      ...(await secretsOf(deps, job)),
      ...(beside === null ? {} : { beside }),
    };
    launched = await compute.launch(request);
  } catch (error) {
    const outcome = launchFailure(error);
    if (outcome === null) throw error;
    return released(deps, standby, `not launched: ${outcome.cause === 'NO_RESOURCE' ? 'no capacity' : 'prechecks failed'}: ${outcome.reason}`);
  }
  try {
    await store.setInstances(jobId, number, launched.placement, launched.instances);
  } catch (error) {
    await compute.release(jobId, number, launched.instances);
    throw error;
  }
  const { placement } = launched;
  const where = `${placement.market ?? job.counters.market}, ${placement.instanceType} in ${placement.zone ?? placement.region}`;
  const of = beside === null ? `attempt ${live}` : `${launched.instances.map((node) => `node ${node.nodeRank}`).join(', ')} of attempt ${live}, beside its other nodes`;
  return { attempt: number, launched: true, reason: `attempt ${number} launched (${where}) as the standby of ${of}, on its ${WARNING_WORDS[asked]}` };
}

/** The answer for a standby an earlier run of LaunchStandby (or a racing one) wrote. */
async function finishedStandby(deps: Pick<UseCaseDeps, 'store' | 'compute' | 'clock'>, standby: AttemptRecord): Promise<StandbyResult> {
  const live = standby.standby?.for ?? standby.attempt - 1;
  if (isReleased(standby)) return { attempt: null, launched: false, reason: standby.standby?.releaseReason ?? 'released' };
  if (standby.placement !== null) {
    return { attempt: standby.attempt, launched: true, reason: `attempt ${standby.attempt} was launched as the standby of attempt ${live}` };
  }
  return released(deps, standby, 'not launched: its launch was interrupted before its instances were recorded');
}

/** Releases a standby that will not run (its instances, by tag too) and says so. */
async function released(deps: Pick<UseCaseDeps, 'store' | 'compute' | 'clock'>, standby: AttemptRecord, reason: string): Promise<StandbyResult> {
  const { attempt } = await deps.store.releaseStandby(standby.jobId, standby.attempt, nowIso(deps.clock), reason);
  await deps.compute.release(standby.jobId, standby.attempt, attempt.instances);
  return { attempt: null, launched: false, reason: attempt.standby?.releaseReason ?? reason };
}

/**
 * Lets the standby of live attempt `live` go, if it has one that was not adopted: marked
 * released for `reason` (unless it was already) and its instances terminated (again, if
 * released before: a release may have been cut short). For every path that ends a job or
 * relaunches it without the standby. Returns the standby as it now is, or null.
 */
export async function releaseStandbyOf(
  deps: Pick<UseCaseDeps, 'store' | 'compute' | 'clock'>,
  jobId: string,
  live: number,
  reason: string,
): Promise<AttemptRecord | null> {
  const standby = await standbyOf(deps.store, jobId, live);
  if (standby === null || standby.standby?.adoptedAt !== undefined) return null;
  const { attempt } = isHolding(standby) ? await deps.store.releaseStandby(jobId, standby.attempt, nowIso(deps.clock), reason) : { attempt: standby };
  await deps.compute.release(jobId, attempt.attempt, attempt.instances);
  return attempt;
}

/** `POST /jobs/{id}/attempts/{n}/hold`: a holding node asks whether to go on to run. */
export type HoldInput = AgentCredentials;

/**
 * What a node of the attempt is told (runSignal): hold, go or stop, with why. A `go` moves
 * the job STARTING -> RUNNING and notes when run started (the first go), so status can show
 * the gap. Wrong secret: UnauthorizedError, as for every agent route.
 */
export async function holdOrRun(input: HoldInput, deps: Pick<UseCaseDeps, 'store' | 'clock'>): Promise<RunAnswer> {
  const { store, clock } = deps;
  const { job, attempt } = await authorizeAgent(store, input);
  const answer = runSignal(job, attempt);
  if (answer.run === 'go') {
    await markRunning(store, job, attempt.attempt, clock);
    if (attempt.standby !== null && attempt.standby !== undefined) await store.noteRunStart(job.jobId, attempt.attempt, nowIso(clock));
  }
  return answer;
}
