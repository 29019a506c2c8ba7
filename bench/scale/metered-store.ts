// The job store and launch pace of the scale simulation: the in-memory ones, wrapped by a
// meter that charges every call the DynamoDB capacity DynamoJobStore's calls would use,
// to the partitions they would touch (lib/adapters/dynamo-job-store/ and
// lib/workflow/job-table.ts: one partition per job, JobListIndex's single partition, InstanceIndex
// by instance id, the launch pace's item). A call that would take a partition past its
// per-second capacity is refused before anything is written, with the TransientError
// DynamoJobStore raises for a throttle that outlived the SDK's retries.
//
// Units: writes 1 per KB of the item (the larger image, estimated as the stored record's
// JSON size plus what the call adds), twice in a transaction; reads 1 per 4 KB strongly
// consistent (every GetItem and job-partition Query the store makes), half that eventually
// consistent (index queries, BatchGetItem). A failed conditional write is charged too.

import { JOB_LIST_INDEX, JOB_LIST_PARTITION, INSTANCE_INDEX, jobListPartition, QUEUE_INDEX, QUEUE_PARTITIONS, queuePartition } from '../../lib/workflow/job-table.ts';
import { queuedAtCreation } from '../../lib/adapters/job-store-rules.ts';
import { jobPk } from '../../lib/adapters/dynamo-job-store/index.ts';
import { LAUNCH_PACE_KEY, LAUNCH_SLOT_PREFIX } from '../../lib/adapters/dynamo-launch-pace.ts';
import type { InMemoryJobStore } from '../../lib/adapters/memory-job-store.ts';
import { TransientError } from '../../lib/errors.ts';
import { isTerminal } from '../../lib/status.ts';
import type { AttemptRecord, InstanceRef, JobRecord, NodeReport, Placement, ProgressMark, StoredDecision } from '../../lib/model.ts';
import type { DecisionBasis } from '../../lib/outcome.ts';
import type { AttemptOutcome, RecoveryCounters } from '../../lib/policy/types.ts';
import type { IdempotencyClaim, JobPatch, JobStore, LaunchPace, StatusChange } from '../../lib/ports.ts';
import type { AwaitStateName } from '../../lib/workflow/contract.ts';
import { PerSecondMeter } from './des.ts';
import type { EventQueue } from './des.ts';

/** JobListIndex as deployed (keys only), or as it was (every attribute), for the "before" run. */
export type JobListProjection = 'KEYS_ONLY' | 'ALL';

/** A charge of capacity units to one partition. */
interface Charge {
  readonly partition: string;
  readonly units: number;
}

/** Bytes of an EVENT item, an INSTANCE item and one JobListIndex keys-only entry (estimates). */
const EVENT_BYTES = 300;
const INSTANCE_ITEM_BYTES = 150;
const LIST_KEY_BYTES = 120;
/** What a report, a heartbeat, a token or an outcome adds to an attempt item (estimate). */
const ATTEMPT_GROWTH_BYTES = 250;

/** Totals and peaks of the capacity the store used. */
export interface CapacityUse {
  writeUnits: number;
  /** Calls that wrote (an UpdateItem, a PutItem, a transaction), however many units each. */
  writeCalls: number;
  readUnits: number;
  throttledCalls: number;
  readonly throttledByPartition: Map<string, number>;
}

/** Per-partition capacity in use, enforced at `writeLimit` and `readLimit` units a second. */
export class PartitionMeter {
  readonly writes = new PerSecondMeter();
  readonly reads = new PerSecondMeter();
  readonly use: CapacityUse = { writeUnits: 0, writeCalls: 0, readUnits: 0, throttledCalls: 0, throttledByPartition: new Map() };

  constructor(
    readonly clock: EventQueue,
    readonly writeLimit: number,
    readonly readLimit: number,
  ) {}

  /** Charges the call, or refuses all of it (nothing charged) when a partition would pass its limit. */
  charge(what: string, writes: readonly Charge[], reads: readonly Charge[]): void {
    const now = this.clock.nowMs;
    const over =
      writes.find((c) => this.writes.inSecond(c.partition, now) + c.units > this.writeLimit) ??
      reads.find((c) => this.reads.inSecond(c.partition, now) + c.units > this.readLimit);
    if (over !== undefined) {
      this.use.throttledCalls += 1;
      this.use.throttledByPartition.set(over.partition, (this.use.throttledByPartition.get(over.partition) ?? 0) + 1);
      throw new TransientError(`DynamoDB ${what}: ProvisionedThroughputExceededException on partition ${over.partition} (after the SDK's retries)`);
    }
    if (writes.length > 0) this.use.writeCalls += 1;
    for (const c of writes) {
      this.writes.add(c.partition, c.units, now);
      this.use.writeUnits += c.units;
    }
    for (const c of reads) {
      this.reads.add(c.partition, c.units, now);
      this.use.readUnits += c.units;
    }
  }
}

