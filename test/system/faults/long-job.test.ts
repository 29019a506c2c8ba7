// A job longer than the local engine's default Task timeout (60 s) runs to its end on
// attempt 1: AwaitAttempt has no clock of its own, only the heartbeat timeout, as on AWS.
// It waits 90 s of real time, so it sits alone in its file and runs beside the others.

import { describe, expect, it } from 'vitest';
import { runToEnd, statusTrail, useLocalRuntimes, yaml } from '../../support/local-harness.ts';
import { processesOfJob } from './world.ts';

const open = useLocalRuntimes();

describe('a job that runs for minutes', () => {
  it('succeeds on attempt 1 after 90 s, kept alive by its heartbeats alone', { timeout: 240_000 }, async () => {
    // A heartbeat timeout far shorter than the job: only the agent's beats keep it alive.
    const t = await open({ heartbeatIntervalMs: 2_000, heartbeatTimeoutMs: 15_000 });
    const job = await runToEnd(
      t,
      yaml`
        run: |
          sleep 90
          echo "trained for 90 s"
      `,
    );

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 0, restartsOnErrors: 0 });
    expect(job.view.attempts).toMatchObject([{ attempt: 1, outcome: 'EXITED', exitCodes: [0], decision: 'SUCCEED' }]);
    expect(statusTrail(job.events)).toEqual(['PENDING', 'STARTING', 'RUNNING', 'SUCCEEDED']);
    expect(job.attempts[0]?.reports[0]?.outputTail).toBe('');
    expect(job.attempts[0]?.reports.at(-1)?.outputTail).toBe('trained for 90 s');
    expect(processesOfJob(job.jobId)).toEqual([]);
  });
});
