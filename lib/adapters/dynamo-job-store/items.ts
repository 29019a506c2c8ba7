// The job store's items: every key it reads or writes (built here and nowhere else), how a
// record becomes an item and back, and the bookkeeping attributes beside the records.
//
// Records are stored attribute by attribute (nested values as maps and lists) so a person
// can read them in the console; a top-level null is stored as an absent attribute, which
// lets conditions say `attribute_not_exists(outcome)`. Values go through
// @aws-sdk/util-dynamodb with the options below, which keep them exactly as they were
// written: any finite number, empty strings, and nested nulls.

import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import {
  convertToAttr,
  unmarshall,
  type marshallOptions,
  type NativeAttributeValue,
  type unmarshallOptions,
} from '@aws-sdk/util-dynamodb';
import type { AttemptRecord, InstanceRef, JobEvent, JobRecord, NodeMarks } from '../../model.ts';
import type { IdempotencyClaim } from '../../ports.ts';
import {
  INSTANCE_INDEX,
  JOB_LIST_INDEX,
  jobListPartition,
  QUEUE_INDEX,
  queuePartition,
  TABLE_KEY,
  TTL_ATTRIBUTE,
} from '../../workflow/job-table.ts';
import * as rules from '../job-store-rules.ts';

/** One item, or one item's key, as DynamoDB holds it. */
export type Item = Record<string, AttributeValue>;

/**
 * How values are written: undefined fields are left out (a record's optional fields), empty
 * strings stay empty strings, and a number is written as JavaScript prints it whatever its
 * size (every number the store holds is a JavaScript number, so reading it back gives the
 * same one). convertClassInstanceToMap is on because marshall tells a plain object by its
 * `constructor`, which a user's map can hold as a key (`envs: {constructor: c}`): without
 * it such a map is refused; with it, every object is written as a map of its own fields.
 */
const WRITE_OPTIONS: marshallOptions = {
  removeUndefinedValues: true,
  allowImpreciseNumbers: true,
  convertClassInstanceToMap: true,
  convertEmptyValues: false,
};

/** How values are read: every number as a JavaScript number, never a BigInt. */
const READ_OPTIONS: unmarshallOptions = { wrapNumbers: (value: string) => Number(value) };

/** Bookkeeping on a JOB item: how many EVENT rows the job has (they are numbered by it). */
export const EVENT_COUNT = 'eventCount';
/** Bookkeeping on an ATTEMPT item: a string set of `<nodeRank>:<phase>`, one per report taken. */
export const REPORT_KEYS = 'reportKeys';

export const ATTEMPT_PREFIX = 'ATTEMPT#';
export const EVENT_PREFIX = 'EVENT#';
const INSTANCE_PREFIX = 'INSTANCE#';

// ---- keys --------------------------------------------------------------------------

/** The partition key of every item of a job (its JOB, ATTEMPT, INSTANCE and EVENT items). */
export function jobPk(jobId: string): string {
  return `JOB#${jobId}`;
}

/** ATTEMPT#0001: zero-padded so the sort key orders attempts (listAttempts also sorts by number). */
function attemptSk(attempt: number): string {
  return `${ATTEMPT_PREFIX}${String(attempt).padStart(4, '0')}`;
}

function key(pk: string, sk: string): Item {
  return { [TABLE_KEY.partitionKey]: { S: pk }, [TABLE_KEY.sortKey]: { S: sk } };
}

/** The items of the table a store reads and writes, by what they hold. */
export const keys = {
  job: (jobId: string): Item => key(jobPk(jobId), 'JOB'),
  attempt: (jobId: string, attempt: number): Item => key(jobPk(jobId), attemptSk(attempt)),
  /** Event rows are numbered per job so that equal timestamps keep their write order. */
  event: (jobId: string, at: string, seq: number): Item => key(jobPk(jobId), `${EVENT_PREFIX}${at}#${String(seq).padStart(6, '0')}`),
  /** One item per instance of a job, for InstanceIndex; keyed by instance so a repeat overwrites. */
  instance: (jobId: string, instanceId: string): Item => key(jobPk(jobId), `${INSTANCE_PREFIX}${instanceId}`),
  /** An idempotency claim's item: a partition of its own, so a claim never touches a job's. */
  claim: (claimKey: string): Item => key(`IDEMPOTENCY#${claimKey}`, 'IDEMPOTENCY'),
  /** The table key of an item (or of an index's keys-only copy of it). */
  of: (item: Item): Item => {
    const { [TABLE_KEY.partitionKey]: pk, [TABLE_KEY.sortKey]: sk } = item;
    if (pk === undefined || sk === undefined) throw new Error(`an item without the table's key: ${JSON.stringify(Object.keys(item))}`);
    return { [TABLE_KEY.partitionKey]: pk, [TABLE_KEY.sortKey]: sk };
  },
} as const;

