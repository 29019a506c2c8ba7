// EvaluateRecoveryPolicy: end the attempt if the wait ended it, apply the policy, record the decision.

import { InvalidInputError } from '../errors.ts';
import type { AttemptRecord, JobRecord, KeptNodes, StoredDecision } from '../model.ts';
import { decideRecovery, initialCounters } from '../policy/decide.ts';
import { describeKeep, nodesToKeep } from '../reuse-rules.ts';
import { RecoveryAction, type AttemptOutcome, type RecoveryDecision } from '../policy/types.ts';
import type { Clock, JobPatch, JobStore } from '../ports.ts';
import { DEFAULT_BOOT_TIMEOUT_SECONDS, formatDuration } from '../task-file/bounds.ts';
import type { TaskSpec } from '../task-file/types.ts';
import { JobStatus } from '../status.ts';
import {
  MAX_ATTEMPTS_PER_EXECUTION,
  WorkflowError,
  type AwaitError,
  type DecisionOutput,
  type WorkflowState,
} from '../workflow/contract.ts';
import { nodesNotHeardFrom } from './await-attempt.ts';
import { nowIso, type UseCaseDeps } from './deps.ts';
import { retryOnConflict } from './retry.ts';
import { standbyOf } from './standby-attempt.ts';

/** Tries at recording a decision when other writers (heartbeat, cancel) keep changing the job. */
const MAX_DECISION_TRIES = 3;

/**
 * Decides what the job does after the attempt in `state`, and records it.
 *
 * 1. An attempt with no outcome was ended by the wait itself: AwaitBoot's timeout or
 *    AwaitAttempt's heartbeat timeout ends it LOST (as never booted while a node was never
 *    heard from; PREEMPTED if EC2 had warned of an interruption: the deadline came
 *    first), a cancel ends it CANCELLED. If a report or event ended it meanwhile, the
 *    stored outcome stands.
 * 2. A job being cancelled is decided as CANCELLED whatever the attempt did: cancel wins.
 * 3. `decideRecovery` on the job's policy and persisted counters (and, in a wait for
 *    capacity, how long it has lasted); the decision, counters,
 *    status (and failure reason, on FAIL) are recorded in one conditional write. A
 *    concurrent status change (a late heartbeat's STARTING -> RUNNING, a cancel) makes it
 *    decide again on a fresh read.
 * 4. A relaunch may keep nodes of the attempt (restart in place, or the survivors of a
 *    partial loss: lib/reuse-rules.ts `nodesToKeep`): they are stored as the decision's
 *    `keep`, in that same write, and its reason says so. Counters are the same with or
 *    without it.
 *
 * Running it again for an attempt already decided returns the recorded decision. Returns
 * the state with `decision` and without the wait's result or error.
 */
export async function evaluatePolicy(
  state: WorkflowState,
  deps: Pick<UseCaseDeps, 'store' | 'clock' | 'random'>,
): Promise<WorkflowState> {
  const { store, clock, random } = deps;
  const { jobId, attempt: number } = state;
  // The job is always read before the attempt. A decision is written in one transaction
  // with the job's status, so an attempt read after the job shows any decision made
  // before that job read; when it shows none, the decision below is written on the status
  // read, and a decision made meanwhile (a run of this step that came late, beside its
  // retry) refuses it. Read the other way round, a job already decided could be decided again.
  const firstJob = await store.getJob(jobId);
  const first = await store.getAttempt(jobId, number);
  if (first.decision !== null) return withDecision(state, first.decision);
  const ended = first.outcome ?? (await endAwaitedAttempt(store, first, firstJob.spec, state.awaitError, clock));

  return retryOnConflict(MAX_DECISION_TRIES, async (tryNumber) => {
    const job = tryNumber === 1 ? firstJob : await store.getJob(jobId);
    const attempt = tryNumber === 1 ? first : await store.getAttempt(jobId, number);
    if (attempt.decision !== null) return withDecision(state, attempt.decision);
    const outcome: AttemptOutcome = job.status === JobStatus.CANCELLING ? cancelledOutcome(job) : ended;
    const capacityWaitSeconds = await secondsWaitingForCapacity(store, job, number, clock);
    const decided = decideRecovery({ policy: job.spec.resources.jobRecovery, counters: job.counters, outcome, random, capacityWaitSeconds });
    const next = nextTaskAfter(job, decided);
    const chosen = next?.decision ?? decided;
    const keep = await keptNodes(store, job, attempt, outcome, chosen);
    const decision = keep === null ? chosen : { ...chosen, reason: `${chosen.reason}; relaunch ${describeKeep(keep, job.spec.numNodes)}` };
    const at = nowIso(clock);
    const stored = toStoredDecision(decision, at, keep);
    await store.recordDecision(
      jobId,
      number,
      stored,
      decision.counters,
      { from: job.status, to: decision.status, reason: decision.reason, attempt: number, at },
      decision.action === 'FAIL' ? { failureReason: decision.reason } : next === null ? undefined : { nextTask: next.nextTask },
    );
    return withDecision(state, stored);
  });
}

