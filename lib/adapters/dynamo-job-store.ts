// DynamoJobStore: the JobStore port on one DynamoDB table (layout in dynamo-table.ts).
//
// Every write that changes state the controller relies on is conditional; the conditions
// are the port's rules (expected status, attempt sequence, outcome set once, one report
// per node and phase), so a lost race is always a refused write, never a lost update.
// Status changes are TransactWriteItems: the job, the EVENT row and (for a decision) the
// attempt are written together or not at all. This is the only module that knows DynamoDB
// exceptions; it turns them into the port's errors, and throttling or a 5xx that outlived
// the SDK's retries into TransientError (the state machine retries the step).
//
// Records are stored attribute by attribute (nested values as maps and lists) so a person
// can read them in the console; a top-level null is stored as an absent attribute, which
// lets conditions say `attribute_not_exists(outcome)`.

import {
  BatchGetItemCommand,
  ConditionalCheckFailedException,
  GetItemCommand,
  QueryCommand,
  TransactionCanceledException,
  TransactionConflictException,
  TransactWriteItemsCommand,
  UpdateItemCommand,
  type UpdateItemCommandOutput,
  type AttributeValue,
  type DynamoDBClient,
  type QueryCommandInput,
  type TransactWriteItem,
} from '@aws-sdk/client-dynamodb';
import { ConcurrentUpdateError, JobNotFoundError } from '../errors.ts';
import { isPhaseEnd, type AttemptRecord, type InstanceRef, type JobEvent, type JobRecord, type NodeReport, type Placement, type StoredDecision } from '../model.ts';
import type { DecisionBasis } from '../outcome.ts';
import type { AttemptOutcome, RecoveryCounters } from '../policy/types.ts';
import type { IdempotencyClaim, JobPatch, JobStore, StatusChange } from '../ports.ts';
import type { AwaitStateName } from '../workflow/contract.ts';
import { sendAws, transientError } from './aws-errors.ts';
import {
  INSTANCE_INDEX,
  JOB_LIST_INDEX,
  JOB_LIST_PARTITIONS,
  jobListPartition,
  QUEUE_INDEX,
  QUEUE_PARTITIONS,
  queuePartition,
  TABLE_KEY,
  TTL_ATTRIBUTE,
  type IndexDefinition,
} from './dynamo-table.ts';
import { isTerminal } from '../status.ts';
import * as rules from './job-store-rules.ts';
import { isReleased } from '../standby.ts';

/** The most keys one BatchGetItem takes. */
const BATCH_GET_LIMIT = 100;
/** Tries of a batch whose keys DynamoDB keeps leaving unprocessed, before a TransientError. */
const BATCH_GET_ROUNDS = 8;

/** What a DynamoJobStore needs: a client (built by the caller) and the table's name. */
export interface DynamoJobStoreOptions {
  readonly client: DynamoDBClient;
  readonly tableName: string;
}

type Item = Record<string, AttributeValue>;

/** The record's field names, checked at compile time to be all of them. */
function allFields<T>() {
  return <const F extends readonly (keyof T)[]>(
    fields: F & ([Exclude<keyof T, F[number]>] extends [never] ? unknown : never),
  ): F => fields;
}

const JOB_FIELDS = allFields<JobRecord>()([
  'jobId',
  'name',
  'spec',
  'pipeline',
  'status',
  'counters',
  'attemptCount',
  'executionArn',
  'failureReason',
  'createdAt',
  'updatedAt',
]);

const ATTEMPT_FIELDS = allFields<AttemptRecord>()([
  'jobId',
  'attempt',
  'task',
  'market',
  'placement',
  'instances',
  'taskToken',
  'tokenState',
  'secretHash',
  'reports',
  'outcome',
  'decision',
  'startedAt',
  'lastHeartbeatAt',
  'nodesHeardFrom',
  'interruptionNoticedAt',
  'rebalanceNoticedAt',
  'standby',
  'runStartedAt',
  'endedAt',
]);

const EVENT_FIELDS = allFields<JobEvent>()(['jobId', 'at', 'from', 'to', 'attempt', 'reason']);

const CLAIM_FIELDS = allFields<IdempotencyClaim>()(['key', 'jobId', 'fingerprint', 'expiresAt']);

/** The QueueIndex keys removed (a null removes an attribute): the job's start no longer waits. */
const LEAVE_QUEUE = { [QUEUE_INDEX.partitionKey]: null, [QUEUE_INDEX.sortKey]: null };

/** Bookkeeping attributes that are not part of any record. */
const EVENT_COUNT = 'eventCount';
const REPORT_KEYS = 'reportKeys';

/** A JobStore on DynamoDB. */
export class DynamoJobStore implements JobStore {
  readonly #client: DynamoDBClient;
  readonly #tableName: string;

  constructor(options: DynamoJobStoreOptions) {
    this.#client = options.client;
    this.#tableName = options.tableName;
  }

