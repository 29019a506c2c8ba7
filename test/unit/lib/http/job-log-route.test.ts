// GET /jobs/{id}/logs?attempt=&node=&phase=: pages of a node's output read on
// from an opaque cursor, and every hostile input a 4xx naming its field before any read.

import { describe, expect, it } from 'vitest';
import { handleApiRequest, type ApiDeps } from '../../../../lib/http/index.ts';
import type { JobLogPage, JobLogReader } from '../../../../lib/ports.ts';
import { encodeCursor, MAX_CURSOR_LENGTH } from '../../../../lib/usecases/read-job-log.ts';
import { jobLogStreamName, type JobLogStream } from '../../../../lib/job-log-names.ts';
import { givenJob, givenLaunched, harness, JOB_ID, taskSpec, type Harness } from '../../../support/usecases-harness.ts';

const OTHER_JOB = 'j-00mm8abcd-other1';

/** A reader over fixed text, a line a page: position is the index of the next line. */
class LinesReader implements JobLogReader {
  readonly reads: { stream: string; position: string | null }[] = [];
  constructor(private readonly lines: Readonly<Record<string, readonly string[]>>) {}

  async read(stream: JobLogStream, position: string | null): Promise<JobLogPage> {
    const name = jobLogStreamName(stream);
    this.reads.push({ stream: name, position });
    const lines = this.lines[name] ?? [];
    const at = position === null ? 0 : Number(position);
    const line = lines[at];
    return line === undefined ? { text: '', position: String(at) } : { text: `${line}\n`, position: String(at + 1) };
  }

  consoleUrl(stream: JobLogStream): string {
    return `https://console.example/${jobLogStreamName(stream)}`;
  }
}

async function get(h: Harness, reader: LinesReader | undefined, path: string) {
  const deps: ApiDeps = { ...h.deps, ...(reader === undefined ? {} : { jobLogs: reader }), onUnexpectedError: (error) => { throw error; } };
  const response = await handleApiRequest({ method: 'GET', path, headers: {} }, deps);
  return { status: response.statusCode, body: JSON.parse(response.body) as Record<string, unknown> };
}

const logPath = (attempt: string | number, node: string | number, phase = 'run', jobId = JOB_ID) => `/jobs/${jobId}/logs?attempt=${attempt}&node=${node}&phase=${phase}`;

