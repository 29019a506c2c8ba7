// launch_on_warning's standby, as pure rules on the records: which warning asks for one,
// whether the relaunch may take it, what its nodes are told, and how long a job went
// without a running `run`.

import type { AttemptRecord, InstanceRef, JobRecord, KeptNodes, WarningKind } from './model.ts';
import type { RecoveryCounters } from './policy/types.ts';
import type { RecoveryPolicy } from './task-file/types.ts';
import { isEnding } from './status.ts';

/**
 * What a node is told once its setup is reported, and again each time a holding node asks:
 * `go` on to run, `hold` (a standby whose warned attempt is still the live one), or `stop`
 * (the attempt will never run: let go, ended, or its job is over).
 */
export type RunSignal = 'hold' | 'go' | 'stop';

/** A signal and why, in one sentence for the agent's log. */
export interface RunAnswer {
  readonly run: RunSignal;
  readonly reason: string;
}

/**
 * The warning on the live attempt that asks for a standby under `policy`, or null: the
 * interruption warning when `launch_on_warning` is on, and also the rebalance
 * recommendation when it is `rebalance`. An attempt that has ended asks for nothing, and
 * neither does a job whose policy could not relaunch it after a preemption
 * (recoveriesLeft): a standby it can never take is instances paid for nothing.
 */
export function standbyAskedBy(policy: RecoveryPolicy, attempt: AttemptRecord, counters: RecoveryCounters): WarningKind | null {
  const option = policy.launchOnWarning ?? false;
  if (option === false || attempt.outcome !== null || recoveriesLeft(policy, counters) === 0) return null;
  if (attempt.interruptionNoticedAt !== null) return 'interruption';
  if (option === 'rebalance' && (attempt.rebalanceNoticedAt ?? null) !== null) return 'rebalance';
  return null;
}

/**
 * How many more preemptions the policy would relaunch after (max_recoveries less the
 * recoveries it has made); null when it has no cap.
 */
export function recoveriesLeft(policy: RecoveryPolicy, counters: RecoveryCounters): number | null {
  const cap = policy.maxRecoveries ?? null;
  return cap === null ? null : Math.max(0, cap - (counters.recoverDecisions ?? 0));
}

/** Whether an attempt is a standby that has been neither adopted nor released. */
export function isHolding(attempt: AttemptRecord): boolean {
  const mark = attempt.standby;
  return mark !== null && mark !== undefined && mark.adoptedAt === undefined && mark.releasedAt === undefined;
}

/** Whether an attempt is a standby that was let go without running run. */
export function isReleased(attempt: AttemptRecord): boolean {
  return attempt.standby?.releasedAt !== undefined;
}

/**
 * Why the relaunch after the warned attempt may not take `standby` as its next attempt, or
 * null when it may: it must run what the next attempt would run, where it would run it,
 * and still be there. A standby lost or reclaimed while it held is gone: taking it would
 * charge the job a recovery the same job without launch_on_warning never needs, so it is
 * let go, charged to nothing, and the relaunch launches fresh. A standby whose own setup
 * failed is taken all the same: it is the next attempt, and the policy decides it as it
 * would any other. A standby of the warned node alone (its `beside` nodes) is taken only by
 * a relaunch that keeps exactly those nodes (`keep`, the decision's), for they are the rest
 * of it; otherwise the relaunch runs as it would without it.
 */
export function whyNotAdopt(job: JobRecord, standby: AttemptRecord, keep: KeptNodes | null = null): string | null {
  if (isReleased(standby)) return `it was released (${standby.standby?.releaseReason ?? 'no reason recorded'})`;
  const ended = standby.outcome;
  if (ended?.kind === 'LOST') return `it was lost while it held (${ended.reason})`;
  if (ended?.kind === 'PREEMPTED') return 'it was reclaimed while it held (a spot interruption)';
  if (standby.market !== job.counters.market) return `the next attempt runs ${job.counters.market}, and the standby ${standby.market}`;
  const task = job.pipeline === null || job.pipeline === undefined ? null : job.pipeline.current;
  if ((standby.task ?? null) !== task) return `the job has moved on to task ${(task ?? 0) + 1}`;
  const beside = standby.standby?.beside;
  if (beside === undefined) return null;
  const warned = standby.standby?.for ?? standby.attempt - 1;
  if (keep === null) return `it was launched beside ${nodesWords(beside)} of attempt ${warned}, and the relaunch keeps none`;
  const ids = (nodes: readonly InstanceRef[]): string => nodes.map((node) => node.instanceId).sort().join(' ');
  if (ids(keep.nodes) !== ids(beside)) return `it was launched beside ${nodesWords(beside)} of attempt ${warned}, and the relaunch keeps ${nodesWords(keep.nodes)}`;
  return null;
}

/** Nodes by rank in words: `node 0`, `nodes 0, 1, 3`. */
function nodesWords(nodes: readonly InstanceRef[]): string {
  return `node${nodes.length === 1 ? '' : 's'} ${nodes.map((node) => node.nodeRank).sort((a, b) => a - b).join(', ')}`;
}

