// InMemoryJobStore: the JobStore port in process memory, for use-case tests and simulation.
//
// It keeps the DynamoJobStore's semantics exactly (the same contract suite runs against
// both): every check happens before any change, and no await sits between a read and its
// write, so each method is as atomic as the DynamoDB condition or transaction it mirrors.
// Records are copied and deep-frozen on the way in, and handed out frozen, so no caller
// can change stored state by mutating an object it passed in or got back.

import { ConcurrentUpdateError, JobNotFoundError, StaleAttemptError } from '../errors.ts';
import type { AttemptRecord, InstanceRef, JobEvent, JobRecord, NodeReport, Placement, StoredDecision } from '../model.ts';
import type { AttemptOutcome, RecoveryCounters } from '../policy/types.ts';
import type { JobPatch, JobStore, StatusChange } from '../ports.ts';

/** The reason on the audit row written when a job is created (its `from` is null). */
export const JOB_CREATED_REASON = 'job created';

interface StoredJob {
  job: JobRecord;
  attempts: Map<number, AttemptRecord>;
  events: JobEvent[];
}

/** A JobStore held in memory; one instance is one isolated database. */
export class InMemoryJobStore implements JobStore {
  readonly #jobs = new Map<string, StoredJob>();
  readonly #instances = new Map<string, { readonly jobId: string; readonly attempt: number }>();

  async createJob(job: JobRecord): Promise<void> {
    if (this.#jobs.has(job.jobId)) throw new ConcurrentUpdateError(`job ${job.jobId} already exists`);
    const created: JobEvent = {
      jobId: job.jobId,
      at: job.createdAt,
      from: null,
      to: job.status,
      attempt: null,
      reason: JOB_CREATED_REASON,
    };
    this.#jobs.set(job.jobId, { job: frozenCopy(job), attempts: new Map(), events: [frozenCopy(created)] });
  }

  async getJob(jobId: string): Promise<JobRecord> {
    return this.#stored(jobId).job;
  }

  async listJobs(options?: { limit?: number }): Promise<JobRecord[]> {
    const newestFirst = [...this.#jobs.values()]
      .map((stored) => stored.job)
      .sort((a, b) => compareStrings(listKey(b), listKey(a)));
    return options?.limit === undefined ? newestFirst : newestFirst.slice(0, Math.max(0, options.limit));
  }

  async changeStatus(jobId: string, change: StatusChange, patch?: JobPatch): Promise<JobRecord> {
    const stored = this.#stored(jobId);
    expectStatus(stored.job, change);
    return this.#applyChange(stored, change, {
      counters: patch?.counters ?? stored.job.counters,
      failureReason: patch?.failureReason === undefined ? stored.job.failureReason : patch.failureReason,
    });
  }

  async setExecution(jobId: string, executionArn: string): Promise<void> {
    const stored = this.#stored(jobId);
    stored.job = frozenCopy({ ...stored.job, executionArn });
  }

  async putAttempt(attempt: AttemptRecord): Promise<void> {
    const stored = this.#stored(attempt.jobId);
    if (stored.job.attemptCount !== attempt.attempt - 1) {
      throw new ConcurrentUpdateError(
        `job ${attempt.jobId} has ${stored.job.attemptCount} attempt(s); attempt ${attempt.attempt} cannot start`,
      );
    }
    stored.attempts.set(attempt.attempt, frozenCopy(attempt));
    stored.job = frozenCopy({ ...stored.job, attemptCount: attempt.attempt });
    this.#own(attempt.jobId, attempt.attempt, attempt.instances);
  }

  async getAttempt(jobId: string, attempt: number): Promise<AttemptRecord> {
    return this.#attempt(jobId, attempt);
  }

