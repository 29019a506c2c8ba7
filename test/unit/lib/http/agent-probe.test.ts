// The agent routes against a caller probing for job ids: they need no AWS credentials, so
// whatever a caller without the secret asks, the answer must not say whether the job (or
// the attempt) exists. Over both stores, since each reports "missing" its own way.

import { describe, expect, it } from 'vitest';
import { InMemoryJobStore } from '../../../../lib/adapters/memory-job-store.ts';
import { DynamoJobStore } from '../../../../lib/adapters/dynamo-job-store/index.ts';
import { authorizationHeader } from '../../../../lib/agent/protocol.ts';
import { handleApiRequest, UNAUTHORIZED_MESSAGE, type ApiRequest } from '../../../../lib/http/index.ts';
import type { JobStore } from '../../../../lib/ports.ts';
import { useDynalite } from '../../../support/fixtures/dynalite.ts';
import { givenLaunched, harness, JOB_ID, type Harness } from '../../../support/usecases-harness.ts';

const dynalite = useDynalite();

/** Same shape as JOB_ID, never stored. */
const MISSING_JOB = 'j-00mm8abcd-nojob0';

const BODIES = {
  heartbeat: { nodeRank: 0 },
  report: { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: '' },
} as const;

function callback(jobId: string, attempt: number, kind: keyof typeof BODIES, authorization?: string): ApiRequest {
  return {
    method: 'POST',
    path: `/jobs/${jobId}/attempts/${attempt}/${kind}`,
    headers: { 'content-type': 'application/json', ...(authorization === undefined ? {} : { authorization }) },
    body: JSON.stringify(BODIES[kind]),
  };
}

/** What a prober sees: everything in the answer. */
async function seen(h: Harness, request: ApiRequest) {
  const response = await handleApiRequest(request, h.deps);
  return { statusCode: response.statusCode, headers: response.headers, body: response.body };
}

describe.each<[string, () => Promise<JobStore>]>([
  ['in memory', async () => new InMemoryJobStore()],
  ['on DynamoDB (dynalite)', async () => new DynamoJobStore({ client: dynalite.client(), tableName: await dynalite.freshTable('probe') })],
])('the agent routes, %s', (_name, makeStore) => {
  it.each(['heartbeat', 'report'] as const)('answer a %s for a missing job exactly as one with a wrong secret for a real job', async (kind) => {
    const h = harness(await makeStore());
    await givenLaunched(h);
    const wrong = authorizationHeader('f'.repeat(64));

    const answers = [
      await seen(h, callback(JOB_ID, 1, kind, wrong)),
      await seen(h, callback(MISSING_JOB, 1, kind, wrong)),
      // An attempt the real job never started, and a number no job has.
      await seen(h, callback(JOB_ID, 2, kind, wrong)),
      await seen(h, callback(MISSING_JOB, 2, kind, wrong)),
      await seen(h, callback(JOB_ID, 999_999_999, kind, wrong)),
    ];

    const expected = { statusCode: 401, headers: answers[0]?.headers, body: JSON.stringify({ error: UNAUTHORIZED_MESSAGE }) };
    for (const answer of answers) expect(answer).toEqual(expected);
    expect(h.workflow.closings).toEqual([]);
  });

  it('answers a callback with no bearer secret the same for a real job and a missing one', async () => {
    const h = harness(await makeStore());
    await givenLaunched(h);

    const real = await seen(h, callback(JOB_ID, 1, 'heartbeat'));
    const missing = await seen(h, callback(MISSING_JOB, 1, 'heartbeat', 'Basic abc'));

    expect(real).toEqual(missing);
    expect(real.statusCode).toBe(401);
  });

  it('says that a rank is out of range only to a caller that holds the secret', async () => {
    const h = harness(await makeStore());
    await givenLaunched(h);
    const request = (jobId: string, secret: string): ApiRequest => ({
      ...callback(jobId, 1, 'heartbeat', authorizationHeader(secret)),
      body: JSON.stringify({ nodeRank: 5 }),
    });

    expect((await seen(h, request(MISSING_JOB, 'f'.repeat(64)))).statusCode).toBe(401);
    expect((await seen(h, request(JOB_ID, 'f'.repeat(64)))).statusCode).toBe(401);
    const holder = await seen(h, request(JOB_ID, h.compute.secretFor(JOB_ID, 1)));
    expect(holder.statusCode).toBe(400);
    expect(holder.body).toContain('nodeRank');
  });

  it('still lets the real agent in', async () => {
    const h = harness(await makeStore());
    await givenLaunched(h);
    const answer = await seen(h, callback(JOB_ID, 1, 'heartbeat', authorizationHeader(h.compute.secretFor(JOB_ID, 1))));
    expect(answer.statusCode).toBe(200);
  });
});
