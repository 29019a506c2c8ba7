// End to end, what a job's processes see: relaunch's and SkyPilot's variables per node, the
// task's envs, and `--env` overrides, which win over the file.

import { describe, expect, it } from 'vitest';
import { runToEnd, useLocalRuntimes, yaml } from '../../support/local-harness.ts';

const open = useLocalRuntimes();

/** `NAME=value` lines from a report's output (the job joins a value's lines with commas). */
function variables(outputTail: string): Record<string, string> {
  return Object.fromEntries(
    outputTail.split('\n').map((line) => {
      const at = line.indexOf('=');
      return [line.slice(0, at), line.slice(at + 1)];
    }),
  );
}

describe('the environment of a job, end to end', () => {
  it('gives every node its rank, the job and attempt, the node IPs, the envs and the overrides', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        num_nodes: 2
        envs:
          GREETING: hello
          MODE: from-file
        resources:
          accelerators: A100:2
        run: |
          names="RELAUNCH_JOB_ID RELAUNCH_ATTEMPT RELAUNCH_NODE_RANK RELAUNCH_NUM_NODES RELAUNCH_NODE_IPS
            SKYPILOT_TASK_ID SKYPILOT_NODE_RANK SKYPILOT_NUM_NODES SKYPILOT_NODE_IPS SKYPILOT_NUM_GPUS_PER_NODE
            GREETING MODE EXTRA"
          for v in $names; do
            echo "$v=$(printenv "$v" | paste -sd, -)"
          done
      `,
      { envOverrides: { MODE: 'from-cli', EXTRA: 'x y' } },
    );

    expect(job.view.status).toBe('SUCCEEDED');
    const reports = (job.attempts[0]?.reports ?? []).filter((r) => r.phase === 'run').sort((a, b) => a.nodeRank - b.nodeRank);
    expect(reports.map((r) => r.nodeRank)).toEqual([0, 1]);
    const seen = reports.map((r) => variables(r.outputTail));
    for (const rank of [0, 1]) {
      expect(seen[rank]).toEqual({
        RELAUNCH_JOB_ID: job.jobId,
        RELAUNCH_ATTEMPT: '1',
        RELAUNCH_NODE_RANK: String(rank),
        RELAUNCH_NUM_NODES: '2',
        RELAUNCH_NODE_IPS: '127.0.0.1,127.0.0.1',
        SKYPILOT_TASK_ID: `${job.jobId}-1`,
        SKYPILOT_NODE_RANK: String(rank),
        SKYPILOT_NUM_NODES: '2',
        SKYPILOT_NODE_IPS: '127.0.0.1,127.0.0.1',
        SKYPILOT_NUM_GPUS_PER_NODE: '2',
        GREETING: 'hello',
        MODE: 'from-cli',
        EXTRA: 'x y',
      });
    }
    // The overrides are part of the job's stored spec, so a relaunch sees them too.
    expect(job.job.spec.envs).toEqual({ GREETING: 'hello', MODE: 'from-cli', EXTRA: 'x y' });
  });

  it('gives a relaunched attempt its own number and task id', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        resources:
          job_recovery:
            recover_on_exit_codes: [29]
        run: |
          echo "$RELAUNCH_ATTEMPT $SKYPILOT_TASK_ID"
          if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then exit 29; fi
      `,
    );

    expect(job.attempts.map((a) => a.reports.find((r) => r.phase === 'run')?.outputTail)).toEqual([`1 ${job.jobId}-1`, `2 ${job.jobId}-2`]);
  });

  it('runs an any_of task as its first candidate, recording its market and entry; ports and network_tier change nothing locally', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        resources:
          ports: 8080
          network_tier: best
          any_of:
            - cloud: gcp
              accelerators: TPU-v5:8
            - accelerators: L4:4
              use_spot: false
            - accelerators: H100:8
              use_spot: true
        run: echo "gpus=$SKYPILOT_NUM_GPUS_PER_NODE"
      `,
    );

    expect(job.view.status).toBe('SUCCEEDED');
    const [attempt] = job.attempts;
    // Spot entries come first in any_of: the H100 one, third in the file.
    expect(attempt?.placement).toEqual({
      region: 'local',
      zone: null,
      instanceType: 'local-process',
      market: 'spot',
      entry: 2,
      // Priced as the type it stands for on AWS, from the table: p5.48xlarge is not in it.
      price: { estimate: true, forInstanceType: 'p5.48xlarge', hourly: null, onDemandHourly: null, source: 'price-table' },
    });
    expect(attempt?.reports.find((r) => r.phase === 'run')?.outputTail).toBe('gpus=8');
  });
});
