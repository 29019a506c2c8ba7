// A relaunch that finds no capacity waits for it, as SkyPilot's recovery does, instead of
// failing the job: the first gap is 60 s, so this file waits a minute of real time and
// runs beside the others.

import { describe, expect, it } from 'vitest';
import { finish, runToEnd, statusTrail, useLocalRuntimes, waitFor, yaml } from '../../support/local-harness.ts';
import { chaos, processesOfJob } from './world.ts';

const open = useLocalRuntimes();

const SPOT_JOB = yaml`
  resources:
    use_spot: true
  run: |
    if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then sleep 60; fi
    echo "attempt $RELAUNCH_ATTEMPT done"
`;

/** Attempt 1 is preempted; attempt 2's launch finds no capacity on any of its tries. */
const PREEMPTED_THEN_NO_CAPACITY = chaos`
  faults:
    - attempt: 1
      preempt: {after: 200ms, warning: 200ms}
    - attempt: 2
      no_capacity: 3
`;

describe('a relaunch without capacity', () => {
  it('waits for capacity, then runs: SUCCEEDED on attempt 3', { timeout: 180_000 }, async () => {
    const t = await open();
    const job = await runToEnd(t, SPOT_JOB, { chaos: PREEMPTED_THEN_NO_CAPACITY });

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', restartsOnErrors: 0 });
    expect(job.view.attempts).toMatchObject([
      { attempt: 1, outcome: 'PREEMPTED', decision: 'RECOVER' },
      { attempt: 2, outcome: 'LAUNCH_FAILED', decision: 'RECOVER' },
      { attempt: 3, outcome: 'EXITED', exitCodes: [0], decision: 'SUCCEED' },
    ]);
    expect(job.attempts[1]?.decision).toMatchObject({ rule: 'WAITING_FOR_CAPACITY', status: 'RECOVERING', delaySeconds: 60 });
    expect(job.view.attempts[1]?.reason).toMatch(/^waiting for capacity: .*InsufficientInstanceCapacity.*; next try in 60 s/);
    const waited = Date.parse(job.attempts[2]?.startedAt ?? '') - Date.parse(job.attempts[1]?.endedAt ?? '');
    expect(waited).toBeGreaterThanOrEqual(60_000);
    expect(statusTrail(job.events)).toEqual([
      'PENDING', 'STARTING', 'RUNNING', 'RECOVERING', 'STARTING', 'RECOVERING', 'STARTING', 'RUNNING', 'SUCCEEDED',
    ]);
    expect(processesOfJob(job.jobId)).toEqual([]);
  });

  it('cancels at once during the wait for capacity', async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(SPOT_JOB, { chaos: PREEMPTED_THEN_NO_CAPACITY });
    await waitFor('the wait for capacity', async () => {
      const attempt = (await t.runtime.deps.store.listAttempts(jobId))[1];
      return attempt?.decision?.rule === 'WAITING_FOR_CAPACITY' ? true : undefined;
    });
    await t.runtime.cancel(jobId);
    const job = await finish(t, jobId);

    expect(job.view.status).toBe('CANCELLED');
    expect(job.view.attempts).toHaveLength(2);
    expect(processesOfJob(jobId)).toEqual([]);
  });
});
