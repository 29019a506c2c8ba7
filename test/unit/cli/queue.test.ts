// The queue `relaunch status` prints (cli/queue.ts through printQueue), over a store holding
// several jobs: SkyPilot's columns, the status and name filters, the limit, --all; and jobs
// named wherever an id is taken (cli/job-id.ts), cancel of an ended job (cancelOne).

import { describe, expect, it } from 'vitest';
import { InMemoryJobStore } from '../../../lib/adapters/memory-job-store.ts';
import type { AttemptRecord, JobRecord } from '../../../lib/model.ts';
import { JobStatus } from '../../../lib/status.ts';
import { getJob, listJobs } from '../../../lib/usecases/queries.ts';
import { newJobRecord } from '../../../lib/usecases/submit-job.ts';
import { cancelOne } from '../../../cli/commands/cancel.ts';
import { printQueue } from '../../../cli/commands/status.ts';
import { jobRefArgument, resolveJob } from '../../../cli/job-id.ts';
import { statusList } from '../../../cli/queue.ts';
import { attemptRecord } from '../../support/fixtures/records.ts';
import { taskSpec } from '../../support/fixtures/specs.ts';
import { bufferIo } from '../../support/cli.ts';

const NOW = Date.parse('2026-12-06T18:30:00Z');

/** A job submitted at `at`, in `status`, with these attempts. */
async function givenJob(
  store: InMemoryJobStore,
  jobId: string,
  options: { name: string; at: string; status: JobStatus; updatedAt?: string; numNodes?: number; recoveries?: number; attempts?: Partial<AttemptRecord>[] },
): Promise<void> {
  const spec = taskSpec({ name: options.name, numNodes: options.numNodes ?? 1 });
  const base = newJobRecord(jobId, spec, options.at);
  const job: JobRecord = {
    ...base,
    status: options.status,
    counters: { ...base.counters, recoveryCount: options.recoveries ?? 0 },
    updatedAt: options.updatedAt ?? options.at,
  };
  await store.createJob(job);
  // Each stored attempt moves the job's attemptCount on, as a launch does.
  for (const [index, attempt] of (options.attempts ?? []).entries()) {
    await store.putAttempt(attemptRecord(jobId, index + 1, options.at, attempt));
  }
}

