// InMemoryJobStore against the JobStore contract, plus what only the in-memory store promises.

import { describe, expect, it } from 'vitest';
import { InMemoryJobStore } from '../../../../lib/adapters/memory-job-store.ts';
import { describeJobStoreContract, sampleJob as job } from '../../../support/job-store.contract.ts';

describeJobStoreContract('InMemoryJobStore', () => new InMemoryJobStore());

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
