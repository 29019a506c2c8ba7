// What an execution costs in state transitions (Step Functions bills each one): a handful
// per attempt, and none at all while the job runs, heartbeats included.

import { describe, expect, it } from 'vitest';
import { StateName } from '../../../lib/workflow/contract.ts';
import { runToEnd, useLocalRuntimes, yaml, type Transition } from '../../support/local-harness.ts';

const open = useLocalRuntimes();

/** The transitions of one execution split per attempt: each LaunchAttempt starts one. */
function perAttempt(transitions: readonly Transition[]): string[][] {
  const attempts: string[][] = [];
  for (const { state } of transitions) {
    if (state === StateName.LaunchAttempt) attempts.push([]);
    attempts.at(-1)?.push(state);
  }
  return attempts;
}

/** The `<label> <epoch ms>` line a job printed. */
function printedTime(output: string, label: string): number {
  const match = new RegExp(`^${label} (\\d+)$`, 'm').exec(output);
  if (match === null) throw new Error(`no "${label}" time in the job's output: ${output}`);
  return Number(match[1]);
}

describe('state transitions', () => {
  it('makes at most 8 per attempt, the backoff Wait included', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        resources:
          job_recovery:
            recover_on_exit_codes: [29]
            restart_backoff:
              initial_seconds: 1
              factor: 1
              max_seconds: 1
              jitter: none
        run: |
          if [ "$RELAUNCH_ATTEMPT" -le 1 ]; then exit 29; fi
      `,
    );
    expect(job.view.attempts.map((a) => a.decision)).toEqual(['RESTART', 'SUCCEED']);

    const mine = t.transitions.filter((x) => x.execution === job.jobId);
    expect(mine).toHaveLength(job.result.transitions);
    const attempts = perAttempt(mine);
    expect(attempts).toEqual([
      [StateName.LaunchAttempt, StateName.AwaitOrEvaluate, StateName.AwaitBoot, StateName.AwaitAttempt, StateName.EvaluateRecoveryPolicy, StateName.ReleaseInstances, StateName.NextStep, StateName.WaitBeforeRelaunch],
      [StateName.LaunchAttempt, StateName.AwaitOrEvaluate, StateName.AwaitBoot, StateName.AwaitAttempt, StateName.EvaluateRecoveryPolicy, StateName.ReleaseInstances, StateName.NextStep, StateName.JobSucceeded],
    ]);
    for (const states of attempts) expect(states.length).toBeLessThanOrEqual(8);
  });

  it('waits for a launch slot in WaitForLaunchPace when a job has more nodes than the pace lets go at once, on every attempt', async () => {
    // One instance at once, then one a second: a 2-node launch always waits a second.
    const t = await open({ launchPace: { burst: 1, perSecond: 1 } });
    const job = await runToEnd(
      t,
      yaml`
        num_nodes: 2
        resources:
          job_recovery:
            recover_on_exit_codes: [29]
        run: |
          if [ "$RELAUNCH_ATTEMPT" -le 1 ]; then exit 29; fi
      `,
    );
    expect(job.job.status).toBe('SUCCEEDED');
    expect(job.view.attempts.map((a) => a.decision)).toEqual(['RESTART', 'SUCCEED']);
    const states = t.transitions.filter((x) => x.execution === job.jobId).map((x) => x.state);
    const waits = states.flatMap((state, index) => (state === StateName.WaitForLaunchPace ? [index] : []));
    expect(waits).toHaveLength(2);
    for (const at of waits) {
      expect(states.slice(at - 2, at + 3)).toEqual([
        StateName.LaunchAttempt,
        StateName.AwaitOrEvaluate,
        StateName.WaitForLaunchPace,
        StateName.LaunchAttempt,
        StateName.AwaitOrEvaluate,
      ]);
    }
    // The wait is not an attempt: two attempts, two launches.
    expect(t.launches.filter((launch) => launch.jobId === job.jobId)).toHaveLength(2);
  });

  it('makes none while the job runs, though the job heartbeats all along', async () => {
    const t = await open({ heartbeatIntervalMs: 200 });
    const job = await runToEnd(
      t,
      yaml`
        run: |
          echo "start $(date +%s%3N)"
          sleep 2
          echo "end $(date +%s%3N)"
      `,
    );
    expect(job.view.status).toBe('SUCCEEDED');
    const output = job.attempts[0]?.reports.find((r) => r.phase === 'run')?.outputTail ?? '';
    const start = printedTime(output, 'start');
    const end = printedTime(output, 'end');
    expect(end - start).toBeGreaterThanOrEqual(2_000);
    // Heartbeats did arrive during the run.
    expect(Date.parse(job.attempts[0]?.lastHeartbeatAt ?? '')).toBeGreaterThan(start + 1_000);

    const mine = t.transitions.filter((x) => x.execution === job.jobId);
    // The controller may still be entering its wait as the process starts; then it is silent.
    const whileRunning = mine.filter((x) => x.at > start && x.at < end).map((x) => x.state);
    const waits: readonly string[] = [StateName.AwaitOrEvaluate, StateName.AwaitBoot, StateName.AwaitAttempt];
    expect(whileRunning.every((state) => waits.includes(state))).toBe(true);
    const waiting = mine.find((x) => x.state === StateName.AwaitAttempt);
    expect(waiting).toBeDefined();
    expect(waiting?.at).toBeLessThan(end);
    const next = mine[mine.indexOf(waiting as Transition) + 1];
    expect(next?.state).toBe(StateName.EvaluateRecoveryPolicy);
    expect(next?.at).toBeGreaterThanOrEqual(end);
  });
});
