// The local DynamoDB: dynalite with TransactWriteItems and refused items added, and a store that can persist.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
  TransactionCanceledException,
  TransactWriteItemsCommand,
  UpdateItemCommand,
  type AttributeValue,
} from '@aws-sdk/client-dynamodb';
import { AbstractLevel } from 'abstract-level';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureTable, INTENT_TABLE, startDynalite, type LocalDynamo } from '../../../local/dynalite.ts';

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

  it('gives a refused transaction item back as it was, where the request asks for it (ALL_OLD)', async () => {
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key('t5'), n: { N: '7' } } }));
    const refusal = await client
      .send(
        new TransactWriteItemsCommand({
          TransactItems: [
            { Update: { TableName: table, Key: key('t5'), UpdateExpression: 'SET n = :two', ConditionExpression: 'n = :one', ExpressionAttributeValues: { ':one': { N: '1' }, ':two': { N: '2' } }, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' } },
            { ConditionCheck: { TableName: table, Key: key('t5', 'none'), ConditionExpression: 'attribute_exists(pk)', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' } },
          ],
        }),
      )
      .then(() => null, (e: unknown) => e as TransactionCanceledException);
    expect(refusal?.CancellationReasons).toEqual([
      { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed', Item: { ...key('t5'), n: { N: '7' } } },
      { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed' },
    ]);
  });
});

describe('startDynalite: a refused write of one item', () => {
  let dynamo: LocalDynamo;
  let client: DynamoDBClient;
  const table = 'single-writes';
  const stored = { ...key('s1'), n: { N: '1' }, tags: { SS: ['a'] } };

  beforeAll(async () => {
    dynamo = await startDynalite();
    client = clientFor(dynamo.endpoint);
    await ensureTable(client, table);
    await client.send(new PutItemCommand({ TableName: table, Item: stored }));
  });

  afterAll(async () => {
    client.destroy();
    await dynamo.close();
  });

  const refusalOf = (write: Promise<unknown>): Promise<ConditionalCheckFailedException | null> =>
    write.then(
      () => null,
      (e: unknown) => {
        expect(e).toBeInstanceOf(ConditionalCheckFailedException);
        return e as ConditionalCheckFailedException;
      },
    );

  it.each([
    ['UpdateItem', () => new UpdateItemCommand({ TableName: table, Key: key('s1'), UpdateExpression: 'SET n = :two', ConditionExpression: 'n = :zero', ExpressionAttributeValues: { ':two': { N: '2' }, ':zero': { N: '0' } }, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' })],
    ['PutItem', () => new PutItemCommand({ TableName: table, Item: { ...key('s1'), n: { N: '3' } }, ConditionExpression: 'attribute_not_exists(pk)', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' })],
    ['DeleteItem', () => new DeleteItemCommand({ TableName: table, Key: key('s1'), ConditionExpression: 'n = :zero', ExpressionAttributeValues: { ':zero': { N: '0' } }, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' })],
  ])('answers a refused %s with the item as it is, as DynamoDB does (ALL_OLD)', async (_name, command) => {
    const refusal = await refusalOf(client.send(command() as UpdateItemCommand));
    expect(refusal?.Item).toEqual(stored);
    expect((await client.send(new GetItemCommand({ TableName: table, Key: key('s1'), ConsistentRead: true }))).Item).toEqual(stored);
  });

  it('gives no item when the request does not ask for it, or when there is none', async () => {
    const unasked = await refusalOf(client.send(new UpdateItemCommand({ TableName: table, Key: key('s1'), UpdateExpression: 'SET n = :two', ConditionExpression: 'n = :zero', ExpressionAttributeValues: { ':two': { N: '2' }, ':zero': { N: '0' } } })));
    expect(unasked?.Item).toBeUndefined();
    const missing = await refusalOf(client.send(new UpdateItemCommand({ TableName: table, Key: key('s-none'), UpdateExpression: 'SET n = :two', ConditionExpression: 'attribute_exists(pk)', ExpressionAttributeValues: { ':two': { N: '2' } }, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' })));
    expect(missing?.Item).toBeUndefined();
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

  /** A store on the folder, its client, and a way to close both. */
  async function opened(): Promise<{ dynamo: LocalDynamo; client: DynamoDBClient; close: () => Promise<void> }> {
    const dynamo = await startDynalite({ path: folder });
    const client = clientFor(dynamo.endpoint);
    await ensureTable(client, 'persisted');
    return { dynamo, client, close: async () => (client.destroy(), await dynamo.close()) };
  }

  const intentsLeft = async (client: DynamoDBClient): Promise<number> => (await client.send(new ScanCommand({ TableName: INTENT_TABLE }))).Items?.length ?? 0;
  const item = async (client: DynamoDBClient, pk: string): Promise<Record<string, AttributeValue> | undefined> =>
    (await client.send(new GetItemCommand({ TableName: 'persisted', Key: key(pk), ConsistentRead: true }))).Item;

  /** An intent as a transaction writes it before its first write: its old images in one part, then its head. */
  async function intent(client: DynamoDBClient, id: string, images: unknown[], head = true): Promise<void> {
    const chunk = Buffer.from(JSON.stringify(images), 'utf8');
    await client.send(new PutItemCommand({ TableName: INTENT_TABLE, Item: { id: { S: `${id}#part#0000` }, chunk: { B: chunk } } }));
    if (head) await client.send(new PutItemCommand({ TableName: INTENT_TABLE, Item: { id: { S: `${id}#head` }, parts: { N: '1' } } }));
  }

  it('leaves no intent behind a transaction, done or cancelled', async () => {
    const { client, close } = await opened();
    try {
      await client.send(new TransactWriteItemsCommand({ TransactItems: [{ Put: { TableName: 'persisted', Item: key('a') } }, { Put: { TableName: 'persisted', Item: key('b') } }] }));
      const refused = client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            { Put: { TableName: 'persisted', Item: { ...key('c'), v: { N: '1' } } } },
            { Put: { TableName: 'persisted', Item: key('a'), ConditionExpression: 'attribute_not_exists(pk)' } },
          ],
        }),
      );
      await expect(refused).rejects.toThrow(TransactionCanceledException);
      expect(await item(client, 'c')).toBeUndefined();
      expect(await intentsLeft(client)).toBe(0);
    } finally {
      await close();
    }
  });

  it('undoes, as it opens, a transaction a crash left in progress, and says so', async () => {
    const first = await opened();
    await first.client.send(new PutItemCommand({ TableName: 'persisted', Item: { ...key('x'), v: { N: '1' } } }));
    // The crash came after the intent and the transaction's first two writes.
    await intent(first.client, 'crashed-1', [
      { tableName: 'persisted', key: key('x'), old: { ...key('x'), v: { N: '1' } } },
      { tableName: 'persisted', key: key('y') },
      { tableName: 'persisted', key: key('z'), old: { ...key('z'), v: { N: '9' } } },
    ]);
    await first.client.send(new PutItemCommand({ TableName: 'persisted', Item: { ...key('x'), v: { N: '2' } } }));
    await first.client.send(new PutItemCommand({ TableName: 'persisted', Item: { ...key('y'), v: { N: '2' } } }));
    await first.close();

    const second = await opened();
    try {
      expect(second.dynamo.undone).toEqual(['a transaction of 3 item(s) (x A, y A, z A) that a crash had cut in half was undone']);
      expect(await item(second.client, 'x')).toEqual({ ...key('x'), v: { N: '1' } });
      expect(await item(second.client, 'y')).toBeUndefined();
      // An item the crash came before is written back as it was: no change.
      expect(await item(second.client, 'z')).toEqual({ ...key('z'), v: { N: '9' } });
      expect(await intentsLeft(second.client)).toBe(0);
    } finally {
      await second.close();
    }
  });

  it('only deletes the parts of an intent whose head was already let go: that transaction was done', async () => {
    const first = await opened();
    await first.client.send(new PutItemCommand({ TableName: 'persisted', Item: { ...key('done'), v: { N: '2' } } }));
    await intent(first.client, 'done-1', [{ tableName: 'persisted', key: key('done'), old: { ...key('done'), v: { N: '1' } } }], false);
    await first.close();

    const second = await opened();
    try {
      expect(second.dynamo.undone).toEqual([]);
      expect(await item(second.client, 'done')).toEqual({ ...key('done'), v: { N: '2' } });
      expect(await intentsLeft(second.client)).toBe(0);
    } finally {
      await second.close();
    }
  });

  it('answers a transaction of items larger than one intent part', async () => {
    const { client, close } = await opened();
    try {
      const big = (pk: string) => ({ ...key(pk), blob: { S: 'x'.repeat(350 * 1024) } });
      await client.send(new PutItemCommand({ TableName: 'persisted', Item: big('p') }));
      await client.send(new PutItemCommand({ TableName: 'persisted', Item: big('q') }));
      await client.send(new TransactWriteItemsCommand({ TransactItems: [{ Delete: { TableName: 'persisted', Key: key('p') } }, { Delete: { TableName: 'persisted', Key: key('q') } }] }));
      expect(await item(client, 'p')).toBeUndefined();
      expect(await intentsLeft(client)).toBe(0);
      await client.send(new DeleteItemCommand({ TableName: 'persisted', Key: key('q') }));
    } finally {
      await close();
    }
  });
});

describe('startDynalite: a write the database below refuses', () => {
  let folder: string;
  let failing = false;
  const original = { put: AbstractLevel.prototype.put, batch: AbstractLevel.prototype.batch };
  const noSpace = (): Promise<never> =>
    Promise.reject(Object.assign(new Error('IO error: 000005.log: No space left on device'), { code: 'LEVEL_IO_ERROR' }));

  beforeAll(async () => {
    folder = await mkdtemp(join(tmpdir(), 'relaunch-dynalite-'));
    // LevelDB failing its writes as on a disk a job filled since the guard looked.
    AbstractLevel.prototype.put = function put(this: AbstractLevel<unknown, unknown, unknown>, ...args: unknown[]) {
      return failing ? noSpace() : (original.put as (...a: unknown[]) => Promise<void>).apply(this, args);
    } as typeof AbstractLevel.prototype.put;
    AbstractLevel.prototype.batch = function batch(this: AbstractLevel<unknown, unknown, unknown>, ...args: unknown[]) {
      return failing ? noSpace() : (original.batch as (...a: unknown[]) => Promise<void>).apply(this, args);
    } as typeof AbstractLevel.prototype.batch;
  });

  afterAll(async () => {
    AbstractLevel.prototype.put = original.put;
    AbstractLevel.prototype.batch = original.batch;
    await rm(folder, { recursive: true, force: true });
  });

  it('answers it as a refused write (a 500 saying so), and serves the next write once the disk takes it', async () => {
    const dynamo = await startDynalite({ path: folder, minFreeBytes: 0 });
    const client = clientFor(dynamo.endpoint);
    try {
      await ensureTable(client, 'full');
      failing = true;
      const refused = client.send(new PutItemCommand({ TableName: 'full', Item: key('lost') }));
      await expect(refused).rejects.toMatchObject({ name: 'InternalServerError', message: expect.stringContaining('No space left on device') });
      failing = false;
      await client.send(new PutItemCommand({ TableName: 'full', Item: key('kept') }));
      const { Item } = await client.send(new GetItemCommand({ TableName: 'full', Key: key('kept'), ConsistentRead: true }));
      expect(Item).toEqual(key('kept'));
    } finally {
      failing = false;
      client.destroy();
      await dynamo.close();
    }
  });
});