  async createJob(job: JobRecord): Promise<void> {
    const reasons = await this.#transact([
      this.#putNew({ ...jobKey(job.jobId), ...jobItem(job), [EVENT_COUNT]: num(1) }),
      this.#putNew({ ...eventKey(job.jobId, job.createdAt, 1), ...recordItem(rules.createdEvent(job)) }),
    ]);
    if (reasons !== null) throw rules.jobExistsError(job.jobId);
  }

  async createJobOnce(job: JobRecord, claim: IdempotencyClaim, now: string): Promise<IdempotencyClaim> {
    const expiresAtEpoch = Math.ceil(Date.parse(claim.expiresAt) / 1000);
    const reasons = await this.#transact([
      {
        Put: {
          TableName: this.#tableName,
          Item: { ...claimKey(claim.key), ...recordItem(claim), [TTL_ATTRIBUTE]: num(expiresAtEpoch) },
          // Free, or held by a claim that has lapsed (TTL deletes late, so it is checked here).
          ConditionExpression: 'attribute_not_exists(#pk) OR #expiresAt <= :now',
          ExpressionAttributeNames: { '#pk': TABLE_KEY.partitionKey, '#expiresAt': 'expiresAt' },
          ExpressionAttributeValues: { ':now': str(now) },
        },
      },
      this.#putNew({ ...jobKey(job.jobId), ...jobItem(job), [EVENT_COUNT]: num(1) }),
      this.#putNew({ ...eventKey(job.jobId, job.createdAt, 1), ...recordItem(rules.createdEvent(job)) }),
    ]);
    if (reasons === null) return claim;
    if (reasons[0] !== CONDITION_FAILED) throw rules.jobExistsError(job.jobId);
    const item = await this.#get(claimKey(claim.key));
    const held = item === undefined ? null : fromItem<IdempotencyClaim>(item, CLAIM_FIELDS);
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
            ExpressionAttributeValues: { ':pk': str(partition) },
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
    return (await this.#getMany(items.map((keys) => ({ [TABLE_KEY.partitionKey]: keys[TABLE_KEY.partitionKey] as AttributeValue, [TABLE_KEY.sortKey]: keys[TABLE_KEY.sortKey] as AttributeValue })))).map(toJob);
  }

  async changeStatus(jobId: string, change: StatusChange, patch?: JobPatch): Promise<JobRecord> {
    const set: Record<string, AttributeValue | null> = {};
    if (patch?.counters !== undefined) set.counters = toAttribute(patch.counters);
    if (patch?.failureReason !== undefined) set.failureReason = nullable(patch.failureReason);
    await this.#writeStatusChange(jobId, change, set, []);
    return this.getJob(jobId);
  }

  async setExecution(jobId: string, executionArn: string): Promise<void> {
    try {
      await this.#update(jobKey(jobId), { executionArn: str(executionArn), ...LEAVE_QUEUE }, 'attribute_exists(#pk)');
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) throw new JobNotFoundError(jobId);
      throw error;
    }
  }

  async listQueued(options: { limit: number }): Promise<JobRecord[]> {
    if (options.limit <= 0) return [];
    return this.#listAcross(QUEUE_INDEX, QUEUE_PARTITIONS, 'oldest', options.limit);
  }

  async putAttempt(attempt: AttemptRecord): Promise<void> {
    const { jobId } = attempt;
    const reportKeys = attempt.reports.map(rules.reportKey);
    const reasons = await this.#transact([
      {
        Update: {
          TableName: this.#tableName,
          Key: jobKey(jobId),
          UpdateExpression: 'SET #attemptCount = :next',
          ConditionExpression: '#attemptCount = :previous',
          ExpressionAttributeNames: { '#attemptCount': 'attemptCount' },
          ExpressionAttributeValues: { ':next': num(attempt.attempt), ':previous': num(attempt.attempt - 1) },
        },
      },
      this.#putNew({
        ...attemptKey(jobId, attempt.attempt),
        ...attemptItem(attempt),
        ...(reportKeys.length > 0 ? { [REPORT_KEYS]: { SS: [...new Set(reportKeys)] } } : {}),
      }),
      ...this.#instancePuts(jobId, attempt.attempt, attempt.instances),
    ]);
    if (reasons === null) return;
    const { job } = await this.#job(jobId);
    throw rules.attemptOutOfSequenceError(jobId, job.attemptCount, attempt.attempt);
  }

  async getAttempt(jobId: string, attempt: number): Promise<AttemptRecord> {
    const item = await this.#get(attemptKey(jobId, attempt));
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
        ExpressionAttributeValues: { ':pk': str(instanceId) },
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
    const reasons = await this.#transact([
      {
        Update: {
          TableName: this.#tableName,
          Key: attemptKey(jobId, attempt),
          UpdateExpression: 'SET #placement = :placement, #instances = :instances',
          ConditionExpression: 'attribute_exists(#pk) AND attribute_not_exists(#placement)',
          ExpressionAttributeNames: { '#pk': TABLE_KEY.partitionKey, '#placement': 'placement', '#instances': 'instances' },
          ExpressionAttributeValues: { ':placement': toAttribute(placement), ':instances': toAttribute(instances) },
        },
      },
      ...this.#instancePuts(jobId, attempt, instances),
    ]);
    if (reasons === null) return;
    await this.getAttempt(jobId, attempt);
    throw rules.instancesSetError(jobId, attempt);
  }

  async setTaskToken(jobId: string, attempt: number, taskToken: string, state: AwaitStateName): Promise<AttemptRecord> {
    const set = { taskToken: str(taskToken), tokenState: str(state) };
    return this.#updateAttempt(jobId, attempt, set, 'attribute_exists(#pk)', (current) => {
      throw new ConcurrentUpdateError(`attempt ${current.attempt} of job ${jobId} refused its task token`);
    });
  }

  async addReport(
    jobId: string,
    attempt: number,
    report: NodeReport,
  ): Promise<{ attempt: AttemptRecord; duplicate: boolean }> {
    const key = rules.reportKey(report);
    // A stopped phase's tail decides nothing, so it is kept after the attempt's end too.
    const ending = isPhaseEnd(report);
    try {
      const updated = await this.#sendUpdate(
        new UpdateItemCommand({
          TableName: this.#tableName,
          Key: attemptKey(jobId, attempt),
          UpdateExpression: 'SET #reports = list_append(#reports, :report) ADD #reportKeys :keys',
          ConditionExpression: `attribute_exists(#pk) AND ${ending ? 'attribute_not_exists(#outcome) AND ' : ''}${NOT_RELEASED} AND NOT contains(#reportKeys, :key)`,
          ExpressionAttributeNames: {
            '#pk': TABLE_KEY.partitionKey,
            '#reports': 'reports',
            '#reportKeys': REPORT_KEYS,
            ...(ending ? { '#outcome': 'outcome' } : {}),
            ...NOT_RELEASED_NAMES,
          },
          ExpressionAttributeValues: {
            ':report': { L: [toAttribute(report)] },
            ':keys': { SS: [key] },
            ':key': str(key),
          },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return { attempt: toAttempt(updated.Attributes ?? {}), duplicate: false };
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
    // Reports and outcomes are only ever added, so what is stored now says why it was refused.
    const current = await this.getAttempt(jobId, attempt);
    if (rules.hasReport(current, report)) return { attempt: current, duplicate: true };
    if (ending && current.outcome !== null) throw rules.endedError(jobId, attempt, 'a report');
    if (isReleased(current)) throw rules.releasedError(jobId, attempt, 'a report');
    throw new ConcurrentUpdateError(`report ${key} for attempt ${attempt} of job ${jobId} was refused`);
  }

  async recordHeartbeat(jobId: string, attempt: number, at: string, nodeRank: number): Promise<AttemptRecord> {
    try {
      const updated = await this.#sendUpdate(
        new UpdateItemCommand({
          TableName: this.#tableName,
          Key: attemptKey(jobId, attempt),
          // A number set: adding a rank twice keeps one, and two nodes' beats never clash.
          UpdateExpression: 'SET #lastHeartbeatAt = :at ADD #nodesHeardFrom :rank',
          ConditionExpression: `attribute_exists(#pk) AND attribute_not_exists(#outcome) AND ${NOT_RELEASED}`,
          ExpressionAttributeNames: {
            '#pk': TABLE_KEY.partitionKey,
            '#outcome': 'outcome',
            '#lastHeartbeatAt': 'lastHeartbeatAt',
            '#nodesHeardFrom': 'nodesHeardFrom',
            ...NOT_RELEASED_NAMES,
          },
          ExpressionAttributeValues: { ':at': str(at), ':rank': { NS: [String(nodeRank)] } },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return toAttempt(updated.Attributes ?? {});
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
    const current = await this.getAttempt(jobId, attempt);
    if (isReleased(current)) throw rules.releasedError(jobId, attempt, 'a heartbeat');
    throw rules.endedError(jobId, attempt, 'a heartbeat');
  }

  async noteInterruption(jobId: string, attempt: number, at: string): Promise<AttemptRecord> {
    return this.#noteOnce(jobId, attempt, 'interruptionNoticedAt', at);
  }

  async noteRebalance(jobId: string, attempt: number, at: string): Promise<AttemptRecord> {
    return this.#noteOnce(jobId, attempt, 'rebalanceNoticedAt', at);
  }

  /** Notes EC2's word on an attempt that has not ended, the first time only. */
  #noteOnce(jobId: string, attempt: number, field: 'interruptionNoticedAt' | 'rebalanceNoticedAt', at: string): Promise<AttemptRecord> {
    return this.#updateAttempt(jobId, attempt, { [field]: str(at) }, `attribute_exists(#pk) AND attribute_not_exists(#${field}) AND attribute_not_exists(#outcome)`, (current) => current);
  }

  async putStandby(attempt: AttemptRecord): Promise<void> {
    const { jobId } = attempt;
    const live = attempt.standby?.for;
    if (live === undefined || live !== attempt.attempt - 1) {
      const { job } = await this.#job(jobId);
      throw rules.standbyOutOfSequenceError(jobId, job.attemptCount, attempt.attempt);
    }
    const reasons = await this.#transact([
      {
        ConditionCheck: {
          TableName: this.#tableName,
          Key: jobKey(jobId),
          ConditionExpression: '#attemptCount = :live',
          ExpressionAttributeNames: { '#attemptCount': 'attemptCount' },
          ExpressionAttributeValues: { ':live': num(live) },
        },
      },
      this.#putNew({ ...attemptKey(jobId, attempt.attempt), ...attemptItem(attempt) }),
      ...this.#instancePuts(jobId, attempt.attempt, attempt.instances),
    ]);
    if (reasons === null) return;
    const { job } = await this.#job(jobId);
    throw rules.standbyOutOfSequenceError(jobId, job.attemptCount, attempt.attempt);
  }

  async adoptStandby(jobId: string, attempt: number, at: string): Promise<AttemptRecord> {
    const reasons = await this.#transact([
      this.#advanceAttemptCount(jobId, attempt),
      {
        Update: {
          TableName: this.#tableName,
          Key: attemptKey(jobId, attempt),
          UpdateExpression: 'SET #standby.#adoptedAt = :at',
          ConditionExpression: `attribute_exists(#standby) AND attribute_not_exists(#standby.#adoptedAt) AND ${NOT_RELEASED}`,
          ExpressionAttributeNames: STANDBY_NAMES,
          ExpressionAttributeValues: { ':at': str(at) },
        },
      },
    ]);
    if (reasons !== null) {
      await this.getAttempt(jobId, attempt);
      throw rules.standbySettledError(jobId, attempt, 'adopted');
    }
    return this.getAttempt(jobId, attempt);
  }

  async releaseStandby(jobId: string, attempt: number, at: string, reason: string): Promise<{ attempt: AttemptRecord; released: boolean }> {
    try {
      const updated = await this.#sendUpdate(
        new UpdateItemCommand({
          TableName: this.#tableName,
          Key: attemptKey(jobId, attempt),
          UpdateExpression: 'SET #standby.#releasedAt = :at, #standby.#releaseReason = :reason, #endedAt = if_not_exists(#endedAt, :at)',
          ConditionExpression: `attribute_exists(#standby) AND attribute_not_exists(#standby.#adoptedAt) AND ${NOT_RELEASED}`,
          ExpressionAttributeNames: { ...STANDBY_NAMES, '#releaseReason': 'releaseReason', '#endedAt': 'endedAt' },
          ExpressionAttributeValues: { ':at': str(at), ':reason': str(reason) },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return { attempt: toAttempt(updated.Attributes ?? {}), released: true };
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
    return { attempt: await this.getAttempt(jobId, attempt), released: false };
  }

  async retireStandby(jobId: string, attempt: number): Promise<void> {
    const reasons = await this.#transact([
      this.#advanceAttemptCount(jobId, attempt),
      {
        ConditionCheck: {
          TableName: this.#tableName,
          Key: attemptKey(jobId, attempt),
          ConditionExpression: 'attribute_exists(#standby.#releasedAt)',
          ExpressionAttributeNames: NOT_RELEASED_NAMES,
        },
      },
    ]);
    if (reasons === null) return;
    await this.#job(jobId);
    throw rules.standbySettledError(jobId, attempt, 'retired');
  }

  async noteRunStart(jobId: string, attempt: number, at: string): Promise<void> {
    await this.#updateAttempt(jobId, attempt, { runStartedAt: str(at) }, 'attribute_exists(#pk) AND attribute_not_exists(#runStartedAt)', (current) => current);
  }

  /** The job's attemptCount from `attempt - 1` to `attempt`, as one item of a transaction. */
  #advanceAttemptCount(jobId: string, attempt: number): TransactWriteItem {
    return {
      Update: {
        TableName: this.#tableName,
        Key: jobKey(jobId),
        UpdateExpression: 'SET #attemptCount = :next',
        ConditionExpression: '#attemptCount = :previous',
        ExpressionAttributeNames: { '#attemptCount': 'attemptCount' },
        ExpressionAttributeValues: { ':next': num(attempt), ':previous': num(attempt - 1) },
      },
    };
  }

  async endAttempt(
    jobId: string,
    attempt: number,
    outcome: AttemptOutcome,
    at: string,
    basis?: DecisionBasis,
  ): Promise<{ attempt: AttemptRecord; won: boolean }> {
    let won = true;
    // The basis as a condition: reports are only appended and the warning is set once, so
    // the list's size and the warning's presence say whether any fact was added since.
    const onBasis: { condition: string; values: Record<string, AttributeValue> } =
      basis === undefined
        ? { condition: '', values: {} }
        : {
            condition: ` AND size(#reports) = :basisReports AND ${basis.interruptionNoticed ? 'attribute_exists' : 'attribute_not_exists'}(#interruptionNoticedAt)`,
            values: { ':basisReports': num(basis.reports) },
          };
    const stored = await this.#updateAttempt(
      jobId,
      attempt,
      { outcome: toAttribute(outcome), endedAt: str(at) },
      `attribute_exists(#pk) AND attribute_not_exists(#outcome)${onBasis.condition}`,
      (current) => {
        won = false;
        return current;
      },
      onBasis.values,
    );
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
    const set: Record<string, AttributeValue | null> = { counters: toAttribute(counters) };
    if (patch?.failureReason !== undefined) set.failureReason = nullable(patch.failureReason);
    if (patch?.nextTask !== undefined) {
      set.spec = toAttribute(patch.nextTask.spec);
      set.pipeline = toAttribute(patch.nextTask.pipeline);
    }
    const decide: TransactWriteItem = {
      Update: {
        TableName: this.#tableName,
        Key: attemptKey(jobId, attempt),
        UpdateExpression: 'SET #decision = :decision',
        ConditionExpression: 'attribute_exists(#pk) AND attribute_not_exists(#decision)',
        ExpressionAttributeNames: { '#pk': TABLE_KEY.partitionKey, '#decision': 'decision' },
        ExpressionAttributeValues: { ':decision': toAttribute(decision) },
      },
    };
    await this.#writeStatusChange(jobId, change, set, [decide], async () => {
      await this.getAttempt(jobId, attempt);
      throw rules.decisionSetError(jobId, attempt);
    });
    return this.getJob(jobId);
  }

  async listEvents(jobId: string): Promise<JobEvent[]> {
    const events = (await this.#queryJobPartition(jobId, EVENT_PREFIX)).map(toEvent);
    if (events.length === 0) await this.#job(jobId);
    return events;
  }

  /**
   * The job update (status, `set`, the event count) and its EVENT row, plus `also`, in one
   * transaction conditional on the status read just before. `onAlsoRefused` explains a
   * refusal of the first of `also`.
   */
  async #writeStatusChange(
    jobId: string,
    change: StatusChange,
    set: Record<string, AttributeValue | null>,
    also: readonly TransactWriteItem[],
    onAlsoRefused?: () => Promise<never>,
  ): Promise<void> {
    const { job, eventCount } = await this.#job(jobId);
    rules.expectStatus(job, change);
    // Event rows are numbered per job so that equal timestamps keep their write order; the
    // count is part of the condition, so two writers can never take the same number.
    const seq = eventCount + 1;
    const event = rules.statusEvent(jobId, change);
    const update = updateParts({ ...set, status: str(change.to), updatedAt: str(change.at), [EVENT_COUNT]: num(seq), ...(isTerminal(change.to) ? LEAVE_QUEUE : {}) });
    const reasons = await this.#transact([
      {
        Update: {
          TableName: this.#tableName,
          Key: jobKey(jobId),
          UpdateExpression: update.expression,
          ConditionExpression: '#status = :from AND #eventCount = :seenCount',
          ExpressionAttributeNames: { ...update.names, '#status': 'status', '#eventCount': EVENT_COUNT },
          ExpressionAttributeValues: { ...update.values, ':from': str(change.from), ':seenCount': num(eventCount) },
        },
      },
      ...also,
      this.#putNew({ ...eventKey(jobId, change.at, seq), ...recordItem(event) }),
    ]);
    if (reasons === null) return;
    if (reasons[0] === CONDITION_FAILED) {
      rules.expectStatus((await this.#job(jobId)).job, change);
      throw new ConcurrentUpdateError(`job ${jobId} changed while it was moving from ${change.from} to ${change.to}`);
    }
    if (reasons[1] === CONDITION_FAILED && onAlsoRefused !== undefined) await onAlsoRefused();
    throw new ConcurrentUpdateError(`job ${jobId}: a status change was refused (${reasons.join(', ')})`);
  }

  /**
   * Sets attributes of an attempt under a condition and returns it as it now is; on a
   * refusal, hands the stored attempt to `onRefused` (a missing job or attempt throws first).
   */
  async #updateAttempt(
    jobId: string,
    attempt: number,
    set: Record<string, AttributeValue>,
    condition: string,
    onRefused: (current: AttemptRecord) => AttemptRecord,
    conditionValues: Record<string, AttributeValue> = {},
  ): Promise<AttemptRecord> {
    try {
      return toAttempt(await this.#update(attemptKey(jobId, attempt), set, condition, conditionValues));
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
    return onRefused(await this.getAttempt(jobId, attempt));
  }

  /**
   * Sends an UpdateItem. One that met a transaction in flight on the same item
   * (TransactionConflictException) lost a race, as a cancelled transaction does:
   * ConcurrentUpdateError, which the use cases retry and the API answers as retryable.
   */
  async #sendUpdate(command: UpdateItemCommand): Promise<UpdateItemCommandOutput> {
    try {
      return await sendAws('DynamoDB UpdateItem', () => this.#client.send(command));
    } catch (error) {
      if (error instanceof TransactionConflictException) {
        throw new ConcurrentUpdateError(`a transaction on the same item was in progress; the update was refused (${error.message})`);
      }
      throw error;
    }
  }

  /**
   * UpdateItem SET with a condition over the attributes in CONDITION_NAMES, its values in
   * `conditionValues` (named so as not to clash with the SET's `:u<n>`); returns ALL_NEW.
   */
  async #update(
    key: Item,
    set: Record<string, AttributeValue | null>,
    condition: string,
    conditionValues: Record<string, AttributeValue> = {},
  ): Promise<Item> {
    const update = updateParts(set);
    const names: Record<string, string> = { ...update.names };
    for (const alias of condition.match(/#\w+/g) ?? []) {
      const name = CONDITION_NAMES[alias];
      if (name === undefined) throw new Error(`condition alias ${alias} is not in CONDITION_NAMES`);
      names[alias] = name;
    }
    const result = await this.#sendUpdate(
      new UpdateItemCommand({
        TableName: this.#tableName,
        Key: key,
        UpdateExpression: update.expression,
        ConditionExpression: condition,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: { ...update.values, ...conditionValues },
        ReturnValues: 'ALL_NEW',
      }),
    );
    return result.Attributes ?? {};
  }

  async #job(jobId: string): Promise<{ job: JobRecord; eventCount: number }> {
    const item = await this.#get(jobKey(jobId));
    if (item === undefined) throw new JobNotFoundError(jobId);
    return { job: toJob(item), eventCount: Number(item[EVENT_COUNT]?.N ?? '0') };
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
  async #getMany(keys: readonly Item[]): Promise<Item[]> {
    const found = new Map<string, Item>();
    const id = (item: Item) => `${item[TABLE_KEY.partitionKey]?.S}\u0000${item[TABLE_KEY.sortKey]?.S}`;
    for (let start = 0; start < keys.length; start += BATCH_GET_LIMIT) {
      let pending: Item[] = keys.slice(start, start + BATCH_GET_LIMIT);
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
    return keys.flatMap((key) => {
      const item = found.get(id(key));
      return item === undefined ? [] : [item];
    });
  }

  async #queryJobPartition(jobId: string, prefix: string): Promise<Item[]> {
    return this.#query({
      KeyConditionExpression: '#pk = :pk AND begins_with(#sk, :prefix)',
      ExpressionAttributeNames: { '#pk': TABLE_KEY.partitionKey, '#sk': TABLE_KEY.sortKey },
      ExpressionAttributeValues: { ':pk': str(jobPk(jobId)), ':prefix': str(prefix) },
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

  /**
   * Runs a transaction; null when it was applied, else each item's cancellation code
   * (CONDITION_FAILED for a refused condition). A transaction cancelled only because
   * another write to one of its items was in flight (TransactionConflict) lost a race:
   * ConcurrentUpdateError, which the use cases retry on a fresh read. One cancelled
   * because an item was throttled, like a throttled or failed call, is a TransientError
   * (nothing was written; the state machine retries the step). Anything else (a
   * validation error) is thrown as it is.
   */
  async #transact(items: readonly TransactWriteItem[]): Promise<string[] | null> {
    try {
      await sendAws('DynamoDB TransactWriteItems', () => this.#client.send(new TransactWriteItemsCommand({ TransactItems: [...items] })));
      return null;
    } catch (error) {
      const reasons = error instanceof TransactionCanceledException ? (error.CancellationReasons ?? []) : [];
      const codes = reasons.map((r) => r.Code ?? 'None');
      if (codes.includes(CONDITION_FAILED)) return codes;
      if (codes.includes(TRANSACTION_CONFLICT)) {
        throw new ConcurrentUpdateError(`a write to the same items was in progress; the transaction was cancelled (${codes.join(', ')})`);
      }
      if (codes.some((code) => THROTTLED_ITEM_CODES.has(code))) throw transientError('DynamoDB TransactWriteItems', error);
      throw error;
    }
  }

  #putNew(item: Item): TransactWriteItem {
    return {
      Put: {
        TableName: this.#tableName,
        Item: item,
        ConditionExpression: 'attribute_not_exists(#pk)',
        ExpressionAttributeNames: { '#pk': TABLE_KEY.partitionKey },
      },
    };
  }

  /** One item per instance, for InstanceIndex; keyed by instance so a repeat overwrites. */
  #instancePuts(jobId: string, attempt: number, instances: readonly InstanceRef[]): TransactWriteItem[] {
    const ids = [...new Set(instances.map((i) => i.instanceId))];
    return ids.map((instanceId) => ({
      Put: {
        TableName: this.#tableName,
        Item: {
          [TABLE_KEY.partitionKey]: str(jobPk(jobId)),
          [TABLE_KEY.sortKey]: str(`${INSTANCE_PREFIX}${instanceId}`),
          [INSTANCE_INDEX.partitionKey]: str(instanceId),
          [INSTANCE_INDEX.sortKey]: str(attemptSk(attempt)),
        },
      },
    }));
  }

}

