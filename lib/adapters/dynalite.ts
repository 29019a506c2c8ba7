// An in-process DynamoDB for the local runtime and the tests: dynalite, behind a small proxy
// that adds the TransactWriteItems operation dynalite lacks (architect/dynalite issue 151).
//
// The proxy runs one request at a time. A transaction is then a sequence of ordinary
// conditional writes sent to dynalite, each asking for the item's old image; if any
// condition fails, the old images are written back before anything else runs, and the
// caller gets DynamoDB's TransactionCanceledException with one reason per item. Nothing
// can observe a transaction half done. The price is throughput, which a local run and a
// test suite do not need; DynamoJobStore speaks plain DynamoDB and never knows.
//
// The proxy also keeps a persisted store off a full disk: LevelDB's write error on a full
// disk is thrown by dynalite where nothing can catch it, ending the whole process. So a
// write is refused with a 500, as DynamoDB answers when it cannot serve one, while the
// folder has less than `minFreeBytes` free, and goes through again once space returns.

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
import { createTableInput } from './dynamo-table.ts';

/** A running local DynamoDB. */
export interface LocalDynamo {
  /** Where to point a DynamoDBClient: `http://127.0.0.1:<port>`. */
  readonly endpoint: string;
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

/** DynamoDB operations that write. */
const WRITE_OPERATIONS = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem', 'TransactWriteItems', 'CreateTable']);

/**
 * Starts dynalite in this process on 127.0.0.1 and a free port, tables ACTIVE at once,
 * with TransactWriteItems added.
 */
export async function startDynalite(options: StartDynaliteOptions = {}): Promise<LocalDynamo> {
  const store = dynalite({ path: options.path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  const storePort = await listen(store);
  const agent = new http.Agent({ keepAlive: true });
  const backend = new Backend(storePort, agent);
  const queue = new SerialQueue();
  const roomToWrite = options.path === undefined ? () => null : diskGuard(options.path, options.minFreeBytes ?? DEFAULT_MIN_FREE_BYTES);

  const front = http.createServer((req, res) => {
    readBody(req)
      .then((body) => queue.run(async () => (isWrite(req) ? (roomToWrite() ?? serve(backend, req, body)) : serve(backend, req, body))))
      .then((reply) => send(res, reply))
      .catch((error: unknown) => send(res, internalError(error)));
  });
  const frontPort = await listen(front);

  return {
    endpoint: `http://127.0.0.1:${frontPort}`,
    async close() {
      await closeServer(front);
      agent.destroy();
      await closeServer(store);
    },
  };
}

/**
 * Creates the jobs table (see dynamo-table.ts) unless it exists, and waits until it is
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

async function serve(backend: Backend, req: http.IncomingMessage, body: Buffer): Promise<Reply> {
  if (req.headers['x-amz-target'] !== `${API_VERSION}.TransactWriteItems`) return backend.forward(req, body);
  let input: Json;
  try {
    input = JSON.parse(body.toString('utf8')) as Json;
  } catch {
    return jsonReply(400, { __type: 'com.amazon.coral.service#SerializationException' });
  }
  return transactWriteItems(backend, input);
}

/** One item of a transaction, as an ordinary write plus what it takes to undo it. */
interface Step {
  readonly kind: 'Put' | 'Update' | 'Delete' | 'ConditionCheck';
  readonly params: Json;
  readonly tableName: string;
  readonly key: Json;
}

const OPERATION_OF: Readonly<Record<Step['kind'], string>> = {
  Put: 'PutItem',
  Update: 'UpdateItem',
  Delete: 'DeleteItem',
  // An UpdateItem with no update expression evaluates the condition and changes nothing,
  // except that it creates a key-only item when none was there; that one is undone.
  ConditionCheck: 'UpdateItem',
};

async function transactWriteItems(backend: Backend, input: Json): Promise<Reply> {
  const planned = await plan(backend, input.TransactItems);
  if (!Array.isArray(planned)) return planned;

  const undo: { step: Step; old: Json | undefined }[] = [];
  const reasons: Json[] = [];
  for (const step of planned) {
    const { ReturnValuesOnConditionCheckFailure: returnOnFailure, ...params } = step.params;
    const result = await backend.call(OPERATION_OF[step.kind], { ...params, ReturnValues: 'ALL_OLD' });
    if (result.ok) {
      undo.push({ step, old: result.body.Attributes as Json | undefined });
      reasons.push({ Code: 'None' });
    } else if (result.body.__type === `${ERROR_PREFIX}ConditionalCheckFailedException`) {
      const reason: Json = { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed' };
      if (returnOnFailure === 'ALL_OLD') {
        const current = await backend.call('GetItem', { TableName: step.tableName, Key: step.key, ConsistentRead: true });
        if (current.body.Item !== undefined) reason.Item = current.body.Item;
      }
      reasons.push(reason);
    } else {
      await restore(backend, undo);
      return jsonReply(400, result.body);
    }
  }

  if (reasons.some((r) => r.Code !== 'None')) {
    await restore(backend, undo);
    return jsonReply(400, {
      __type: `${ERROR_PREFIX}TransactionCanceledException`,
      Message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.map((r) => String(r.Code)).join(', ')}]`,
      CancellationReasons: reasons,
    });
  }
  await restore(
    backend,
    undo.filter((u) => u.step.kind === 'ConditionCheck'),
  );
  return jsonReply(200, {});
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

/** Writes back the old images, newest change first. */
async function restore(backend: Backend, undo: readonly { step: Step; old: Json | undefined }[]): Promise<void> {
  for (const { step, old } of [...undo].reverse()) {
    const result =
      old === undefined
        ? await backend.call('DeleteItem', { TableName: step.tableName, Key: step.key })
        : await backend.call('PutItem', { TableName: step.tableName, Item: old });
    if (!result.ok) throw new Error(`could not undo a transaction step: ${JSON.stringify(result.body)}`);
  }
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
