// The local DynamoDB: dynalite with TransactWriteItems added, and a store that can persist.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  TransactionCanceledException,
  TransactWriteItemsCommand,
  type AttributeValue,
} from '@aws-sdk/client-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureTable, startDynalite, type LocalDynamo } from '../../../lib/adapters/dynalite.ts';

function clientFor(endpoint: string): DynamoDBClient {
  return new DynamoDBClient({ endpoint, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
}

const key = (pk: string, sk = 'A'): Record<string, AttributeValue> => ({ pk: { S: pk }, sk: { S: sk } });

describe('startDynalite: transactions', () => {
  let dynamo: LocalDynamo;
  let client: DynamoDBClient;
  const table = 'transactions';

  beforeAll(async () => {
    dynamo = await startDynalite();
    client = clientFor(dynamo.endpoint);
    await ensureTable(client, table);
  });

  afterAll(async () => {
    client.destroy();
    await dynamo.close();
  });

  async function items(pk: string): Promise<Record<string, AttributeValue>[]> {
    const { Items } = await client.send(
      new QueryCommand({ TableName: table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': { S: pk } }, ConsistentRead: true }),
    );
    return Items ?? [];
  }

  it('applies every item when every condition holds, and a passing ConditionCheck leaves no item behind', async () => {
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key('t1'), n: { N: '1' } } }));
    await client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          { Update: { TableName: table, Key: key('t1'), UpdateExpression: 'SET n = :two', ConditionExpression: 'n = :one', ExpressionAttributeValues: { ':one': { N: '1' }, ':two': { N: '2' } } } },
          { Put: { TableName: table, Item: { ...key('t1', 'B'), v: { S: 'new' } }, ConditionExpression: 'attribute_not_exists(pk)' } },
          { ConditionCheck: { TableName: table, Key: key('t1', 'C'), ConditionExpression: 'attribute_not_exists(pk)' } },
        ],
      }),
    );
    expect(await items('t1')).toEqual([
      { ...key('t1'), n: { N: '2' } },
      { ...key('t1', 'B'), v: { S: 'new' } },
    ]);
  });

  it('writes nothing when one condition fails, and names it in the cancellation reasons', async () => {
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key('t2'), n: { N: '1' } } }));
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key('t2', 'D'), gone: { BOOL: false } } }));
    const attempt = client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          { Update: { TableName: table, Key: key('t2'), UpdateExpression: 'SET n = :two', ConditionExpression: 'n = :one', ExpressionAttributeValues: { ':one': { N: '1' }, ':two': { N: '2' } } } },
          { Put: { TableName: table, Item: { ...key('t2', 'B') } } },
          { Delete: { TableName: table, Key: key('t2', 'D') } },
          { ConditionCheck: { TableName: table, Key: key('t2', 'C'), ConditionExpression: 'attribute_exists(pk)', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' } },
        ],
      }),
    );
    const error = await attempt.then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(TransactionCanceledException);
    expect((error as TransactionCanceledException).CancellationReasons?.map((r) => r.Code)).toEqual([
      'None',
      'None',
      'None',
      'ConditionalCheckFailed',
    ]);
    expect(await items('t2')).toEqual([
      { ...key('t2'), n: { N: '1' } },
      { ...key('t2', 'D'), gone: { BOOL: false } },
    ]);
  });

  it('refuses two operations on one item, as DynamoDB does', async () => {
    await expect(
      client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            { Put: { TableName: table, Item: key('t3') } },
            { Delete: { TableName: table, Key: key('t3') } },
          ],
        }),
      ),
    ).rejects.toMatchObject({ name: 'ValidationException' });
    expect(await items('t3')).toEqual([]);
  });

  it('lets exactly one of many racing transactions on the same condition win', async () => {
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key('t4'), owner: { S: 'nobody' } } }));
    const racers = Array.from({ length: 6 }, (_, i) =>
      client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            { Update: { TableName: table, Key: key('t4'), UpdateExpression: 'SET #o = :me', ConditionExpression: '#o = :nobody', ExpressionAttributeNames: { '#o': 'owner' }, ExpressionAttributeValues: { ':me': { S: `racer-${i}` }, ':nobody': { S: 'nobody' } } } },
            { Put: { TableName: table, Item: key('t4', `claim-${i}`) } },
          ],
        }),
      ),
    );
    const results = await Promise.allSettled(racers);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const rows = await items('t4');
    expect(rows.filter((r) => r.sk?.S?.startsWith('claim-'))).toHaveLength(1);
  });
});

describe('startDynalite: a persisted store', () => {
  let folder: string;

  beforeAll(async () => {
    folder = await mkdtemp(join(tmpdir(), 'relaunch-dynalite-'));
  });

  afterEach(async () => {
    await rm(folder, { recursive: true, force: true });
  });

  it('keeps tables and items across a restart on the same folder', async () => {
    const first = await startDynalite({ path: folder });
    const firstClient = clientFor(first.endpoint);
    await ensureTable(firstClient, 'persisted');
    await firstClient.send(new PutItemCommand({ TableName: 'persisted', Item: { ...key('kept'), note: { S: 'ünïcødé ✓' } } }));
    firstClient.destroy();
    await first.close();

    const second = await startDynalite({ path: folder });
    const secondClient = clientFor(second.endpoint);
    try {
      await ensureTable(secondClient, 'persisted');
      const { Item } = await secondClient.send(new GetItemCommand({ TableName: 'persisted', Key: key('kept'), ConsistentRead: true }));
      expect(Item).toEqual({ ...key('kept'), note: { S: 'ünïcødé ✓' } });
    } finally {
      secondClient.destroy();
      await second.close();
    }
  });

  it('starts empty on a fresh folder', async () => {
    const dynamo = await startDynalite({ path: folder });
    const client = clientFor(dynamo.endpoint);
    try {
      await ensureTable(client, 'persisted');
      const { Item } = await client.send(new GetItemCommand({ TableName: 'persisted', Key: key('kept') }));
      expect(Item).toBeUndefined();
    } finally {
      client.destroy();
      await dynamo.close();
    }
  });
});
