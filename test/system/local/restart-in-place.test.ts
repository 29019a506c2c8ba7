// A restart in place, run for real on the local runtime: the job exits with a code in
// recover_on_exit_codes on attempt 1, and attempt 2 runs on the same node (the same agent,
// setup skipped). Each attempt's output is its own, read as `relaunch logs` and `run` read
// it, though both attempts' files are in the one folder the node was launched in.

import { describe, expect, it } from 'vitest';
import { LogTail } from '../../../cli/follow.ts';
import { FileJobLogs } from '../../../local/file-job-logs.ts';
import { attemptLogs } from '../../../local/paths.ts';
import { chaos, processesOfJob } from '../faults/world.ts';
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

  it('replaces only the preempted node of four: the survivors run attempt 2 with their ranks, setup again (FAILOVER)', SLOW, async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        num_nodes: 4
        resources:
          use_spot: true
          job_recovery:
            strategy: FAILOVER
        setup: echo "setup of attempt $RELAUNCH_ATTEMPT on node $RELAUNCH_NODE_RANK"
        run: |
          if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then exec sleep 600; fi
          echo "node $RELAUNCH_NODE_RANK of $RELAUNCH_NUM_NODES in attempt $RELAUNCH_ATTEMPT"
      `,
      {
        chaos: chaos`
          faults:
            - attempt: 1
              preempt: {node: 2, after: 1s, warning: 1s}
        `,
      },
    );

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 });
    expect(job.view.attempts).toMatchObject([
      { attempt: 1, outcome: 'PREEMPTED', decision: 'RECOVER' },
      { attempt: 2, outcome: 'EXITED', exitCodes: [0, 0, 0, 0], decision: 'SUCCEED' },
    ]);
    const [first, second] = job.attempts;
    expect(first?.outcome).toEqual({ kind: 'PREEMPTED', nodes: [2] });
    expect(first?.decision?.keep?.nodes.map((node) => node.nodeRank)).toEqual([0, 1, 3]);
    const byRank = (attempt: typeof first, rank: number) => attempt?.instances.find((node) => node.nodeRank === rank);
    for (const rank of [0, 1, 3]) {
      expect(byRank(second, rank)).toMatchObject({ instanceId: byRank(first, rank)?.instanceId, reusedFrom: 1 });
    }
    expect(byRank(second, 2)?.instanceId).not.toBe(byRank(first, 2)?.instanceId);
    expect(byRank(second, 2)?.reusedFrom).toBeUndefined();

    // Setup ran again on every node of attempt 2 (SkyPilot's FAILOVER), each with its own rank.
    const reader = new FileJobLogs(t.dataDir);
    for (const rank of [0, 1, 2, 3]) {
      const read = async (phase: 'setup' | 'run') => (await reader.read({ jobId: job.jobId, attempt: 2, nodeRank: rank, phase }, null, 64 * 1024)).text;
      expect(await read('setup')).toBe(`setup of attempt 2 on node ${rank}\n`);
      expect(await read('run')).toBe(`node ${rank} of 4 in attempt 2\n`);
    }
    expect(processesOfJob(job.jobId)).toEqual([]);
    expect(t.errors).toEqual([]);
  });

  it("with launch_on_warning: node 1 of 3 warned, its replacement alone boots during the warning, and the survivors join it as attempt 2", SLOW, async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        num_nodes: 3
        resources:
          use_spot: true
          job_recovery:
            strategy: FAILOVER
            launch_on_warning: true
        setup: echo "setup of attempt $RELAUNCH_ATTEMPT on node $RELAUNCH_NODE_RANK"
        run: |
          if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then exec sleep 600; fi
          echo "node $RELAUNCH_NODE_RANK of $RELAUNCH_NUM_NODES in attempt $RELAUNCH_ATTEMPT"
      `,
      {
        chaos: chaos`
          faults:
            - attempt: 1
              preempt: {node: 1, after: 1s, warning: 8s}
        `,
      },
    );

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 });
    const [first, second] = job.attempts;
    expect(first).toMatchObject({ outcome: { kind: 'PREEMPTED', nodes: [1] }, interruptionNode: 1 });
    expect(second?.standby).toMatchObject({ for: 1, on: 'interruption', adoptedAt: expect.any(String) });
    // One node launched, for rank 1, beside the other two.
    const standbyLaunch = t.launches.find((launch) => launch.attempt === 2);
    expect(standbyLaunch?.beside?.nodes.map((node) => node.nodeRank)).toEqual([0, 2]);
    expect(t.launches.filter((launch) => launch.attempt > 2)).toEqual([]);
    const byRank = (attempt: typeof first, rank: number) => attempt?.instances.find((node) => node.nodeRank === rank);
    for (const rank of [0, 2]) expect(byRank(second, rank)).toMatchObject({ instanceId: byRank(first, rank)?.instanceId, reusedFrom: 1 });
    expect(byRank(second, 1)?.reusedFrom).toBeUndefined();
    // The replacement was launched on the warning, before attempt 1 ended (the warned node's
    // agent stops at once on a warning shorter than its grace period, which ends the attempt).
    expect(Date.parse(second?.startedAt ?? '')).toBeLessThan(Date.parse(first?.endedAt ?? ''));
    expect(Date.parse(first?.interruptionNoticedAt ?? '')).toBeLessThanOrEqual(Date.parse(second?.startedAt ?? ''));

    const reader = new FileJobLogs(t.dataDir);
    for (const rank of [0, 1, 2]) {
      const read = async (phase: 'setup' | 'run') => (await reader.read({ jobId: job.jobId, attempt: 2, nodeRank: rank, phase }, null, 64 * 1024)).text;
      expect(await read('setup')).toBe(`setup of attempt 2 on node ${rank}\n`);
      expect(await read('run')).toBe(`node ${rank} of 3 in attempt 2\n`);
    }
    expect(processesOfJob(job.jobId)).toEqual([]);
    expect(t.errors).toEqual([]);
  });
});