/** The QueueIndex keys, as attribute names: removed once a job's start no longer waits. */
export const QUEUE_KEYS: readonly string[] = [QUEUE_INDEX.partitionKey, QUEUE_INDEX.sortKey];

// ---- values ------------------------------------------------------------------------

/** One value as an attribute value. */
export function toAttribute(value: NativeAttributeValue): AttributeValue {
  return convertToAttr(value, WRITE_OPTIONS);
}

/**
 * Fields to write at the top level of an item, split by the item rule: a null is an
 * absent attribute, so it is removed rather than set.
 */
export function topLevel(fields: Readonly<Record<string, NativeAttributeValue>>): {
  set: Record<string, NativeAttributeValue>;
  remove: string[];
} {
  const set: Record<string, NativeAttributeValue> = {};
  const remove: string[] = [];
  for (const [name, value] of Object.entries(fields)) {
    if (value === null) remove.push(name);
    else if (value !== undefined) set[name] = value;
  }
  return { set, remove };
}

/** A record's fields as attributes; top-level nulls and undefineds are left out. */
function recordItem(record: object): Item {
  const item: Item = {};
  for (const [name, value] of Object.entries(record)) {
    if (value !== null && value !== undefined) item[name] = toAttribute(value as NativeAttributeValue);
  }
  return item;
}

// ---- item shapes -------------------------------------------------------------------

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
  'interruptionNode',
  'rebalanceNoticedAt',
  'rebalanceNode',
  'standby',
  'runStartedAt',
  'endedAt',
  'nodeMarks',
  'stopAskedAt',
  'instancesGoneAt',
  'progress',
]);

/** The points of a node's timeline an attempt's item holds, each as an attribute of its own. */
const NODE_MARKS = ['firstHeartbeatAt'] as const satisfies readonly (keyof NodeMarks)[];
const NODE_MARK_ATTRIBUTE = /^mark_(firstHeartbeatAt)_(\d+)$/;

/**
 * The attribute that holds one point of node `nodeRank`'s timeline: a top-level attribute
 * (not a field of a map), so a write can set it on any attempt, those stored before the
 * timeline was kept included, with no map to create first.
 */
export function nodeMarkAttribute(mark: keyof NodeMarks, nodeRank: number): string {
  return `mark_${mark}_${nodeRank}`;
}

const EVENT_FIELDS = allFields<JobEvent>()(['jobId', 'at', 'from', 'to', 'attempt', 'reason']);

const CLAIM_FIELDS = allFields<IdempotencyClaim>()(['key', 'jobId', 'fingerprint', 'expiresAt']);

/** The job's item as created: the record, its list index keys, and its queue keys while it waits. */
export function jobItem(job: JobRecord): Item {
  return {
    ...keys.job(job.jobId),
    ...recordItem(job),
    [JOB_LIST_INDEX.partitionKey]: { S: jobListPartition(job.jobId) },
    [JOB_LIST_INDEX.sortKey]: { S: rules.listKey(job) },
    ...(rules.queuedAtCreation(job) ? { [QUEUE_INDEX.partitionKey]: { S: queuePartition(job.jobId) }, [QUEUE_INDEX.sortKey]: { S: rules.listKey(job) } } : {}),
    [EVENT_COUNT]: toAttribute(1),
  };
}

/** An event row. */
export function eventItem(event: JobEvent, seq: number): Item {
  return { ...keys.event(event.jobId, event.at, seq), ...recordItem(event) };
}

/** An idempotency claim's item, with the epoch seconds TTL deletes it after. */
export function claimItem(claim: IdempotencyClaim): Item {
  const expiresAtEpoch = Math.ceil(Date.parse(claim.expiresAt) / 1000);
  return { ...keys.claim(claim.key), ...recordItem(claim), [TTL_ATTRIBUTE]: toAttribute(expiresAtEpoch) };
}

/**
 * An attempt as an item. nodesHeardFrom is a number set, which DynamoDB cannot hold empty:
 * an attempt nobody has heard from has none (and heartbeats ADD to it). Its reports' keys
 * go beside it, so a report is taken once per node and phase.
 */
