// The API layer over in-memory ports: routing, parsing, and the error-to-status table.

import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { AGENT_LIBRARY } from '../../../../lib/agent/script.ts';
import { authorizationHeader } from '../../../../lib/agent/protocol.ts';
import { handleApiRequest, INTERNAL_ERROR_MESSAGE, MAX_BODY_BYTES, UNAUTHORIZED_MESSAGE, type ApiDeps, type ApiRequest } from '../../../../lib/http/index.ts';
import { JobStatus } from '../../../../lib/status.ts';
import { WorkflowError } from '../../../../lib/workflow/contract.ts';
import { givenJob, givenLaunched, givenReplacedAttempt, harness, JOB_ID, tokenFor, type Harness } from '../../../support/usecases-harness.ts';

const GOOD_TASK = 'name: train\nresources:\n  cpus: 2\nrun: python train.py\n';

function request(method: string, path: string, init: Partial<ApiRequest> = {}): ApiRequest {
  return { method, path, headers: {}, ...init };
}

function deps(h: Harness, onUnexpectedError?: ApiDeps['onUnexpectedError']): ApiDeps {
  return { ...h.deps, onUnexpectedError };
}

async function call(h: Harness, req: ApiRequest) {
  const response = await handleApiRequest(req, deps(h));
  return { ...response, json: response.body === '' ? undefined : (JSON.parse(response.body) as Record<string, unknown>) };
}

/** A job with attempt 1 launched and awaited; the agent's secret for it. */
async function running(h: Harness): Promise<string> {
  await givenLaunched(h);
  return h.compute.secretFor(JOB_ID, 1);
}

