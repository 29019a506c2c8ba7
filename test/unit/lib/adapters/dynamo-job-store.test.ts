// DynamoJobStore against the JobStore contract on dynalite (a real DynamoDB API, in process),
// plus what only the DynamoDB layout promises: the items it writes and the indexes it uses.

import { BatchGetItemCommand, DynamoDBClient, GetItemCommand, QueryCommand, UpdateItemCommand, type AttributeValue, type TransactWriteItemsCommandInput } from '@aws-sdk/client-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { JobStatus } from '../../../../lib/status.ts';
import { describe, expect, it } from 'vitest';
import { DynamoJobStore } from '../../../../lib/adapters/dynamo-job-store/index.ts';
import { INSTANCE_INDEX, JOB_LIST_INDEX, JOB_LIST_PARTITIONS, jobListPartition } from '../../../../lib/workflow/job-table.ts';
import { useDynalite } from '../../../support/fixtures/dynalite.ts';
import { attemptRecord } from '../../../support/fixtures/records.ts';
import { describeJobStoreContract, richSpec, sampleJob as job } from '../../../support/job-store.contract.ts';

const dynalite = useDynalite();

/** A store on a table of its own, so every test starts empty. */
async function freshStore(): Promise<{ store: DynamoJobStore; tableName: string }> {
  const tableName = await dynalite.freshTable('jobs');
  return { store: new DynamoJobStore({ client: dynalite.client(), tableName }), tableName };
}

describeJobStoreContract('DynamoJobStore on dynalite', async () => (await freshStore()).store);

describe('DynamoJobStore layout', () => {
  it('keeps the job under JOB#<id>/JOB with its spec as a map and the list index keys', async () => {
    const { store, tableName } = await freshStore();
    await store.createJob(job);
    const { Item } = await dynalite.client().send(
      new GetItemCommand({ TableName: tableName, Key: { pk: { S: 'JOB#job-1' }, sk: { S: 'JOB' } } }),
    );
    expect(Item).toMatchObject({
      status: { S: 'PENDING' },
      [JOB_LIST_INDEX.partitionKey]: { S: jobListPartition('job-1') },
      [JOB_LIST_INDEX.sortKey]: { S: '2026-01-01T00:00:00.000Z#job-1' },
      spec: { M: expect.objectContaining({ envs: { M: expect.objectContaining({ EMPTY: { S: '' } }) } }) },
    });
  });

  it('writes ATTEMPT#0001, an INSTANCE item per instance for the instance index, and EVENT rows', async () => {
    const { store, tableName } = await freshStore();
    await store.createJob(job);
    await store.changeStatus('job-1', {
      from: 'PENDING',
      to: 'STARTING',
      reason: 'launching',
      attempt: 1,
      at: '2026-01-01T00:00:01.000Z',
    });
    await store.putAttempt(attemptRecord('job-1', 1, '2026-01-01T00:00:01.000Z', { secretHash: 'f'.repeat(64) }));
    await store.setInstances('job-1', 1, { region: 'us-east-1', zone: null, instanceType: 'm5.large' }, [
      { instanceId: 'i-0123', nodeRank: 0, privateIp: null },
    ]);
    const { Items } = await dynalite.client().send(
      new QueryCommand({
        TableName: tableName,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': { S: 'JOB#job-1' } },
      }),
    );
    expect(Items?.map((item) => item.sk?.S)).toEqual([
      'ATTEMPT#0001',
      'EVENT#2026-01-01T00:00:00.000Z#000001',
      'EVENT#2026-01-01T00:00:01.000Z#000002',
      'INSTANCE#i-0123',
      'JOB',
    ]);
    const { Items: owners } = await dynalite.client().send(
      new QueryCommand({
        TableName: tableName,
        IndexName: INSTANCE_INDEX.indexName,
        KeyConditionExpression: `${INSTANCE_INDEX.partitionKey} = :id`,
        ExpressionAttributeValues: { ':id': { S: 'i-0123' } },
      }),
    );
    expect(owners).toEqual([
      { pk: { S: 'JOB#job-1' }, sk: { S: 'INSTANCE#i-0123' }, gsi1pk: { S: 'i-0123' }, gsi1sk: { S: 'ATTEMPT#0001' } },
    ]);
  });

  it('pages through a job list longer than one DynamoDB page', async () => {
    const { store } = await freshStore();
    // A page ends once it holds 1 MB: six of these fill the first, the seventh needs a second.
    const bigSpec = { ...richSpec, setup: 'x'.repeat(200_000) };
    for (let n = 0; n < 7; n += 1) {
      await store.createJob({ ...job, jobId: `job-${n}`, spec: bigSpec, createdAt: `2026-01-01T00:00:0${n}.000Z` });
    }
    const listed = await store.listJobs();
    expect(listed.map((j) => j.jobId)).toEqual(['job-6', 'job-5', 'job-4', 'job-3', 'job-2', 'job-1', 'job-0']);
    expect(listed[0]?.spec).toEqual(bigSpec);
  });

  it('keeps status writes out of the list index: it holds each job\'s keys only', async () => {
    const { store, tableName } = await freshStore();
    await store.createJob(job);
    await store.changeStatus('job-1', { from: JobStatus.PENDING, to: JobStatus.STARTING, reason: 'launching', attempt: 1, at: '2026-01-01T00:01:00.000Z' });

    const { Items } = await dynalite.client().send(
      new QueryCommand({
        TableName: tableName,
        IndexName: JOB_LIST_INDEX.indexName,
        KeyConditionExpression: '#pk = :pk',
        ExpressionAttributeNames: { '#pk': JOB_LIST_INDEX.partitionKey },
        ExpressionAttributeValues: { ':pk': { S: jobListPartition('job-1') } },
      }),
    );
    expect(Items?.map((item) => Object.keys(item).sort())).toEqual([['gsi2pk', 'gsi2sk', 'pk', 'sk']]);
    expect((await store.listJobs())[0]?.status).toBe(JobStatus.STARTING);
  });

  it('lists more jobs than one BatchGetItem takes, newest first, and with a limit', async () => {
    const { store } = await freshStore();
    for (let n = 0; n < 230; n += 1) {
      await store.createJob({ ...job, jobId: `job-${String(n).padStart(3, '0')}`, createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString() });
    }
    const listed = await store.listJobs();
    expect(listed).toHaveLength(230);
    expect(listed[0]?.jobId).toBe('job-229');
    expect(listed.at(-1)?.jobId).toBe('job-000');
    expect((await store.listJobs({ limit: 150 })).map((j) => j.jobId)).toEqual(listed.slice(0, 150).map((j) => j.jobId));
  });
});

