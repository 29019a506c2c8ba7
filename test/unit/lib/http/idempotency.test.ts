// POST /jobs with an Idempotency-Key: a repeat answers the job the first made, a different
// task under the same key is refused, and a key that is not one is a 400 naming the header.

import { describe, expect, it, vi } from 'vitest';
import {
  handleApiRequest,
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENT_REPLAY_HEADER,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  type ApiRequest,
} from '../../../../lib/http/index.ts';
import { JobStatus } from '../../../../lib/status.ts';
import { IDEMPOTENCY_KEY_LIFETIME_MS, idempotencyClaimKey, newJobRecord, taskFingerprint } from '../../../../lib/usecases/submit-job.ts';
import { parseTaskFile } from '../../../../lib/task-file/parse.ts';
import { harness, type Harness } from '../../../support/usecases-harness.ts';

const TASK = 'name: train\nresources:\n  cpus: 2\nrun: python train.py\n';
const OTHER_TASK = 'name: train\nresources:\n  cpus: 2\nrun: python train.py --epochs 3\n';
const KEY = '8e03978e-40d5-43e8-bc93-6894a57f9324';
const ALICE = 'arn:aws:iam::123456789012:user/alice';

function submit(key: string | undefined, body = TASK, more: Partial<ApiRequest> = {}): ApiRequest {
  return {
    method: 'POST',
    path: '/jobs',
    headers: { 'content-type': 'application/yaml', ...(key === undefined ? {} : { [IDEMPOTENCY_KEY_HEADER]: key }) },
    body,
    caller: ALICE,
    ...more,
  };
}

async function call(h: Harness, request: ApiRequest) {
  const response = await handleApiRequest(request, h.deps);
  return { ...response, json: JSON.parse(response.body) as { jobId?: string; error?: string; issues?: { path: string; message: string }[] } };
}

describe('POST /jobs with an Idempotency-Key', () => {
  it('answers a repeat with the job the first made, marked as a replay, and starts one execution', async () => {
    const h = harness();

    const first = await call(h, submit(KEY));
    const again = await call(h, submit(KEY));

    expect(first.statusCode).toBe(202);
    expect(again).toMatchObject({ statusCode: 202, json: { jobId: first.json.jobId, warnings: [] } });
    expect(first.headers[IDEMPOTENT_REPLAY_HEADER]).toBeUndefined();
    expect(again.headers[IDEMPOTENT_REPLAY_HEADER]).toBe('true');
    expect(await h.store.listJobs()).toHaveLength(1);
    expect(h.workflow.starts.map((start) => start.executionName)).toEqual([first.json.jobId]);
  });

  it('answers submits that arrive together with one job', async () => {
    const h = harness();

    const answers = await Promise.all([call(h, submit(KEY)), call(h, submit(KEY)), call(h, submit(KEY))]);

    expect(new Set(answers.map((a) => a.json.jobId)).size).toBe(1);
    expect(answers.map((a) => a.statusCode)).toEqual([202, 202, 202]);
    expect(await h.store.listJobs()).toHaveLength(1);
  });

  it('refuses a different task under a used key with 422 naming the header, and makes nothing', async () => {
    const h = harness();
    const first = await call(h, submit(KEY));

    const other = await call(h, submit(KEY, OTHER_TASK));

    expect(other.statusCode).toBe(422);
    expect(other.json.error).toMatch(/^Idempotency-Key: the idempotency key was already used for a different task/);
    expect(other.json.issues).toEqual([{ path: IDEMPOTENCY_KEY_HEADER, message: expect.stringContaining(String(first.json.jobId)) }]);
    expect(await h.store.listJobs()).toHaveLength(1);
    expect(h.workflow.starts).toHaveLength(1);
  });

  it('takes the same task as JSON, in another key order, as the same request', async () => {
    const h = harness();
    const first = await call(h, submit(KEY));
    const json = JSON.stringify({ run: 'python train.py', resources: { cpus: 2 }, name: 'train' });

    const again = await call(h, submit(KEY, json, { headers: { 'content-type': 'application/json', 'idempotency-key': KEY } }));

    expect(again.json.jobId).toBe(first.json.jobId);
  });

  it('keeps one caller\'s keys apart from another\'s', async () => {
    const h = harness();
    const alice = await call(h, submit(KEY));
    const bob = await call(h, submit(KEY, TASK, { caller: 'arn:aws:iam::123456789012:user/bob' }));
    const bobWithOtherTask = await call(h, submit(KEY, OTHER_TASK, { caller: 'arn:aws:iam::123456789012:user/carol' }));

    expect(bob.json.jobId).not.toBe(alice.json.jobId);
    expect(bobWithOtherTask.statusCode).toBe(202);
    expect(await h.store.listJobs()).toHaveLength(3);
  });

  it('lets a key make a new job once 24 hours have passed', async () => {
    const h = harness();
    const first = await call(h, submit(KEY));
    h.clock.advance(IDEMPOTENCY_KEY_LIFETIME_MS / 1000 - 1);
    expect((await call(h, submit(KEY))).json.jobId).toBe(first.json.jobId);

    h.clock.advance(1);
    const later = await call(h, submit(KEY, OTHER_TASK));

    expect(later.statusCode).toBe(202);
    expect(later.json.jobId).not.toBe(first.json.jobId);
  });

  it('reads the key as written or as a quoted structured-field string, under any header case', async () => {
    const h = harness();
    const first = await call(h, submit(KEY));
    const quoted = await call(h, submit(undefined, TASK, { headers: { 'IDEMPOTENCY-KEY': `"${KEY}"`, 'content-type': 'application/yaml' } }));
    expect(quoted.json.jobId).toBe(first.json.jobId);
  });

  it('makes a job per submit when no key is sent, as before', async () => {
    const h = harness();
    await call(h, submit(undefined));
    await call(h, submit(undefined));
    expect(await h.store.listJobs()).toHaveLength(2);
  });

  it('starts the execution a first submit stopped before starting (its job left PENDING)', async () => {
    const h = harness();
    const spec = parseTaskFile(TASK).spec;
    const at = h.clock.now().toISOString();
    const jobId = 'j-00mm8abcd-crash1';
    const claim = {
      key: idempotencyClaimKey(ALICE, KEY),
      jobId,
      fingerprint: taskFingerprint(spec),
      expiresAt: new Date(h.clock.now().getTime() + 60_000).toISOString(),
    };
    await h.store.createJobOnce(newJobRecord(jobId, spec, at), claim, at);
    const start = vi.spyOn(h.workflow, 'start');

    const retried = await call(h, submit(KEY));

    expect(retried).toMatchObject({ statusCode: 202, json: { jobId } });
    expect(start.mock.calls.map(([name]) => name)).toEqual([jobId]);
    expect((await h.store.getJob(jobId)).executionArn).toBe(h.workflow.starts[0]?.executionArn);
    // A third try finds the execution recorded and starts nothing.
    await call(h, submit(KEY));
    expect(start).toHaveBeenCalledTimes(1);
  });

  it('answers a repeat of a submit whose execution could not start with that job, and starts nothing again', async () => {
    const h = harness();
    h.workflow.failNextStart(new Error('Step Functions is down'));
    const start = vi.spyOn(h.workflow, 'start');
    const first = await call(h, submit(KEY));
    expect(first.statusCode).toBe(500);

    const again = await call(h, submit(KEY));

    expect(again.statusCode).toBe(202);
    expect((await h.store.getJob(String(again.json.jobId))).status).toBe(JobStatus.FAILED_CONTROLLER);
    expect(start).toHaveBeenCalledTimes(1);
  });
});

