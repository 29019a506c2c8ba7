// An in-process DynamoDB for the local runtime and the tests: dynalite, behind a small proxy
// that adds the TransactWriteItems operation dynalite lacks (architect/dynalite issue 151).
//
// The proxy runs one request at a time. A transaction is then a sequence of ordinary
// conditional writes sent to dynalite; if any condition fails, the items' old images are
// written back before anything else runs, and the caller gets DynamoDB's
// TransactionCanceledException with one reason per item. Nothing can observe a
// transaction half done. The price is throughput, which a local run and a test suite do
// not need; DynamoJobStore speaks plain DynamoDB and never knows.
//
// A persisted store must also survive a crash of its process between two of those writes
// (kill -9). Before its first write, a transaction records its items' old images in an
// intent (items of a table of the proxy's own, INTENT_TABLE, in the same LevelDB); the
// intent is deleted once the transaction is done or undone. Opening the folder again
// writes back the old images of any intent left, so a transaction is found whole or not at
// all. LevelDB applies writes in the order they were made, and a killed process loses
// none it wrote, so the intent is always there when any of its transaction's writes is.
// (Writes are not synced: a power cut may lose acknowledged ones, which is not handled.)
// One trace of a cut can stay: dynalite writes an item's index entries before the item,
// so an index may keep an entry for an item that was never written, which every reader
// skips (DynamoDB's own eventually consistent indexes can show the same).
//
// dynalite also ignores ReturnValuesOnConditionCheckFailure; the proxy adds the refused item
// to a refusal that asks for it, in a transaction and in a write of one item alike.
//
// The proxy also keeps a persisted store off a full disk: LevelDB's write error on a full
// disk is thrown by dynalite where nothing can catch it, ending the whole process. So a
// write is refused with a 500, as DynamoDB answers when it cannot serve one, while the
// folder has less than `minFreeBytes` free, and goes through again once space returns. A
// write the database below still refuses (the disk filled after the guard looked) is
// caught in that request's own domain and answered the same 500 (catchStoreErrors).
//
// Over 600 lines, kept as one file: the proxy's parts (serving, transactions, their intent
// log, the disk guard) share one serial queue and one backend connection, and their
// guarantee (nothing seen half done, across kill -9) holds only for all of them together.