const agent = (secret: string, body: unknown, attempt = 1, kind = 'report') =>
  request('POST', `/jobs/${JOB_ID}/attempts/${attempt}/${kind}`, {
    headers: { Authorization: authorizationHeader(secret), 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });

describe('POST /jobs', () => {
  it('accepts a YAML task with 202 and the new job id, and starts its execution', async () => {
    const h = harness();
    const res = await call(h, request('POST', '/jobs', { body: GOOD_TASK, headers: { 'content-type': 'text/yaml' } }));
    expect(res.statusCode).toBe(202);
    expect(res.json).toMatchObject({ jobId: expect.stringMatching(/^j-/), warnings: [] });
    expect(h.workflow.starts.map((s) => s.executionName)).toEqual([res.json?.jobId]);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
  });

  it('accepts a JSON task when the content type says JSON', async () => {
    const h = harness();
    const body = JSON.stringify({ name: 'train', run: 'python train.py' });
    const res = await call(h, request('POST', '/jobs', { body, headers: { 'Content-Type': 'application/json' } }));
    expect(res.statusCode).toBe(202);
  });

  it('answers 400 with every issue, located by path and line, for a bad task', async () => {
    const h = harness();
    const res = await call(h, request('POST', '/jobs', { body: 'run: x\nresources:\n  cloud: gcp\n  bogus_key: 1\n' }));
    expect(res.statusCode).toBe(400);
    expect(res.json?.error).toMatch(/task is not valid/);
    const issues = res.json?.issues as { path: string; message: string; line?: number }[];
    expect(issues.length).toBeGreaterThanOrEqual(1);
    expect(issues).toContainEqual(expect.objectContaining({ path: 'resources.bogus_key', line: 4 }));
    expect(h.workflow.starts).toEqual([]);
  });

  it('answers 400 for malformed JSON, naming the body', async () => {
    const h = harness();
    const res = await call(h, request('POST', '/jobs', { body: '{"run":', headers: { 'content-type': 'application/json' } }));
    expect(res.statusCode).toBe(400);
    expect(res.json?.issues).toEqual([expect.objectContaining({ path: '', message: expect.stringMatching(/^expected a JSON body/) })]);
  });

  it('answers 413 for a body over the limit, before parsing it', async () => {
    const h = harness();
    const res = await call(h, request('POST', '/jobs', { body: `run: "${'x'.repeat(MAX_BODY_BYTES)}"` }));
    expect(res.statusCode).toBe(413);
    expect(h.workflow.starts).toEqual([]);
  });
});

describe('reading and cancelling jobs', () => {
  it('GET /jobs/{id} answers the job view; an unknown id is 404', async () => {
    const h = harness();
    await running(h);
    const res = await call(h, request('GET', `/jobs/${JOB_ID}`));
    expect(res.statusCode).toBe(200);
    expect(res.json).toMatchObject({ jobId: JOB_ID, status: JobStatus.STARTING, attempts: [expect.objectContaining({ attempt: 1 })] });
    const missing = await call(h, request('GET', '/jobs/j-nope'));
    expect(missing.statusCode).toBe(404);
    expect(missing.json?.error).toContain('j-nope');
  });

  it('GET /jobs lists jobs, honours ?limit and refuses a bad one', async () => {
    const h = harness();
    await givenJob(h, undefined, 'j-a');
    await givenJob(h, undefined, 'j-b');
    expect((await call(h, request('GET', '/jobs'))).json?.jobs).toHaveLength(2);
    expect((await call(h, request('GET', '/jobs?limit=1'))).json?.jobs).toHaveLength(1);
    const bad = await call(h, request('GET', '/jobs?limit=0'));
    expect(bad.statusCode).toBe(400);
    expect(bad.json?.issues).toEqual([expect.objectContaining({ path: 'limit' })]);
  });

  it('DELETE /jobs/{id} cancels a running job (202) and fails its waiting task; again it is a no-op', async () => {
    const h = harness();
    await running(h);
    const res = await call(h, request('DELETE', `/jobs/${JOB_ID}`));
    expect(res.statusCode).toBe(202);
    expect(res.json).toMatchObject({ jobId: JOB_ID, status: JobStatus.CANCELLING, alreadyFinished: false });
    expect(h.workflow.closingOf(tokenFor(1))).toMatchObject({ kind: 'fail', error: WorkflowError.JobCancelled });
    expect((await call(h, request('DELETE', `/jobs/${JOB_ID}`))).statusCode).toBe(202);
    expect(h.workflow.closings).toHaveLength(1);
  });
});

describe('agent callbacks', () => {
  it('stores a report once: the first is accepted and resumes the task, a repeat is a duplicate', async () => {
    const h = harness();
    const secret = await running(h);
    const body = { nodeRank: 0, phase: 'run', exitCode: 0, outputTail: 'done' };
    await call(h, agent(secret, { ...body, phase: 'setup' }));
    const first = await call(h, agent(secret, body));
    expect(first).toMatchObject({ statusCode: 200, json: { status: 'accepted' } });
    const again = await call(h, agent(secret, body));
    expect(again).toMatchObject({ statusCode: 200, json: { status: 'duplicate' } });
    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'EXITED' } }]);
  });

  it('answers 401 with one message for a wrong, missing or unissued secret', async () => {
    const h = harness();
    await running(h);
    const body = { nodeRank: 0, phase: 'run', exitCode: 0, outputTail: '' };
    const wrong = await call(h, agent('not-the-secret', body));
    const unissued = await call(h, agent('not-the-secret', body, 7));
    const missing = await call(h, { ...agent('x', body), headers: { 'content-type': 'application/json' } });
    for (const res of [wrong, unissued, missing]) expect(res).toMatchObject({ statusCode: 401, json: { error: UNAUTHORIZED_MESSAGE } });
    expect(h.workflow.closings).toEqual([]);
  });

  it('answers 409 to a report for an attempt that has ended with a different code', async () => {
    const h = harness();
    const secret = await running(h);
    await call(h, agent(secret, { nodeRank: 0, phase: 'setup', exitCode: 3, outputTail: '' }));
    const late = await call(h, agent(secret, { nodeRank: 0, phase: 'run', exitCode: 0, outputTail: '' }));
    expect(late.statusCode).toBe(409);
  });

  it('answers 400 naming each bad field of a report body, and for a bad attempt number', async () => {
    const h = harness();
    const secret = await running(h);
    const res = await call(h, agent(secret, { nodeRank: -1, phase: 'teardown', exitCode: 300 }));
    expect(res.statusCode).toBe(400);
    const paths = (res.json?.issues as { path: string }[]).map((issue) => issue.path).sort();
    expect(paths).toEqual(['exitCode', 'nodeRank', 'outputTail', 'phase']);
    const badAttempt = await call(h, request('POST', `/jobs/${JOB_ID}/attempts/zero/report`, { body: '{}' }));
    expect(badAttempt.statusCode).toBe(400);
  });

  it('accepts a stopped run with its last lines, resumes nothing, and answers a repeat as a duplicate', async () => {
    const h = harness();
    const secret = await running(h);
    await call(h, agent(secret, { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: '' }));
    const stop = { nodeRank: 0, phase: 'run', stopped: 'interruption', outputTail: 'step 9\n' };
    expect(await call(h, agent(secret, stop))).toMatchObject({ statusCode: 200, json: { status: 'accepted' } });
    expect(await call(h, agent(secret, stop))).toMatchObject({ statusCode: 200, json: { status: 'duplicate' } });
    expect(h.workflow.closings).toEqual([]);
  });

  it("accepts a report of the agent's own failure before setup, beside the old format, and ends the attempt AGENT_FAILED", async () => {
    const h = harness();
    const secret = await running(h);
    const failure = { nodeRank: 0, phase: 'setup', agentFailure: { step: 'mounts', error: 'nothing at s3://data/typo/' }, outputTail: 'relaunch: nothing at s3://data/typo/' };
    expect(await call(h, agent(secret, failure))).toMatchObject({ statusCode: 200, json: { status: 'accepted' } });
    expect(await call(h, agent(secret, failure))).toMatchObject({ statusCode: 200, json: { status: 'duplicate' } });
    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'AGENT_FAILED' } }]);
  });

  it.each([
    ['neither an exit code nor an agent failure', { nodeRank: 0, phase: 'setup', outputTail: '' }, 'exitCode', 'expected an exit code 0-255, or agentFailure when the agent failed before setup'],
    ['both', { nodeRank: 0, phase: 'setup', exitCode: 1, agentFailure: { step: 'mounts', error: 'x' }, outputTail: '' }, 'agentFailure', 'expected either exitCode or agentFailure, got both'],
    ['an agent failure in run', { nodeRank: 0, phase: 'run', agentFailure: { step: 'mounts', error: 'x' }, outputTail: '' }, 'phase', "expected setup with agentFailure (the agent's steps come before it), got run"],
    ['a stop beside an exit code', { nodeRank: 0, phase: 'run', exitCode: 143, stopped: 'shutdown', outputTail: '' }, 'stopped', 'expected stopped alone, without exitCode or agentFailure (a stopped phase has no code)'],
    ['a stop the agent does not know', { nodeRank: 0, phase: 'run', stopped: 'reboot', outputTail: '' }, 'stopped', expect.stringContaining('interruption')],
    ['a step the agent does not have', { nodeRank: 0, phase: 'setup', agentFailure: { step: 'reboot', error: 'x' }, outputTail: '' }, 'agentFailure.step', expect.stringContaining('image-pull')],
  ])('answers 400 to a report with %s, naming the field', async (_name, body, path, message) => {
    const h = harness();
    const secret = await running(h);
    const res = await call(h, agent(secret, body));
    expect(res).toMatchObject({ statusCode: 400, json: { issues: [{ path, message }] } });
    expect(h.workflow.closings).toEqual([]);
  });

  it('passes a heartbeat to the waiting task', async () => {
    const h = harness();
    const secret = await running(h);
    const res = await call(h, agent(secret, { nodeRank: 0 }, 1, 'heartbeat'));
    expect(res.statusCode).toBe(200);
    expect(h.workflow.heartbeats).toEqual([tokenFor(1)]);
  });
});