  async listAttempts(jobId: string): Promise<AttemptRecord[]> {
    return [...this.#stored(jobId).attempts.values()].sort((a, b) => a.attempt - b.attempt);
  }

  async findAttemptByInstance(instanceId: string): Promise<AttemptRecord | null> {
    const owner = this.#instances.get(instanceId);
    return owner === undefined ? null : this.#attempt(owner.jobId, owner.attempt);
  }

  async setInstances(
    jobId: string,
    attempt: number,
    placement: Placement,
    instances: readonly InstanceRef[],
  ): Promise<void> {
    const current = this.#attempt(jobId, attempt);
    if (current.placement !== null) {
      throw new ConcurrentUpdateError(`attempt ${attempt} of job ${jobId} already has its instances`);
    }
    this.#replaceAttempt({ ...current, placement, instances });
    this.#own(jobId, attempt, instances);
  }

  async setTaskToken(jobId: string, attempt: number, taskToken: string): Promise<AttemptRecord> {
    return this.#replaceAttempt({ ...this.#attempt(jobId, attempt), taskToken });
  }

  async addReport(
    jobId: string,
    attempt: number,
    report: NodeReport,
  ): Promise<{ attempt: AttemptRecord; duplicate: boolean }> {
    const current = this.#attempt(jobId, attempt);
    // A repeat is answered as one even after the attempt ended: the agent may be retrying
    // the very report that ended it.
    if (current.reports.some((r) => r.nodeRank === report.nodeRank && r.phase === report.phase)) {
      return { attempt: current, duplicate: true };
    }
    if (current.outcome !== null) throw endedError(jobId, attempt, 'a report');
    return { attempt: this.#replaceAttempt({ ...current, reports: [...current.reports, report] }), duplicate: false };
  }

  async recordHeartbeat(jobId: string, attempt: number, at: string): Promise<AttemptRecord> {
    const current = this.#attempt(jobId, attempt);
    if (current.outcome !== null) throw endedError(jobId, attempt, 'a heartbeat');
    return this.#replaceAttempt({ ...current, lastHeartbeatAt: at });
  }

  async noteInterruption(jobId: string, attempt: number, at: string): Promise<AttemptRecord> {
    const current = this.#attempt(jobId, attempt);
    if (current.interruptionNoticedAt !== null || current.outcome !== null) return current;
    return this.#replaceAttempt({ ...current, interruptionNoticedAt: at });
  }

  async endAttempt(
    jobId: string,
    attempt: number,
    outcome: AttemptOutcome,
    at: string,
  ): Promise<{ attempt: AttemptRecord; won: boolean }> {
    const current = this.#attempt(jobId, attempt);
    if (current.outcome !== null) return { attempt: current, won: false };
    return { attempt: this.#replaceAttempt({ ...current, outcome, endedAt: at }), won: true };
  }

  async recordDecision(
    jobId: string,
    attempt: number,
    decision: StoredDecision,
    counters: RecoveryCounters,
    change: StatusChange,
    patch?: Pick<JobPatch, 'failureReason'>,
  ): Promise<JobRecord> {
    const stored = this.#stored(jobId);
    expectStatus(stored.job, change);
    const current = this.#attempt(jobId, attempt);
    if (current.decision !== null) {
      throw new ConcurrentUpdateError(`attempt ${attempt} of job ${jobId} already has a decision`);
    }
    this.#replaceAttempt({ ...current, decision });
    return this.#applyChange(stored, change, {
      counters,
      failureReason: patch?.failureReason === undefined ? stored.job.failureReason : patch.failureReason,
    });
  }

  async listEvents(jobId: string): Promise<JobEvent[]> {
    return [...this.#stored(jobId).events];
  }

  #stored(jobId: string): StoredJob {
    const stored = this.#jobs.get(jobId);
    if (stored === undefined) throw new JobNotFoundError(jobId);
    return stored;
  }

  #attempt(jobId: string, attempt: number): AttemptRecord {
    const stored = this.#stored(jobId);
    const found = stored.attempts.get(attempt);
    if (found === undefined) throw new StaleAttemptError(`job ${jobId} has no attempt ${attempt}`);
    return found;
  }

  #replaceAttempt(attempt: AttemptRecord): AttemptRecord {
    const copy = frozenCopy(attempt);
    this.#stored(attempt.jobId).attempts.set(attempt.attempt, copy);
    return copy;
  }

  #applyChange(
    stored: StoredJob,
    change: StatusChange,
    fields: { counters: RecoveryCounters; failureReason: string | null },
  ): JobRecord {
    const event: JobEvent = {
      jobId: stored.job.jobId,
      at: change.at,
      from: change.from,
      to: change.to,
      attempt: change.attempt,
      reason: change.reason,
    };
    stored.job = frozenCopy({ ...stored.job, ...fields, status: change.to, updatedAt: change.at });
    // Oldest first by time, and in write order for equal times (a frozen test clock).
    const at = stored.events.findLastIndex((e) => compareStrings(e.at, change.at) <= 0);
    stored.events.splice(at + 1, 0, frozenCopy(event));
    return stored.job;
  }

  #own(jobId: string, attempt: number, instances: readonly InstanceRef[]): void {
    for (const instance of instances) this.#instances.set(instance.instanceId, { jobId, attempt });
  }
}

function expectStatus(job: JobRecord, change: StatusChange): void {
  if (job.status !== change.from) {
    throw new ConcurrentUpdateError(
      `job ${job.jobId} is ${job.status}, not ${change.from}; cannot change it to ${change.to}`,
    );
  }
}

function endedError(jobId: string, attempt: number, what: string): StaleAttemptError {
  return new StaleAttemptError(`attempt ${attempt} of job ${jobId} has already ended; ${what} changes nothing`);
}

/** The order of listJobs, the same as the DynamoDB index's sort key: creation time, then id. */
function listKey(job: JobRecord): string {
  return `${job.createdAt}#${job.jobId}`;
}

/** Code-unit order, as DynamoDB compares strings (for the ASCII that ids and times use). */
function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  return a < b ? -1 : 1;
}

function frozenCopy<T>(value: T): T {
  return deepFreeze(structuredClone(value));
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