import domain from 'node:domain';
import { statfsSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { crc32 } from 'node:zlib';
import {
  CreateTableCommand,
  DescribeTableCommand,
  ResourceInUseException,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import dynalite from 'dynalite';
import { createTableInput } from '../lib/workflow/job-table.ts';

/** A running local DynamoDB. */
export interface LocalDynamo {
  /** Where to point a DynamoDBClient: `http://127.0.0.1:<port>`. */
  readonly endpoint: string;
  /** Transactions a crash had cut in half, undone as the store opened: one line each. */
  readonly undone: readonly string[];
  /** Stops serving and closes the store (a persisted one is flushed to its folder). */
  close(): Promise<void>;
}

/** Where a local DynamoDB keeps its data. */
export interface StartDynaliteOptions {
  /** A folder for the data, kept across restarts; in memory when absent. */
  readonly path?: string;
  /**
   * With `path`: writes are refused while the folder's file system has less free space
   * than this, so LevelDB never meets a full disk. @default 32 MiB
   */
  readonly minFreeBytes?: number;
}

/** The free space a persisted store keeps in hand: LevelDB flushes and compacts in MiBs. */
export const DEFAULT_MIN_FREE_BYTES = 32 * 1024 * 1024;

/**
 * The proxy's own table in a persisted store: the intents of transactions in progress.
 * It is empty between transactions.
 */
export const INTENT_TABLE = 'relaunch-local-transactions';

/** DynamoDB operations that write. */
const WRITE_OPERATIONS = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem', 'TransactWriteItems', 'CreateTable']);

/**
 * Starts dynalite in this process on 127.0.0.1 and a free port, tables ACTIVE at once,
 * with TransactWriteItems added.
 */
export async function startDynalite(options: StartDynaliteOptions = {}): Promise<LocalDynamo> {
  const store = catchStoreErrors(dynalite({ path: options.path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 }));
  const storePort = await listen(store);
  const agent = new http.Agent({ keepAlive: true });
  const backend = new Backend(storePort, agent);
  const queue = new SerialQueue();
  const roomToWrite = options.path === undefined ? () => null : diskGuard(options.path, options.minFreeBytes ?? DEFAULT_MIN_FREE_BYTES);
  let intents: IntentLog | null = null;
  let undone: string[] = [];
  try {
    if (options.path !== undefined) {
      intents = new IntentLog(backend);
      undone = await intents.open();
    }
  } catch (error) {
    agent.destroy();
    await closeServer(store);
    throw error;
  }
  const transactions = new Transactions(backend, intents);

  const front = http.createServer((req, res) => {
    readBody(req)
      .then((body) => queue.run(async () => (isWrite(req) ? (roomToWrite() ?? serve(transactions, req, body)) : serve(transactions, req, body))))
      .then((reply) => send(res, reply))
      .catch((error: unknown) => send(res, internalError(error)));
  });
  const frontPort = await listen(front);

  return {
    endpoint: `http://127.0.0.1:${frontPort}`,
    undone,
    async close() {
      await closeServer(front);
      agent.destroy();
      await closeServer(store);
    },
  };
}

/**
 * Creates the jobs table (see lib/workflow/job-table.ts) unless it exists, and waits until it is
 * ACTIVE. For dynalite; a deployed table is CloudFormation's.
 */
export async function ensureTable(client: DynamoDBClient, tableName: string): Promise<void> {
  try {
    await client.send(new CreateTableCommand(createTableInput(tableName)));
  } catch (error) {
    if (!(error instanceof ResourceInUseException)) throw error;
  }
  for (let polls = 0; polls < TABLE_ACTIVE_POLLS; polls += 1) {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    const indexesActive = (Table?.GlobalSecondaryIndexes ?? []).every((i) => i.IndexStatus === 'ACTIVE');
    if (Table?.TableStatus === 'ACTIVE' && indexesActive) return;
    await sleep(TABLE_ACTIVE_POLL_MS);
  }
  throw new Error(`table ${tableName} did not become ACTIVE after ${TABLE_ACTIVE_POLLS} polls`);
}

const TABLE_ACTIVE_POLLS = 500;
const TABLE_ACTIVE_POLL_MS = 20;
const API_VERSION = 'DynamoDB_20120810';
const ERROR_PREFIX = 'com.amazonaws.dynamodb.v20120810#';
const MAX_TRANSACT_ITEMS = 100;

type Json = Record<string, unknown>;

/** An HTTP answer, written back to the client as is. */
interface Reply {
  readonly status: number;
  readonly headers: http.OutgoingHttpHeaders;
  readonly body: Buffer;
}

/**
 * dynalite's server with each request's errors made answers: dynalite throws an error of
 * the database below it (LevelDB's `No space left on device`, when a disk fills between the
 * guard's look and the write) from a callback, where nothing catches it and the process
 * ends. Each request runs in a domain of its own, which catches what its callbacks throw
 * and answers it as a refused write (a 500, as DynamoDB answers a write it cannot serve),
 * so the caller retries and the runtime lives on. `domain` is deprecated, but it is the one
 * way to catch what a library throws from its own callbacks for one request alone.
 */
function catchStoreErrors(server: http.Server): http.Server {
  const handlers = server.listeners('request') as ((req: http.IncomingMessage, res: http.ServerResponse) => void)[];
  server.removeAllListeners('request');
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const scope = domain.create();
    scope.on('error', (error: unknown) => {
      if (res.headersSent || res.writableEnded) return;
      const reply = internalError(new Error(`the local database refused the write: ${error instanceof Error ? error.message : String(error)}`));
      res.writeHead(reply.status, reply.headers);
      res.end(reply.body);
    });
    scope.add(req);
    scope.add(res);
    scope.run(() => {
      for (const handler of handlers) handler.call(server, req, res);
    });
  });
  return server;
}