describe('POST /jobs/{id}/attempts/{n}/next', () => {
  it("answers an ended attempt's node with its own secret, refuses a wrong one, and names a bad body's field", async () => {
    const h = harness();
    const secret = await running(h);
    expect((await call(h, agent(secret, { nodeRank: 0, phase: 'run', exitCode: 3, outputTail: '' }))).statusCode).toBe(200);

    const asked = await call(h, agent(secret, { nodeRank: 0 }, 1, 'next'));
    expect(asked.statusCode).toBe(200);
    expect(asked.json).toMatchObject({ next: expect.stringMatching(/^(wait|stop)$/), reason: expect.any(String) });
    expect((await call(h, agent('wrong', { nodeRank: 0 }, 1, 'next'))).statusCode).toBe(401);
    const bad = await call(h, agent(secret, { nodeRank: 'zero' }, 1, 'next'));
    expect(bad.statusCode).toBe(400);
    expect(bad.json?.issues).toEqual([expect.objectContaining({ path: 'nodeRank' })]);
  });
});

describe('POST /jobs/{id}/attempts/{n}/data-credentials', () => {
  const ISSUED = { Version: 1, AccessKeyId: 'ASIADATA', SecretAccessKey: 's', SessionToken: 't', Expiration: '2026-12-03T15:00:00.000Z' } as const;

  /** A DataAccess that records whom it gave credentials to. */
  function recordingAccess(): NonNullable<ApiDeps['dataAccess']> & { readonly given: [string, number][] } {
    const given: [string, number][] = [];
    return {
      given,
      credentialsFor: async (job, attempt) => {
        given.push([job.jobId, attempt]);
        return ISSUED;
      },
    };
  }

  const ask = async (h: Harness, access: ApiDeps['dataAccess'], req: ApiRequest) => {
    const response = await handleApiRequest(req, { ...h.deps, dataAccess: access });
    return { ...response, json: JSON.parse(response.body) as Record<string, unknown> };
  };

  it("answers the live attempt's agent with its job's credentials, never to be cached", async () => {
    const h = harness();
    const secret = await running(h);
    const access = recordingAccess();
    const res = await ask(h, access, agent(secret, { nodeRank: 0 }, 1, 'data-credentials'));
    expect(res).toMatchObject({ statusCode: 200, json: ISSUED });
    expect(res.headers['cache-control']).toBe('no-store');
    expect(access.given).toEqual([[JOB_ID, 1]]);
  });

  it('gives nothing to a wrong or missing secret (401), a stale or ended attempt (409), or a bad body (400)', async () => {
    const h = harness();
    const secret = await running(h);
    const access = recordingAccess();
    const wrong = await ask(h, access, agent('not-the-secret', { nodeRank: 0 }, 1, 'data-credentials'));
    const missing = await ask(h, access, { ...agent(secret, { nodeRank: 0 }, 1, 'data-credentials'), headers: { 'content-type': 'application/json' } });
    const badBody = await ask(h, access, agent(secret, { nodeRank: 5 }, 1, 'data-credentials'));
    const notJson = await ask(h, access, { ...agent(secret, {}, 1, 'data-credentials'), body: 'nodeRank=0' });
    expect([wrong.statusCode, missing.statusCode, badBody.statusCode, notJson.statusCode]).toEqual([401, 401, 400, 400]);
    expect(badBody.json.issues).toEqual([{ path: 'nodeRank', message: 'expected 0 (the job has 1 node), got 5' }]);
    await call(h, agent(secret, { nodeRank: 0, phase: 'setup', exitCode: 3, outputTail: '' }));
    const ended = await ask(h, access, agent(secret, { nodeRank: 0 }, 1, 'data-credentials'));
    expect(ended.statusCode).toBe(409);
    expect(access.given).toEqual([]);
  });

  it("answers 409 to a stale attempt's agent once the next attempt is live", async () => {
    const h = harness();
    const secret = await running(h);
    await givenReplacedAttempt(h);
    const access = recordingAccess();
    const stale = await ask(h, access, agent(secret, { nodeRank: 0 }, 1, 'data-credentials'));
    expect(stale).toMatchObject({ statusCode: 409, json: { error: expect.stringContaining('attempt 2 is the live one') } });
    expect(access.given).toEqual([]);
  });

  it('answers 404 with why where the API gives no data credentials (the local runtime)', async () => {
    const h = harness();
    const secret = await running(h);
    const res = await ask(h, undefined, agent(secret, { nodeRank: 0 }, 1, 'data-credentials'));
    expect(res).toMatchObject({ statusCode: 404, json: { error: expect.stringContaining('gives no data credentials') } });
  });
});

