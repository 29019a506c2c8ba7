// InMemoryJobStore against the JobStore contract, plus what only the in-memory store promises.

import { describe, expect, it } from 'vitest';
import { InMemoryJobStore } from '../../../lib/adapters/memory-job-store.ts';
import type { JobRecord } from '../../../lib/model.ts';
import { describeJobStoreContract, richSpec } from './job-store.contract.ts';

describeJobStoreContract('InMemoryJobStore', () => new InMemoryJobStore());

const job: JobRecord = {
  jobId: 'job-1',
  name: null,
  spec: richSpec,
  status: 'PENDING',
  counters: { restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 0, consecutivePreemptions: 0, market: 'spot' },
  attemptCount: 0,
  executionArn: null,
  failureReason: null,
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
};

describe('InMemoryJobStore', () => {
  it('hands out deep-frozen records, so a caller cannot change stored state by accident', async () => {
    const store = new InMemoryJobStore();
    await store.createJob(job);
    const stored = await store.getJob('job-1');
    expect(Object.isFrozen(stored)).toBe(true);
    expect(Object.isFrozen(stored.spec.resources.jobRecovery.recoverOnExitCodes)).toBe(true);
    expect(Object.isFrozen(job)).toBe(false);
  });

  it('keeps stores apart: each instance is its own database', async () => {
    const a = new InMemoryJobStore();
    const b = new InMemoryJobStore();
    await a.createJob(job);
    expect(await b.listJobs()).toEqual([]);
  });
});