/** Whether a request is one of the operations that write. */
function isWrite(req: http.IncomingMessage): boolean {
  const target = req.headers['x-amz-target'];
  return typeof target === 'string' && WRITE_OPERATIONS.has(target.slice(target.indexOf('.') + 1));
}

/** null while `folder` has room for a write; else the 500 that refuses it, saying why. */
function diskGuard(folder: string, minFreeBytes: number): () => Reply | null {
  return () => {
    let free: number;
    try {
      const stats = statfsSync(folder);
      free = stats.bavail * stats.bsize;
    } catch {
      return null; // Not there yet (dynalite creates it): LevelDB will say what is wrong.
    }
    if (free >= minFreeBytes) return null;
    const message = `the local database's disk is full: ${folder} has ${free} bytes free, and writes wait until ${minFreeBytes} are`;
    return jsonReply(500, { __type: `${ERROR_PREFIX}InternalServerError`, message });
  };
}

/** Runs tasks one after another, in the order they were queued. */
class SerialQueue {
  #tail: Promise<unknown> = Promise.resolve();

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(task);
    this.#tail = result.catch(() => undefined);
    return result;
  }
}

/** The dynalite server behind the proxy. */
class Backend {
  readonly #keySchemas = new Map<string, readonly string[]>();

  constructor(
    private readonly port: number,
    private readonly agent: http.Agent,
  ) {}

  /** Passes a client's request through untouched. */
  forward(req: http.IncomingMessage, body: Buffer): Promise<Reply> {
    return this.#request(req.method ?? 'POST', req.url ?? '/', { ...req.headers, host: `127.0.0.1:${this.port}` }, body);
  }

  /** One DynamoDB operation; resolves with its JSON answer, an error answer included. */
  async call(operation: string, input: Json): Promise<{ ok: boolean; body: Json }> {
    const reply = await this.#request(
      'POST',
      '/',
      {
        'content-type': 'application/x-amz-json-1.0',
        'x-amz-target': `${API_VERSION}.${operation}`,
        'x-amz-date': '20260101T000000Z',
        // dynalite checks that a signature is present, not that it is right.
        authorization:
          'AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0',
      },
      Buffer.from(JSON.stringify(input)),
    );
    return { ok: reply.status === 200, body: JSON.parse(reply.body.toString('utf8')) as Json };
  }

  /** The key attribute names of a table, or the error answer if it has none. */
  async keySchema(tableName: string): Promise<readonly string[] | Json> {
    const known = this.#keySchemas.get(tableName);
    if (known !== undefined) return known;
    const described = await this.call('DescribeTable', { TableName: tableName });
    if (!described.ok) return described.body;
    const table = described.body.Table as { KeySchema: { AttributeName: string }[] };
    const names = table.KeySchema.map((k) => k.AttributeName);
    this.#keySchemas.set(tableName, names);
    return names;
  }

  #request(method: string, path: string, headers: http.OutgoingHttpHeaders, body: Buffer): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port: this.port, method, path, headers, agent: this.agent },
        (res) => {
          readBody(res).then(
            (data) => resolve({ status: res.statusCode ?? 500, headers: res.headers, body: data }),
            reject,
          );
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }
}

async function serve(transactions: Transactions, req: http.IncomingMessage, body: Buffer): Promise<Reply> {
  // A transaction a failed undo left in the store is finished before anything else is served.
  const unfinished = await transactions.finishUndo();
  if (unfinished !== null) return unfinished;
  const target = req.headers['x-amz-target'];
  const single = typeof target === 'string' ? SINGLE_ITEM_WRITES.get(target) : undefined;
  if (single !== undefined) return withRefusedItem(transactions.backend, single, req, body);
  if (target !== `${API_VERSION}.TransactWriteItems`) return transactions.backend.forward(req, body);
  let input: Json;
  try {
    input = JSON.parse(body.toString('utf8')) as Json;
  } catch {
    return jsonReply(400, { __type: 'com.amazon.coral.service#SerializationException' });
  }
  return transactions.write(input);
}