/** A cancel's outcome, with why when the job was cancelled for another reason than the user's cancel. */
export function cancelledOutcome(job: JobRecord): AttemptOutcome {
  return job.failureReason === null ? { kind: 'CANCELLED' } : { kind: 'CANCELLED', reason: job.failureReason };
}

/** Ends an attempt the wait gave up on; if something else ended it first, its outcome stands. */
async function endAwaitedAttempt(
  store: JobStore,
  attempt: AttemptRecord,
  spec: TaskSpec,
  awaitError: AwaitError | undefined,
  clock: Clock,
): Promise<AttemptOutcome> {
  const outcome = outcomeOfAwaitError(attempt, spec, awaitError, clock.now());
  const ended = await store.endAttempt(attempt.jobId, attempt.attempt, outcome, nowIso(clock));
  return ended.attempt.outcome ?? outcome;
}

/**
 * How a wait that gave up ended the attempt: AwaitBoot's timeout (or, in an execution
 * started before AwaitBoot existed, AwaitAttempt's heartbeat timeout) with a node never
 * heard from is LOST as never booted; AwaitAttempt's heartbeat timeout is LOST; either is
 * PREEMPTED when EC2 warned of an interruption first.
 */
function outcomeOfAwaitError(attempt: AttemptRecord, spec: TaskSpec, awaitError: AwaitError | undefined, now: Date): AttemptOutcome {
  const secondsSince = (at: string): number => Math.max(0, Math.floor((now.getTime() - Date.parse(at)) / 1000));
  switch (awaitError?.Error) {
    case WorkflowError.HeartbeatTimeout:
    case WorkflowError.Timeout: {
      if (attempt.interruptionNoticedAt !== null) return { kind: 'PREEMPTED' };
      const silent = nodesNotHeardFrom(attempt, spec.numNodes);
      if (silent.length > 0) {
        const boot = formatDuration(spec.resources.jobRecovery.bootTimeoutSeconds ?? DEFAULT_BOOT_TIMEOUT_SECONDS);
        const from = `${silentNodes(silent, spec.numNodes)} in the ${secondsSince(attempt.startedAt)} s since launch`;
        // The silent nodes are the ones that went; the others booted and may be kept.
        const nodes = silent.length < spec.numNodes ? { nodes: silent } : {};
        return { kind: 'LOST', reason: `no heartbeat from ${from} (boot_timeout ${boot})`, neverBooted: true, ...nodes };
      }
      return { kind: 'LOST', reason: `no heartbeat for ${secondsSince(attempt.lastHeartbeatAt ?? attempt.startedAt)} s` };
    }
    case WorkflowError.JobCancelled:
      return { kind: 'CANCELLED' };
    default: {
      const got = awaitError === undefined ? 'no outcome and no await error' : `await error ${awaitError.Error}`;
      throw new InvalidInputError([
        {
          path: 'awaitError',
          message: `attempt ${attempt.attempt} of job ${attempt.jobId} has not ended; expected a heartbeat timeout, a timeout or a cancel, got ${got}`,
        },
      ]);
    }
  }
}

/** The nodes never heard from, as a reason names them: `the node`, `node 1 of 2`, `nodes 0, 1 of 2`. */
function silentNodes(ranks: readonly number[], numNodes: number): string {
  if (numNodes === 1) return 'the node';
  if (ranks.length === numNodes) return `any of the ${numNodes} nodes`;
  return `${ranks.length === 1 ? 'node' : 'nodes'} ${ranks.join(', ')} of ${numNodes}`;
}