const CONDITION_FAILED = 'ConditionalCheckFailed';
const TRANSACTION_CONFLICT = 'TransactionConflict';
/** Cancellation codes of an item DynamoDB throttled inside a transaction. */
const THROTTLED_ITEM_CODES: ReadonlySet<string> = new Set(['ThrottlingError', 'ProvisionedThroughputExceeded']);
const ATTEMPT_PREFIX = 'ATTEMPT#';
const EVENT_PREFIX = 'EVENT#';
const INSTANCE_PREFIX = 'INSTANCE#';

/** Attribute names conditions may use, by alias. */
const CONDITION_NAMES: Readonly<Record<string, string>> = {
  '#pk': TABLE_KEY.partitionKey,
  '#outcome': 'outcome',
  '#interruptionNoticedAt': 'interruptionNoticedAt',
  '#rebalanceNoticedAt': 'rebalanceNoticedAt',
  '#runStartedAt': 'runStartedAt',
  '#reports': 'reports',
};

/** The names a condition on a standby's mark uses. */
const STANDBY_NAMES = { '#standby': 'standby', '#adoptedAt': 'adoptedAt', '#releasedAt': 'releasedAt' } as const;
/** The condition that an attempt is not a standby let go unused (an absent mark counts as not released). */
const NOT_RELEASED = 'attribute_not_exists(#standby.#releasedAt)';
/** The names NOT_RELEASED uses (DynamoDB refuses names an expression does not use). */
const NOT_RELEASED_NAMES = { '#standby': STANDBY_NAMES['#standby'], '#releasedAt': STANDBY_NAMES['#releasedAt'] } as const;

