// kill -9 of a process in the middle of the controller's store writes, at random moments,
// round after round on the same folder: every multi-item write (TransactWriteItems over
// dynalite) is found whole or not at all when the folder is opened again. The writer is
// a real process: store-load.ts running the controller's use cases on a persisted store
// (fast rounds), and `relaunch serve` running jobs that restart as fast as they can, then
// started again on the folder. The check reads the raw table, item by item.

import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { DynamoDBClient, ScanCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleProgram } from '../../../cli/build.ts';
import { DynamoJobStore } from '../../../lib/adapters/dynamo-job-store/index.ts';
import { startDynalite } from '../../../local/dynalite.ts';
import { isTerminal, type JobStatus } from '../../../lib/status.ts';
import { killStrayClis } from '../../support/cli.ts';
import { waitFor } from '../../support/fixtures/wait.ts';
import { yaml } from '../../support/local-harness.ts';
import { serve } from './world.ts';
import { REPO_ROOT } from '../../../infra/lambda-catalog.ts';

const LOAD = fileURLToPath(new URL('./store-load.ts', import.meta.url));
/** The table the load writes, named as the local runtime names its own. */
const LOAD_TABLE = 'relaunch-jobs';
const ROUNDS = 20;
/** Rounds with a whole `relaunch serve` (seconds each to start): the load above makes the 20. */
const SERVE_ROUNDS = 2;
/** The kill lands this long after the writes are under way, at most (chosen at random). */
const MAX_KILL_DELAY_MS = 700;
/**
 * A limit against a hang, not a wait: a round (a writer's start, its kill, the check) took
 * 4-11 s of wall time on one 2-CPU machine as the rest of the suite ran beside it, and 20
 * rounds ran past 240 s there while two busy loops also ran.
 */
const CRASH_TEST_TIMEOUT_MS = 600_000;

const folders: string[] = [];
/**
 * store-load.ts, bundled once (started through tsx, each writer took about a second of CPU
 * before its first write), under the checkout, where its dependencies resolve.
 */
