// A restart in place, run for real on the local runtime: the job exits with a code in
// recover_on_exit_codes on attempt 1, and attempt 2 runs on the same node (the same agent,
// setup skipped). Each attempt's output is its own, read as `relaunch logs` and `run` read
// it, though both attempts' files are in the one folder the node was launched in.

import { describe, expect, it } from 'vitest';
import { LogTail } from '../../../cli/follow.ts';
import { FileJobLogs } from '../../../local/file-job-logs.ts';
import { attemptLogs } from '../../../local/paths.ts';
import { processesOfJob } from '../faults/world.ts';
import { runToEnd, useLocalRuntimes, yaml } from '../../support/local-harness.ts';

const open = useLocalRuntimes();

/** Two attempts' agents on a busy 2-CPU machine. */
const SLOW = { timeout: 120_000 };

describe('a restart in place on the local runtime', () => {
  it("runs attempt 2 on attempt 1's node, setup skipped, and each attempt's logs show its own lines only", SLOW, async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        resources:
          job_recovery:
            recover_on_exit_codes: [3]
            reuse_nodes: {setup: skip}
        setup: echo "setup of attempt $RELAUNCH_ATTEMPT"
        run: |
          echo "run of attempt $RELAUNCH_ATTEMPT"
          if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then exit 3; fi
      `,
    );

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 });
    expect(job.view.attempts).toMatchObject([
      { attempt: 1, outcome: 'EXITED', exitCodes: [3], decision: 'RESTART' },
      { attempt: 2, outcome: 'EXITED', exitCodes: [0], decision: 'SUCCEED' },
    ]);
    const [first, second] = job.attempts;
    expect(second?.instances).toHaveLength(1);
    expect(second?.instances[0]).toMatchObject({ instanceId: first?.instances[0]?.instanceId, nodeRank: 0, reusedFrom: 1 });

    // The job log reader (`relaunch logs`, the API's log pages).
    const reader = new FileJobLogs(t.dataDir);
    const read = async (attempt: number, phase: 'setup' | 'run') => (await reader.read({ jobId: job.jobId, attempt, nodeRank: 0, phase }, null, 64 * 1024)).text;
    expect(await read(1, 'run')).toBe('run of attempt 1\n');
    expect(await read(2, 'run')).toBe('run of attempt 2\n');
    expect(await read(1, 'setup')).toBe('setup of attempt 1\n');
    expect(await read(2, 'setup')).toBe('relaunch: setup skipped: it ran on this node in attempt 1\n');
    // The data folder's files as `relaunch logs` and `run`'s live output read them.
    expect(new LogTail().read(attemptLogs(t.dataDir, job.jobId, 1).filter((log) => log.phase === 'run'))).toBe('run of attempt 1\n');
    expect(new LogTail().read(attemptLogs(t.dataDir, job.jobId, 2).filter((log) => log.phase === 'run'))).toBe('run of attempt 2\n');

    expect(processesOfJob(job.jobId)).toEqual([]);
    expect(t.errors).toEqual([]);
  });
});
