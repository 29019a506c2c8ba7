// InMemoryJobStore: the JobStore port in process memory, for use-case tests and simulation.
//
// It keeps the DynamoJobStore's semantics exactly (the same contract suite runs against
// both): every check happens before any change, and no await sits between a read and its
// write, so each method is as atomic as the DynamoDB condition or transaction it mirrors.
// Records are copied and deep-frozen on the way in, and handed out frozen, so no caller
// can change stored state by mutating an object it passed in or got back.

import { JobNotFoundError } from '../errors.ts';
import { isTerminal } from '../status.ts';
import { isPhaseEnd, type AttemptRecord, type InstanceRef, type JobEvent, type JobRecord, type NodeReport, type Placement, type ProgressMark, type StandbyMark, type StoredDecision } from '../model.ts';
import type { DecisionBasis } from '../outcome.ts';
import type { AttemptOutcome, RecoveryCounters } from '../policy/types.ts';
import type { IdempotencyClaim, JobPatch, JobStore, StatusChange } from '../ports.ts';
import * as rules from './job-store-rules.ts';
import { isHolding, isReleased } from '../standby-rules.ts';
import type { AwaitStateName } from '../workflow/contract.ts';

interface StoredJob {
  job: JobRecord;
  attempts: Map<number, AttemptRecord>;
  events: JobEvent[];
}

/** A JobStore held in memory; one instance is one isolated database. */
export class InMemoryJobStore implements JobStore {
  readonly #jobs = new Map<string, StoredJob>();
  /** Jobs whose execution is not recorded yet, by id (listQueued). */
  readonly #queued = new Set<string>();
  readonly #instances = new Map<string, { readonly jobId: string; readonly attempt: number }>();
  readonly #claims = new Map<string, IdempotencyClaim>();

  async createJob(job: JobRecord): Promise<void> {
    this.#create(job);
  }

  async createJobOnce(job: JobRecord, claim: IdempotencyClaim, now: string): Promise<IdempotencyClaim> {
    const held = this.#claims.get(claim.key);
    if (held !== undefined && !rules.claimLapsed(held, now)) return held;
    this.#create(job);
    const stored = frozenCopy(claim);
    this.#claims.set(claim.key, stored);
    return stored;
  }

  async getJob(jobId: string): Promise<JobRecord> {
    return this.#stored(jobId).job;
  }