/** The partition key of every item of a job (its JOB, ATTEMPT, INSTANCE and EVENT items). */
export function jobPk(jobId: string): string {
  return `JOB#${jobId}`;
}

/** An idempotency claim's item: a partition of its own, so a claim never touches a job's. */
function claimKey(key: string): Item {
  return { [TABLE_KEY.partitionKey]: str(`IDEMPOTENCY#${key}`), [TABLE_KEY.sortKey]: str('IDEMPOTENCY') };
}

function jobKey(jobId: string): Item {
  return { [TABLE_KEY.partitionKey]: str(jobPk(jobId)), [TABLE_KEY.sortKey]: str('JOB') };
}

/** ATTEMPT#0001: zero-padded so the sort key orders attempts (listAttempts also sorts by number). */
function attemptSk(attempt: number): string {
  return `${ATTEMPT_PREFIX}${String(attempt).padStart(4, '0')}`;
}

function attemptKey(jobId: string, attempt: number): Item {
  return { [TABLE_KEY.partitionKey]: str(jobPk(jobId)), [TABLE_KEY.sortKey]: str(attemptSk(attempt)) };
}

function eventKey(jobId: string, at: string, seq: number): Item {
  return {
    [TABLE_KEY.partitionKey]: str(jobPk(jobId)),
    [TABLE_KEY.sortKey]: str(`${EVENT_PREFIX}${at}#${String(seq).padStart(6, '0')}`),
  };
}