let loadProgram: string;
beforeAll(async () => {
  mkdirSync(path.join(REPO_ROOT, 'dist'), { recursive: true });
  const folder = mkdtempSync(path.join(REPO_ROOT, 'dist', 'store-load-'));
  folders.push(folder);
  loadProgram = path.join(folder, 'store-load.mjs');
  await bundleProgram(LOAD, loadProgram);
});
afterAll(() => {
  killStrayClis();
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

/**
 * Starts the load on `folder`, waits until its writes are under way, kills it at a random
 * moment after; the prefix of the ids of the jobs it wrote (store-load.ts names them).
 */
async function killMidLoad(folder: string): Promise<string> {
  const child = spawn(process.execPath, [loadProgram, folder, LOAD_TABLE, '6'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await waitFor('the load to be under way', () => {
      if (out.includes('loading')) return true;
      if (child.exitCode !== null) throw new Error(`the load ended on its own: ${err}`);
      return undefined;
    });
    // Not a wait for anything: the moment of the fault, at random.
    await sleep(Math.floor(Math.random() * MAX_KILL_DELAY_MS));
  } finally {
    child.kill('SIGKILL');
    await exited;
  }
  return `j-load-${child.pid}-`;
}

type Item = Record<string, AttributeValue>;

/**
 * What the folder holds once opened again: every break of a multi-item write, in words, in
 * the jobs whose ids start with `only` (all of them when it is not given).
 */
async function brokenWrites(folder: string, only?: string): Promise<string[]> {
  // Nothing owns the folder now: the writer is dead, and so the folder's lock is free.
  const dynamo = await startDynalite({ path: folder });
  const client = new DynamoDBClient({ endpoint: dynamo.endpoint, region: 'local', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
  try {
    const items: Item[] = [];
    let start: Item | undefined;
    do {
      const page = await client.send(new ScanCommand({ TableName: LOAD_TABLE, ConsistentRead: true, ExclusiveStartKey: start }));
      items.push(...(page.Items ?? []));
      start = page.LastEvaluatedKey;
    } while (start !== undefined);
    const store = new DynamoJobStore({ client, tableName: LOAD_TABLE });
    const partitions = new Map<string, Item[]>();
    for (const item of items) {
      const pk = item.pk?.S ?? '';
      partitions.set(pk, [...(partitions.get(pk) ?? []), item]);
    }
    const broken: string[] = [];
    for (const [pk, rows] of partitions) {
      if (!pk.startsWith('JOB#')) continue;
      const jobId = pk.slice('JOB#'.length);
      if (only !== undefined && !jobId.startsWith(only)) continue;
      if (!rows.some((row) => row.sk?.S === 'JOB')) {
        broken.push(`${jobId}: ${rows.length} row(s) and no JOB item`);
        continue;
      }
      const job = await store.getJob(jobId);
      const attempts = await store.listAttempts(jobId);
      const events = await store.listEvents(jobId);
      const numbers = attempts.map((a) => a.attempt);
      const expected = Array.from({ length: job.attemptCount }, (_, i) => i + 1);
      if (JSON.stringify(numbers) !== JSON.stringify(expected)) broken.push(`${jobId}: attemptCount ${job.attemptCount}, attempt rows ${JSON.stringify(numbers)}`);
      if (events.at(-1)?.to !== job.status) broken.push(`${jobId}: status ${job.status}, last event to ${events.at(-1)?.to ?? 'none'}`);
      // Every decision is written with its EVENT row and the job's counters; in these loads
      // each one restarts the job (RECOVERING), and only a decision goes to RECOVERING.
      const decided = attempts.filter((a) => a.decision !== null);
      for (const a of decided) {
        if (!events.some((e) => e.attempt === a.attempt && e.to === a.decision?.status && e.reason === a.decision?.reason)) {
          broken.push(`${jobId}: attempt ${a.attempt} decided ${a.decision?.status} with no EVENT row for it`);
        }
      }
      const decisionEvents = events.filter((e) => e.to === 'RECOVERING').map((e) => e.attempt);
      const decidedNumbers = decided.map((a) => a.attempt);
      if (JSON.stringify(decidedNumbers) !== JSON.stringify(decisionEvents)) broken.push(`${jobId}: decided attempts ${JSON.stringify(decidedNumbers)}, decision events ${JSON.stringify(decisionEvents)}`);
      if (job.counters.recoveryCount !== decided.length) broken.push(`${jobId}: recoveryCount ${job.counters.recoveryCount}, ${decided.length} decision(s)`);
      const recorded = attempts.flatMap((a) => a.instances.map((i) => i.instanceId)).sort();
      const indexed = rows.filter((row) => row.sk?.S?.startsWith('INSTANCE#')).map((row) => row.sk?.S?.slice('INSTANCE#'.length) ?? '').sort();
      if (JSON.stringify(recorded) !== JSON.stringify(indexed)) broken.push(`${jobId}: instances ${JSON.stringify(recorded)}, INSTANCE rows ${JSON.stringify(indexed)}`);
    }
    return broken;
  } finally {
    client.destroy();
    await dynamo.close();
  }
}

describe('kill -9 in the middle of the store writes', () => {
  it(`leaves every multi-item write whole or undone, over ${ROUNDS} rounds on one folder`, { timeout: CRASH_TEST_TIMEOUT_MS }, async () => {
    const folder = mkdtempSync(path.join(tmpdir(), 'relaunch-store-crash-'));
    folders.push(folder);
    const found: string[] = [];
    for (let round = 1; round <= ROUNDS; round += 1) {
      // A round's kill can cut only its own writer's jobs: those are checked after it (a
      // check of every job each round grows with the rounds), and every job at the end.
      const jobs = await killMidLoad(folder);
      const broken = await brokenWrites(folder, round === ROUNDS ? undefined : jobs);
      found.push(...broken.map((b) => `round ${round}: ${b}`));
    }
    expect(found).toEqual([]);
  });
});

/** A job that restarts as fast as the controller can run it, forever: every attempt is a handful of transactions. */
const RESTARTS_FOREVER = yaml`
  resources:
    job_recovery:
      recover_on_exit_codes: [29]
  run: exit 29
`;

describe('kill -9 of relaunch serve under load', () => {
  it('leaves the store whole, and the next serve opens the folder and ends every job that was live', { timeout: CRASH_TEST_TIMEOUT_MS }, async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'relaunch-serve-crash-'));
    folders.push(dataDir);
    const found: string[] = [];
    for (let round = 1; round <= SERVE_ROUNDS; round += 1) {
      const server = await serve(dataDir);
      const jobs = await Promise.all(Array.from({ length: 4 }, () => server.submit(RESTARTS_FOREVER)));
      await waitFor('the jobs to be restarting', async () => ((await server.job(jobs[0] as string)).attempts.length >= 3 ? true : undefined), 60_000);
      // Not a wait for anything: the moment of the fault, at random.
      await sleep(Math.floor(Math.random() * MAX_KILL_DELAY_MS));
      server.cli.child.kill('SIGKILL');
      await server.cli.finished;
      found.push(...(await brokenWrites(path.join(dataDir, 'db'))).map((b) => `round ${round}: ${b}`));

      const next = await serve(dataDir);
      const after = await Promise.all(jobs.map((jobId) => next.job(jobId)));
      expect(after.filter((job) => !isTerminal(job.status as JobStatus))).toEqual([]);
      expect(after.every((job) => job.status === 'FAILED_CONTROLLER')).toBe(true);
      next.cli.child.kill('SIGTERM');
      const ended = await next.cli.finished;
      expect(ended.code, ended.stderr).toBe(0);
    }
    expect(found).toEqual([]);
  });
});
