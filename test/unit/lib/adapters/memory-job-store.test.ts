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

  it('moves a kept instance to the attempt that reuses it when that attempt is placed, and keeps its reusedFrom', async () => {
    const store = new InMemoryJobStore();
    const at = '2026-03-01T12:00:00.000Z';
    const placement = { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm5.large' };
    const attempt = (number: number) => ({
      jobId: 'job-1', attempt: number, task: null, market: 'spot' as const, placement: null, instances: [], secretHash: 'h', taskToken: null,
      tokenState: null, startedAt: at, endedAt: null, lastHeartbeatAt: null, nodesHeardFrom: [], interruptionNoticedAt: null, reports: [], outcome: null, decision: null,
    });
    await store.createJob(job);
    await store.putAttempt(attempt(1));
    await store.setInstances('job-1', 1, placement, [{ instanceId: 'i-kept', nodeRank: 0, privateIp: '10.0.0.1' }, { instanceId: 'i-gone', nodeRank: 1, privateIp: '10.0.0.2' }]);
    await store.endAttempt('job-1', 1, { kind: 'LOST', reason: 'instance i-gone was terminated', nodes: [1] }, at);
    await store.putAttempt(attempt(2));
    await store.setInstances('job-1', 2, placement, [{ instanceId: 'i-kept', nodeRank: 0, privateIp: '10.0.0.1', reusedFrom: 1 }, { instanceId: 'i-new', nodeRank: 1, privateIp: '10.0.0.3' }]);

    expect((await store.findAttemptByInstance('i-kept'))?.attempt).toBe(2);
    expect((await store.findAttemptByInstance('i-gone'))?.attempt).toBe(1);
    expect((await store.getAttempt('job-1', 2)).instances[0]).toEqual({ instanceId: 'i-kept', nodeRank: 0, privateIp: '10.0.0.1', reusedFrom: 1 });
  });
});