function jobItem(job: JobRecord): Item {
  return {
    ...recordItem(job),
    [JOB_LIST_INDEX.partitionKey]: str(jobListPartition(job.jobId)),
    [JOB_LIST_INDEX.sortKey]: str(rules.listKey(job)),
    ...(rules.queuedAtCreation(job) ? { [QUEUE_INDEX.partitionKey]: str(queuePartition(job.jobId)), [QUEUE_INDEX.sortKey]: str(rules.listKey(job)) } : {}),
  };
}

/** `SET #a = :a, ...` for the non-null values and `REMOVE #b` for the nulls. */
function updateParts(set: Record<string, AttributeValue | null>): {
  expression: string;
  names: Record<string, string>;
  values: Record<string, AttributeValue>;
} {
  const names: Record<string, string> = {};
  const values: Record<string, AttributeValue> = {};
  const assignments: string[] = [];
  const removals: string[] = [];
  for (const [index, [name, value]] of Object.entries(set).entries()) {
    names[`#u${index}`] = name;
    if (value === null) {
      removals.push(`#u${index}`);
    } else {
      values[`:u${index}`] = value;
      assignments.push(`#u${index} = :u${index}`);
    }
  }
  const parts = [
    assignments.length > 0 ? `SET ${assignments.join(', ')}` : '',
    removals.length > 0 ? `REMOVE ${removals.join(', ')}` : '',
  ];
  return { expression: parts.filter(Boolean).join(' '), names, values };
}

