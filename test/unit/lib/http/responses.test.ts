// The error-to-status table: 409 is the agent's "stop retrying", so only a stale attempt answers it there.

import { describe, expect, it } from 'vitest';
import { authorizationHeader, STALE_ATTEMPT_STATUS } from '../../../../lib/agent/protocol.ts';
import { InMemoryJobStore } from '../../../../lib/adapters/memory-job-store.ts';
import {
  ConcurrentUpdateError,
  IllegalTransitionError,
  JobAlreadyFinishedError,
  StaleAttemptError,
  TransientError,
} from '../../../../lib/errors.ts';
import { handleApiRequest } from '../../../../lib/http/index.ts';
import { errorResponse } from '../../../../lib/http/responses.ts';
import type { AttemptRecord, NodeReport } from '../../../../lib/model.ts';
import { hashSecret } from '../../../../lib/secrets.ts';
import { JOB_STATUSES } from '../../../../lib/status.ts';
import { newJobRecord } from '../../../../lib/usecases/submit-job.ts';
import { attemptRecord } from '../../../support/fixtures/records.ts';
import { givenLaunched, harness, JOB_ID, taskSpec } from '../../../support/usecases-harness.ts';

describe('errorResponse', () => {
  it.each([
    ['a stale attempt', new StaleAttemptError('attempt 1 has ended'), STALE_ATTEMPT_STATUS],
    ['an illegal transition (user routes only)', new IllegalTransitionError('SUCCEEDED', 'CANCELLING'), 409],
    ['a job already finished', new JobAlreadyFinishedError('done'), 409],
    ['a lost race', new ConcurrentUpdateError('job changed meanwhile'), 503],
    ['a throttle that outlasted the SDK\'s retries', new TransientError('DynamoDB GetItem: throttled'), 503],
  ])('answers %s with %i', (_what, error, status) => {
    expect(errorResponse(error)?.statusCode).toBe(status);
  });

  it('asks the caller to come back after a lost race, and says so only then', () => {
    expect(errorResponse(new ConcurrentUpdateError('x'))?.headers['retry-after']).toBe('1');
    expect(errorResponse(new TransientError('x'))?.headers['retry-after']).toBe('1');
    expect(errorResponse(new StaleAttemptError('x'))?.headers['retry-after']).toBeUndefined();
  });
});

/** A store where one report loses a race (DynamoDB refused it for no stored reason). */
class ReportLosesRace extends InMemoryJobStore {
  losing = false;
  override async addReport(jobId: string, attempt: number, report: NodeReport): Promise<{ attempt: AttemptRecord; duplicate: boolean }> {
    if (this.losing) throw new ConcurrentUpdateError(`report for attempt ${attempt} of job ${jobId} was refused`);
    return super.addReport(jobId, attempt, report);
  }
}

describe('an agent report that loses a race', () => {
  it('is answered 503 (retried by the agent), not 409 (dropped), and lands when sent again', async () => {
    const h = harness();
    const store = new ReportLosesRace();
    const world = { ...h, store, deps: { ...h.deps, store } };
    await givenLaunched(world);
    const secret = h.compute.secretFor(JOB_ID, 1);
    const report = {
      method: 'POST',
      path: `/jobs/${JOB_ID}/attempts/1/report`,
      headers: { Authorization: authorizationHeader(secret), 'Content-Type': 'application/json' },
      body: JSON.stringify({ nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: '' }),
    };

    store.losing = true;
    const lost = await handleApiRequest(report, world.deps);
    store.losing = false;
    const again = await handleApiRequest(report, world.deps);

    expect(lost.statusCode).toBe(503);
    expect(lost.statusCode).not.toBe(STALE_ATTEMPT_STATUS);
    expect(again.statusCode).toBeLessThan(300);
    expect((await store.getAttempt(JOB_ID, 1)).reports).toHaveLength(1);
  });
});

describe('the agent\'s routes', () => {
  // Why IllegalTransitionError may keep 409: the agent's routes only ever ask STARTING ->
  // RUNNING, legal by the table, so whatever status the job is in they never raise it.
  it.each(JOB_STATUSES)('never answer an illegal transition, with the job %s', async (status) => {
    const h = harness();
    await h.store.createJob({ ...newJobRecord(JOB_ID, taskSpec(), '2026-03-01T11:00:00.000Z'), status });
    await h.store.putAttempt(attemptRecord(JOB_ID, 1, '2026-03-01T11:00:01.000Z', { secretHash: hashSecret('s3cret') }));
    const headers = { Authorization: authorizationHeader('s3cret'), 'Content-Type': 'application/json' };
    const post = (kind: string, body: unknown) =>
      handleApiRequest({ method: 'POST', path: `/jobs/${JOB_ID}/attempts/1/${kind}`, headers, body: JSON.stringify(body) }, h.deps);

    const answers = [
      await post('heartbeat', { nodeRank: 0 }),
      await post('report', { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: '' }),
      await post('report', { nodeRank: 0, phase: 'run', exitCode: 0, outputTail: '' }),
    ];
    for (const answer of answers) expect(answer.body).not.toMatch(/cannot go from/);
  });
});
