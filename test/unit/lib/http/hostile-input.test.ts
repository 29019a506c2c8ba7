// The API against hostile input, over the real DynamoJobStore on dynalite (DynamoDB's own
// limits apply): what a store would refuse with a 500 is a 400 or 404 naming the field.

import { InMemoryJobSecrets } from '../../../../lib/adapters/memory-job-secrets.ts';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MemoryLaunchPace } from '../../../../lib/launch-pace.ts';
import { authorizationHeader } from '../../../../lib/agent/protocol.ts';
import { DynamoJobStore } from '../../../../lib/adapters/dynamo-job-store/index.ts';
import { ensureTable, startDynalite, type LocalDynamo } from '../../../../local/dynalite.ts';
import { handleApiRequest, type ApiDeps, type ApiRequest } from '../../../../lib/http/index.ts';
import type { JobStore } from '../../../../lib/ports.ts';
import {
  MAX_ENV_VALUE_BYTES,
  MAX_ENVS,
  MAX_NAME_LENGTH,
  MAX_TASK_TEXT_BYTES,
  MAX_WORKDIR_LENGTH,
  taskTextBytes,
} from '../../../../lib/task-file/limits.ts';
import { FakeWorkflow } from '../../../support/fakes/fake-workflow.ts';
import { TestClock } from '../../../support/usecases-harness.ts';

let dynamo: LocalDynamo;
let client: DynamoDBClient;
let tables = 0;

beforeAll(async () => {
  dynamo = await startDynalite();
  client = new DynamoDBClient({ endpoint: dynamo.endpoint, region: 'local', credentials: { accessKeyId: 'x', secretAccessKey: 'x' } });
});

afterAll(async () => {
  client.destroy();
  await dynamo.close();
});

interface World {
  readonly store: DynamoJobStore;
  readonly workflow: FakeWorkflow;
  /** Every store method called, by name. */
  readonly storeCalls: string[];
  /** Errors that became a 500. */
  readonly unexpected: unknown[];
  readonly deps: ApiDeps;
}

let world: World;

