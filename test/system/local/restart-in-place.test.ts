// A restart in place, run for real on the local runtime: the job exits with a code in
// recover_on_exit_codes on attempt 1, and attempt 2 runs on the same node (the same agent,
// setup skipped). Each attempt's output is its own, read as `relaunch logs` and `run` read
// it, though both attempts' files are in the one folder the node was launched in. And a
// preempted node of several replaced alone, after the preemption or, with launch_on_warning,
// on its warning: the survivors keep their ranks and run attempt 2.

import { describe, expect, it } from 'vitest';
import { LogTail } from '../../../cli/follow.ts';
import { FileJobLogs } from '../../../local/file-job-logs.ts';
import { attemptLogs } from '../../../local/paths.ts';
import { processesOfJob } from '../faults/world.ts';
import { preemptedNodeJob, runToEnd, useLocalRuntimes, yaml, type FinishedJob, type TestRuntime } from '../../support/local-harness.ts';

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
    const job = await survivorsOfPreemption(t, { numNodes: 4, node: 2, warningSeconds: 1, launchOnWarning: false });

    expect(job.view.attempts).toMatchObject([
      { attempt: 1, outcome: 'PREEMPTED', decision: 'RECOVER' },
      { attempt: 2, outcome: 'EXITED', exitCodes: [0, 0, 0, 0], decision: 'SUCCEED' },
    ]);
    expect(job.attempts[0]?.decision?.keep?.nodes.map((node) => node.nodeRank)).toEqual([0, 1, 3]);
    expect(t.launches.map((launch) => [launch.attempt, launch.keep?.nodes.length ?? 0])).toEqual([[1, 0], [2, 3]]);
  });

  it('with launch_on_warning: node 1 of 3 warned, its replacement alone launched on the warning, and the survivors join it as attempt 2', SLOW, async () => {
    const t = await open();
    const job = await survivorsOfPreemption(t, { numNodes: 3, node: 1, warningSeconds: 20, launchOnWarning: true });

    const [first, second] = job.attempts;
    expect(first?.interruptionNode).toBe(1);
    expect(second?.standby).toMatchObject({ for: 1, on: 'interruption', adoptedAt: expect.any(String) });
    // One launch for the relaunch, of rank 1 beside the other two, before attempt 1 ended.
    expect(t.launches.map((launch) => [launch.attempt, launch.beside?.nodes.map((node) => node.nodeRank) ?? []])).toEqual([[1, []], [2, [0, 2]]]);
    expect(Date.parse(first?.interruptionNoticedAt ?? '')).toBeLessThanOrEqual(Date.parse(second?.startedAt ?? ''));
    expect(Date.parse(second?.startedAt ?? '')).toBeLessThan(Date.parse(first?.endedAt ?? ''));
  });
});

/**
 * Runs preemptedNodeJob to its end and checks what holds with and without
 * `launch_on_warning`: SUCCEEDED after one recovery, the warned node replaced and every other
 * one kept with its rank and instance, setup run again on every node, and nothing of the job
 * left running.
 */
async function survivorsOfPreemption(t: TestRuntime, options: Parameters<typeof preemptedNodeJob>[0]): Promise<FinishedJob> {
  const { task, chaos } = preemptedNodeJob(options);
  const job = await runToEnd(t, task, { chaos });

  expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 });
  const [first, second] = job.attempts;
  expect(first?.outcome).toEqual({ kind: 'PREEMPTED', nodes: [options.node] });
  const byRank = (attempt: typeof first, rank: number) => attempt?.instances.find((node) => node.nodeRank === rank);
  const ranks = Array.from({ length: options.numNodes }, (_, rank) => rank);
  for (const rank of ranks.filter((rank) => rank !== options.node)) {
    expect(byRank(second, rank)).toMatchObject({ instanceId: byRank(first, rank)?.instanceId, reusedFrom: 1 });
  }
  expect(byRank(second, options.node)?.instanceId).not.toBe(byRank(first, options.node)?.instanceId);
  expect(byRank(second, options.node)?.reusedFrom).toBeUndefined();

  // Setup ran again on every node of attempt 2 (SkyPilot's FAILOVER), each with its own rank.
  const reader = new FileJobLogs(t.dataDir);
  for (const rank of ranks) {
    const read = async (phase: 'setup' | 'run') => (await reader.read({ jobId: job.jobId, attempt: 2, nodeRank: rank, phase }, null, 64 * 1024)).text;
    expect(await read('setup')).toBe(`setup of attempt 2 on node ${rank}\n`);
    expect(await read('run')).toBe(`node ${rank} of ${options.numNodes} in attempt 2\n`);
  }
  expect(processesOfJob(job.jobId)).toEqual([]);
  expect(t.errors).toEqual([]);
  return job;
}