describe('POST /jobs/{id}/attempts/{n}/log-credentials and .../shipper', () => {
  const ISSUED = { Version: 1, AccessKeyId: 'ASIALOGS', SecretAccessKey: 's', SessionToken: 't', Expiration: '2026-12-07T15:00:00.000Z' } as const;

  /** A LogAccess that records which node it gave credentials to. */
  function recordingLogs(): NonNullable<ApiDeps['logAccess']> & { readonly given: [string, number, number][] } {
    const given: [string, number, number][] = [];
    return {
      given,
      credentialsFor: async (job, attempt, nodeRank) => {
        given.push([job.jobId, attempt, nodeRank]);
        return ISSUED;
      },
    };
  }

  const ask = async (h: Harness, access: ApiDeps['logAccess'], req: ApiRequest) => handleApiRequest(req, { ...h.deps, ...(access === undefined ? {} : { logAccess: access }) });

  it("answers the live attempt's node with credentials for its own streams, never to be cached, and the shipper's program pinned by the agent", async () => {
    const h = harness();
    const secret = await running(h);
    const access = recordingLogs();
    const res = await ask(h, access, agent(secret, { nodeRank: 0 }, 1, 'log-credentials'));
    expect(res.statusCode).toBe(200);
    expect(JSON.parse(res.body)).toEqual(ISSUED);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(access.given).toEqual([[JOB_ID, 1, 0]]);
    const program = await ask(h, access, agent(secret, { nodeRank: 0 }, 1, 'shipper'));
    expect(program.statusCode).toBe(200);
    expect(program.body).toBe(AGENT_LIBRARY.program);
    expect(createHash('sha256').update(program.body).digest('hex')).toBe(AGENT_LIBRARY.sha256);
  });

  it('gives nothing to a wrong secret (401), a rank the job does not have (400) or an ended attempt (409)', async () => {
    const h = harness();
    const secret = await running(h);
    const access = recordingLogs();
    const wrong = await ask(h, access, agent('not-the-secret', { nodeRank: 0 }, 1, 'log-credentials'));
    const badRank = await ask(h, access, agent(secret, { nodeRank: 5 }, 1, 'log-credentials'));
    const wrongForProgram = await ask(h, access, agent('not-the-secret', { nodeRank: 0 }, 1, 'shipper'));
    expect([wrong.statusCode, badRank.statusCode, wrongForProgram.statusCode]).toEqual([401, 400, 401]);
    await call(h, agent(secret, { nodeRank: 0, phase: 'setup', exitCode: 3, outputTail: '' }));
    expect((await ask(h, access, agent(secret, { nodeRank: 0 }, 1, 'log-credentials'))).statusCode).toBe(409);
    expect(access.given).toEqual([]);
  });

  it("answers 404 with why to log credentials where nothing ships (the local runtime), and serves the agent's library all the same (its tools' installs)", async () => {
    const h = harness();
    const secret = await running(h);
    const res = await ask(h, undefined, agent(secret, { nodeRank: 0 }, 1, 'log-credentials'));
    expect(res.statusCode).toBe(404);
    expect(JSON.parse(res.body)).toEqual({ error: expect.stringContaining('ships no job output to CloudWatch Logs') });
    const library = await ask(h, undefined, agent(secret, { nodeRank: 0 }, 1, 'shipper'));
    expect(library.statusCode).toBe(200);
    expect(library.body).toBe(AGENT_LIBRARY.program);
    expect((await ask(h, undefined, agent('not-the-secret', { nodeRank: 0 }, 1, 'shipper'))).statusCode).toBe(401);
  });
});