describe('reading a node\'s output through the API', () => {
  it('pages through the stream with the cursor each page gives back, then stays at its end', async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2 }));
    const stream = { jobId: JOB_ID, attempt: 1, nodeRank: 1, phase: 'run' } as const;
    const reader = new LinesReader({ [jobLogStreamName(stream)]: ['step 1', 'step 2'] });
    const texts: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 3; page += 1) {
      const { status, body } = await get(h, reader, `${logPath(1, 1)}${cursor === undefined ? '' : `&cursor=${cursor}`}`);
      expect(status).toBe(200);
      expect(body).toMatchObject({ jobId: JOB_ID, attempt: 1, nodeRank: 1, phase: 'run', consoleUrl: `https://console.example/${jobLogStreamName(stream)}` });
      texts.push(body.text as string);
      cursor = body.cursor as string;
    }
    expect(texts).toEqual(['step 1\n', 'step 2\n', '']);
    expect(reader.reads.map((read) => read.position)).toEqual([null, '1', '2']);
  });

  it.each([
    ['attempt 0', logPath(0, 0), 'attempt', 'expected an attempt number (1-based) in ?attempt=, got "0"'],
    ['no attempt', `/jobs/${JOB_ID}/logs?node=0&phase=run`, 'attempt', 'got nothing'],
    ['an attempt the job has not made', logPath(7, 0), 'attempt', `expected an attempt of job ${JOB_ID}, which has attempts 1-1; got 7`],
    ['a huge attempt', logPath('99999999999999999999', 0), 'attempt', 'expected an attempt number'],
    ['node -1', logPath(1, -1), 'node', 'expected a node rank (0 for the head node) in ?node=, got "-1"'],
    ['a node past the job\'s', logPath(1, 1), 'node', 'expected a node rank 0-0 (attempt 1 runs 1 node), got 1'],
    ['a huge node', logPath(1, '1e309'), 'node', 'expected a node rank'],
    ['a node of 10 digits', logPath(1, '9999999999'), 'node', 'expected a node rank'],
    ['a phase that is not one', logPath(1, 0, 'teardown'), 'phase', 'expected setup or run in ?phase=, got "teardown"'],
    ['a cursor that is not one', `${logPath(1, 0)}&cursor=not%20a%20cursor`, 'cursor', 'expected a cursor a page of this log gave, got "not a cursor"'],
    ['a cursor of base64 that is not JSON', `${logPath(1, 0)}&cursor=${Buffer.from('{"s":').toString('base64url')}`, 'cursor', 'expected a cursor a page of this log gave'],
    ['a cursor without a position', `${logPath(1, 0)}&cursor=${Buffer.from(JSON.stringify({ s: `${JOB_ID}/attempt-1/node-0/run` })).toString('base64url')}`, 'cursor', 'expected a cursor'],
    ['a huge cursor', `${logPath(1, 0)}&cursor=${'A'.repeat(MAX_CURSOR_LENGTH + 1)}`, 'cursor', `got ${MAX_CURSOR_LENGTH + 1} characters (at most ${MAX_CURSOR_LENGTH})`],
    ['another job\'s cursor', `${logPath(1, 0)}&cursor=${encodeCursor(`${OTHER_JOB}/attempt-1/node-0/run`, '0')}`, 'cursor', `the cursor belongs to another log (${OTHER_JOB}/attempt-1/node-0/run), not ${JOB_ID}/attempt-1/node-0/run`],
    ['another phase\'s cursor', `${logPath(1, 0)}&cursor=${encodeCursor(`${JOB_ID}/attempt-1/node-0/setup`, '0')}`, 'cursor', 'the cursor belongs to another log'],
  ])('answers 400 naming the field for %s, and reads nothing', async (_what, path, field, message) => {
    const h = harness();
    await givenLaunched(h);
    const reader = new LinesReader({});
    const { status, body } = await get(h, reader, path);
    expect(status).toBe(400);
    expect(body.issues).toEqual([{ path: field, message: expect.stringContaining(message) as string }]);
    expect(reader.reads).toEqual([]);
  });

  it('answers 404 for another job that does not exist, a job id that cannot be one, and a job with no attempt yet as 400', async () => {
    const h = harness();
    await givenLaunched(h);
    await givenJob(h, taskSpec(), OTHER_JOB);
    const reader = new LinesReader({});
    expect((await get(h, reader, logPath(1, 0, 'run', 'j-00mm8abcd-nojob1'))).status).toBe(404);
    expect((await get(h, reader, logPath(1, 0, 'run', '../../etc'))).status).toBe(404);
    const none = await get(h, reader, logPath(1, 0, 'run', OTHER_JOB));
    expect(none.status).toBe(400);
    expect(none.body.issues).toEqual([{ path: 'attempt', message: `expected an attempt of job ${OTHER_JOB}, which has no attempt yet; got 1` }]);
    expect(reader.reads).toEqual([]);
  });

  it('answers 404 saying so where the API keeps no output', async () => {
    const h = harness();
    await givenLaunched(h);
    expect(await get(h, undefined, logPath(1, 0))).toEqual({ status: 404, body: { error: 'this relaunch keeps no job output to read' } });
  });
});

describe('GET /jobs/{id} with a log reader that has a console', () => {
  it("gives each launched attempt's node logs, setup and run, their console links; none without a reader", async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2 }));
    const { body } = await get(h, new LinesReader({}), `/jobs/${JOB_ID}`);
    expect(body.logStreams).toEqual([
      { attempt: 1, nodeRank: 0, phase: 'setup', consoleUrl: `https://console.example/${JOB_ID}/attempt-1/node-0/setup` },
      { attempt: 1, nodeRank: 0, phase: 'run', consoleUrl: `https://console.example/${JOB_ID}/attempt-1/node-0/run` },
      { attempt: 1, nodeRank: 1, phase: 'setup', consoleUrl: `https://console.example/${JOB_ID}/attempt-1/node-1/setup` },
      { attempt: 1, nodeRank: 1, phase: 'run', consoleUrl: `https://console.example/${JOB_ID}/attempt-1/node-1/run` },
    ]);
    expect((await get(h, undefined, `/jobs/${JOB_ID}`)).body).not.toHaveProperty('logStreams');
  });
});