/**
 * How long the job's current wait for capacity has lasted, in whole seconds: since the
 * first of the `capacityWaits` launches in a row that found none ended (any attempt that
 * launched ends a wait, so they are the attempts just before this one). 0 when not waiting.
 */
async function secondsWaitingForCapacity(store: JobStore, job: JobRecord, attempt: number, clock: Clock): Promise<number> {
  const tries = job.counters.capacityWaits ?? 0;
  if (tries === 0 || attempt - tries < 1) return 0;
  const first = await store.getAttempt(job.jobId, attempt - tries);
  const began = Date.parse(first.endedAt ?? first.startedAt);
  return Math.max(0, Math.floor((clock.now().getTime() - began) / 1000));
}

/**
 * A pipeline's task that succeeded, with a task after it: the job goes on to that task,
 * PENDING, with the budgets of its own policy (as SkyPilot counts them, per task).
 * null for any other decision, and for the last task (its success ends the job).
 */
function nextTaskAfter(job: JobRecord, decided: RecoveryDecision): { decision: RecoveryDecision; nextTask: NonNullable<JobPatch['nextTask']> } | null {
  const pipeline = job.pipeline;
  if (decided.action !== RecoveryAction.SUCCEED || pipeline === null || pipeline === undefined) return null;
  const current = pipeline.current + 1;
  const spec = pipeline.tasks[current];
  if (spec === undefined) return null;
  const total = pipeline.tasks.length;
  const reason = `task ${current} of ${total}${named(job.spec)} succeeded; task ${current + 1} of ${total}${named(spec)} starts`;
  return {
    decision: { ...decided, action: RecoveryAction.NEXT_TASK, status: JobStatus.PENDING, reason, delaySeconds: 0, counters: initialCounters(spec.resources.useSpot) },
    nextTask: { spec, pipeline: { ...pipeline, current } },
  };
}

function named(spec: TaskSpec): string {
  return spec.name === null ? '' : ` (${spec.name})`;
}

function toStoredDecision(decision: RecoveryDecision, decidedAt: string, keep: KeptNodes | null): StoredDecision {
  return {
    action: decision.action,
    rule: decision.rule,
    status: decision.status,
    reason: decision.reason,
    delaySeconds: decision.delaySeconds,
    decidedAt,
    counters: decision.counters,
    ...(keep === null ? {} : { keep }),
  };
}

/**
 * The nodes of the decided attempt its relaunch runs on again (lib/reuse-rules.ts
 * nodesToKeep), or null. None when a standby of a whole set a warning started for the
 * attempt exists (launch_on_warning): the relaunch takes that standby, or launches past
 * it, never on these nodes. A standby of the warned node alone (launched beside the
 * others) leaves them to this rule: the relaunch takes it when the nodes kept are the ones
 * it was launched beside. The decision and its counters are the same either way.
 */
async function keptNodes(store: JobStore, job: JobRecord, attempt: AttemptRecord, outcome: AttemptOutcome, decision: RecoveryDecision): Promise<KeptNodes | null> {
  const standby = await standbyOf(store, job.jobId, attempt.attempt);
  const { keep } = nodesToKeep({
    policy: job.spec.resources.jobRecovery,
    decision,
    outcome,
    market: attempt.market,
    placement: attempt.placement,
    instances: attempt.instances,
    numNodes: job.spec.numNodes,
    // setup: skip holds only where setup exited 0 (ran, or was skipped on a node that ran it before).
    setupDone: attempt.reports.filter((report) => report.phase === 'setup' && report.exitCode === 0).map((report) => report.nodeRank),
    wholeStandby: standby !== null && standby.standby?.beside === undefined,
  });
  return keep;
}

/** The state the Choice reads: the decision, and whether to continue as a new execution. */
function withDecision(state: WorkflowState, decision: StoredDecision): WorkflowState {
  const { awaitError: _awaitError, awaited: _awaited, ...rest } = state;
  const relaunching = decision.action === RecoveryAction.RESTART || decision.action === RecoveryAction.RECOVER || decision.action === RecoveryAction.NEXT_TASK;
  const output: DecisionOutput = {
    action: decision.action,
    status: decision.status,
    reason: decision.reason,
    delaySeconds: decision.delaySeconds,
    continueAsNew: relaunching && state.attemptsInExecution >= MAX_ATTEMPTS_PER_EXECUTION,
  };
  return { ...rest, decision: output };
}