beforeEach(async () => {
  tables += 1;
  const tableName = `hostile-${tables}`;
  await ensureTable(client, tableName);
  const store = new DynamoJobStore({ client, tableName });
  const storeCalls: string[] = [];
  // Records every call, so a test can say that a request never reached the store.
  const watched = new Proxy(store, {
    get(target, key, receiver) {
      const value: unknown = Reflect.get(target, key, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        storeCalls.push(String(key));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  }) as JobStore;
  const workflow = new FakeWorkflow();
  const unexpected: unknown[] = [];
  let draws = 0;
  const deps: ApiDeps = {
    store: watched,
    workflow,
    secrets: new InMemoryJobSecrets(),
    pace: new MemoryLaunchPace(),
    clock: new TestClock(),
    random: () => ((draws += 1) * 0.137) % 1,
    onUnexpectedError: (error) => unexpected.push(error),
  };
  world = { store, workflow, storeCalls, unexpected, deps };
});

async function call(method: string, path: string, init: Partial<ApiRequest> = {}) {
  const response = await handleApiRequest({ method, path, headers: {}, ...init }, world.deps);
  return { status: response.statusCode, body: JSON.parse(response.body) as { error: string; issues?: { path: string; message: string }[] } };
}

const yaml = (body: string) => ({ body, headers: { 'content-type': 'application/yaml' } });
const json = (body: unknown) => ({ body: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': 'application/json' } });

describe('POST /jobs refuses what the store could not hold, with 400 naming the field', () => {
  it.each([
    ['a 210 KB name (YAML)', yaml(`name: ${'a'.repeat(210_000)}\nrun: echo\n`), 'name', /^expected a name of at most 128 characters, got 210000 characters$/],
    ['a 210 KB name (JSON)', json({ name: 'a'.repeat(210_000), run: 'echo' }), 'name', /^expected a name of at most 128 characters/],
    ['an env named __proto__ (YAML)', yaml('run: echo\nenvs:\n  __proto__: polluted\n'), 'envs.__proto__', /other than __proto__/],
    ['an env named __proto__ (JSON)', json('{"run": "echo", "envs": {"__proto__": "polluted"}}'), 'envs.__proto__', /other than __proto__/],
    ['an env named __proto__ holding a mapping', json('{"run": "echo", "envs": {"__proto__": {"polluted": "yes"}}}'), 'envs.__proto__', /other than __proto__/],
    ['300 envs', json({ run: 'echo', envs: Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`E${i}`, i])) }), 'envs', /^expected at most 256 environment variables, got 300$/],
    ['a 100 KB env value', yaml(`run: echo\nenvs:\n  BIG: ${'x'.repeat(100_000)}\n`), 'envs.BIG', /^expected a value of at most 32768 bytes \(UTF-8\), got 100000$/],
    ['a 200 KB run', yaml(`run: ${'x'.repeat(200_000)}\n`), '', /^expected envs, setup and run to take at most 65536 bytes together/],
    ['a NUL in run', json({ run: 'echo \0' }), 'run', /without NUL characters/],
  ])('%s', async (_what, request, path, message) => {
    const res = await call('POST', '/jobs', request);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('the task is not valid (1 issue)');
    expect(res.body.issues).toEqual([expect.objectContaining({ path, message: expect.stringMatching(message) })]);
    expect(world.unexpected).toEqual([]);
    expect(await world.store.listJobs()).toEqual([]);
    expect(world.workflow.starts).toEqual([]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('stores envs named constructor and prototype as plain keys, and they read back the same', async () => {
    const res = await call('POST', '/jobs', yaml('run: env\nenvs:\n  constructor: c\n  prototype: p\n  toString: t\n'));
    expect(res.status).toBe(202);
    const job = await world.store.getJob((res.body as unknown as { jobId: string }).jobId);
    expect(Object.entries(job.spec.envs)).toEqual([['constructor', 'c'], ['prototype', 'p'], ['toString', 't']]);
    expect(Object.getPrototypeOf(job.spec.envs)).toBe(Object.prototype);
  });

  it('stores a task at every limit at once', async () => {
    const envs = Object.fromEntries(Array.from({ length: MAX_ENVS }, (_, i) => [`E${i}`, i === 0 ? 'v'.repeat(MAX_ENV_VALUE_BYTES) : 'v']));
    const run = 'x'.repeat(MAX_TASK_TEXT_BYTES - taskTextBytes({ envs, setup: null, run: null }));
    const task = { name: 'n'.repeat(MAX_NAME_LENGTH), workdir: `/${'w'.repeat(MAX_WORKDIR_LENGTH - 1)}`, envs, run };
    const res = await call('POST', '/jobs', json(task));
    expect(res.status).toBe(202);
    expect(world.unexpected).toEqual([]);
    const job = await world.store.getJob((res.body as unknown as { jobId: string }).jobId);
    expect(job.spec).toMatchObject(task);
  });
});

describe('a path naming something that cannot be a job id', () => {
  const long = 'j-'.padEnd(2048, 'x');
  const secret = { authorization: authorizationHeader('s'.repeat(64)), 'content-type': 'application/json' };
  const report = JSON.stringify({ nodeRank: 0, phase: 'run', exitCode: 0, outputTail: '' });

  it.each([
    ['GET /jobs/{2 KB}', 'GET', `/jobs/${long}`, {}],
    ['DELETE /jobs/{2 KB}', 'DELETE', `/jobs/${long}`, {}],
    ['a heartbeat with a good-looking secret to /jobs/{2 KB}', 'POST', `/jobs/${long}/attempts/1/heartbeat`, { headers: secret, body: '{"nodeRank":0}' }],
    ['a report with a good-looking secret to /jobs/{2 KB}', 'POST', `/jobs/${long}/attempts/1/report`, { headers: secret, body: report }],
    ['a report to a job id with a newline', 'POST', `/jobs/${encodeURIComponent('j-0m8x2k1qz-4fz0aa\n')}/attempts/1/report`, { headers: secret, body: report }],
  ])('%s is 404, saying why, before any store call', async (_what, method, path, init) => {
    const res = await call(method, path, init);
    expect(res.status).toBe(404);
    expect(res.body.error).toMatch(/^no job with id "j-x+\.\.\." \(2048 characters; a job id has 18, such as j-0m8x2k1qz-4fz0aa\)$|^no job with id "j-0m8x2k1qz-4fz0aa\\n" \(19 characters/);
    expect(res.body.error.length).toBeLessThan(200);
    expect(world.storeCalls).toEqual([]);
    expect(world.unexpected).toEqual([]);
  });

  it('repeats a short printable one as it came', async () => {
    expect(await call('GET', '/jobs/j-no-such-job')).toEqual({ status: 404, body: { error: 'no job with id j-no-such-job' } });
    expect(world.storeCalls).toEqual([]);
  });

  it('a well-formed id of no job reaches the store and is 404', async () => {
    expect(await call('GET', '/jobs/j-0m8x2k1qz-4fz0aa')).toEqual({ status: 404, body: { error: 'no job with id j-0m8x2k1qz-4fz0aa' } });
    expect(world.storeCalls).toEqual(['getJob']);
  });
});