/**
 * What a node of `attempt` is told: `go` only while the attempt is the job's live one and
 * has not ended, the job is neither over nor being cancelled, for an attempt with reused
 * nodes (a standby that nodes joined included) once every node has reported setup 0
 * (`hold` until then: setupPending), and, for a standby, once it was adopted (which happens only after the attempt before it has ended and the policy
 * relaunched the job); `hold` while it is a standby after the live attempt; `stop`
 * otherwise. Messages may arrive in any order, and the job and the attempt may be read a
 * moment apart (a standby adopted or released between the two reads): such a pair is
 * answered `hold`, never `go`, and the node's next ask reads them again.
 */
export function runSignal(job: JobRecord, attempt: AttemptRecord): RunAnswer {
  const which = `attempt ${attempt.attempt} of job ${job.jobId}`;
  const stale: RunAnswer = { run: 'stop', reason: `${which} is stale: attempt ${job.attemptCount} is the live one` };
  const hold: RunAnswer = { run: 'hold', reason: `${which} is a standby: attempt ${attempt.attempt - 1} is still the live one` };
  if (isReleased(attempt)) return { run: 'stop', reason: `${which} was a standby, released: ${attempt.standby?.releaseReason ?? 'no reason recorded'}` };
  if (attempt.outcome !== null) return { run: 'stop', reason: `${which} has ended (${attempt.outcome.kind})` };
  if (isEnding(job.status)) return { run: 'stop', reason: `job ${job.jobId} is ${job.status}` };
  const mark = attempt.standby;
  const pending = setupPending(attempt, job.spec.numNodes);
  const setUp: RunAnswer = {
    run: 'hold',
    reason: `${which} waits for node${pending.length === 1 ? '' : 's'} ${pending.join(', ')} to finish setup: it runs on reused nodes, and starts when every node is up`,
  };
  if (mark === null || mark === undefined) {
    if (attempt.attempt !== job.attemptCount) return stale;
    return pending.length > 0 ? setUp : { run: 'go', reason: `${which} is the live attempt` };
  }
  if (mark.adoptedAt === undefined) return attempt.attempt >= job.attemptCount && attempt.attempt <= job.attemptCount + 1 ? hold : stale;
  if (attempt.attempt > job.attemptCount) return hold;
  if (attempt.attempt !== job.attemptCount) return stale;
  // A standby of the warned node alone runs once the nodes that joined it have set up too.
  return pending.length > 0 ? setUp : { run: 'go', reason: `${which} is the live attempt: attempt ${mark.for} has ended and the job relaunched` };
}

/** Whether an attempt runs on a node kept from the attempt before it (restart in place, or a survivor). */
export function hasReusedNodes(attempt: AttemptRecord): boolean {
  return attempt.instances.some((node) => node.reusedFrom !== undefined);
}

/**
 * The ranks of an attempt with reused nodes that have not reported setup 0 yet: its run
 * starts on every node together once none is left (a kept node sets up, or skips setup, in
 * moments; its replacement may still be booting). [] for an attempt on fresh nodes only,
 * whose nodes go on to run each as its setup ends, as before.
 */
export function setupPending(attempt: AttemptRecord, numNodes: number): number[] {
  if (!hasReusedNodes(attempt)) return [];
  const done = new Set(attempt.reports.filter((report) => report.phase === 'setup' && report.exitCode === 0).map((report) => report.nodeRank));
  return Array.from({ length: numNodes }, (_, rank) => rank).filter((rank) => !done.has(rank));
}

/**
 * When the attempt's run started, as far as the records say: when a node of an adopted
 * standby was first told to go; for an attempt with reused nodes, the last of its nodes'
 * setup reports that exited 0 once every node has one (they hold until then); else (an
 * attempt that never held) its first setup report that exited 0, after which the agent
 * starts run at once. null when run never started.
 */
export function runStartOf(attempt: AttemptRecord): string | null {
  if ((attempt.runStartedAt ?? null) !== null) return attempt.runStartedAt as string;
  if (attempt.standby !== null && attempt.standby !== undefined) return null;
  if (hasReusedNodes(attempt)) {
    const setUp = new Map(attempt.reports.filter((report) => report.phase === 'setup' && report.exitCode === 0).map((report) => [report.nodeRank, report.reportedAt]));
    if (attempt.instances.some((node) => !setUp.has(node.nodeRank))) return null;
    return [...setUp.values()].sort().at(-1) ?? null;
  }
  const started = attempt.reports
    .filter((report) => report.phase === 'setup' && report.exitCode === 0)
    .map((report) => report.reportedAt)
    .sort();
  return started[0] ?? null;
}

/**
 * How long the job went without a running `run` before `attempt`'s run started, in
 * seconds: from the end of the last attempt before it that was not a standby let go
 * unused, to this attempt's run start. null for the first attempt, or while either end is
 * unknown. `attempts` is every attempt of the job.
 */
export function gapBefore(attempt: AttemptRecord, attempts: readonly AttemptRecord[]): number | null {
  const start = runStartOf(attempt);
  if (start === null) return null;
  const previous = [...attempts]
    .filter((other) => other.attempt < attempt.attempt && !isReleased(other))
    .sort((a, b) => b.attempt - a.attempt)[0];
  if (previous === undefined || previous.endedAt === null) return null;
  return Math.max(0, (Date.parse(start) - Date.parse(previous.endedAt)) / 1000);
}
