// What every launch of an attempt is made of, LaunchAttempt's and LaunchStandby's alike:
// the attempt as first written, the request compute gets, and how a launch error ends it.

import { NoCapacityError, PrecheckError } from '../errors.ts';
import type { AttemptRecord, JobRecord } from '../model.ts';
import type { AttemptOutcome } from '../policy/types.ts';
import type { JobStore, LaunchRequest } from '../ports.ts';
import { DEFAULT_BOOT_TIMEOUT_SECONDS } from '../task-file/bounds.ts';
import { isReleased } from '../standby-rules.ts';
import type { UseCaseDeps } from './deps.ts';

/** The job's boot_timeout, in seconds: AwaitBoot's clock. */
export function bootTimeoutOf(job: JobRecord): number {
  return job.spec.resources.jobRecovery.bootTimeoutSeconds ?? DEFAULT_BOOT_TIMEOUT_SECONDS;
}

/** Attempt `attempt` of the job as written before its launch: on the job's market, nothing placed or reported. */
export function newAttempt(job: JobRecord, attempt: number, secretHash: string, at: string): AttemptRecord {
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

/**
 * Where earlier attempts ran and how each ended, newest first; attempts never placed, and
 * standbys let go unused (they never ran), are left out.
 */
export async function placementHistory(store: JobStore, jobId: string, attempt: number): Promise<LaunchRequest['history']> {
  const attempts = await store.listAttempts(jobId);
  return attempts
    .filter((earlier) => earlier.attempt < attempt)
    .sort((a, b) => b.attempt - a.attempt)
    .flatMap((earlier) =>
      earlier.placement === null || isReleased(earlier) ? [] : [{ placement: earlier.placement, outcome: earlier.outcome?.kind ?? null }],
    );
}

/** The job's secrets, for the launch to hand its nodes; a PrecheckError when some are no longer stored. */
export async function secretsOf(deps: Pick<UseCaseDeps, 'secrets'>, job: JobRecord): Promise<Pick<LaunchRequest, 'secrets'>> {
  const names = job.spec.secretNames ?? [];
  if (names.length === 0) return {};
  const values = await deps.secrets.get(job.jobId);
  const missing = names.filter((name) => values[name] === undefined);
  if (missing.length > 0) throw new PrecheckError(`secrets ${missing.join(', ')} of job ${job.jobId} are no longer stored; submit the job again`);
  return { secrets: Object.fromEntries(names.map((name) => [name, values[name] as string])) };
}

/** The outcome a launch error ends the attempt with; null for an error that is relaunch's own fault. */
export function launchFailure(error: unknown): Extract<AttemptOutcome, { kind: 'LAUNCH_FAILED' }> | null {
  if (error instanceof NoCapacityError) return { kind: 'LAUNCH_FAILED', cause: 'NO_RESOURCE', reason: error.message };
  if (error instanceof PrecheckError) return { kind: 'LAUNCH_FAILED', cause: 'PRECHECKS', reason: error.message };
  return null;
}