/** The writes of one item, by their X-Amz-Target, with where each names its item's key. */
const SINGLE_ITEM_WRITES: ReadonlyMap<string, 'Key' | 'Item'> = new Map([
  [`${API_VERSION}.PutItem`, 'Item'],
  [`${API_VERSION}.UpdateItem`, 'Key'],
  [`${API_VERSION}.DeleteItem`, 'Key'],
]);

/**
 * A write of one item passed through to dynalite, and, when its condition refused it and the
 * request asked for the item (ReturnValuesOnConditionCheckFailure: ALL_OLD), the refusal
 * with the item as it is, as DynamoDB gives it and dynalite does not. Requests run one at a
 * time, so the item read just after the refusal is the one that refused it. A missing item
 * comes back without one, as on DynamoDB.
 */
async function withRefusedItem(backend: Backend, keyFrom: 'Key' | 'Item', req: http.IncomingMessage, body: Buffer): Promise<Reply> {
  const reply = await backend.forward(req, body);
  if (reply.status !== 400) return reply;
  let input: Json;
  let answer: Json;
  try {
    input = JSON.parse(body.toString('utf8')) as Json;
    answer = JSON.parse(reply.body.toString('utf8')) as Json;
  } catch {
    return reply;
  }
  if (input.ReturnValuesOnConditionCheckFailure !== 'ALL_OLD' || answer.__type !== `${ERROR_PREFIX}ConditionalCheckFailedException`) return reply;
  const tableName = String(input.TableName);
  const schema = await backend.keySchema(tableName);
  if (!Array.isArray(schema)) return reply;
  const source = input[keyFrom] as Json | undefined;
  const key = Object.fromEntries(schema.map((name: string) => [name, source?.[name]]));
  const current = await backend.call('GetItem', { TableName: tableName, Key: key, ConsistentRead: true });
  const item = current.body.Item as Json | undefined;
  if (!current.ok || item === undefined) return reply;
  return jsonReply(400, { ...answer, Item: item });
}

/** One item of a transaction, as an ordinary write. */
interface Step {
  readonly kind: 'Put' | 'Update' | 'Delete' | 'ConditionCheck';
  readonly params: Json;
  readonly tableName: string;
  readonly key: Json;
}

/** An item as it was before a transaction: its table, key, and old image (undefined: there was none). */
interface Image {
  readonly tableName: string;
  readonly key: Json;
  readonly old: Json | undefined;
}

const OPERATION_OF: Readonly<Record<Step['kind'], string>> = {
  Put: 'PutItem',
  Update: 'UpdateItem',
  Delete: 'DeleteItem',
  // An UpdateItem with no update expression evaluates the condition and changes nothing,
  // except that it creates a key-only item when none was there; that one is undone.
  ConditionCheck: 'UpdateItem',
};

/** TransactWriteItems over dynalite, with an intent for each transaction when the store is persisted. */
class Transactions {
  /** A transaction whose undo failed (the store refused a write): it is finished before anything else runs. */
  #pendingUndo: { readonly images: readonly Image[]; readonly intent: Intent | null } | null = null;

  constructor(
    readonly backend: Backend,
    private readonly intents: IntentLog | null,
  ) {}

