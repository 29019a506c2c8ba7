// EC2's word on an instance (spot interruption warning, state change): preempted, lost, or nothing.

import type { AttemptRecord, JobRecord } from '../model.ts';
import type { AttemptOutcome } from '../policy/types.ts';
import { isHolding, isReleased } from '../standby-rules.ts';
import { isEnding } from '../status.ts';
import type { UseCaseDeps } from './deps.ts';
import { settleAttempt } from './settle-attempt.ts';
import { askForStandby } from './standby-attempt.ts';

/** One EventBridge event about an instance, reduced to what matters. */
export interface InstanceEvent {
  readonly instanceId: string;
  readonly kind: 'SPOT_INTERRUPTION_WARNING' | 'REBALANCE_RECOMMENDATION' | 'STATE_CHANGE';
  /** The new state of a STATE_CHANGE (`running`, `shutting-down`, `terminated`, ...). */
  readonly state?: string;
  /** When EC2 says it happened (ISO 8601). */
  readonly time: string;
}

/** What the event did, and why: `ignored` events change nothing. */
export interface InstanceEventResult {
  readonly action: 'ignored' | 'noted' | 'ended';
  readonly reason: string;
}

/**
 * States in which the instance, and so the attempt's process on it, is gone or going, and
 * the word the reason uses for each. The EventBridge rule forwards exactly these states.
 */
export const INSTANCE_GONE_STATES = {
  'shutting-down': 'terminated',
  terminated: 'terminated',
  stopping: 'stopped',
  stopped: 'stopped',
} as const satisfies Readonly<Record<string, string>>;

/**
 * Applies an EC2 event to the attempt that owns the instance, by the rule of lib/outcome.ts
 * (`decideAttempt`), the same one a report is decided by.
 *
 * - An unknown instance, an attempt that is not the job's latest, or one already ended:
 *   ignored, so duplicate and late events (EventBridge delivers at least once) are no-ops.
 * - A spot interruption warning is noted and the attempt keeps running: a node that
 *   reports 0 in the two minutes left keeps its code. Should a failing report already be
 *   stored and not yet have ended the attempt, the warning ends it PREEMPTED. With
 *   `launch_on_warning`, the execution is asked for a standby (askForStandby).
 * - A rebalance recommendation decides nothing: it is noted only for a job whose
 *   `launch_on_warning` is `rebalance`, and asks for a standby; any other job ignores it.
 * - An event about a standby still holding (neither adopted nor released) settles that
 *   standby as it would the live attempt (a warning noted; its instance gone before its
 *   final report ends it LOST, or PREEMPTED after a warning), and asks for nothing: the
 *   relaunch that takes it decides it as any attempt. A released standby's are ignored,
 *   and so are those of a standby whose job has ended or is being cancelled (its release
 *   follows).
 * - An instance going away after its node's final report is stored is expected (the agent
 *   shuts its instance down once its reports are in) and decides nothing: it is ignored
 *   while the other nodes run on. Nothing is recorded, as no later fact needs it.
 * - An instance going away before its node's final report ends the attempt at once:
 *   PREEMPTED when a warning is on record, else LOST. A later report from that node is
 *   refused as stale (an agent's own shutdown always comes after its final report is
 *   stored, so this is a real loss, or a reclaim racing the report).
 *
 * The end is written only if no report (that node's final one included) and no warning
 * was stored since the attempt was read; otherwise it is decided again on a fresh read,
 * so a final report stored at the same moment always wins over this event.
 */
