// DynamoJobStore: the JobStore port on one DynamoDB table (layout in lib/workflow/job-table.ts).
//
// Every write that changes state the controller relies on is conditional: each is a
// ConditionalWrite (write.ts) under a named condition (conditions.ts), so a lost race is
// always a refused write, never a lost update. Status changes are TransactWriteItems: the
// job, the EVENT row and (for a decision) the attempt are written together or not at all.
// A refused write is explained from the item DynamoDB hands back with the refusal (ALL_OLD),
// read again only where none came back (the item is missing, or the service gives none).
// This is the only module that knows DynamoDB exceptions; it turns them into the port's
// errors, and throttling or a 5xx that outlived the SDK's retries into TransientError (the
// state machine retries the step).

import {
  BatchGetItemCommand,
  ConditionalCheckFailedException,
  GetItemCommand,
  QueryCommand,
  TransactionCanceledException,
  TransactionConflictException,
  TransactWriteItemsCommand,
  UpdateItemCommand,
  type DynamoDBClient,
  type QueryCommandInput,
  type TransactWriteItem,
} from '@aws-sdk/client-dynamodb';
import type { NativeAttributeValue } from '@aws-sdk/util-dynamodb';
import { ConcurrentUpdateError, JobNotFoundError } from '../../errors.ts';
import { isPhaseEnd, type AttemptRecord, type InstanceRef, type JobEvent, type JobRecord, type NodeReport, type Placement, type ProgressMark, type StoredDecision } from '../../model.ts';
import type { DecisionBasis } from '../../outcome.ts';
import type { AttemptOutcome, RecoveryCounters } from '../../policy/types.ts';
import type { IdempotencyClaim, JobPatch, JobStore, StatusChange } from '../../ports.ts';
import { isReleased } from '../../standby-rules.ts';
import { isTerminal } from '../../status.ts';
import type { AwaitStateName } from '../../workflow/contract.ts';
import { sendAws, transientError } from '../aws-errors.ts';
import {
  INSTANCE_INDEX,
  JOB_LIST_INDEX,
  JOB_LIST_PARTITIONS,
  QUEUE_INDEX,
  QUEUE_PARTITIONS,
  TABLE_KEY,
  type IndexDefinition,
} from '../../workflow/job-table.ts';
import * as rules from '../job-store-rules.ts';
import * as when from './conditions.ts';
import {
  ATTEMPT_PREFIX,
  attemptItem,
  claimItem,
  EVENT_COUNT,
  EVENT_PREFIX,
  eventCountOf,
  eventItem,
  instanceItems,
  jobItem,
  jobPk,
  keys,
  nodeMarkAttribute,
  QUEUE_KEYS,
  REPORT_KEYS,
  toAttempt,
  toClaim,
  toEvent,
  toJob,
  topLevel,
  type Item,
} from './items.ts';
import { CONDITION_FAILED, TableWrites, TransactionRefusal, type ConditionalWrite } from './write.ts';

/** The most keys one BatchGetItem takes. */
const BATCH_GET_LIMIT = 100;
/** Tries of a batch whose keys DynamoDB keeps leaving unprocessed, before a TransientError. */
const BATCH_GET_ROUNDS = 8;

const TRANSACTION_CONFLICT = 'TransactionConflict';
/** Cancellation codes of an item DynamoDB throttled inside a transaction. */
const THROTTLED_ITEM_CODES: ReadonlySet<string> = new Set(['ThrottlingError', 'ProvisionedThroughputExceeded']);

/** What a DynamoJobStore needs: a client (built by the caller) and the table's name. */
export interface DynamoJobStoreOptions {
  readonly client: DynamoDBClient;
  readonly tableName: string;
}

/** An UpdateItem's answer: the item as written, or refused with the item as it was when given. */
type UpdateResult = { readonly written: Item } | { readonly refused: Item | undefined };

/** A JobStore on DynamoDB. */
export class DynamoJobStore implements JobStore {
  readonly #client: DynamoDBClient;
  readonly #tableName: string;
  readonly #writes: TableWrites;

  constructor(options: DynamoJobStoreOptions) {
    this.#client = options.client;
    this.#tableName = options.tableName;
    this.#writes = new TableWrites(options.tableName);
  }

