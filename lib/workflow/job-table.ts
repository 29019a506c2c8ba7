// The jobs table, defined once: the CDK construct, the local runtime and the tests all build
// it from these names, and DynamoJobStore reads and writes by them.
//
// Layout (DESIGN.md section 5), every item of a job in its own partition:
//
//   pk            sk                        what
//   JOB#<id>      JOB                       the job; gsi2pk = JOBS#<0-9>, gsi2sk = <createdAt>#<id>;
//                                           until its execution is recorded, gsi3pk = QUEUED#<0-9>, gsi3sk = gsi2sk
//   JOB#<id>      ATTEMPT#<nnnn>            one attempt (4+ digits, zero-padded)
//   JOB#<id>      INSTANCE#<instanceId>     which attempt owns an instance; gsi1pk = <instanceId>,
//                                           gsi1sk = ATTEMPT#<nnnn>
//   JOB#<id>      EVENT#<at>#<seq>          one status change (seq: 6+ digits, per job)
//   IDEMPOTENCY#<digest>  IDEMPOTENCY       a submit's idempotency key claim: jobId, fingerprint,
//                                           expiresAt; TTL_ATTRIBUTE lets DynamoDB delete it later
//
// Three indexes: InstanceIndex finds an attempt by instance id (keys only: pk and gsi1sk
// name the attempt item); JobListIndex lists jobs newest first without a Scan; QueueIndex
// holds only the jobs whose execution is not recorded yet, oldest first. JobListIndex
// projects keys only: a job's status writes change no key, so they never write to the
// index, which takes one write per job created. (Projecting whole items put every status
// write of every job into the index, whose ~1,000 writes a second per partition would
// throttle the table's writes with it.) Jobs are spread over ten partitions by id; a list
// reads all of them newest first, merges the keys, then reads the items (BatchGetItem,
// 100 at a time).

import type { CreateTableCommandInput } from '@aws-sdk/client-dynamodb';

/** The table's key attributes, both strings. */
export const TABLE_KEY = { partitionKey: 'pk', sortKey: 'sk' } as const;

/**
 * The table's time-to-live attribute (epoch seconds): DynamoDB deletes an item some time
 * after it. Only lapsed idempotency claims carry it; nothing relies on when they go.
 */
export const TTL_ATTRIBUTE = 'expiresAtEpoch';

/** A global secondary index: its name, string key attributes and what it projects. */
export interface IndexDefinition {
  readonly indexName: string;
  readonly partitionKey: string;
  readonly sortKey: string;
  /** DynamoDB's ProjectionType (and CDK's `dynamodb.ProjectionType` value). */
  readonly projection: 'ALL' | 'KEYS_ONLY';
}

/** Finds the attempt that owns an instance id. */
export const INSTANCE_INDEX: IndexDefinition = {
  indexName: 'InstanceIndex',
  partitionKey: 'gsi1pk',
  sortKey: 'gsi1sk',
  projection: 'KEYS_ONLY',
};

/** Lists jobs by creation time; keys only, so status writes stay out of it. */
export const JOB_LIST_INDEX: IndexDefinition = {
  indexName: 'JobListIndex',
  partitionKey: 'gsi2pk',
  sortKey: 'gsi2sk',
  projection: 'KEYS_ONLY',
};

/**
 * The JobListIndex partition jobs created before the list was sharded sit in; the list
 * still reads it.
 */
export const JOB_LIST_PARTITION = 'JOBS';

/**
 * How many JobListIndex partitions new jobs are spread over. One partition takes about
 * 1,000 writes a second, one per job created: ten take a burst of submits as fast as API
 * Gateway's default 10,000 requests a second.
 */
export const JOB_LIST_SHARDS = 10;

/** A job's shard, 0-9, from its id (FNV-1a): where it sits in JobListIndex and QueueIndex. */
function shardOf(jobId: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < jobId.length; i += 1) hash = Math.imul(hash ^ jobId.charCodeAt(i), 0x01000193) >>> 0;
  return hash % JOB_LIST_SHARDS;
}

/** The JobListIndex partition a job sits in: `JOBS#<0-9>`. */
export function jobListPartition(jobId: string): string {
  return `${JOB_LIST_PARTITION}#${shardOf(jobId)}`;
}

/** The QueueIndex partition a job sits in until its execution is recorded: `QUEUED#<0-9>`. */
export function queuePartition(jobId: string): string {
  return `${QUEUE_PARTITION}#${shardOf(jobId)}`;
}

/** Every partition a list reads: the shards, and the one unsharded jobs are in. */
export const JOB_LIST_PARTITIONS: readonly string[] = [...Array.from({ length: JOB_LIST_SHARDS }, (_, i) => `${JOB_LIST_PARTITION}#${i}`), JOB_LIST_PARTITION];

/**
 * Jobs whose execution is not recorded yet, oldest first, for the janitor to start those
 * Step Functions throttled: sparse, since a job carries its keys from its creation (in the
 * same write) until its execution is recorded or it ends. Spread over ten partitions as
 * the job list is.
 */
export const QUEUE_INDEX: IndexDefinition = {
  indexName: 'QueueIndex',
  partitionKey: 'gsi3pk',
  sortKey: 'gsi3sk',
  projection: 'KEYS_ONLY',
};

/** The prefix of QueueIndex's partitions. */
export const QUEUE_PARTITION = 'QUEUED';

/** Every QueueIndex partition. */
export const QUEUE_PARTITIONS: readonly string[] = Array.from({ length: JOB_LIST_SHARDS }, (_, i) => `${QUEUE_PARTITION}#${i}`);

/** Every index of the table. */
export const TABLE_INDEXES: readonly IndexDefinition[] = [INSTANCE_INDEX, JOB_LIST_INDEX, QUEUE_INDEX];

/**
 * CreateTable's input for this table, on-demand billing, as the CDK construct declares it:
 * for dynalite and tests (the deployed table is CloudFormation's).
 */
export function createTableInput(tableName: string): CreateTableCommandInput {
  const keyAttributes = [TABLE_KEY.partitionKey, TABLE_KEY.sortKey, ...TABLE_INDEXES.flatMap((i) => [i.partitionKey, i.sortKey])];
  return {
    TableName: tableName,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: keyAttributes.map((name) => ({ AttributeName: name, AttributeType: 'S' })),
    KeySchema: [
      { AttributeName: TABLE_KEY.partitionKey, KeyType: 'HASH' },
      { AttributeName: TABLE_KEY.sortKey, KeyType: 'RANGE' },
    ],
    GlobalSecondaryIndexes: TABLE_INDEXES.map((index) => ({
      IndexName: index.indexName,
      KeySchema: [
        { AttributeName: index.partitionKey, KeyType: 'HASH' },
        { AttributeName: index.sortKey, KeyType: 'RANGE' },
      ],
      Projection: { ProjectionType: index.projection },
    })),
  };
}