  async listJobs(options?: { limit?: number }): Promise<JobRecord[]> {
    const newestFirst = [...this.#jobs.values()]
      .map((stored) => stored.job)
      .sort((a, b) => compareStrings(rules.listKey(b), rules.listKey(a)));
    return options?.limit === undefined ? newestFirst : newestFirst.slice(0, Math.max(0, options.limit));
  }

  async changeStatus(jobId: string, change: StatusChange, patch?: JobPatch): Promise<JobRecord> {
    const stored = this.#stored(jobId);
    rules.expectStatus(stored.job, change);
    return this.#applyChange(stored, change, {
      counters: patch?.counters ?? stored.job.counters,
      failureReason: patch?.failureReason === undefined ? stored.job.failureReason : patch.failureReason,
    });
  }

  async setExecution(jobId: string, executionArn: string): Promise<void> {
    const stored = this.#stored(jobId);
    stored.job = frozenCopy({ ...stored.job, executionArn });
    this.#queued.delete(jobId);
  }

  async listQueued(options: { limit: number }): Promise<JobRecord[]> {
    const oldestFirst = [...this.#queued]
      .map((jobId) => this.#stored(jobId).job)
      .sort((a, b) => compareStrings(rules.listKey(a), rules.listKey(b)));
    return oldestFirst.slice(0, Math.max(0, options.limit));
  }

  async putAttempt(attempt: AttemptRecord): Promise<void> {
    const stored = this.#stored(attempt.jobId);
    if (stored.job.attemptCount !== attempt.attempt - 1) {
      throw rules.attemptOutOfSequenceError(attempt.jobId, stored.job.attemptCount, attempt.attempt);
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
    if (current.placement !== null) throw rules.instancesSetError(jobId, attempt);
    this.#replaceAttempt({ ...current, placement, instances });
    this.#own(jobId, attempt, instances);
  }

  async setTaskToken(jobId: string, attempt: number, taskToken: string, state: AwaitStateName): Promise<AttemptRecord> {
    return this.#replaceAttempt({ ...this.#attempt(jobId, attempt), taskToken, tokenState: state });
  }

  async addReport(
    jobId: string,
    attempt: number,
    report: NodeReport,
  ): Promise<{ attempt: AttemptRecord; duplicate: boolean }> {
    const current = this.#attempt(jobId, attempt);
    // A repeat is answered as one even after the attempt ended: the agent may be retrying
    // the very report that ended it.
    if (rules.hasReport(current, report)) return { attempt: current, duplicate: true };
    // A stopped phase's tail decides nothing, so it is kept after the attempt's end too.
    if (isPhaseEnd(report) && current.outcome !== null) throw rules.endedError(jobId, attempt, 'a report');
    if (isReleased(current)) throw rules.releasedError(jobId, attempt, 'a report');
    return { attempt: this.#replaceAttempt({ ...current, reports: [...current.reports, report] }), duplicate: false };
  }

  async recordHeartbeat(jobId: string, attempt: number, at: string, nodeRank: number, progress?: ProgressMark): Promise<AttemptRecord> {
    const current = this.#attempt(jobId, attempt);
    if (current.outcome !== null) throw rules.endedError(jobId, attempt, 'a heartbeat');
    if (isReleased(current)) throw rules.releasedError(jobId, attempt, 'a heartbeat');
    const heard = current.nodesHeardFrom.includes(nodeRank)
      ? current.nodesHeardFrom
      : [...current.nodesHeardFrom, nodeRank].sort((a, b) => a - b);
    const marks = current.nodeMarks?.[String(nodeRank)];
    const nodeMarks = marks?.firstHeartbeatAt === undefined ? { ...current.nodeMarks, [String(nodeRank)]: { ...marks, firstHeartbeatAt: at } } : current.nodeMarks;
    return this.#replaceAttempt({
      ...current,
      lastHeartbeatAt: at,
      nodesHeardFrom: heard,
      ...(nodeMarks === undefined ? {} : { nodeMarks }),
      ...(progress === undefined ? {} : { progress }),
    });
  }

  async noteStopAsked(jobId: string, attempt: number, at: string): Promise<void> {
    const current = this.#attempt(jobId, attempt);
    if (current.stopAskedAt === undefined) this.#replaceAttempt({ ...current, stopAskedAt: at });
  }

  async noteInstancesGone(jobId: string, attempt: number, at: string): Promise<void> {
    const current = this.#attempt(jobId, attempt);
    if (current.instancesGoneAt === undefined) this.#replaceAttempt({ ...current, instancesGoneAt: at });
  }


  async noteInterruption(jobId: string, attempt: number, at: string, nodeRank?: number): Promise<AttemptRecord> {
    const current = this.#attempt(jobId, attempt);
    if (current.interruptionNoticedAt !== null || current.outcome !== null) return current;
    return this.#replaceAttempt({ ...current, interruptionNoticedAt: at, ...(nodeRank === undefined ? {} : { interruptionNode: nodeRank }) });
  }

  async noteRebalance(jobId: string, attempt: number, at: string, nodeRank?: number): Promise<AttemptRecord> {
    const current = this.#attempt(jobId, attempt);
    if ((current.rebalanceNoticedAt ?? null) !== null || current.outcome !== null) return current;
    return this.#replaceAttempt({ ...current, rebalanceNoticedAt: at, ...(nodeRank === undefined ? {} : { rebalanceNode: nodeRank }) });
  }

  async putStandby(attempt: AttemptRecord): Promise<void> {
    const stored = this.#stored(attempt.jobId);
    const live = attempt.standby?.for;
    if (live === undefined || stored.job.attemptCount !== live || live !== attempt.attempt - 1 || stored.attempts.has(attempt.attempt)) {
      throw rules.standbyOutOfSequenceError(attempt.jobId, stored.job.attemptCount, attempt.attempt);
    }
    stored.attempts.set(attempt.attempt, frozenCopy(attempt));
    this.#own(attempt.jobId, attempt.attempt, attempt.instances);
  }

  async adoptStandby(jobId: string, attempt: number, at: string, kept: readonly InstanceRef[] = []): Promise<AttemptRecord> {
    const stored = this.#stored(jobId);
    const current = stored.attempts.get(attempt);
    if (current === undefined || !isHolding(current) || stored.job.attemptCount !== attempt - 1) {
      throw rules.standbySettledError(jobId, attempt, 'adopted');
    }
    stored.job = frozenCopy({ ...stored.job, attemptCount: attempt });
    const instances = [...current.instances, ...kept].sort((a, b) => a.nodeRank - b.nodeRank);
    const adopted = this.#replaceAttempt({ ...current, instances, standby: { ...(current.standby as StandbyMark), adoptedAt: at } });
    this.#own(jobId, attempt, kept);
    return adopted;
  }

  async releaseStandby(jobId: string, attempt: number, at: string, reason: string): Promise<{ attempt: AttemptRecord; released: boolean }> {
    const current = this.#attempt(jobId, attempt);
    if (!isHolding(current)) return { attempt: current, released: false };
    const standby: StandbyMark = { ...(current.standby as StandbyMark), releasedAt: at, releaseReason: reason };
    return { attempt: this.#replaceAttempt({ ...current, standby, endedAt: current.endedAt ?? at }), released: true };
  }

  async retireStandby(jobId: string, attempt: number): Promise<void> {
    const stored = this.#stored(jobId);
    const current = stored.attempts.get(attempt);
    if (current === undefined || !isReleased(current) || stored.job.attemptCount !== attempt - 1) {
      throw rules.standbySettledError(jobId, attempt, 'retired');
    }
    stored.job = frozenCopy({ ...stored.job, attemptCount: attempt });
  }

  async noteRunStart(jobId: string, attempt: number, at: string): Promise<void> {
    const current = this.#attempt(jobId, attempt);
    if ((current.runStartedAt ?? null) === null) this.#replaceAttempt({ ...current, runStartedAt: at });
  }

  async endAttempt(
    jobId: string,
    attempt: number,
    outcome: AttemptOutcome,
    at: string,
    basis?: DecisionBasis,
  ): Promise<{ attempt: AttemptRecord; won: boolean }> {
    const current = this.#attempt(jobId, attempt);
    if (current.outcome !== null) return { attempt: current, won: false };
    if (basis !== undefined && !rules.matchesBasis(current, basis)) return { attempt: current, won: false };
    return { attempt: this.#replaceAttempt({ ...current, outcome, endedAt: at }), won: true };
  }

  async recordDecision(
    jobId: string,
    attempt: number,
    decision: StoredDecision,
    counters: RecoveryCounters,
    change: StatusChange,
    patch?: Pick<JobPatch, 'failureReason' | 'nextTask'>,
  ): Promise<JobRecord> {
    const stored = this.#stored(jobId);
    rules.expectStatus(stored.job, change);
    const current = this.#attempt(jobId, attempt);
    if (current.decision !== null) throw rules.decisionSetError(jobId, attempt);
    this.#replaceAttempt({ ...current, decision });
    return this.#applyChange(stored, change, {
      counters,
      failureReason: patch?.failureReason === undefined ? stored.job.failureReason : patch.failureReason,
      ...(patch?.nextTask === undefined ? {} : { spec: patch.nextTask.spec, pipeline: patch.nextTask.pipeline }),
    });
  }

  async listEvents(jobId: string): Promise<JobEvent[]> {
    return [...this.#stored(jobId).events];
  }

  #create(job: JobRecord): void {
    if (this.#jobs.has(job.jobId)) throw rules.jobExistsError(job.jobId);
    this.#jobs.set(job.jobId, { job: frozenCopy(job), attempts: new Map(), events: [frozenCopy(rules.createdEvent(job))] });
    if (rules.queuedAtCreation(job)) this.#queued.add(job.jobId);
  }

  #stored(jobId: string): StoredJob {
    const stored = this.#jobs.get(jobId);
    if (stored === undefined) throw new JobNotFoundError(jobId);
    return stored;
  }

  #attempt(jobId: string, attempt: number): AttemptRecord {
    const stored = this.#stored(jobId);
    const found = stored.attempts.get(attempt);
    if (found === undefined) throw rules.noAttemptError(jobId, attempt);
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
    fields: Pick<JobRecord, 'counters' | 'failureReason'> & Partial<Pick<JobRecord, 'spec' | 'pipeline'>>,
  ): JobRecord {
    const event = rules.statusEvent(stored.job.jobId, change);
    stored.job = frozenCopy({ ...stored.job, ...fields, status: change.to, updatedAt: change.at });
    if (isTerminal(change.to)) this.#queued.delete(stored.job.jobId);
    // Oldest first by time, and in write order for equal times (a frozen test clock).
    const at = stored.events.findLastIndex((e) => compareStrings(e.at, change.at) <= 0);
    stored.events.splice(at + 1, 0, frozenCopy(event));
    return stored.job;
  }

  #own(jobId: string, attempt: number, instances: readonly InstanceRef[]): void {
    for (const instance of instances) this.#instances.set(instance.instanceId, { jobId, attempt });
  }
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