  async write(input: Json): Promise<Reply> {
    const planned = await plan(this.backend, input.TransactItems);
    if (!Array.isArray(planned)) return planned;
    const images: Image[] = [];
    for (const step of planned) {
      const current = await this.backend.call('GetItem', { TableName: step.tableName, Key: step.key, ConsistentRead: true });
      if (!current.ok) return jsonReply(400, current.body);
      images.push({ tableName: step.tableName, key: step.key, old: current.body.Item as Json | undefined });
    }
    const intent = this.intents === null ? null : await this.intents.record(images);

    const reasons: Json[] = [];
    for (const [index, step] of planned.entries()) {
      const { ReturnValuesOnConditionCheckFailure: returnOnFailure, ...params } = step.params;
      const result = await this.backend.call(OPERATION_OF[step.kind], params);
      if (result.ok) {
        reasons.push({ Code: 'None' });
      } else if (result.body.__type === `${ERROR_PREFIX}ConditionalCheckFailedException`) {
        const reason: Json = { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed' };
        // Nothing else runs meanwhile: the item is still as it was before the transaction.
        const old = images[index]?.old;
        if (returnOnFailure === 'ALL_OLD' && old !== undefined) reason.Item = old;
        reasons.push(reason);
      } else {
        await this.#undo(images.slice(0, index), intent);
        return jsonReply(400, result.body);
      }
    }

    if (reasons.some((r) => r.Code !== 'None')) {
      await this.#undo(images, intent);
      return jsonReply(400, {
        __type: `${ERROR_PREFIX}TransactionCanceledException`,
        Message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.map((r) => String(r.Code)).join(', ')}]`,
        CancellationReasons: reasons,
      });
    }
    await this.#undo(
      images.filter((_, index) => planned[index]?.kind === 'ConditionCheck'),
      intent,
    );
    return jsonReply(200, {});
  }

  /**
   * Finishes an undo the store refused earlier; null once none is pending, else the 500
   * that refuses the request meanwhile (the store still holds the transaction half done).
   */
  async finishUndo(): Promise<Reply | null> {
    const pending = this.#pendingUndo;
    if (pending === null) return null;
    this.#pendingUndo = null;
    try {
      await this.#undo(pending.images, pending.intent);
      return null;
    } catch (error) {
      return internalError(error);
    }
  }

  /** Writes back the old images, newest change first, then lets the intent go. */
  async #undo(images: readonly Image[], intent: Intent | null): Promise<void> {
    try {
      await restore(this.backend, images);
      if (intent !== null) await this.intents?.discard(intent);
    } catch (error) {
      this.#pendingUndo = { images, intent };
      throw error;
    }
  }
}

/** Checks the request as DynamoDB does before writing anything; an error reply if it is bad. */
async function plan(backend: Backend, items: unknown): Promise<Step[] | Reply> {
  if (!Array.isArray(items) || items.length === 0 || items.length > MAX_TRANSACT_ITEMS) {
    return validationError(`TransactItems must hold 1 to ${MAX_TRANSACT_ITEMS} items`);
  }
  const steps: Step[] = [];
  const seen = new Set<string>();
  for (const item of items as Json[]) {
    const kinds = (['Put', 'Update', 'Delete', 'ConditionCheck'] as const).filter((k) => item[k] !== undefined);
    const kind = kinds[0];
    if (kinds.length !== 1 || kind === undefined) {
      return validationError('each TransactItem must hold exactly one of Put, Update, Delete, ConditionCheck');
    }
    const params = item[kind] as Json;
    const tableName = String(params.TableName);
    const schema = await backend.keySchema(tableName);
    if (!Array.isArray(schema)) return jsonReply(400, schema as Json);
    const source = (kind === 'Put' ? params.Item : params.Key) as Json | undefined;
    const key = Object.fromEntries(schema.map((name: string) => [name, source?.[name]]));
    const identity = JSON.stringify([tableName, ...schema.map((name: string) => source?.[name])]);
    if (seen.has(identity)) {
      return validationError('Transaction request cannot include multiple operations on one item');
    }
    seen.add(identity);
    steps.push({ kind, params, tableName, key });
  }
  return steps;
}

/** Writes back the old images, the last item first. */
async function restore(backend: Backend, images: readonly Image[]): Promise<void> {
  for (const { tableName, key, old } of [...images].reverse()) {
    const result =
      old === undefined
        ? await backend.call('DeleteItem', { TableName: tableName, Key: key })
        : await backend.call('PutItem', { TableName: tableName, Item: old });
    if (!result.ok) throw new Error(`could not undo a transaction step: ${JSON.stringify(result.body)}`);
  }
}

/** An intent in the store: its id and how many parts hold its images. */
interface Intent {
  readonly id: string;
  readonly parts: number;
}

/**
 * Bytes of images one intent part holds: within dynalite's 400 KB item, with room for the
 * key. A transaction of 100 items of 400 KB takes 134 parts.
 */
const INTENT_PART_BYTES = 300 * 1024;

/**
 * The intents of transactions in progress, in INTENT_TABLE. An intent is its parts (the
 * old images as JSON, cut into binary chunks) and a head naming how many there are: the
 * parts are written first and the head last, so a head is only ever there with all its
 * parts; the head is deleted first and the parts after, so parts without a head are
 * leftovers of an intent already let go.
 */
class IntentLog {
  #sequence = 0;
  readonly #prefix = randomBytes(6).toString('hex');

  constructor(private readonly backend: Backend) {}

  /**
   * Creates the table on first use and undoes every transaction a crash left in progress;
   * returns a line for each one undone.
   */
  async open(): Promise<string[]> {
    const created = await this.backend.call('CreateTable', {
      TableName: INTENT_TABLE,
      AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
    });
    if (!created.ok && created.body.__type !== `${ERROR_PREFIX}ResourceInUseException`) {
      throw new Error(`could not create the table of transactions in progress: ${JSON.stringify(created.body)}`);
    }
    await this.#untilActive();
    const items = await this.#scan();
    const heads = items.filter((item) => idOf(item).endsWith(HEAD_SUFFIX));
    const undone: string[] = [];
    for (const head of heads) {
      const id = idOf(head).slice(0, -HEAD_SUFFIX.length);
      const intent: Intent = { id, parts: Number((head.parts as { N?: string } | undefined)?.N ?? '0') };
      const images = await this.#images(intent);
      await restore(this.backend, images);
      await this.discard(intent);
      undone.push(describeUndone(images));
    }
    // Parts whose head was already deleted: an intent let go, all but its last deletes.
    for (const item of await this.#scan()) await this.#delete(idOf(item));
    return undone;
  }

  /** Writes the intent of a transaction whose items are `images`, before its first write. */
  async record(images: readonly Image[]): Promise<Intent> {
    this.#sequence += 1;
    const id = `${this.#prefix}-${this.#sequence}`;
    const bytes = Buffer.from(JSON.stringify(images), 'utf8');
    const parts = Math.max(1, Math.ceil(bytes.length / INTENT_PART_BYTES));
    for (let part = 0; part < parts; part += 1) {
      const chunk = bytes.subarray(part * INTENT_PART_BYTES, (part + 1) * INTENT_PART_BYTES);
      await this.#put({ id: { S: partId(id, part) }, chunk: { B: chunk.toString('base64') } });
    }
    await this.#put({ id: { S: `${id}${HEAD_SUFFIX}` }, parts: { N: String(parts) } });
    return { id, parts };
  }

  /** Lets an intent go once its transaction is done or undone: the head first, then the parts. */
  async discard(intent: Intent): Promise<void> {
    await this.#delete(`${intent.id}${HEAD_SUFFIX}`);
    for (let part = 0; part < intent.parts; part += 1) await this.#delete(partId(intent.id, part));
  }

  async #images(intent: Intent): Promise<Image[]> {
    const chunks: Buffer[] = [];
    for (let part = 0; part < intent.parts; part += 1) {
      const got = await this.backend.call('GetItem', { TableName: INTENT_TABLE, Key: { id: { S: partId(intent.id, part) } }, ConsistentRead: true });
      const chunk = (got.body.Item as { chunk?: { B?: string } } | undefined)?.chunk?.B;
      if (!got.ok || chunk === undefined) throw new Error(`the intent of transaction ${intent.id} lacks its part ${part}: ${JSON.stringify(got.body)}`);
      chunks.push(Buffer.from(chunk, 'base64'));
    }
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as Image[];
  }

  /** dynalite makes a new table ACTIVE on its next turn, even with no delay set. */
  async #untilActive(): Promise<void> {
    for (let polls = 0; polls < TABLE_ACTIVE_POLLS; polls += 1) {
      const described = await this.backend.call('DescribeTable', { TableName: INTENT_TABLE });
      if (described.ok && (described.body.Table as { TableStatus?: string } | undefined)?.TableStatus === 'ACTIVE') return;
      await sleep(TABLE_ACTIVE_POLL_MS);
    }
    throw new Error(`table ${INTENT_TABLE} did not become ACTIVE after ${TABLE_ACTIVE_POLLS} polls`);
  }

  async #scan(): Promise<Json[]> {
    const items: Json[] = [];
    let start: Json | undefined;
    do {
      const page = await this.backend.call('Scan', { TableName: INTENT_TABLE, ConsistentRead: true, ...(start === undefined ? {} : { ExclusiveStartKey: start }) });
      if (!page.ok) throw new Error(`could not read the transactions in progress: ${JSON.stringify(page.body)}`);
      items.push(...((page.body.Items as Json[] | undefined) ?? []));
      start = page.body.LastEvaluatedKey as Json | undefined;
    } while (start !== undefined);
    return items;
  }