/** A partition of the table, by its pk. */
export function tablePartition(pk: string): string {
  return `table ${pk}`;
}
/** JobListIndex's one partition. */
export const JOB_LIST_GSI_PARTITION = `${JOB_LIST_INDEX.indexName} ${JOB_LIST_PARTITION}`;
/** The launch pace's item's partition. */
export const PACE_PARTITION = tablePartition(LAUNCH_PACE_KEY.pk.S);

const sizes = new WeakMap<object, number>();
function bytesOf(record: object): number {
  let size = sizes.get(record);
  if (size === undefined) {
    size = JSON.stringify(record).length;
    sizes.set(record, size);
  }
  return size;
}
const wcu = (bytes: number): number => Math.ceil(bytes / 1024);
const rcu = (bytes: number, consistent: boolean): number => Math.ceil(bytes / 4096) * (consistent ? 1 : 0.5);

/** A JobStore that meters (and throttles) as DynamoDB would, over an in-memory one. */
export class MeteredJobStore implements JobStore {
  /** Jobs in QueueIndex, so the write that takes one out is charged. */
  readonly #queued = new Set<string>();

  constructor(
    readonly inner: InMemoryJobStore,
    readonly meter: PartitionMeter,
    readonly projection: JobListProjection,
  ) {}

  async createJob(job: JobRecord): Promise<void> {
    const j = wcu(bytesOf(job));
    this.meter.charge('TransactWriteItems', [{ partition: tablePartition(jobPk(job.jobId)), units: 2 * (j + wcu(EVENT_BYTES)) }, this.#listIndexWrite(j, job.jobId), ...this.#queueWrite(job)], []);
    return this.inner.createJob(job);
  }

  async createJobOnce(job: JobRecord, claim: IdempotencyClaim, now: string): Promise<IdempotencyClaim> {
    const j = wcu(bytesOf(job));
    this.meter.charge(
      'TransactWriteItems',
      [
        { partition: tablePartition(`IDEMPOTENCY#${claim.key}`), units: 2 },
        { partition: tablePartition(jobPk(job.jobId)), units: 2 * (j + wcu(EVENT_BYTES)) },
        this.#listIndexWrite(j, job.jobId),
        ...this.#queueWrite(job),
      ],
      [],
    );
    return this.inner.createJobOnce(job, claim, now);
  }

  async getJob(jobId: string): Promise<JobRecord> {
    const job = await this.inner.getJob(jobId);
    this.meter.charge('GetItem', [], [{ partition: tablePartition(jobPk(jobId)), units: rcu(bytesOf(job), true) }]);
    return job;
  }

  async listJobs(options?: { limit?: number }): Promise<JobRecord[]> {
    const jobs = await this.inner.listJobs(options);
    if (this.projection === 'ALL') {
      const bytes = jobs.reduce((sum, job) => sum + bytesOf(job), 0);
      this.meter.charge('Query', [], [{ partition: JOB_LIST_GSI_PARTITION, units: rcu(bytes, false) }]);
      return jobs;
    }
    this.meter.charge(
      'Query and BatchGetItem',
      [],
      [
        // One query per list partition, each reading its share of the keys.
        ...this.#listPartitions(jobs).map(([partition, count]) => ({ partition, units: rcu(count * LIST_KEY_BYTES, false) })),
        ...jobs.map((job) => ({ partition: tablePartition(jobPk(job.jobId)), units: rcu(bytesOf(job), false) })),
      ],
    );
    return jobs;
  }

  async changeStatus(jobId: string, change: StatusChange, patch?: JobPatch): Promise<JobRecord> {
    const job = await this.inner.getJob(jobId);
    const j = wcu(bytesOf(job));
    const read = rcu(bytesOf(job), true);
    const leaves = isTerminal(change.to) ? this.#queueLeave(jobId) : [];
    this.meter.charge('TransactWriteItems (status)', [{ partition: tablePartition(jobPk(jobId)), units: 2 * (j + wcu(EVENT_BYTES)) }, ...this.#listIndexUpdate(j), ...leaves], [{ partition: tablePartition(jobPk(jobId)), units: 2 * read }]);
    return this.inner.changeStatus(jobId, change, patch);
  }

  async setExecution(jobId: string, executionArn: string): Promise<void> {
    const j = wcu(bytesOf(await this.inner.getJob(jobId)) + executionArn.length);
    this.meter.charge('UpdateItem', [{ partition: tablePartition(jobPk(jobId)), units: j }, ...this.#listIndexUpdate(j), ...this.#queueLeave(jobId)], []);
    return this.inner.setExecution(jobId, executionArn);
  }

  async listQueued(options: { limit: number }): Promise<JobRecord[]> {
    const jobs = await this.inner.listQueued(options);
    this.meter.charge('Query (ten partitions) and BatchGetItem (queue)', [], [...this.#queueReads(jobs), ...jobs.map((job) => ({ partition: tablePartition(jobPk(job.jobId)), units: rcu(bytesOf(job), false) }))]);
    return jobs;
  }

  async putAttempt(attempt: AttemptRecord): Promise<void> {
    const j = wcu(bytesOf(await this.inner.getJob(attempt.jobId)));
    this.meter.charge('TransactWriteItems (attempt)', [{ partition: tablePartition(jobPk(attempt.jobId)), units: 2 * (j + wcu(bytesOf(attempt))) }, ...this.#listIndexUpdate(j)], []);
    return this.inner.putAttempt(attempt);
  }

  async getAttempt(jobId: string, attempt: number): Promise<AttemptRecord> {
    const found = await this.inner.getAttempt(jobId, attempt);
    this.meter.charge('GetItem', [], [{ partition: tablePartition(jobPk(jobId)), units: rcu(bytesOf(found), true) }]);
    return found;
  }

  async listAttempts(jobId: string): Promise<AttemptRecord[]> {
    const attempts = await this.inner.listAttempts(jobId);
    const bytes = attempts.reduce((sum, attempt) => sum + bytesOf(attempt), 0);
    this.meter.charge('Query', [], [{ partition: tablePartition(jobPk(jobId)), units: Math.max(1, rcu(bytes, true)) }]);
    return attempts;
  }

  async findAttemptByInstance(instanceId: string): Promise<AttemptRecord | null> {
    const found = await this.inner.findAttemptByInstance(instanceId);
    const reads: Charge[] = [{ partition: `${INSTANCE_INDEX.indexName} ${instanceId}`, units: 0.5 }];
    if (found !== null) reads.push({ partition: tablePartition(jobPk(found.jobId)), units: rcu(bytesOf(found), true) });
    this.meter.charge('Query and GetItem', [], reads);
    return found;
  }

  async setInstances(jobId: string, attempt: number, placement: Placement, instances: readonly InstanceRef[]): Promise<void> {
    const a = wcu(bytesOf(await this.inner.getAttempt(jobId, attempt)) + JSON.stringify(instances).length);
    this.meter.charge(
      'TransactWriteItems (instances)',
      [
        { partition: tablePartition(jobPk(jobId)), units: 2 * (a + instances.length * wcu(INSTANCE_ITEM_BYTES)) },
        ...instances.map((instance) => ({ partition: `${INSTANCE_INDEX.indexName} ${instance.instanceId}`, units: 1 })),
      ],
      [],
    );
    return this.inner.setInstances(jobId, attempt, placement, instances);
  }

  async setTaskToken(jobId: string, attempt: number, taskToken: string, state: AwaitStateName): Promise<AttemptRecord> {
    await this.#attemptUpdate(jobId, attempt);
    return this.inner.setTaskToken(jobId, attempt, taskToken, state);
  }

  async addReport(jobId: string, attempt: number, report: NodeReport): Promise<{ attempt: AttemptRecord; duplicate: boolean }> {
    await this.#attemptUpdate(jobId, attempt);
    return this.inner.addReport(jobId, attempt, report);
  }

  async recordHeartbeat(jobId: string, attempt: number, at: string, nodeRank: number, progress?: ProgressMark): Promise<AttemptRecord> {
    await this.#attemptUpdate(jobId, attempt);
    return this.inner.recordHeartbeat(jobId, attempt, at, nodeRank, progress);
  }

  async noteStopAsked(jobId: string, attempt: number, at: string): Promise<void> {
    await this.#attemptUpdate(jobId, attempt);
    return this.inner.noteStopAsked(jobId, attempt, at);
  }

  async noteInstancesGone(jobId: string, attempt: number, at: string): Promise<void> {
    await this.#attemptUpdate(jobId, attempt);
    return this.inner.noteInstancesGone(jobId, attempt, at);
  }

  async noteInterruption(jobId: string, attempt: number, at: string): Promise<AttemptRecord> {
    await this.#attemptUpdate(jobId, attempt);
    return this.inner.noteInterruption(jobId, attempt, at);
  }

  async noteRebalance(jobId: string, attempt: number, at: string): Promise<AttemptRecord> {
    await this.#attemptUpdate(jobId, attempt);
    return this.inner.noteRebalance(jobId, attempt, at);
  }

  async putStandby(attempt: AttemptRecord): Promise<void> {
    const j = wcu(bytesOf(await this.inner.getJob(attempt.jobId)));
    // A condition check on the job (a read of it) and the attempt's item.
    this.meter.charge('TransactWriteItems (standby)', [{ partition: tablePartition(jobPk(attempt.jobId)), units: 2 * (j + wcu(bytesOf(attempt))) }], []);
    return this.inner.putStandby(attempt);
  }

  async adoptStandby(jobId: string, attempt: number, at: string): Promise<AttemptRecord> {
    const j = wcu(bytesOf(await this.inner.getJob(jobId)));
    const a = wcu(bytesOf(await this.inner.getAttempt(jobId, attempt)));
    this.meter.charge('TransactWriteItems (adopt standby)', [{ partition: tablePartition(jobPk(jobId)), units: 2 * (j + a) }, ...this.#listIndexUpdate(j)], []);
    return this.inner.adoptStandby(jobId, attempt, at);
  }

  async releaseStandby(jobId: string, attempt: number, at: string, reason: string): Promise<{ attempt: AttemptRecord; released: boolean }> {
    await this.#attemptUpdate(jobId, attempt);
    return this.inner.releaseStandby(jobId, attempt, at, reason);
  }

  async retireStandby(jobId: string, attempt: number): Promise<void> {
    const j = wcu(bytesOf(await this.inner.getJob(jobId)));
    this.meter.charge('TransactWriteItems (retire standby)', [{ partition: tablePartition(jobPk(jobId)), units: 2 * (j + 1) }, ...this.#listIndexUpdate(j)], []);
    return this.inner.retireStandby(jobId, attempt);
  }

  async noteRunStart(jobId: string, attempt: number, at: string): Promise<void> {
    await this.#attemptUpdate(jobId, attempt);
    return this.inner.noteRunStart(jobId, attempt, at);
  }

  async endAttempt(jobId: string, attempt: number, outcome: AttemptOutcome, at: string, basis?: DecisionBasis): Promise<{ attempt: AttemptRecord; won: boolean }> {
    await this.#attemptUpdate(jobId, attempt);
    return this.inner.endAttempt(jobId, attempt, outcome, at, basis);
  }

  async recordDecision(
    jobId: string,
    attempt: number,
    decision: StoredDecision,
    counters: RecoveryCounters,
    change: StatusChange,
    patch?: Pick<JobPatch, 'failureReason' | 'nextTask'>,
  ): Promise<JobRecord> {
    const job = await this.inner.getJob(jobId);
    const j = wcu(bytesOf(job));
    const a = wcu(bytesOf(await this.inner.getAttempt(jobId, attempt)) + ATTEMPT_GROWTH_BYTES);
    const read = rcu(bytesOf(job), true);
    const leaves = isTerminal(change.to) ? this.#queueLeave(jobId) : [];
    this.meter.charge('TransactWriteItems (decision)', [{ partition: tablePartition(jobPk(jobId)), units: 2 * (j + a + wcu(EVENT_BYTES)) }, ...this.#listIndexUpdate(j), ...leaves], [{ partition: tablePartition(jobPk(jobId)), units: 2 * read }]);
    return this.inner.recordDecision(jobId, attempt, decision, counters, change, patch);
  }

  async listEvents(jobId: string): Promise<import('../../lib/model.ts').JobEvent[]> {
    const events = await this.inner.listEvents(jobId);
    this.meter.charge('Query', [], [{ partition: tablePartition(jobPk(jobId)), units: Math.max(1, rcu(events.length * EVENT_BYTES, true)) }]);
    return events;
  }

  async #attemptUpdate(jobId: string, attempt: number): Promise<void> {
    const current = await this.inner.getAttempt(jobId, attempt);
    this.meter.charge('UpdateItem (attempt)', [{ partition: tablePartition(jobPk(jobId)), units: wcu(bytesOf(current) + ATTEMPT_GROWTH_BYTES) }], []);
  }

  /** A job created: its JobListIndex entry, keys only or the whole item. */
  /** A job created without an execution: its QueueIndex entry, in its shard. */
  #queueWrite(job: JobRecord): Charge[] {
    if (!queuedAtCreation(job)) return [];
    this.#queued.add(job.jobId);
    return [{ partition: `${QUEUE_INDEX.indexName} ${queuePartition(job.jobId)}`, units: wcu(LIST_KEY_BYTES) }];
  }

  /** A job leaving QueueIndex (its execution recorded, or its end): the index's delete. */
  #queueLeave(jobId: string): Charge[] {
    return this.#queued.delete(jobId) ? [{ partition: `${QUEUE_INDEX.indexName} ${queuePartition(jobId)}`, units: wcu(LIST_KEY_BYTES) }] : [];
  }

  /** A read of QueueIndex: every partition queried (at least 0.5 RCU each), each giving its keys. */
  #queueReads(jobs: readonly JobRecord[]): Charge[] {
    return QUEUE_PARTITIONS.map((partition) => {
      const keys = jobs.filter((job) => queuePartition(job.jobId) === partition).length;
      return { partition: `${QUEUE_INDEX.indexName} ${partition}`, units: Math.max(0.5, rcu(keys * LIST_KEY_BYTES, false)) };
    });
  }

  /**
   * A job created: its list index entry, the whole item with ALL (the layout before the
   * index was sharded: one partition), its keys in its shard with KEYS_ONLY (today's).
   */
  #listIndexWrite(jobUnits: number, jobId: string): Charge {
    if (this.projection === 'ALL') return { partition: JOB_LIST_GSI_PARTITION, units: jobUnits };
    return { partition: `${JOB_LIST_INDEX.indexName} ${jobListPartition(jobId)}`, units: wcu(LIST_KEY_BYTES) };
  }

  /** The list partitions a list of jobs came from, with how many keys each gave. */
  #listPartitions(jobs: readonly JobRecord[]): [string, number][] {
    const counts = new Map<string, number>();
    for (const job of jobs) {
      const partition = `${JOB_LIST_INDEX.indexName} ${jobListPartition(job.jobId)}`;
      counts.set(partition, (counts.get(partition) ?? 0) + 1);
    }
    return [...counts];
  }

  /** A job item updated: no index write with keys only (no key changes), the whole item with ALL. */
  #listIndexUpdate(jobUnits: number): Charge[] {
    return this.projection === 'ALL' ? [{ partition: JOB_LIST_GSI_PARTITION, units: jobUnits }] : [];
  }
}

/**
 * A LaunchPace that meters the DynamoDB writes DynamoLaunchPace makes: on its one item, one
 * conditional UpdateItem while launches queue, two when the bucket had fallen behind the
 * clock (the first write's condition fails, and is still charged); and a later slot's own
 * item, written at the reservation.
 */
export class MeteredLaunchPace implements LaunchPace {
  #paidOffAt = 0;

  constructor(
    readonly inner: LaunchPace,
    readonly meter: PartitionMeter,
    readonly config: { readonly burst: number; readonly perSecond: number },
  ) {}

  async reserve(instances: number, now: number, holder?: string): Promise<number> {
    const writes = this.#paidOffAt >= now ? 1 : 2;
    this.meter.charge('UpdateItem (launch pace)', [{ partition: PACE_PARTITION, units: writes }], []);
    const launchAt = await this.inner.reserve(instances, now, holder);
    this.#paidOffAt = launchAt + (this.config.burst * 1000) / this.config.perSecond;
    // A later slot is noted for its holder, in an item of its own.
    if (holder !== undefined && launchAt > now) this.meter.charge('PutItem (launch slot)', [{ partition: tablePartition(`${LAUNCH_SLOT_PREFIX}${holder}`), units: 1 }], []);
    return launchAt;
  }

  /** The slot's item taken out, then (when it was still ahead) a read and a write of the bucket. */
  async release(holder: string, now: number): Promise<boolean> {
    this.meter.charge('DeleteItem (launch slot)', [{ partition: tablePartition(`${LAUNCH_SLOT_PREFIX}${holder}`), units: 1 }], []);
    const given = await this.inner.release(holder, now);
    if (given) this.meter.charge('GetItem and UpdateItem (launch pace)', [{ partition: PACE_PARTITION, units: 1 }], [{ partition: PACE_PARTITION, units: 1 }]);
    return given;
  }
}
