// The janitor's sweep: which tagged instances go, which stay, and that one failed release
// does not stop the rest.

import { describe, expect, it } from 'vitest';
import type { InstanceInventory, TaggedInstance } from '../../../../lib/ports.ts';
import { SWEEP_BUDGET_SECONDS, SWEEP_GRACE_SECONDS, sweepInstances } from '../../../../lib/usecases/sweep-instances.ts';
import { fakeInstanceId } from '../../../support/fakes/fake-compute.ts';
import { evaluatePolicy } from '../../../../lib/usecases/evaluate-policy.ts';
import { releaseInstances } from '../../../../lib/usecases/release-instances.ts';
import type { WorkflowState } from '../../../../lib/workflow/contract.ts';
import { givenJob, givenLaunched, harness, initialState, JOB_ID, launchAndAwait, report, taskSpec, type Harness } from '../../../support/usecases-harness.ts';

/** An inventory that lists what the test put in it. */
class ListedInventory implements InstanceInventory {
  constructor(readonly instances: TaggedInstance[] = []) {}
  async listTagged(): Promise<TaggedInstance[]> {
    return this.instances;
  }
}

/** Attempt `attempt`'s node `rank` of `jobId`, launched `minutesAgo` before the clock's now. */
function tagged(h: Harness, jobId: string, attempt: number | null, minutesAgo: number, rank = 0): TaggedInstance {
  return {
    instanceId: fakeInstanceId(jobId, attempt ?? 0, rank),
    region: 'us-east-1',
    jobId,
    attempt,
    launchedAt: new Date(h.clock.now().getTime() - minutesAgo * 60_000).toISOString(),
  };
}

function sweep(h: Harness, inventory: InstanceInventory) {
  return sweepInstances({ store: h.store, compute: h.compute, clock: h.clock, inventory });
}

