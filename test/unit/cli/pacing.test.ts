// How the CLI paces itself against an API: the poll cadence of `follow`, and the retries of
// a call that was throttled or not served, Retry-After honoured. Waits are injected and
// recorded, never slept; the HTTP is real (a local server that answers as each test says).

import { DEFAULT_RECOVERY_POLICY } from '../../../lib/task-file/recovery.ts';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { followJob, pollDelayMs } from '../../../cli/follow.ts';
import {
  ApiError,
  DEPLOYED_PACING,
  HttpJobsClient,
  LOCAL_PACING,
  MAX_RETRY_AFTER_MS,
  retryDelayMs,
  type JobsClient,
  type Pacing,
} from '../../../cli/jobs-client.ts';
import type { Io } from '../../../cli/exit.ts';
import { InvalidInputError, JobNotFoundError } from '../../../lib/errors.ts';
import { JobStatus } from '../../../lib/status.ts';
import type { JobView } from '../../../lib/views.ts';

const JOB_ID = 'j-00mm8abcd-pace01';
const quietIo: Io = { out: () => undefined, err: () => undefined };
const middle = () => 0.5;

describe('pollDelayMs', () => {
  it.each([
    ['a local runtime right after a change', LOCAL_PACING, [0], 200, 240],
    ['a local runtime after many unchanged polls', LOCAL_PACING, [4, 10, 1000], 800, 1000],
    ['a deployed API right after a change', DEPLOYED_PACING, [0], 2000, 2400],
    ['a deployed API after one unchanged poll', DEPLOYED_PACING, [1], 2400, 3600],
    ['a deployed API after many unchanged polls', DEPLOYED_PACING, [3, 10, 1000], 4000, 5000],
  ])('waits within bounds for %s', (_name, pacing, unchanged, low, high) => {
    for (const polls of unchanged) {
      for (const draw of [0, 0.25, 0.5, 0.75, 0.999]) {
        const delay = pollDelayMs(pacing, polls, () => draw);
        expect(delay).toBeGreaterThanOrEqual(low);
        expect(delay).toBeLessThanOrEqual(high);
      }
    }
  });

  it('never leaves 2-5 s for a deployed API, and spreads followers apart', () => {
    const delays = Array.from({ length: 20 }, (_, polls) => pollDelayMs(DEPLOYED_PACING, polls % 3, () => (polls * 0.37) % 1));
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(DEPLOYED_PACING.pollMinMs);
    expect(Math.max(...delays)).toBeLessThanOrEqual(DEPLOYED_PACING.pollMaxMs);
    expect(new Set(delays).size).toBeGreaterThan(3);
  });
});

/** A client that serves views from a script, one per poll, and never throttles. */
function scriptedClient(pacing: Pacing, statuses: readonly JobStatus[]): JobsClient & { polls: number } {
  const views = statuses.map((status): JobView => ({
    jobId: JOB_ID,
    name: null,
    status,
    recoveryCount: 0,
    restartsOnErrors: 0,
    failureReason: null,
    recoveryPolicy: DEFAULT_RECOVERY_POLICY,
    numNodes: 1,
    createdAt: '2026-03-01T12:00:00.000Z',
    updatedAt: '2026-03-01T12:00:00.000Z',
    attempts: [],
  }));
  return {
    where: 'scripted',
    dataDir: null,
    pacing,
    polls: 0,
    async getJob() {
      const view = views[Math.min(this.polls, views.length - 1)] as JobView;
      this.polls += 1;
      return view;
    },
    submit: () => Promise.reject(new Error('not used')),
    listJobs: () => Promise.reject(new Error('not used')),
    cancel: () => Promise.reject(new Error('not used')),
  };
}