  async #put(item: Json): Promise<void> {
    const result = await this.backend.call('PutItem', { TableName: INTENT_TABLE, Item: item });
    if (!result.ok) throw new Error(`could not record a transaction's intent: ${JSON.stringify(result.body)}`);
  }

  async #delete(id: string): Promise<void> {
    const result = await this.backend.call('DeleteItem', { TableName: INTENT_TABLE, Key: { id: { S: id } } });
    if (!result.ok) throw new Error(`could not let a transaction's intent go: ${JSON.stringify(result.body)}`);
  }
}

const HEAD_SUFFIX = '#head';

function partId(id: string, part: number): string {
  return `${id}#part#${String(part).padStart(4, '0')}`;
}

function idOf(item: Json): string {
  return (item.id as { S?: string } | undefined)?.S ?? '';
}

/** One line about an undone transaction: how many items, and the first few keys. */
function describeUndone(images: readonly Image[]): string {
  const keys = images.map((image) => Object.values(image.key).map((value) => (value as { S?: string; N?: string }).S ?? (value as { N?: string }).N ?? '?').join(' '));
  const shown = keys.slice(0, 3).join(', ');
  return `a transaction of ${images.length} item(s) (${shown}${keys.length > 3 ? ', ...' : ''}) that a crash had cut in half was undone`;
}

function validationError(message: string): Reply {
  return jsonReply(400, { __type: 'com.amazon.coral.validate#ValidationException', message });
}

function internalError(error: unknown): Reply {
  const message = error instanceof Error ? error.message : String(error);
  return jsonReply(500, { __type: `${ERROR_PREFIX}InternalServerError`, message });
}

function jsonReply(status: number, body: Json): Reply {
  const data = Buffer.from(JSON.stringify(body));
  return {
    status,
    body: data,
    headers: {
      'content-type': 'application/x-amz-json-1.0',
      'x-amz-crc32': String(crc32(data)),
      'x-amzn-requestid': randomBytes(26).toString('hex').toUpperCase(),
    },
  };
}

function send(res: http.ServerResponse, reply: Reply): void {
  const { 'transfer-encoding': _chunked, connection: _connection, ...headers } = reply.headers;
  res.writeHead(reply.status, { ...headers, 'content-length': reply.body.length });
  res.end(reply.body);
}

function readBody(stream: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

function listen(server: http.Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

function closeServer(server: http.Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.close((error) => (error ? reject(error) : resolve()));
    // Clients keep connections alive; without this, close waits for them to time out.
    server.closeAllConnections();
  });
}