// Values: plain JSON data (strings, finite numbers, booleans, null, arrays, objects) to
// DynamoDB attribute values and back, exactly. Written here rather than taken from
// @aws-sdk/util-dynamodb, which is not published at the client's pinned version.

function str(value: string): AttributeValue {
  return { S: value };
}

function num(value: number): AttributeValue {
  return { N: String(value) };
}

/** A top-level string that may be null: null means the attribute is removed. */
function nullable(value: string | null): AttributeValue | null {
  return value === null ? null : str(value);
}

function toAttribute(value: unknown, path = '$'): AttributeValue {
  if (value === null) return { NULL: true };
  switch (typeof value) {
    case 'string':
      return { S: value };
    case 'boolean':
      return { BOOL: value };
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError(`${path}: cannot store the number ${value}`);
      return { N: String(value) };
    case 'object': {
      if (Array.isArray(value)) return { L: value.map((v, i) => toAttribute(v, `${path}[${i}]`)) };
      const entries = Object.entries(value).filter(([, v]) => v !== undefined);
      return { M: Object.fromEntries(entries.map(([k, v]) => [k, toAttribute(v, `${path}.${k}`)])) };
    }
    default:
      throw new TypeError(`${path}: cannot store a value of type ${typeof value}`);
  }
}

function fromAttribute(attribute: AttributeValue): unknown {
  if (attribute.S !== undefined) return attribute.S;
  if (attribute.N !== undefined) return Number(attribute.N);
  if (attribute.BOOL !== undefined) return attribute.BOOL;
  if (attribute.NULL !== undefined) return null;
  if (attribute.L !== undefined) return attribute.L.map(fromAttribute);
  if (attribute.NS !== undefined) return attribute.NS.map(Number).sort((a, b) => a - b);
  if (attribute.M !== undefined) {
    return Object.fromEntries(Object.entries(attribute.M).map(([k, v]) => [k, fromAttribute(v)]));
  }
  throw new TypeError(`unexpected attribute value ${JSON.stringify(attribute)}`);
}