describe('followJob', () => {
  const { RUNNING, STARTING, SUCCEEDED } = JobStatus;

  it('polls a deployed API from 2 s, backing off while the job does not change and back to 2 s when it does', async () => {
    const client = scriptedClient(DEPLOYED_PACING, [STARTING, RUNNING, RUNNING, RUNNING, RUNNING, RUNNING, SUCCEEDED]);
    const waits: number[] = [];

    const view = await followJob(client, JOB_ID, quietIo, { progress: false, output: false, random: middle, sleep: async (ms) => waits.push(ms) });

    expect(view.status).toBe(SUCCEEDED);
    expect(client.polls).toBe(7);
    expect(waits).toEqual([2000, 2000, 3000, 4500, 5000, 5000]);
  });

  it('polls a local runtime every 200 ms while the job changes, backing off to 1 s while it does not', async () => {
    const client = scriptedClient(LOCAL_PACING, [STARTING, RUNNING, RUNNING, RUNNING, RUNNING, RUNNING, RUNNING, RUNNING, SUCCEEDED]);
    const waits: number[] = [];

    await followJob(client, JOB_ID, quietIo, { progress: false, output: false, random: middle, sleep: async (ms) => waits.push(ms) });

    expect(waits).toEqual([200, 200, 300, 450, 675, 1000, 1000, 1000]);
  });
});

interface Seen {
  readonly method: string;
  readonly headers: IncomingHttpHeaders;
}

/** A stand-in API: answers each request with the next scripted answer; 200 `{jobs: []}` once they run out. */
class ScriptedApi {
  readonly requests: Seen[] = [];
  answers: { status: number; headers?: Record<string, string>; body?: unknown }[] = [];
  private server: Server | undefined;

