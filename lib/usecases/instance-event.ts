// EC2's word on an instance (spot interruption warning, state change): preempted or lost.

import type { AttemptOutcome } from '../policy/types.ts';
import type { UseCaseDeps } from './deps.ts';
import { resumeTask } from './tasks.ts';

/** One EventBridge event about an instance, reduced to what matters. */
export interface InstanceEvent {
  readonly instanceId: string;
  readonly kind: 'SPOT_INTERRUPTION_WARNING' | 'STATE_CHANGE';
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
 * Applies an EC2 event to the attempt that owns the instance.
 *
 * - An unknown instance, an attempt that is not the job's latest, or one already ended:
 *   ignored, so duplicate and late events (EventBridge delivers at least once) are no-ops.
 * - A spot interruption warning is noted and the attempt keeps running: a report in the
 *   two minutes left keeps its exit code.
 * - The instance going away ends the attempt PREEMPTED when a warning was noted, else LOST,
 *   and resumes the waiting execution if this call ended it.
 */
export async function onInstanceEvent(event: InstanceEvent, deps: Pick<UseCaseDeps, 'store' | 'workflow'>): Promise<InstanceEventResult> {
  const { store, workflow } = deps;
  const attempt = await store.findAttemptByInstance(event.instanceId);
  if (attempt === null) return ignored(`instance ${event.instanceId} belongs to no attempt`);
  const where = `attempt ${attempt.attempt} of job ${attempt.jobId}`;
  const job = await store.getJob(attempt.jobId);
  if (job.attemptCount !== attempt.attempt) return ignored(`${where} is stale: attempt ${job.attemptCount} is the live one`);
  if (attempt.outcome !== null) return ignored(`${where} has already ended (${attempt.outcome.kind})`);

  if (event.kind === 'SPOT_INTERRUPTION_WARNING') {
    if (attempt.interruptionNoticedAt !== null) return ignored(`${where}: interruption already noted at ${attempt.interruptionNoticedAt}`);
    await store.noteInterruption(attempt.jobId, attempt.attempt, event.time);
    return { action: 'noted', reason: `${where}: spot interruption warning for ${event.instanceId}; the attempt runs until the instance goes` };
  }

  const gone = event.state === undefined ? undefined : (INSTANCE_GONE_STATES as Readonly<Record<string, string>>)[event.state];
  if (gone === undefined) return ignored(`instance ${event.instanceId} is ${event.state ?? 'in an unnamed state'}, not gone`);
  const outcome: AttemptOutcome =
    attempt.interruptionNoticedAt !== null
      ? { kind: 'PREEMPTED' }
      : { kind: 'LOST', reason: `instance ${event.instanceId} was ${gone}` };
  const ended = await store.endAttempt(attempt.jobId, attempt.attempt, outcome, event.time);
  if (!ended.won) return ignored(`${where} ended meanwhile (${ended.attempt.outcome?.kind ?? 'unknown'})`);
  if (ended.attempt.taskToken !== null) {
    await resumeTask(workflow, ended.attempt.taskToken, { outcome: outcome.kind });
  }
  const why = outcome.kind === 'PREEMPTED' ? 'preempted after a spot interruption warning' : outcome.reason;
  return { action: 'ended', reason: `${where} ended: ${why}` };
}

function ignored(reason: string): InstanceEventResult {
  return { action: 'ignored', reason };
}
