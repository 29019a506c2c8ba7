// LaunchAttempt run again after its Lambda failed part way (the state machine's Lambda retry).

import { describe, expect, it } from 'vitest';
import { InMemoryJobStore } from '../../../../lib/adapters/memory-job-store.ts';
import type { AttemptRecord } from '../../../../lib/model.ts';
import { INTERRUPTED_LAUNCH_REASON, launchAttempt } from '../../../../lib/usecases/launch-attempt.ts';
import { cancelJob } from '../../../../lib/usecases/cancel-job.ts';
import { fakeInstanceId } from '../../../support/fakes/fake-compute.ts';
import { givenJob, harness, initialState, JOB_ID, type Harness } from '../../../support/usecases-harness.ts';

/** A store whose first putAttempt fails, as a Lambda that dies right after claiming STARTING. */
class FirstPutAttemptFails extends InMemoryJobStore {
  #failed = false;
  override async putAttempt(attempt: AttemptRecord): Promise<void> {
    if (!this.#failed) {
      this.#failed = true;
      throw new Error('Task timed out after 60.00 seconds');
    }
    return super.putAttempt(attempt);
  }
}

/** Attempt 1 written, then the Lambda dies inside compute.launch: nothing recorded. */
async function diesMidLaunch(h: Harness): Promise<void> {
  h.compute.scriptLaunch({ error: new Error('Task timed out after 60.00 seconds') });
  await expect(launchAttempt(initialState(), h.deps)).rejects.toThrow('Task timed out');
}

describe('launchAttempt retried after a failed run', () => {
  it('goes on with the attempt when the first run only moved the job to STARTING', async () => {
    const h = harness();
    const store = new FirstPutAttemptFails();
    const deps = { ...h.deps, store };
    await givenJob({ ...h, store });
    await expect(launchAttempt(initialState(), deps)).rejects.toThrow('Task timed out');
    expect((await store.getJob(JOB_ID)).status).toBe('STARTING');

    const next = await launchAttempt(initialState(), deps);

    expect(next).toMatchObject({ attempt: 1, launched: true, attemptsInExecution: 1 });
    expect(h.compute.launches.map((l) => l.attempt)).toEqual([1]);
    expect((await store.getAttempt(JOB_ID, 1)).instances.map((i) => i.instanceId)).toEqual([fakeInstanceId(JOB_ID, 1, 0)]);
    expect((await store.listEvents(JOB_ID)).map((e) => e.to)).toEqual(['PENDING', 'STARTING']);
  });

  it('releases and retires an attempt launched but never recorded, and launches the next one once', async () => {
    const h = harness();
    await givenJob(h);
    await diesMidLaunch(h);

    const next = await launchAttempt(initialState(), h.deps);

    expect(next).toMatchObject({ jobId: JOB_ID, attempt: 2, launched: true, attemptsInExecution: 2 });
    expect(h.compute.releases).toEqual([{ jobId: JOB_ID, attempt: 1, instances: [] }]);
    expect(h.compute.launches.map((l) => l.attempt)).toEqual([1, 2]);
    const [first, second] = await h.store.listAttempts(JOB_ID);
    expect(first).toMatchObject({ outcome: { kind: 'LOST', reason: INTERRUPTED_LAUNCH_REASON }, decision: null, placement: null });
    expect(second).toMatchObject({ outcome: null, placement: expect.any(Object) });
    expect(h.compute.secretFor(JOB_ID, 2)).not.toBe(h.compute.secretFor(JOB_ID, 1));
    expect((await h.store.getJob(JOB_ID)).status).toBe('STARTING');
  });

  it('goes on when an earlier retry retired the attempt but died before writing the next', async () => {
    const h = harness();
    await givenJob(h);
    await diesMidLaunch(h);
    await h.store.endAttempt(JOB_ID, 1, { kind: 'LOST', reason: INTERRUPTED_LAUNCH_REASON }, h.clock.now().toISOString());

    const next = await launchAttempt(initialState(), h.deps);

    expect(next).toMatchObject({ attempt: 2, launched: true });
    expect(h.compute.releases.map((r) => r.attempt)).toEqual([1]);
  });

  it('retires the interrupted attempt and ends the job\'s next one CANCELLED when a cancel came meanwhile', async () => {
    const h = harness();
    await givenJob(h);
    await diesMidLaunch(h);
    await cancelJob(JOB_ID, h.deps);

    const next = await launchAttempt(initialState(), h.deps);

    expect(next).toMatchObject({ attempt: 2, launched: false });
    expect(h.compute.launches.map((l) => l.attempt)).toEqual([1]);
    expect(h.compute.releases.map((r) => r.attempt)).toEqual([1]);
    expect((await h.store.getAttempt(JOB_ID, 2)).outcome).toEqual({ kind: 'CANCELLED' });
  });

  it('still refuses an attempt that ended otherwise (a launch failure), launching nothing', async () => {
    const h = harness();
    await givenJob(h);
    h.compute.scriptLaunch({ error: new Error('boom') });
    await expect(launchAttempt(initialState(), h.deps)).rejects.toThrow('boom');
    await h.store.endAttempt(JOB_ID, 1, { kind: 'LOST', reason: 'something else' }, h.clock.now().toISOString());

    await expect(launchAttempt(initialState(), h.deps)).rejects.toThrow(/latest attempt is 1, expected 0/);
    expect(h.compute.launches).toHaveLength(1);
    expect(h.compute.releases).toEqual([]);
  });
});