  async start(): Promise<string> {
    this.server = createServer((request, response) => {
      this.requests.push({ method: request.method ?? '', headers: request.headers });
      request.resume();
      request.on('end', () => {
        const answer = this.answers.shift() ?? { status: 200, body: { jobs: [] } };
        response.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
        response.end(JSON.stringify(answer.body ?? { error: `scripted ${answer.status}` }));
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}

describe('HttpJobsClient retries', () => {
  let api: ScriptedApi;
  let url: string;
  let waits: number[];

  beforeEach(async () => {
    api = new ScriptedApi();
    url = await api.start();
    waits = [];
  });

  afterEach(async () => {
    await api.stop();
  });

  const deployed = (pacing: Pacing = DEPLOYED_PACING) =>
    new HttpJobsClient(url, { pacing, random: middle, sleep: async (ms) => void waits.push(ms) });

  it('waits as long as a 429 Retry-After asks, twice, then gets its answer', async () => {
    api.answers = [
      { status: 429, headers: { 'retry-after': '3' } },
      { status: 429, headers: { 'retry-after': '1' } },
    ];

    expect(await deployed().listJobs()).toEqual([]);

    expect(api.requests).toHaveLength(3);
    expect(waits).toEqual([3000, 1000]);
  });

  it('honours a 503 Retry-After given as an HTTP date', async () => {
    api.answers = [{ status: 503, headers: { 'retry-after': new Date(Date.now() + 8000).toUTCString() } }];

    await deployed().listJobs();

    expect(waits).toHaveLength(1);
    // An HTTP date has whole seconds: 7-8 s from when it was read.
    expect(waits[0]).toBeGreaterThan(6000);
    expect(waits[0]).toBeLessThanOrEqual(8000);
  });

  it('cuts a Retry-After longer than a minute to a minute', async () => {
    api.answers = [{ status: 429, headers: { 'retry-after': '3600' } }];
    await deployed().listJobs();
    expect(waits).toEqual([MAX_RETRY_AFTER_MS]);
  });

  it('backs off with jitter where no Retry-After was given, and on 5xx', async () => {
    api.answers = [{ status: 429 }, { status: 502 }, { status: 500 }, { status: 429, headers: { 'retry-after': 'soon' } }];

    await deployed().listJobs();

    expect(api.requests).toHaveLength(5);
    expect(waits).toEqual([750, 1500, 3000, 6000]);
  });

  it('gives up after its tries with the last answer, as an ApiError with its status', async () => {
    api.answers = Array.from({ length: 10 }, () => ({ status: 429, body: { error: 'Too Many Requests' } }));

    const error = await deployed().listJobs().catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ statusCode: 429, message: 'the API answered 429: Too Many Requests' });
    expect(api.requests).toHaveLength(DEPLOYED_PACING.tries);
  });

  it('never retries an answer no retry changes', async () => {
    api.answers = [{ status: 404, body: { error: 'no job' } }];
    await expect(deployed().getJob(JOB_ID)).rejects.toThrow(JobNotFoundError);
    api.answers = [{ status: 400, body: { error: 'bad', issues: [{ path: 'limit', message: 'x' }] } }];
    await expect(deployed().listJobs()).rejects.toThrow('limit: x');
    expect(api.requests).toHaveLength(2);
    expect(waits).toEqual([]);
  });

  it('does not retry a local server (`relaunch serve`), which never throttles', async () => {
    api.answers = [{ status: 503, headers: { 'retry-after': '1' } }];
    await expect(new HttpJobsClient(url, { sleep: async (ms) => void waits.push(ms) }).listJobs()).rejects.toThrow(ApiError);
    expect(api.requests).toHaveLength(1);
  });

  it('sends a fresh Idempotency-Key with each submit and the same one with each retry of it', async () => {
    api.answers = [
      { status: 503, headers: { 'retry-after': '1' } },
      { status: 502 },
      { status: 202, body: { jobId: JOB_ID, warnings: [] } },
      { status: 202, body: { jobId: 'j-00mm8abcd-pace02', warnings: [] } },
    ];
    const client = deployed();

    expect(await client.submit('run: echo hi\n', {})).toMatchObject({ jobId: JOB_ID });
    await client.submit('run: echo hi\n', {});

    const keys = api.requests.map((request) => request.headers['idempotency-key']);
    expect(api.requests.map((request) => request.method)).toEqual(['POST', 'POST', 'POST', 'POST']);
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(keys.slice(0, 3)).toEqual([keys[0], keys[0], keys[0]]);
    expect(keys[3]).toMatch(/^[0-9a-f-]{36}$/);
    expect(keys[3]).not.toBe(keys[0]);
  });

  it('takes a 422 with issues (a key used for another task) as bad input, not a server fault', async () => {
    api.answers = [{ status: 422, body: { error: 'Idempotency-Key: used', issues: [{ path: 'Idempotency-Key', message: 'used for job j-1' }] } }];
    await expect(deployed().submit('run: echo hi\n', {})).rejects.toThrow(InvalidInputError);
    expect(api.requests).toHaveLength(1);
  });

  it('retries an API that does not answer, then says it cannot be reached', async () => {
    await api.stop();
    const error = await deployed({ ...DEPLOYED_PACING, tries: 3 }).listJobs().catch((e: unknown) => e);
    expect(error).toMatchObject({ statusCode: 0, message: expect.stringContaining(`cannot reach ${url}`) });
    expect(waits).toEqual([750, 1500]);
    api = new ScriptedApi();
    await api.start();
  });
});

describe('retryDelayMs', () => {
  it.each([
    [200, null],
    [400, null],
    [401, null],
    [403, null],
    [404, null],
    [409, null],
    [413, null],
  ])('takes a %i as final', (status, expected) => {
    expect(retryDelayMs({ status, retryAfter: '1' }, 1, 0, middle)).toBe(expected);
  });

  it('keeps a backoff wait between half and all of its delay', () => {
    expect(retryDelayMs({ status: 503, retryAfter: null }, 3, 0, () => 0)).toBe(2000);
    expect(retryDelayMs({ status: 503, retryAfter: null }, 3, 0, () => 0.999)).toBeLessThanOrEqual(4000);
  });

  it('takes a Retry-After date in the past as no wait', () => {
    expect(retryDelayMs({ status: 429, retryAfter: 'Wed, 21 Oct 2015 07:28:00 GMT' }, 1, Date.now(), middle)).toBe(0);
  });
});
