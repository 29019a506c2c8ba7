// What the agent's callbacks share: proving the per-attempt secret, and refusing stale attempts.

import { ConcurrentUpdateError, InvalidInputError, JobNotFoundError, StaleAttemptError, UnauthorizedError } from '../errors.ts';
import type { AttemptRecord, JobRecord } from '../model.ts';
import type { Clock, JobStore } from '../ports.ts';
import { secretMatches } from '../secrets.ts';
import { isHolding, isReleased } from '../standby-rules.ts';
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
 * (constant-time). A job that does not exist, an attempt that was never started (it has
 * no secret) and a wrong secret are all the same UnauthorizedError: the agent routes need
 * no AWS credentials, so a caller without the secret must not learn whether a job id or
 * an attempt exists (the API answers each with one 401 and one message). The job and the
 * attempt are both read, side by side, whatever either finds: a missing job does not
 * skip the attempt's read. The attempt may be the live one or an earlier one, or the
 * standby right after the live one (launch_on_warning), whose agents call too. A rank outside the job's nodes is InvalidInputError, said only
 * once the secret matched.
 */
export async function authorizeAgent(
  store: JobStore,
  credentials: AgentCredentials,
): Promise<{ job: JobRecord; attempt: AttemptRecord }> {
  const { jobId, attempt: number, nodeRank, secret } = credentials;
  const refused = new UnauthorizedError(`no callback secret of job ${jobId} attempt ${number} matches`);
  if (!Number.isInteger(number) || number < 1) throw refused;
  const [jobRead, attemptRead] = await Promise.allSettled([store.getJob(jobId), store.getAttempt(jobId, number)]);
  const job = unlessMissing(jobRead);
  const attempt = unlessMissing(attemptRead);
  if (job === null || attempt === null || number > job.attemptCount + 1 || !secretMatches(secret, attempt.secretHash)) throw refused;
  const nodes = job.spec.numNodes;
  if (!Number.isInteger(nodeRank) || nodeRank < 0 || nodeRank >= nodes) {
    const expected = nodes === 1 ? 'expected 0 (the job has 1 node)' : `expected an integer 0-${nodes - 1}`;
    throw new InvalidInputError([{ path: 'nodeRank', message: `${expected}, got ${nodeRank}` }]);
  }
  return { job, attempt };
}

/**
 * A read's value; null when it found no job or attempt (JobNotFoundError, or the
 * StaleAttemptError of an attempt the job does not have). Any other failure is thrown.
 */
function unlessMissing<T>(read: PromiseSettledResult<T>): T | null {
  if (read.status === 'fulfilled') return read.value;
  if (read.reason instanceof JobNotFoundError || read.reason instanceof StaleAttemptError) return null;
  throw read.reason;
}

/** Refuses a callback for an attempt that is not the job's latest, or that has ended. */
export function assertLiveAttempt(job: JobRecord, attempt: AttemptRecord): void {
  if (isReleased(attempt)) {
    throw new StaleAttemptError(`attempt ${attempt.attempt} of job ${job.jobId} was a standby, released unused (${attempt.standby?.releaseReason ?? 'no reason recorded'})`);
  }
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
 * Refuses a callback for an attempt that is neither the job's live one nor a standby
 * holding after it, or that has ended; says which it is.
 */
export function assertLiveOrHolding(job: JobRecord, attempt: AttemptRecord): 'live' | 'standby' {
  if (isHolding(attempt) && attempt.attempt === job.attemptCount + 1) {
    if (attempt.outcome !== null) throw new StaleAttemptError(`standby attempt ${attempt.attempt} of job ${job.jobId} has already ended (${attempt.outcome.kind})`);
    return 'standby';
  }
  assertLiveAttempt(job, attempt);
  return 'live';
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