export async function onInstanceEvent(event: InstanceEvent, deps: Pick<UseCaseDeps, 'store' | 'workflow'>): Promise<InstanceEventResult> {
  const { store } = deps;
  const attempt = await store.findAttemptByInstance(event.instanceId);
  if (attempt === null) return ignored(`instance ${event.instanceId} belongs to no attempt`);
  const where = `attempt ${attempt.attempt} of job ${attempt.jobId}`;
  const job = await store.getJob(attempt.jobId);
  const standby = isHolding(attempt) && attempt.attempt === job.attemptCount + 1;
  if (isReleased(attempt)) return ignored(`${where} was a standby, released unused`);
  // Its job ended (or is being cancelled): the standby is let go with it, and may have been
  // told to stop, and shut down, before the release is written. Not an attempt that ended.
  if (isHolding(attempt) && isEnding(job.status)) {
    return ignored(`${where} is a standby of a job that is ${job.status}: it is released, not ended`);
  }
  if (job.attemptCount !== attempt.attempt && !standby) return ignored(`${where} is stale: attempt ${job.attemptCount} is the live one`);
  if (attempt.outcome !== null) return ignored(`${where} has already ended (${attempt.outcome.kind})`);
  const nodeRank = attempt.instances.find((instance) => instance.instanceId === event.instanceId)?.nodeRank;

  if (event.kind === 'REBALANCE_RECOMMENDATION') {
    if (standby || job.spec.resources.jobRecovery.launchOnWarning !== 'rebalance') {
      return ignored(`${where}: a rebalance recommendation for ${event.instanceId} decides nothing${standby ? ' for a standby' : " (the job's launch_on_warning is not rebalance)"}`);
    }
    if ((attempt.rebalanceNoticedAt ?? null) !== null) return ignored(`${where}: rebalance recommendation already noted at ${attempt.rebalanceNoticedAt}`);
    const noted = await store.noteRebalance(attempt.jobId, attempt.attempt, event.time, nodeRank);
    return { action: 'noted', reason: `${where}: rebalance recommendation for ${event.instanceId}${await standbyAsked(deps, job, noted)}` };
  }

  if (event.kind === 'SPOT_INTERRUPTION_WARNING') {
    if (attempt.interruptionNoticedAt !== null) return ignored(`${where}: interruption already noted at ${attempt.interruptionNoticedAt}`);
    const noted = await store.noteInterruption(attempt.jobId, attempt.attempt, event.time, nodeRank);
    const settled = await settleAttempt(noted, job.spec, [], event.time, deps);
    if (settled.ended) return ended(where, settled.outcome);
    if (settled.attempt.outcome !== null) return ignored(`${where} ended meanwhile (${settled.attempt.outcome.kind})`);
    const asked = standby ? '; a standby is taken as it is, warned, if the relaunch comes' : await standbyAsked(deps, job, settled.attempt);
    return { action: 'noted', reason: `${where}: spot interruption warning for ${event.instanceId}; the attempt runs until the instance goes${asked}` };
  }

  const how = event.state === undefined ? undefined : (INSTANCE_GONE_STATES as Readonly<Record<string, string>>)[event.state];
  if (how === undefined) return ignored(`instance ${event.instanceId} is ${event.state ?? 'in an unnamed state'}, not gone`);
  if (nodeRank === undefined) return ignored(`instance ${event.instanceId} is none of the nodes of ${where}`);
  const settled = await settleAttempt(attempt, job.spec, [{ nodeRank, instanceId: event.instanceId, how }], event.time, deps);
  if (settled.ended) return ended(where, settled.outcome);
  if (settled.attempt.outcome !== null) return ignored(`${where} ended meanwhile (${settled.attempt.outcome.kind})`);
  return ignored(`instance ${event.instanceId} of node ${nodeRank} was ${how} after its final report: expected, it decides nothing`);
}

/** Asks for the standby the warning wants, if it wants one; says so for the event's reason. */
async function standbyAsked(deps: Pick<UseCaseDeps, 'store' | 'workflow'>, job: JobRecord, attempt: AttemptRecord): Promise<string> {
  return (await askForStandby(deps, job, attempt)) ? `; asked for attempt ${attempt.attempt + 1} as its standby (launch_on_warning)` : '';
}

function ended(where: string, outcome: AttemptOutcome): InstanceEventResult {
  return { action: 'ended', reason: `${where} ended: ${describeOutcome(outcome)}` };
}

function describeOutcome(outcome: AttemptOutcome): string {
  switch (outcome.kind) {
    case 'PREEMPTED':
      return 'preempted after a spot interruption warning';
    case 'LOST':
      return outcome.reason;
    default:
      return `the nodes' reports decide it (${outcome.kind})`;
  }
}

function ignored(reason: string): InstanceEventResult {
  return { action: 'ignored', reason };
}