const PLACED = { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm5.large' };

/** Node `nodeRank`'s instance, up at `runningAt`. */
const node = (instanceId: string, runningAt: string, nodeRank = 0) => ({ instanceId, nodeRank, privateIp: null, runningAt });

/** Four jobs: an old success with a recovery, a failure, a running two-node job, and a newer run of the first name. */
async function storeOfFourJobs(): Promise<InMemoryJobStore> {
  const store = new InMemoryJobStore();
  await givenJob(store, 'j-0000000a1-aaaaaa', {
    name: 'train',
    at: '2026-12-06T17:00:00.000Z',
    updatedAt: '2026-12-06T17:20:00.000Z',
    status: JobStatus.SUCCEEDED,
    recoveries: 1,
    // Priced at launch as on AWS: EC2's spot price, then the table's on-demand one; neither an estimate.
    attempts: [
      {
        placement: { ...PLACED, price: { hourly: 0.04, onDemandHourly: 0.096, source: 'spot-price-history', estimate: false } },
        instances: [node('i-a1-1', '2026-12-06T17:00:00.000Z')],
        runStartedAt: '2026-12-06T17:01:00.000Z',
        endedAt: '2026-12-06T17:06:00.000Z',
      },
      {
        placement: { ...PLACED, zone: 'us-east-1b', price: { hourly: 0.096, onDemandHourly: 0.096, source: 'price-table', estimate: false } },
        market: 'on-demand',
        instances: [node('i-a1-2', '2026-12-06T17:07:00.000Z')],
        startedAt: '2026-12-06T17:07:00.000Z',
        runStartedAt: '2026-12-06T17:10:00.000Z',
        endedAt: '2026-12-06T17:19:30.000Z',
      },
    ],
  });
  await givenJob(store, 'j-0000000a2-bbbbbb', {
    name: 'eval',
    at: '2026-12-06T17:30:00.000Z',
    updatedAt: '2026-12-06T17:31:00.000Z',
    status: JobStatus.FAILED,
    // No price stored (a local run's): the table's spot estimate.
    attempts: [{ placement: PLACED, instances: [node('i-a2-1', '2026-12-06T17:30:00.000Z')], runStartedAt: '2026-12-06T17:30:30.000Z', endedAt: '2026-12-06T17:30:50.000Z' }],
  });
  await givenJob(store, 'j-0000000a3-cccccc', {
    name: 'sweep',
    at: '2026-12-06T18:00:00.000Z',
    status: JobStatus.RUNNING,
    numNodes: 2,
    attempts: [
      {
        placement: { ...PLACED, instanceType: 'g5.xlarge' },
        instances: [node('i-a3-1', '2026-12-06T18:00:00.000Z', 0), node('i-a3-2', '2026-12-06T18:00:00.000Z', 1)],
        runStartedAt: '2026-12-06T18:10:00.000Z',
      },
    ],
  });
  await givenJob(store, 'j-0000000a4-dddddd', { name: 'train', at: '2026-12-06T18:20:00.000Z', status: JobStatus.PENDING });
  return store;
}

/** What `relaunch status` talks to, over the store. */
function clientOf(store: InMemoryJobStore) {
  return {
    listJobs: async () => (await listJobs({ store })).jobs,
    getJob: (jobId: string) => getJob(jobId, { store }),
    cancel: async (jobId: string) => {
      const job = await store.getJob(jobId);
      return { status: job.status, alreadyFinished: true };
    },
  };
}

/** The printed queue as cells: the line over the table, then each row split on its column gaps. */
async function queue(store: InMemoryJobStore, options: Parameters<typeof printQueue>[1] = {}): Promise<{ head: string; rows: string[][] }> {
  const io = bufferIo();
  await printQueue(clientOf(store), options, io, NOW, 'Europe/Paris');
  const [head = '', ...lines] = io.stdout.join('\n').split('\n');
  return { head, rows: lines.map((line) => line.split(/\s{2,}/)) };
}

describe('the queue relaunch status prints', () => {
  it("gives each job sky jobs queue's columns: name, resources, submitted, total and job duration, cost, attempts, recoveries, status", async () => {
    const { head, rows } = await queue(await storeOfFourJobs());
    expect(head).toBe('in progress: 1 PENDING, 1 RUNNING');
    expect(rows).toEqual([
      ['ID', 'NAME', 'RESOURCES', 'SUBMITTED', 'TOT. DURATION', 'JOB DURATION', 'COST', 'ATTEMPTS', 'RECOVERIES', 'STATUS'],
      ['j-0000000a4-dddddd', 'train', '1x -', '2026-12-06 19:20:00 CET', '10m 00s', '0s', '-', '0', '0', 'PENDING'],
      // Two g5.xlarge at the table's spot estimate (35% of $1.006) from 18:00 to the latest time on record, its run's start at 18:10: so far.
      ['j-0000000a3-cccccc', 'sweep', '2x g5.xlarge spot', '2026-12-06 19:00:00 CET', '30m 00s', '20m 00s', '~$0.1174', '1', '0', 'RUNNING'],
      // 50 s of an m5.large at the table's spot estimate (35% of $0.096).
      ['j-0000000a2-bbbbbb', 'eval', '1x m5.large spot', '2026-12-06 18:30:00 CET', '1m 00s', '20s', '~$0.000467', '1', '0', 'FAILED'],
      // 6 min at EC2's $0.04 spot, then 12.5 min on demand at $0.096: as billed, no ~.
      ['j-0000000a1-aaaaaa', 'train', '1x m5.large on-demand', '2026-12-06 18:00:00 CET', '20m 00s', '14m 30s', '$0.0240', '2', '1', 'SUCCEEDED'],
    ]);
  });

  it("gives the COST of the account status JOB shows, and - for a view without one (an API older than the accounting)", async () => {
    const store = await storeOfFourJobs();
    const io = bufferIo();
    const client = clientOf(store);
    const withoutAccount = { ...client, getJob: async (jobId: string) => ({ ...(await client.getJob(jobId)), account: undefined }) };
    await printQueue(withoutAccount, {}, io, NOW, 'Europe/Paris');
    const costs = io.stdout.join('\n').split('\n').slice(2).map((line) => line.split(/\s{2,}/)[6]);
    expect(costs).toEqual(['-', '-', '-', '-']);
    const view = await client.getJob('j-0000000a1-aaaaaa');
    expect(view.account?.cost).toMatchObject({ dollars: 0.024, estimate: false });
  });

  it('reads each shown job once, for its row and its cost alike, and none the limit cut', async () => {
    const client = clientOf(await storeOfFourJobs());
    const read: string[] = [];
    const counting = { ...client, getJob: (jobId: string) => (read.push(jobId), client.getJob(jobId)) };
    await printQueue(counting, { limit: 3 }, bufferIo(), NOW);
    expect(read.sort()).toEqual(['j-0000000a2-bbbbbb', 'j-0000000a3-cccccc', 'j-0000000a4-dddddd']);
  });

  it('keeps the jobs of the statuses and the name asked for', async () => {
    const store = await storeOfFourJobs();
    const ids = (rows: string[][]) => rows.slice(1).map((row) => row[0]);
    expect(ids((await queue(store, { status: statusList('running,pending') })).rows)).toEqual(['j-0000000a4-dddddd', 'j-0000000a3-cccccc']);
    expect(ids((await queue(store, { name: 'train' })).rows)).toEqual(['j-0000000a4-dddddd', 'j-0000000a1-aaaaaa']);
    expect(ids((await queue(store, { name: 'train', status: [JobStatus.SUCCEEDED] })).rows)).toEqual(['j-0000000a1-aaaaaa']);
    expect((await queue(store, { name: 'nobody' })).rows).toEqual([['no job matches (relaunch status with no filter lists them all)']]);
  });

  it('shows the newest N with --limit and says more are hidden; --all shows every job with STARTED, WHERE and DETAILS', async () => {
    const store = await storeOfFourJobs();
    const limited = await queue(store, { limit: 2 });
    expect(limited.rows.slice(1, -1).map((row) => row[0])).toEqual(['j-0000000a4-dddddd', 'j-0000000a3-cccccc']);
    expect(limited.rows.at(-1)).toEqual(['(the newest 2 shown: --limit N or --all for more)']);
    // Two jobs are named train: a limit of two cuts none of them, whatever the filter left out.
    const named = await queue(store, { limit: 2, name: 'train' });
    expect(named.rows.slice(1).map((row) => row[0])).toEqual(['j-0000000a4-dddddd', 'j-0000000a1-aaaaaa']);
    const all = await queue(store, { all: true });
    expect(all.rows[0]?.slice(-3)).toEqual(['STARTED', 'WHERE', 'DETAILS']);
    expect(all.rows.at(-1)?.slice(-4)).toEqual(['SUCCEEDED', '2026-12-06 18:01:00 CET', 'us-east-1b', '-']);
    expect(all.rows).toHaveLength(5);
  });

  it('prints the kept jobs as GET /jobs lists them with --json', async () => {
    const io = bufferIo();
    await printQueue(clientOf(await storeOfFourJobs()), { json: true, status: [JobStatus.FAILED] }, io, NOW);
    expect(JSON.parse(io.stdout.join('\n'))).toEqual({ jobs: [expect.objectContaining({ jobId: 'j-0000000a2-bbbbbb', name: 'eval', status: 'FAILED' })] });
  });

  it('refuses a status that does not exist, naming the option and the statuses', () => {
    expect(() => statusList('DONE')).toThrow(/--status: expected one or more of PENDING, STARTING, .* \(comma-separated\), got "DONE"/);
  });
});

describe('a job named wherever an id is taken', () => {
  it('takes an id as an id, anything name-shaped as a name, and refuses the rest', () => {
    expect(jobRefArgument('j-0000000a1-aaaaaa')).toEqual({ id: 'j-0000000a1-aaaaaa' });
    expect(jobRefArgument('train')).toEqual({ name: 'train' });
    expect(() => jobRefArgument('../x')).toThrow('<job>: expected a job id such as j-0m8x2k1qz-4fz0aa or a job\'s name such as train-llama, got "../x"');
  });

  it('means the newest job of that name; an unknown name is a clear error', async () => {
    const client = clientOf(await storeOfFourJobs());
    await expect(resolveJob({ name: 'train' }, client)).resolves.toBe('j-0000000a4-dddddd');
    await expect(resolveJob({ name: 'eval' }, client)).resolves.toBe('j-0000000a2-bbbbbb');
    await expect(resolveJob({ name: 'nobody' }, client)).rejects.toThrow('<job>: no job named nobody (nor with that id): relaunch status lists the jobs');
  });

  it('to cancel, means the running job of that name, and two running of one name is ambiguous', async () => {
    const store = await storeOfFourJobs();
    await givenJob(store, 'j-0000000a5-eeeeee', { name: 'sweep', at: '2026-12-06T18:25:00.000Z', status: JobStatus.RUNNING });
    const client = clientOf(store);
    await expect(resolveJob({ name: 'train' }, client, { live: true })).resolves.toBe('j-0000000a4-dddddd');
    await expect(resolveJob({ name: 'eval' }, client, { live: true })).resolves.toBe('j-0000000a2-bbbbbb');
    await expect(resolveJob({ name: 'sweep' }, client, { live: true })).rejects.toThrow(
      '<job>: 2 jobs named sweep are running (j-0000000a5-eeeeee, j-0000000a3-cccccc): give the id of the one you mean',
    );
  });

  it('says a job that had already ended was not cancelled', async () => {
    const client = clientOf(await storeOfFourJobs());
    await expect(cancelOne(client, 'j-0000000a2-bbbbbb')).resolves.toBe('j-0000000a2-bbbbbb: already ended FAILED, nothing to cancel');
    await expect(cancelOne({ cancel: async () => ({ status: 'CANCELLING', alreadyFinished: false }) }, 'j-0000000a3-cccccc')).resolves.toBe('j-0000000a3-cccccc: CANCELLING');
  });
});