/** A record's fields as attributes; top-level nulls and undefineds are left out. */
function recordItem(record: object): Item {
  const entries = Object.entries(record).filter(([, v]) => v !== null && v !== undefined);
  return Object.fromEntries(entries.map(([k, v]) => [k, toAttribute(v, k)]));
}

/** The named fields of an item, absent ones as null; keys and bookkeeping are left behind. */
function fromItem<T>(item: Item, fields: readonly string[]): T {
  const record: Record<string, unknown> = {};
  for (const field of fields) {
    const attribute = item[field];
    record[field] = attribute === undefined ? null : fromAttribute(attribute);
  }
  return record as T;
}

/** A job item as a record; a one-task job has no `pipeline` (absent, as it was given). */
function toJob(item: Item): JobRecord {
  const { pipeline, ...job } = fromItem<JobRecord>(item, JOB_FIELDS);
  return pipeline === null || pipeline === undefined ? job : { ...job, pipeline };
}

/**
 * An attempt as an item. nodesHeardFrom is a number set, which DynamoDB cannot hold empty:
 * an attempt nobody has heard from has none (and heartbeats ADD to it).
 */
function attemptItem(attempt: AttemptRecord): Item {
  const { nodesHeardFrom, ...rest } = attempt;
  const item = recordItem(rest);
  if (nodesHeardFrom.length > 0) item.nodesHeardFrom = { NS: nodesHeardFrom.map(String) };
  return item;
}

/**
 * An attempt item as a record; an attempt stored before a field existed gets its empty
 * value, one of a one-task job has no `task`, and the fields only some attempts have
 * (`standby`, `rebalanceNoticedAt`, `runStartedAt`) are absent when they have none.
 */
function toAttempt(item: Item): AttemptRecord {
  const { task, standby, rebalanceNoticedAt, runStartedAt, ...attempt } = fromItem<AttemptRecord>(item, ATTEMPT_FIELDS);
  return {
    ...attempt,
    nodesHeardFrom: attempt.nodesHeardFrom ?? [],
    ...(task === null || task === undefined ? {} : { task }),
    ...(standby === null || standby === undefined ? {} : { standby }),
    ...(rebalanceNoticedAt === null || rebalanceNoticedAt === undefined ? {} : { rebalanceNoticedAt }),
    ...(runStartedAt === null || runStartedAt === undefined ? {} : { runStartedAt }),
  };
}

function toEvent(item: Item): JobEvent {
  return fromItem<JobEvent>(item, EVENT_FIELDS);
}