describe('DynamoJobStore list shards', () => {
  it('spreads new jobs over the ten partitions by id, and lists them newest first across all, the unsharded one included', async () => {
    const { store, tableName } = await freshStore();
    const ids = Array.from({ length: 40 }, (_, n) => `j-${String(n).padStart(2, '0')}`);
    for (const [n, id] of ids.entries()) await store.createJob({ ...job, jobId: id, createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString() });
    expect(new Set(ids.map(jobListPartition)).size).toBe(10);
    // A job written before the shards, in the one partition all jobs then shared.
    await dynalite.client().send(
      new UpdateItemCommand({
        TableName: tableName,
        Key: { pk: { S: 'JOB#j-00' }, sk: { S: 'JOB' } },
        UpdateExpression: 'SET gsi2pk = :old',
        ExpressionAttributeValues: { ':old': { S: 'JOBS' } },
      }),
    );
    expect(JOB_LIST_PARTITIONS).toContain('JOBS');
    expect((await store.listJobs()).map((j) => j.jobId)).toEqual([...ids].reverse());
    expect((await store.listJobs({ limit: 5 })).map((j) => j.jobId)).toEqual(ids.slice(-5).reverse());
  });
});

describe('DynamoJobStore.listJobs with DynamoDB leaving keys unprocessed', () => {
  it('asks for those keys again, and keeps the list\'s order', async () => {
    const keys = (id: string) => ({ pk: { S: `JOB#${id}` }, sk: { S: 'JOB' } });
    // Real items, written and read on dynalite before DynamoDB's client is mocked.
    const { store: real, tableName } = await freshStore();
    await real.createJob({ ...job, jobId: 'a' });
    await real.createJob({ ...job, jobId: 'b' });
    const item = async (id: string) => (await dynalite.client().send(new GetItemCommand({ TableName: tableName, Key: keys(id) }))).Item as Record<string, AttributeValue>;
    const [itemA, itemB] = [await item('a'), await item('b')];
    const dynamo = mockClient(DynamoDBClient);
    // Both in the partition of jobs from before the shards; the others are empty.
    dynamo.on(QueryCommand).resolves({ Items: [] });
    dynamo.on(QueryCommand, { ExpressionAttributeValues: { ':pk': { S: 'JOBS' } } }).resolves({ Items: ['b', 'a'].map((id) => ({ ...keys(id), gsi2pk: { S: 'JOBS' }, gsi2sk: { S: `t#${id}` } })) });
    dynamo
      .on(BatchGetItemCommand)
      .resolvesOnce({ Responses: { [tableName]: [itemA] }, UnprocessedKeys: { [tableName]: { Keys: [keys('b')] } } })
      .resolves({ Responses: { [tableName]: [itemB] } });
    const store = new DynamoJobStore({ client: new DynamoDBClient({ region: 'us-east-1' }), tableName });

    try {
      expect((await store.listJobs()).map((j) => j.jobId)).toEqual(['b', 'a']);
      expect(dynamo.commandCalls(BatchGetItemCommand).map((call) => call.args[0].input.RequestItems?.[tableName]?.Keys)).toEqual([[keys('b'), keys('a')], [keys('b')]]);
    } finally {
      dynamo.restore();
    }
  });
});