describe('routing and unexpected errors', () => {
  it.each([
    ['GET', '/nothing', 404],
    ['GET', '/jobs/a/b', 404],
    ['PUT', '/jobs', 405],
    ['GET', `/jobs/${JOB_ID}/attempts/1/report`, 405],
  ])('%s %s answers %i', async (method, path, status) => {
    const res = await call(harness(), request(method, path));
    expect(res.statusCode).toBe(status);
  });

  it('says which methods a path allows on 405', async () => {
    const res = await call(harness(), request('PATCH', '/jobs/x'));
    expect(res.headers.allow).toBe('GET, DELETE');
  });

  it('decodes path segments, and answers 404 to a malformed escape', async () => {
    const h = harness();
    await givenJob(h);
    expect((await call(h, request('GET', `/jobs/${JOB_ID.slice(0, -1)}%${JOB_ID.charCodeAt(JOB_ID.length - 1).toString(16)}`))).statusCode).toBe(200);
    expect((await call(h, request('GET', '/jobs/%E0%A4%A'))).statusCode).toBe(404);
  });

  it('answers a generic 500 with no stack or message, and reports the error to the caller', async () => {
    const h = harness();
    const seen: unknown[] = [];
    h.store.getJob = () => Promise.reject(new Error('secret detail at /x.ts:1'));
    const res = await handleApiRequest(request('GET', `/jobs/${JOB_ID}`), deps(h, (error) => seen.push(error)));
    expect(res.statusCode).toBe(500);
    expect(JSON.parse(res.body)).toEqual({ error: INTERNAL_ERROR_MESSAGE });
    expect(res.body).not.toContain('secret detail');
    expect(seen).toHaveLength(1);
  });
});

describe('GET /sources', () => {
  it('says where relaunch run uploads, when the API has a bucket for it', async () => {
    const h = harness();
    const sources = { bucket: 'relaunch-data-1', prefix: 'sources', region: 'eu-west-1', allowedBuckets: ['team-*'] };
    const response = await handleApiRequest(request('GET', '/sources'), { ...deps(h), sources });
    expect(response.statusCode).toBe(200);
    expect(JSON.parse(response.body)).toEqual(sources);
  });

  it('answers 404 with why when it has none (the local runtime)', async () => {
    const res = await call(harness(), request('GET', '/sources'));
    expect(res.statusCode).toBe(404);
    expect(res.json?.error).toMatch(/keeps no uploads in S3/);
  });
});
