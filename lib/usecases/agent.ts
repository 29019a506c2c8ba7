// What the agent's callbacks share: proving the per-attempt secret, and refusing stale attempts.

import { ConcurrentUpdateError, InvalidInputError, StaleAttemptError, UnauthorizedError } from '../errors.ts';
import type { AttemptRecord, JobRecord } from '../model.ts';
import type { Clock, JobStore } from '../ports.ts';
import { secretMatches } from '../secrets.ts';
import { JobStatus } from '../status.ts';
import { nowIso } from './deps.ts';

/** Who a callback claims to be. */
export interface AgentCredentials {
  readonly jobId: string;
  readonly attempt: number;
  readonly nodeRank: number;
  readonly secret: string;
}

/**
 * The job and attempt a callback speaks for, once its secret matched the attempt's hash
 * (constant-time). An attempt that was never started has no secret, so it is refused the
 * same way as a wrong one: a caller without the secret learns nothing. A rank outside the
 * job's nodes is InvalidInputError.
 */
export async function authorizeAgent(
  store: JobStore,
  credentials: AgentCredentials,
): Promise<{ job: JobRecord; attempt: AttemptRecord }> {
  const { jobId, attempt: number, nodeRank, secret } = credentials;
  const job = await store.getJob(jobId);
  if (!Number.isInteger(number) || number < 1 || number > job.attemptCount) {
    throw new UnauthorizedError(`no callback secret was issued for attempt ${number} of job ${jobId}`);
  }
  const attempt = await store.getAttempt(jobId, number);
  if (!secretMatches(secret, attempt.secretHash)) {
    throw new UnauthorizedError(`the callback secret does not match attempt ${number} of job ${jobId}`);
  }
  const nodes = job.spec.numNodes;
  if (!Number.isInteger(nodeRank) || nodeRank < 0 || nodeRank >= nodes) {
    const expected = nodes === 1 ? 'expected 0 (the job has 1 node)' : `expected an integer 0-${nodes - 1}`;
    throw new InvalidInputError([{ path: 'nodeRank', message: `${expected}, got ${nodeRank}` }]);
  }
  return { job, attempt };
}

/** Refuses a callback for an attempt that is not the job's latest, or that has ended. */
export function assertLiveAttempt(job: JobRecord, attempt: AttemptRecord): void {
  if (attempt.attempt !== job.attemptCount) {
    throw new StaleAttemptError(
      `attempt ${attempt.attempt} of job ${job.jobId} is stale: attempt ${job.attemptCount} is the live one`,
    );
  }
  if (attempt.outcome !== null) {
    throw new StaleAttemptError(`attempt ${attempt.attempt} of job ${job.jobId} has already ended (${attempt.outcome.kind})`);
  }
}

/**
 * STARTING -> RUNNING once the agent is heard from. Conditional: when another writer got
 * there first (a second node, a cancel, a decision), its status stands and this is a no-op.
 */
export async function markRunning(store: JobStore, job: JobRecord, attempt: number, clock: Clock): Promise<void> {
  if (job.status !== JobStatus.STARTING) return;
  try {
    await store.changeStatus(job.jobId, {
      from: JobStatus.STARTING,
      to: JobStatus.RUNNING,
      reason: `the agent of attempt ${attempt} is up`,
      attempt,
      at: nowIso(clock),
    });
  } catch (error) {
    if (!(error instanceof ConcurrentUpdateError)) throw error;
  }
}