describe('DynamoJobStore with a node kept from one attempt to the next', () => {
  /** Job 1 with attempt 1 on i-0 and i-1, and attempt 2 started, not yet placed. */
  async function secondAttemptUnplaced(): Promise<{ store: DynamoJobStore; tableName: string }> {
    const fresh = await freshStore();
    const { store } = fresh;
    await store.createJob(job);
    await store.changeStatus('job-1', { from: JobStatus.PENDING, to: JobStatus.STARTING, reason: 'launching', attempt: 1, at: '2026-01-01T00:00:01.000Z' });
    await store.putAttempt(attemptRecord('job-1', 1, '2026-01-01T00:00:01.000Z', { secretHash: 'a'.repeat(64) }));
    await store.setInstances('job-1', 1, placement, [
      { instanceId: 'i-0', nodeRank: 0, privateIp: '10.0.0.1' },
      { instanceId: 'i-1', nodeRank: 1, privateIp: '10.0.0.2' },
    ]);
    await store.putAttempt(attemptRecord('job-1', 2, '2026-01-01T00:10:00.000Z', { secretHash: 'b'.repeat(64) }));
    return fresh;
  }
  const placement = { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm5.large' };
  const second = [
    { instanceId: 'i-0', nodeRank: 0, privateIp: '10.0.0.1', reusedFrom: 1 },
    { instanceId: 'i-9', nodeRank: 1, privateIp: '10.0.0.9' },
  ];

  /** Where the instance index says an instance is: the attempt sort keys of its items. */
  async function indexOf(tableName: string, instanceId: string): Promise<(string | undefined)[]> {
    const { Items } = await dynalite.client().send(
      new QueryCommand({
        TableName: tableName,
        IndexName: INSTANCE_INDEX.indexName,
        KeyConditionExpression: `${INSTANCE_INDEX.partitionKey} = :id`,
        ExpressionAttributeValues: { ':id': { S: instanceId } },
      }),
    );
    return (Items ?? []).map((item) => item[INSTANCE_INDEX.sortKey]?.S);
  }

  it('moves the kept instance\'s index item to the new attempt in the one transaction that records the instances', async () => {
    const { store, tableName } = await secondAttemptUnplaced();
    const sent: TransactWriteItemsCommandInput[] = [];
    const client = dynalite.client();
    client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'TransactWriteItemsCommand') sent.push(args.input as TransactWriteItemsCommandInput);
        return next(args);
      },
      { step: 'initialize', name: 'recordTransactions' },
    );
    try {
      await store.setInstances('job-1', 2, placement, second);
    } finally {
      client.middlewareStack.remove('recordTransactions');
    }

    expect(sent).toHaveLength(1);
    const items = sent[0]?.TransactItems ?? [];
    expect(items[0]?.Update?.Key).toEqual({ pk: { S: 'JOB#job-1' }, sk: { S: 'ATTEMPT#0002' } });
    expect(items.flatMap((item) => (item.Put === undefined ? [] : [[item.Put.Item?.sk?.S, item.Put.Item?.[INSTANCE_INDEX.sortKey]?.S]]))).toEqual([
      ['INSTANCE#i-0', 'ATTEMPT#0002'],
      ['INSTANCE#i-9', 'ATTEMPT#0002'],
    ]);
    expect(await indexOf(tableName, 'i-0')).toEqual(['ATTEMPT#0002']);
    expect(await indexOf(tableName, 'i-1')).toEqual(['ATTEMPT#0001']);
    expect((await store.findAttemptByInstance('i-0'))?.attempt).toBe(2);
    expect((await store.getAttempt('job-1', 2)).instances).toEqual(second);
  });

  it('leaves the index where it was when the new attempt\'s instances are refused (already set)', async () => {
    const { store, tableName } = await secondAttemptUnplaced();
    await store.setInstances('job-1', 2, placement, [{ instanceId: 'i-7', nodeRank: 0, privateIp: '10.0.0.7' }, { instanceId: 'i-8', nodeRank: 1, privateIp: '10.0.0.8' }]);

    await expect(store.setInstances('job-1', 2, placement, second)).rejects.toThrow();

    expect(await indexOf(tableName, 'i-0')).toEqual(['ATTEMPT#0001']);
    expect((await store.findAttemptByInstance('i-0'))?.attempt).toBe(1);
  });
});