export function attemptItem(attempt: AttemptRecord): Item {
  const { nodesHeardFrom, nodeMarks, ...rest } = attempt;
  const item: Item = { ...keys.attempt(attempt.jobId, attempt.attempt), ...recordItem(rest) };
  for (const [rank, marks] of Object.entries(nodeMarks ?? {})) {
    for (const mark of NODE_MARKS) {
      const at = marks[mark];
      if (at !== undefined) item[nodeMarkAttribute(mark, Number(rank))] = toAttribute(at);
    }
  }
  if (nodesHeardFrom.length > 0) item.nodesHeardFrom = toAttribute(new Set(nodesHeardFrom));
  const reportKeys = new Set(attempt.reports.map(rules.reportKey));
  if (reportKeys.size > 0) item[REPORT_KEYS] = toAttribute(reportKeys);
  return item;
}

/** The items of InstanceIndex for an attempt's instances, one per distinct instance. */
export function instanceItems(jobId: string, attempt: number, instances: readonly InstanceRef[]): Item[] {
  const ids = [...new Set(instances.map((i) => i.instanceId))];
  return ids.map((instanceId) => ({
    ...keys.instance(jobId, instanceId),
    [INSTANCE_INDEX.partitionKey]: { S: instanceId },
    [INSTANCE_INDEX.sortKey]: { S: attemptSk(attempt) },
  }));
}

/** The named fields of an item, absent ones as null; keys and bookkeeping are left behind. */
function fromItem<T>(item: Item, fields: readonly string[]): T {
  const present: Item = {};
  for (const field of fields) {
    const attribute = item[field];
    if (attribute !== undefined) present[field] = attribute;
  }
  const values = unmarshall(present, READ_OPTIONS);
  const record: Record<string, unknown> = {};
  for (const field of fields) record[field] = field in values ? values[field] : null;
  return record as T;
}

/** A job item as a record; a one-task job has no `pipeline` (absent, as it was given). */
export function toJob(item: Item): JobRecord {
  const { pipeline, ...job } = fromItem<JobRecord>(item, JOB_FIELDS);
  return pipeline === null || pipeline === undefined ? job : { ...job, pipeline };
}

/** A job item's event count: the number of its last EVENT row. */
export function eventCountOf(item: Item): number {
  return Number(item[EVENT_COUNT]?.N ?? '0');
}

/**
 * An attempt item as a record; an attempt stored before a field existed gets its empty
 * value, one of a one-task job has no `task`, and the fields only some attempts have
 * (`standby`, `rebalanceNoticedAt`, the warned nodes, `runStartedAt`) are absent when they have none.
 */
export function toAttempt(item: Item): AttemptRecord {
  const { task, standby, rebalanceNoticedAt, interruptionNode, rebalanceNode, runStartedAt, nodesHeardFrom, nodeMarks: _none, stopAskedAt, instancesGoneAt, progress, ...attempt } = fromItem<AttemptRecord>(item, ATTEMPT_FIELDS);
  const marks = nodeMarksOf(item);
  // A number set reads as a Set; the record holds the ranks in order.
  const heardFrom = nodesHeardFrom === null ? [] : [...(nodesHeardFrom as unknown as ReadonlySet<number>)].sort((a, b) => a - b);
  return {
    ...attempt,
    nodesHeardFrom: heardFrom,
    ...(task === null || task === undefined ? {} : { task }),
    ...(standby === null || standby === undefined ? {} : { standby }),
    ...(rebalanceNoticedAt === null || rebalanceNoticedAt === undefined ? {} : { rebalanceNoticedAt }),
    ...(interruptionNode === null || interruptionNode === undefined ? {} : { interruptionNode }),
    ...(rebalanceNode === null || rebalanceNode === undefined ? {} : { rebalanceNode }),
    ...(runStartedAt === null || runStartedAt === undefined ? {} : { runStartedAt }),
    ...(marks === null ? {} : { nodeMarks: marks }),
    ...(stopAskedAt === null || stopAskedAt === undefined ? {} : { stopAskedAt }),
    ...(instancesGoneAt === null || instancesGoneAt === undefined ? {} : { instancesGoneAt }),
    ...(progress === null || progress === undefined ? {} : { progress }),
  };
}

/** The node marks an attempt's item holds (nodeMarkAttribute), by rank; null when none. */
function nodeMarksOf(item: Item): Record<string, NodeMarks> | null {
  const marks: Record<string, Record<string, string>> = {};
  for (const [name, value] of Object.entries(item)) {
    const match = NODE_MARK_ATTRIBUTE.exec(name);
    if (match === null || value.S === undefined) continue;
    const [, mark, rank] = match as unknown as [string, string, string];
    (marks[rank] ??= {})[mark] = value.S;
  }
  return Object.keys(marks).length === 0 ? null : marks;
}

export function toEvent(item: Item): JobEvent {
  return fromItem<JobEvent>(item, EVENT_FIELDS);
}

export function toClaim(item: Item): IdempotencyClaim {
  return fromItem<IdempotencyClaim>(item, CLAIM_FIELDS);
}