  async createJob(job: JobRecord): Promise<void> {
    const refusal = await this.#transact([
      this.#writes.put(jobItem(job), when.ITEM_IS_NEW),
      this.#writes.put(eventItem(rules.createdEvent(job), 1), when.ITEM_IS_NEW),
    ]);
    if (refusal !== null) throw rules.jobExistsError(job.jobId);
  }

  async createJobOnce(job: JobRecord, claim: IdempotencyClaim, now: string): Promise<IdempotencyClaim> {
    const refusal = await this.#transact([
      this.#writes.put(claimItem(claim), when.claimFree(now)),
      this.#writes.put(jobItem(job), when.ITEM_IS_NEW),
      this.#writes.put(eventItem(rules.createdEvent(job), 1), when.ITEM_IS_NEW),
    ]);
    if (refusal === null) return claim;
    if (!refusal.refused(0)) throw rules.jobExistsError(job.jobId);
    const item = refusal.item(0) ?? (await this.#get(keys.claim(claim.key)));
    const held = item === undefined ? null : toClaim(item);
    if (held === null || rules.claimLapsed(held, now)) {
      throw new ConcurrentUpdateError('the idempotency key was held when the job was written, and no longer is');
    }
    return held;
  }

  async getJob(jobId: string): Promise<JobRecord> {
    return (await this.#job(jobId)).job;
  }

  async listJobs(options?: { limit?: number }): Promise<JobRecord[]> {
    const limit = options?.limit;
    if (limit !== undefined && limit <= 0) return [];
    return this.#listAcross(JOB_LIST_INDEX, JOB_LIST_PARTITIONS, 'newest', limit);
  }

  /**
   * The jobs an index holds across its partitions, by its sort key (`<createdAt>#<id>`):
   * each partition read up to `limit` in that order, the keys merged, the first `limit`
   * of them all read (BatchGetItem).
   */
  async #listAcross(index: IndexDefinition, partitions: readonly string[], order: 'newest' | 'oldest', limit: number | undefined): Promise<JobRecord[]> {
    const pages = await Promise.all(
      partitions.map((partition) =>
        this.#query(
          {
            IndexName: index.indexName,
            KeyConditionExpression: '#pk = :pk',
            ExpressionAttributeNames: { '#pk': index.partitionKey },
            ExpressionAttributeValues: { ':pk': { S: partition } },
            ScanIndexForward: order === 'oldest',
          },
          limit,
        ),
      ),
    );
    const keyOf = (item: Item): string => item[index.sortKey]?.S ?? '';
    const direction = order === 'newest' ? -1 : 1;
    const merged = pages.flat().sort((a, b) => direction * (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0));
    const items = limit === undefined ? merged : merged.slice(0, limit);
    return (await this.#getMany(items.map(keys.of))).map(toJob);
  }

  async changeStatus(jobId: string, change: StatusChange, patch?: JobPatch): Promise<JobRecord> {
    await this.#writeStatusChange(jobId, change, {
      ...(patch?.counters === undefined ? {} : { counters: patch.counters }),
      ...(patch?.failureReason === undefined ? {} : { failureReason: patch.failureReason }),
    });
    return this.getJob(jobId);
  }

  async setExecution(jobId: string, executionArn: string): Promise<void> {
    // Its execution recorded, the job's start no longer waits: it leaves the queue.
    const result = await this.#update({ key: keys.job(jobId), set: { executionArn }, remove: QUEUE_KEYS, condition: when.ITEM_EXISTS });
    if ('refused' in result) throw new JobNotFoundError(jobId);
  }

  async listQueued(options: { limit: number }): Promise<JobRecord[]> {
    if (options.limit <= 0) return [];
    return this.#listAcross(QUEUE_INDEX, QUEUE_PARTITIONS, 'oldest', options.limit);
  }

  async putAttempt(attempt: AttemptRecord): Promise<void> {
    const { jobId } = attempt;
    const refusal = await this.#transact([
      this.#writes.inTransaction(advanceAttemptCount(jobId, attempt.attempt)),
      this.#writes.put(attemptItem(attempt), when.ITEM_IS_NEW),
      ...this.#instancePuts(jobId, attempt.attempt, attempt.instances),
    ]);
    if (refusal === null) return;
    const job = await this.#jobFrom(refusal.item(0), jobId);
    throw rules.attemptOutOfSequenceError(jobId, job.attemptCount, attempt.attempt);
  }

  async getAttempt(jobId: string, attempt: number): Promise<AttemptRecord> {
    const item = await this.#get(keys.attempt(jobId, attempt));
    if (item === undefined) return this.#missingAttempt(jobId, attempt);
    return toAttempt(item);
  }

  async listAttempts(jobId: string): Promise<AttemptRecord[]> {
    const attempts = (await this.#queryJobPartition(jobId, ATTEMPT_PREFIX)).map(toAttempt);
    if (attempts.length === 0) await this.#job(jobId);
    return attempts.sort((a, b) => a.attempt - b.attempt);
  }

  async findAttemptByInstance(instanceId: string): Promise<AttemptRecord | null> {
    const [owner] = await this.#query(
      {
        IndexName: INSTANCE_INDEX.indexName,
        KeyConditionExpression: '#pk = :pk',
        ExpressionAttributeNames: { '#pk': INSTANCE_INDEX.partitionKey },
        ExpressionAttributeValues: { ':pk': { S: instanceId } },
      },
      1,
    );
    const pk = owner?.[TABLE_KEY.partitionKey];
    const attemptSk = owner?.[INSTANCE_INDEX.sortKey];
    if (pk === undefined || attemptSk === undefined) return null;
    const item = await this.#get({ [TABLE_KEY.partitionKey]: pk, [TABLE_KEY.sortKey]: attemptSk });
    return item === undefined ? null : toAttempt(item);
  }

  async setInstances(
    jobId: string,
    attempt: number,
    placement: Placement,
    instances: readonly InstanceRef[],
  ): Promise<void> {
    const refusal = await this.#transact([
      this.#writes.inTransaction({ key: keys.attempt(jobId, attempt), set: { placement, instances }, condition: when.PLACEMENT_UNSET }),
      ...this.#instancePuts(jobId, attempt, instances),
    ]);
    if (refusal === null) return;
    await this.#attemptFrom(refusal.item(0), jobId, attempt);
    throw rules.instancesSetError(jobId, attempt);
  }

  async setTaskToken(jobId: string, attempt: number, taskToken: string, state: AwaitStateName): Promise<AttemptRecord> {
    const write = { key: keys.attempt(jobId, attempt), set: { taskToken, tokenState: state }, condition: when.ITEM_EXISTS };
    return this.#updateAttempt(jobId, attempt, write, (current) => {
      throw new ConcurrentUpdateError(`attempt ${current.attempt} of job ${jobId} refused its task token`);
    });
  }

  async addReport(
    jobId: string,
    attempt: number,
    report: NodeReport,
  ): Promise<{ attempt: AttemptRecord; duplicate: boolean }> {
    const key = rules.reportKey(report);
    const result = await this.#update({
      key: keys.attempt(jobId, attempt),
      append: { reports: [report] },
      add: { [REPORT_KEYS]: new Set([key]) },
      condition: isPhaseEnd(report) ? when.reportIsNew(key) : when.stoppedTailIsNew(key),
    });
    if ('written' in result) return { attempt: toAttempt(result.written), duplicate: false };
    // Reports and outcomes are only ever added, so the refused item says why it was refused.
    const current = await this.#attemptFrom(result.refused, jobId, attempt);
    if (rules.hasReport(current, report)) return { attempt: current, duplicate: true };
    if (isPhaseEnd(report) && current.outcome !== null) throw rules.endedError(jobId, attempt, 'a report');
    if (isReleased(current)) throw rules.releasedError(jobId, attempt, 'a report');
    throw new ConcurrentUpdateError(`report ${key} for attempt ${attempt} of job ${jobId} was refused`);
  }

  async recordHeartbeat(jobId: string, attempt: number, at: string, nodeRank: number, progress?: ProgressMark): Promise<AttemptRecord> {
    const result = await this.#update({
      key: keys.attempt(jobId, attempt),
      set: { lastHeartbeatAt: at, ...(progress === undefined ? {} : { progress }) },
      // The node's first beat, in the same write: its timeline costs no write of its own.
      setIfAbsent: { [nodeMarkAttribute('firstHeartbeatAt', nodeRank)]: at },
      // A number set: adding a rank twice keeps one, and two nodes' beats never clash.
      add: { nodesHeardFrom: new Set([nodeRank]) },
      condition: when.TAKES_HEARTBEAT,
    });
    if ('written' in result) return toAttempt(result.written);
    const current = await this.#attemptFrom(result.refused, jobId, attempt);
    if (isReleased(current)) throw rules.releasedError(jobId, attempt, 'a heartbeat');
    throw rules.endedError(jobId, attempt, 'a heartbeat');
  }

  async noteInterruption(jobId: string, attempt: number, at: string, nodeRank?: number): Promise<AttemptRecord> {
    return this.#noteOnce(jobId, attempt, 'interruptionNoticedAt', at, nodeRank === undefined ? {} : { interruptionNode: nodeRank });
  }

  async noteRebalance(jobId: string, attempt: number, at: string, nodeRank?: number): Promise<AttemptRecord> {
    return this.#noteOnce(jobId, attempt, 'rebalanceNoticedAt', at, nodeRank === undefined ? {} : { rebalanceNode: nodeRank });
  }

  /** Notes EC2's word on an attempt that has not ended, and the node it named, the first time only. */
  #noteOnce(
    jobId: string,
    attempt: number,
    field: 'interruptionNoticedAt' | 'rebalanceNoticedAt',
    at: string,
    node: { interruptionNode?: number } | { rebalanceNode?: number },
  ): Promise<AttemptRecord> {
    const write = { key: keys.attempt(jobId, attempt), set: { [field]: at, ...node }, condition: when.firstNotice(field) };
    return this.#updateAttempt(jobId, attempt, write, (current) => current);
  }

  async putStandby(attempt: AttemptRecord): Promise<void> {
    const { jobId } = attempt;
    const live = attempt.standby?.for;
    if (live === undefined || live !== attempt.attempt - 1) {
      const { job } = await this.#job(jobId);
      throw rules.standbyOutOfSequenceError(jobId, job.attemptCount, attempt.attempt);
    }
    const refusal = await this.#transact([
      this.#writes.inTransaction({ key: keys.job(jobId), condition: when.liveAttemptIs(live) }),
      this.#writes.put(attemptItem(attempt), when.ITEM_IS_NEW),
      ...this.#instancePuts(jobId, attempt.attempt, attempt.instances),
    ]);
    if (refusal === null) return;
    const job = await this.#jobFrom(refusal.item(0), jobId);
    throw rules.standbyOutOfSequenceError(jobId, job.attemptCount, attempt.attempt);
  }

  async adoptStandby(jobId: string, attempt: number, at: string, kept: readonly InstanceRef[] = []): Promise<AttemptRecord> {
    // Kept nodes join its instances, and their index moves to it, in the write that adopts it.
    const joined = kept.length === 0 ? {} : { instances: [...(await this.getAttempt(jobId, attempt)).instances, ...kept].sort((a, b) => a.nodeRank - b.nodeRank) };
    const refusal = await this.#transact([
      this.#writes.inTransaction(advanceAttemptCount(jobId, attempt)),
      this.#writes.inTransaction({ key: keys.attempt(jobId, attempt), set: { 'standby.adoptedAt': at, ...joined }, condition: when.STANDBY_UNSETTLED }),
      ...this.#instancePuts(jobId, attempt, kept),
    ]);
    if (refusal !== null) {
      await this.#attemptFrom(refusal.item(1), jobId, attempt);
      throw rules.standbySettledError(jobId, attempt, 'adopted');
    }
    return this.getAttempt(jobId, attempt);
  }

  async releaseStandby(jobId: string, attempt: number, at: string, reason: string): Promise<{ attempt: AttemptRecord; released: boolean }> {
    const result = await this.#update({
      key: keys.attempt(jobId, attempt),
      set: { 'standby.releasedAt': at, 'standby.releaseReason': reason },
      setIfAbsent: { endedAt: at },
      condition: when.STANDBY_UNSETTLED,
    });
    if ('written' in result) return { attempt: toAttempt(result.written), released: true };
    return { attempt: await this.#attemptFrom(result.refused, jobId, attempt), released: false };
  }

  async retireStandby(jobId: string, attempt: number): Promise<void> {
    const refusal = await this.#transact([
      this.#writes.inTransaction(advanceAttemptCount(jobId, attempt)),
      this.#writes.inTransaction({ key: keys.attempt(jobId, attempt), condition: when.STANDBY_RELEASED }),
    ]);
    if (refusal === null) return;
    await this.#jobFrom(refusal.item(0), jobId);
    throw rules.standbySettledError(jobId, attempt, 'retired');
  }

  async noteStopAsked(jobId: string, attempt: number, at: string): Promise<void> {
    const write = { key: keys.attempt(jobId, attempt), setIfAbsent: { stopAskedAt: at }, condition: when.ITEM_EXISTS };
    await this.#updateAttempt(jobId, attempt, write, (current) => current);
  }

  async noteInstancesGone(jobId: string, attempt: number, at: string): Promise<void> {
    const write = { key: keys.attempt(jobId, attempt), setIfAbsent: { instancesGoneAt: at }, condition: when.ITEM_EXISTS };
    await this.#updateAttempt(jobId, attempt, write, (current) => current);
  }

  async noteRunStart(jobId: string, attempt: number, at: string): Promise<void> {
    const write = { key: keys.attempt(jobId, attempt), set: { runStartedAt: at }, condition: when.RUN_START_UNSET };
    await this.#updateAttempt(jobId, attempt, write, (current) => current);
  }

  async endAttempt(
    jobId: string,
    attempt: number,
    outcome: AttemptOutcome,
    at: string,
    basis?: DecisionBasis,
  ): Promise<{ attempt: AttemptRecord; won: boolean }> {
    let won = true;
    const write = { key: keys.attempt(jobId, attempt), set: { outcome, endedAt: at }, condition: when.endsOnce(basis) };
    const stored = await this.#updateAttempt(jobId, attempt, write, (current) => {
      won = false;
      return current;
    });
    return { attempt: stored, won };
  }

  async recordDecision(
    jobId: string,
    attempt: number,
    decision: StoredDecision,
    counters: RecoveryCounters,
    change: StatusChange,
    patch?: Pick<JobPatch, 'failureReason' | 'nextTask'>,
  ): Promise<JobRecord> {
    const decide: ConditionalWrite = { key: keys.attempt(jobId, attempt), set: { decision }, condition: when.DECISION_UNSET };
    await this.#writeStatusChange(
      jobId,
      change,
      {
        counters,
        ...(patch?.failureReason === undefined ? {} : { failureReason: patch.failureReason }),
        ...(patch?.nextTask === undefined ? {} : { spec: patch.nextTask.spec, pipeline: patch.nextTask.pipeline }),
      },
      decide,
      async (refused) => {
        await this.#attemptFrom(refused, jobId, attempt);
        throw rules.decisionSetError(jobId, attempt);
      },
    );
    return this.getJob(jobId);
  }

  async listEvents(jobId: string): Promise<JobEvent[]> {
    const events = (await this.#queryJobPartition(jobId, EVENT_PREFIX)).map(toEvent);
    if (events.length === 0) await this.#job(jobId);
    return events;
  }

  /**
   * The job update (status, `fields` (a null removes one), the event count) and its EVENT
   * row, plus `also`, in one transaction conditional on the status read just before.
   * `onAlsoRefused` explains a refusal of `also`, given the refused item where it came back.
   */
  async #writeStatusChange(
    jobId: string,
    change: StatusChange,
    fields: Record<string, NativeAttributeValue>,
    also?: ConditionalWrite,
    onAlsoRefused?: (refused: Item | undefined) => Promise<never>,
  ): Promise<void> {
    const { job, eventCount } = await this.#job(jobId);
    rules.expectStatus(job, change);
    // Event rows are numbered per job so that equal timestamps keep their write order; the
    // count is part of the condition, so two writers can never take the same number.
    const seq = eventCount + 1;
    const { set, remove } = topLevel({
      ...fields,
      status: change.to,
      updatedAt: change.at,
      [EVENT_COUNT]: seq,
      // An ended job's start waits no more: it leaves the queue.
      ...(isTerminal(change.to) ? Object.fromEntries(QUEUE_KEYS.map((name) => [name, null])) : {}),
    });
    const refusal = await this.#transact([
      this.#writes.inTransaction({ key: keys.job(jobId), set, remove, condition: when.jobAsRead(change.from, eventCount) }),
      ...(also === undefined ? [] : [this.#writes.inTransaction(also)]),
      this.#writes.put(eventItem(rules.statusEvent(jobId, change), seq), when.ITEM_IS_NEW),
    ]);
    if (refusal === null) return;
    if (refusal.refused(0)) {
      rules.expectStatus(await this.#jobFrom(refusal.item(0), jobId), change);
      throw new ConcurrentUpdateError(`job ${jobId} changed while it was moving from ${change.from} to ${change.to}`);
    }
    if (also !== undefined && refusal.refused(1) && onAlsoRefused !== undefined) await onAlsoRefused(refusal.item(1));
    throw new ConcurrentUpdateError(`job ${jobId}: a status change was refused (${refusal.codes.join(', ')})`);
  }

  /**
   * An attempt's conditional write; returns the attempt as it now is, or, refused, what
   * `onRefused` makes of the attempt as it was (a missing job or attempt throws first).
   */
  async #updateAttempt(
    jobId: string,
    attempt: number,
    write: ConditionalWrite,
    onRefused: (current: AttemptRecord) => AttemptRecord,
  ): Promise<AttemptRecord> {
    const result = await this.#update(write);
    if ('written' in result) return toAttempt(result.written);
    return onRefused(await this.#attemptFrom(result.refused, jobId, attempt));
  }

  /**
   * Sends a conditional write as an UpdateItem. A refusal is an answer, with the item as
   * it was where DynamoDB gave it. One that met a transaction in flight on the same item
   * (TransactionConflictException) lost a race, as a cancelled transaction does:
   * ConcurrentUpdateError, which the use cases retry and the API answers as retryable.
   */
  async #update(write: ConditionalWrite): Promise<UpdateResult> {
    try {
      const result = await sendAws('DynamoDB UpdateItem', () => this.#client.send(new UpdateItemCommand(this.#writes.update(write))));
      return { written: result.Attributes ?? {} };
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return { refused: error.Item };
      if (error instanceof TransactionConflictException) {
        throw new ConcurrentUpdateError(`a transaction on the same item was in progress; the update was refused (${error.message})`);
      }
      throw error;
    }
  }

  /**
   * Runs a transaction; null when it was applied, else its refusal (a refused condition).
   * A transaction cancelled only because another write to one of its items was in flight
   * (TransactionConflict) lost a race: ConcurrentUpdateError, which the use cases retry on
   * a fresh read. One cancelled because an item was throttled, like a throttled or failed
   * call, is a TransientError (nothing was written; the state machine retries the step).
   * Anything else (a validation error) is thrown as it is.
   */
  async #transact(items: readonly TransactWriteItem[]): Promise<TransactionRefusal | null> {
    try {
      await sendAws('DynamoDB TransactWriteItems', () => this.#client.send(new TransactWriteItemsCommand({ TransactItems: [...items] })));
      return null;
    } catch (error) {
      const reasons = error instanceof TransactionCanceledException ? (error.CancellationReasons ?? []) : [];
      const codes = reasons.map((r) => r.Code ?? 'None');
      if (codes.includes(CONDITION_FAILED)) return new TransactionRefusal(codes, reasons.map((r) => r.Item));
      if (codes.includes(TRANSACTION_CONFLICT)) {
        throw new ConcurrentUpdateError(`a write to the same items was in progress; the transaction was cancelled (${codes.join(', ')})`);
      }
      if (codes.some((code) => THROTTLED_ITEM_CODES.has(code))) throw transientError('DynamoDB TransactWriteItems', error);
      throw error;
    }
  }

  /** The instance index's items of an attempt, as puts of a transaction. */
  #instancePuts(jobId: string, attempt: number, instances: readonly InstanceRef[]): TransactWriteItem[] {
    return instanceItems(jobId, attempt, instances).map((item) => this.#writes.put(item));
  }

  /** A job from the item a refusal gave back, else read (JobNotFoundError if there is none). */
  async #jobFrom(refused: Item | undefined, jobId: string): Promise<JobRecord> {
    return refused === undefined ? (await this.#job(jobId)).job : toJob(refused);
  }

  /** An attempt from the item a refusal gave back, else read (the port's error if there is none). */
  async #attemptFrom(refused: Item | undefined, jobId: string, attempt: number): Promise<AttemptRecord> {
    return refused === undefined ? this.getAttempt(jobId, attempt) : toAttempt(refused);
  }

  async #job(jobId: string): Promise<{ job: JobRecord; eventCount: number }> {
    const item = await this.#get(keys.job(jobId));
    if (item === undefined) throw new JobNotFoundError(jobId);
    return { job: toJob(item), eventCount: eventCountOf(item) };
  }

  async #missingAttempt(jobId: string, attempt: number): Promise<never> {
    await this.#job(jobId);
    throw rules.noAttemptError(jobId, attempt);
  }

  async #get(key: Item): Promise<Item | undefined> {
    const result = await sendAws('DynamoDB GetItem', () =>
      this.#client.send(new GetItemCommand({ TableName: this.#tableName, Key: key, ConsistentRead: true })),
    );
    return result.Item;
  }

  /**
   * Items by key, in the keys' order, skipping any gone since the keys were read: 100 per
   * BatchGetItem, and the keys DynamoDB leaves unprocessed (throttling) asked again after
   * a short, growing pause.
   */
  async #getMany(keyList: readonly Item[]): Promise<Item[]> {
    const found = new Map<string, Item>();
    const id = (item: Item) => `${item[TABLE_KEY.partitionKey]?.S}\u0000${item[TABLE_KEY.sortKey]?.S}`;
    for (let start = 0; start < keyList.length; start += BATCH_GET_LIMIT) {
      let pending: Item[] = keyList.slice(start, start + BATCH_GET_LIMIT);
      for (let round = 0; pending.length > 0; round += 1) {
        if (round > 0) await new Promise((resolve) => setTimeout(resolve, Math.min(50 * 2 ** round, 2000)));
        const result = await sendAws('DynamoDB BatchGetItem', () =>
          this.#client.send(new BatchGetItemCommand({ RequestItems: { [this.#tableName]: { Keys: pending } } })),
        );
        for (const item of result.Responses?.[this.#tableName] ?? []) found.set(id(item), item);
        pending = result.UnprocessedKeys?.[this.#tableName]?.Keys ?? [];
        if (round >= BATCH_GET_ROUNDS && pending.length > 0) throw transientError('DynamoDB BatchGetItem', new Error(`${pending.length} keys left unprocessed after ${round + 1} tries`));
      }
    }
    return keyList.flatMap((key) => {
      const item = found.get(id(key));
      return item === undefined ? [] : [item];
    });
  }

  async #queryJobPartition(jobId: string, prefix: string): Promise<Item[]> {
    return this.#query({
      KeyConditionExpression: '#pk = :pk AND begins_with(#sk, :prefix)',
      ExpressionAttributeNames: { '#pk': TABLE_KEY.partitionKey, '#sk': TABLE_KEY.sortKey },
      ExpressionAttributeValues: { ':pk': { S: jobPk(jobId) }, ':prefix': { S: prefix } },
      ConsistentRead: true,
    });
  }

  /** A Query followed page by page, up to `limit` items. */
  async #query(input: Omit<QueryCommandInput, 'TableName'>, limit?: number): Promise<Item[]> {
    const items: Item[] = [];
    let start: Item | undefined;
    do {
      const page = await sendAws('DynamoDB Query', () =>
        this.#client.send(
          new QueryCommand({
            ...input,
            TableName: this.#tableName,
            ExclusiveStartKey: start,
            ...(limit === undefined ? {} : { Limit: limit - items.length }),
          }),
        ),
      );
      items.push(...(page.Items ?? []));
      start = page.LastEvaluatedKey;
    } while (start !== undefined && (limit === undefined || items.length < limit));
    return items;
  }
}

/**
 * The job's attemptCount from `attempt - 1` to `attempt`: the one request that makes an
 * attempt the live one (a new attempt, an adopted or a retired standby).
 */
function advanceAttemptCount(jobId: string, attempt: number): ConditionalWrite {
  return { key: keys.job(jobId), set: { attemptCount: attempt }, condition: when.liveAttemptIs(attempt - 1) };
}