describe('sweepInstances', () => {
  it('releases the instances of an attempt that ended more than the grace period ago, once per attempt', async () => {
    const h = harness();
    await givenLaunched(h);
    await report(h, 1, 'run', 0);
    h.clock.advance(SWEEP_GRACE_SECONDS + 60);

    const result = await sweep(h, new ListedInventory([tagged(h, JOB_ID, 1, 30, 0), tagged(h, JOB_ID, 1, 30, 1)]));

    expect(h.compute.releases).toEqual([{ jobId: JOB_ID, attempt: 1, instances: [] }]);
    expect(result).toMatchObject({ checked: 2, kept: 0, failed: [], deferred: 0 });
    expect(result.released).toEqual([
      {
        jobId: JOB_ID,
        attempt: 1,
        instanceIds: [fakeInstanceId(JOB_ID, 1, 0), fakeInstanceId(JOB_ID, 1, 1)],
        reason: `attempt 1 of job ${JOB_ID} ended EXITED ${SWEEP_GRACE_SECONDS + 60} s ago`,
      },
    ]);
  });

  it('leaves the machine its own release: an attempt that ended within the grace period keeps its instances', async () => {
    const h = harness();
    await givenLaunched(h);
    await report(h, 1, 'run', 0);
    h.clock.advance(SWEEP_GRACE_SECONDS - 60);
    const result = await sweep(h, new ListedInventory([tagged(h, JOB_ID, 1, 30)]));
    expect(h.compute.releases).toEqual([]);
    expect(result).toMatchObject({ kept: 1, released: [] });
  });

  it('keeps the instances of a live attempt, and any instance launched within the grace period whatever its job', async () => {
    const h = harness();
    await givenLaunched(h);
    h.clock.advance(3600);
    const result = await sweep(h, new ListedInventory([tagged(h, JOB_ID, 1, 60), tagged(h, 'j-nobody', 1, 5)]));
    expect(h.compute.releases).toEqual([]);
    expect(result).toMatchObject({ checked: 2, kept: 2 });
  });

  it('releases the instances of a job the table does not hold, and of an attempt the job never recorded', async () => {
    const h = harness();
    await givenLaunched(h);
    const result = await sweep(h, new ListedInventory([tagged(h, 'j-nobody', 3, 60), tagged(h, JOB_ID, 7, 60)]));
    expect(result.released.map((r) => r.reason)).toEqual([
      'job j-nobody is not in the table',
      `attempt 7 of job ${JOB_ID} was never recorded`,
    ]);
    expect(h.compute.releases.map((r) => [r.jobId, r.attempt])).toEqual([['j-nobody', 3], [JOB_ID, 7]]);
  });

  it('keeps, and counts, an instance whose attempt tag is missing: it cannot be released by tag', async () => {
    const h = harness();
    const result = await sweep(h, new ListedInventory([tagged(h, 'j-nobody', null, 60)]));
    expect(result).toMatchObject({ checked: 1, kept: 1, released: [] });
  });

  it('reports a release that fails and goes on with the next attempt', async () => {
    const h = harness();
    h.compute.release = async (jobId, attempt) => {
      if (jobId === 'j-first') throw new Error('RequestLimitExceeded');
      h.compute.releases.push({ jobId, attempt, instances: [] });
    };
    const result = await sweep(h, new ListedInventory([tagged(h, 'j-first', 1, 60), tagged(h, 'j-second', 1, 60)]));
    expect(result.failed).toEqual([expect.objectContaining({ jobId: 'j-first', error: 'RequestLimitExceeded' })]);
    expect(result.released).toEqual([expect.objectContaining({ jobId: 'j-second' })]);
  });

  it('leaves the attempts it has no time for to the next sweep', async () => {
    const h = harness();
    h.compute.release = async (jobId, attempt) => {
      h.clock.advance(SWEEP_BUDGET_SECONDS / 2);
      h.compute.releases.push({ jobId, attempt, instances: [] });
    };
    const inventory = new ListedInventory(['j-a', 'j-b', 'j-c', 'j-d'].map((job) => tagged(h, job, 1, 60)));
    const result = await sweep(h, inventory);
    expect(result.released.map((r) => r.jobId)).toEqual(['j-a', 'j-b']);
    expect(result.deferred).toBe(2);
  });

  it('releases the latest attempt of a job that has ended, should it have no outcome of its own', async () => {
    const h = harness();
    await givenJob(h);
    await launchAndAwait(h, initialState());
    const at = h.clock.now().toISOString();
    await h.store.changeStatus(JOB_ID, { from: 'STARTING', to: 'FAILED_CONTROLLER', reason: 'test', attempt: 1, at });
    const result = await sweep(h, new ListedInventory([tagged(h, JOB_ID, 1, 60)]));
    expect(result.released.map((r) => r.reason)).toEqual([`job ${JOB_ID} has ended (FAILED_CONTROLLER)`]);
  });

  describe('nodes held for the relaunch', () => {
    const REUSE = { reuseNodes: { reuse: true, setup: 'skip' as const }, recoverOnExitCodes: [29] };

    /** A one-node job whose attempt 1 exited 29 and was decided: its node is kept and held. */
    async function held(): Promise<{ h: Harness; state: WorkflowState }> {
      const h = harness();
      const launched = await givenLaunched(h, taskSpec({ recovery: REUSE }));
      await report(h, 1, 'setup', 0);
      await report(h, 1, 'run', 29);
      const state = await releaseInstances(await evaluatePolicy(launched, h.deps), h.deps);
      h.compute.releases.length = 0;
      return { h, state };
    }

    it('never takes a held node of a live job whose next attempt is not placed, within the grace', async () => {
      const { h } = await held();
      h.clock.advance(SWEEP_GRACE_SECONDS - 60);
      const result = await sweep(h, new ListedInventory([tagged(h, JOB_ID, 1, 30)]));
      expect(h.compute.releases).toEqual([]);
      expect(result).toMatchObject({ kept: 1, released: [] });
    });

    it('releases a held node at once when its job has ended', async () => {
      const { h } = await held();
      await h.store.changeStatus(JOB_ID, { from: 'RECOVERING', to: 'FAILED_CONTROLLER', reason: 'the test', attempt: 1, at: h.clock.now().toISOString() });
      const result = await sweep(h, new ListedInventory([tagged(h, JOB_ID, 1, 30)]));
      expect(result.released.map((r) => r.reason)).toEqual([`the nodes attempt 1 of job ${JOB_ID} kept for its relaunch are not needed: the job has ended (FAILED_CONTROLLER)`]);
    });

    it('releases at once a held node the next attempt was placed without', async () => {
      const { h, state } = await held();
      h.compute.reclaim(fakeInstanceId(JOB_ID, 1, 0));
      await launchAndAwait(h, state);
      // Found gone by the launch, yet still listed (EC2 lists a terminated instance a while).
      const result = await sweep(h, new ListedInventory([tagged(h, JOB_ID, 1, 30)]));
      expect(result.released.map((r) => r.reason)).toEqual([`the nodes attempt 1 of job ${JOB_ID} kept for its relaunch were left out of attempt 2, which was placed without them`]);
    });
  });
});