describe('POST /jobs with a key that is not one', () => {
  it.each([
    ['empty', ''],
    ['empty in quotes', '""'],
    ['one character too long', 'k'.repeat(MAX_IDEMPOTENCY_KEY_LENGTH + 1)],
    ['100 000 characters long', 'k'.repeat(100_000)],
    ['holding a NUL', 'abc\u0000def'],
    ['holding a newline (a header split)', 'abc\r\nX-Injected: 1'],
    ['holding a tab', 'abc\tdef'],
    ['holding an escape sequence', 'abc\u001b[31mred'],
    ['holding DEL', 'abc\u007f'],
    ['holding a space', 'abc def'],
    ['holding non-ASCII text', 'ключ-1'],
    ['holding a quote inside quotes', '"abc"def"'],
    ['holding a backslash inside quotes', '"abc\\def"'],
  ])('answers 400 naming the header for a key %s, and touches nothing', async (_what, key) => {
    const h = harness();

    const answer = await call(h, submit(key));

    expect(answer.statusCode).toBe(400);
    expect(answer.json.issues).toEqual([{ path: IDEMPOTENCY_KEY_HEADER, message: expect.stringMatching(/^expected 1-255 visible ASCII characters/) }]);
    // The answer never repeats the key: it may be huge, or hold escape sequences.
    if (key.length > 3) expect(answer.body).not.toContain(key.slice(1, -1));
    expect(await h.store.listJobs()).toEqual([]);
    expect(h.workflow.starts).toEqual([]);
  });

  it('says how long a key is, and where a bad character sits', async () => {
    const h = harness();
    expect((await call(h, submit('k'.repeat(300)))).json.issues?.[0]?.message).toContain('got 300 characters');
    expect((await call(h, submit('ab\u0000c'))).json.issues?.[0]?.message).toContain('got a control character (U+0000) at position 3');
  });

  it('takes a key of exactly 255 visible characters', async () => {
    const h = harness();
    const key = Array.from({ length: MAX_IDEMPOTENCY_KEY_LENGTH }, (_, i) => String.fromCharCode(0x21 + (i % 94))).join('');
    expect((await call(h, submit(key))).statusCode).toBe(202);
  });
});
