// End to end, the recovery policy on real exits: each task runs through the deployed state
// machine with real bash processes, and the job's record in the table tells the story.

import { describe, expect, it } from 'vitest';
import { simulate } from '../../../lib/simulate.ts';
import { parseTaskFile } from '../../../lib/task-file/parse.ts';
import { reportCodes, runToEnd, statusTrail, useLocalRuntimes, yaml, type FinishedJob } from '../../support/local-harness.ts';

const open = useLocalRuntimes();

/** What `relaunch run --json` says of each attempt, without times and placement. */
function attemptsOf(job: FinishedJob): unknown[] {
  return job.view.attempts.map(({ attempt, outcome, phase, exitCodes, decision, reason }) => ({
    attempt,
    outcome,
    phase,
    exitCodes,
    decision,
    reason,
  }));
}

describe('the recovery policy, end to end', () => {
  it('succeeds on the first attempt when the run exits 0', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        name: first-try
        run: |
          echo "hello from attempt $RELAUNCH_ATTEMPT"
      `,
    );

    expect(job.result).toMatchObject({ status: 'SUCCEEDED', output: { decision: { action: 'SUCCEED', status: 'SUCCEEDED' } } });
    expect(job.view).toMatchObject({ name: 'first-try', status: 'SUCCEEDED', recoveryCount: 0, restartsOnErrors: 0, failureReason: null });
    expect(attemptsOf(job)).toEqual([
      { attempt: 1, outcome: 'EXITED', phase: 'run', exitCodes: [0], decision: 'SUCCEED', reason: 'exit code 0 (run); job succeeded' },
    ]);

    expect(job.job).toMatchObject({
      status: 'SUCCEEDED',
      attemptCount: 1,
      executionArn: `arn:relaunch:local:execution:${job.jobId}`,
      counters: { restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 0, consecutivePreemptions: 0, market: 'on-demand' },
    });
    expect(statusTrail(job.events)).toEqual(['PENDING', 'STARTING', 'RUNNING', 'SUCCEEDED']);
    const [attempt] = job.attempts;
    // The agent reports setup too (exit 0 when the task has none), then run.
    expect(attempt?.reports).toEqual([
      expect.objectContaining({ nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: '' }),
      expect.objectContaining({ nodeRank: 0, phase: 'run', exitCode: 0, outputTail: 'hello from attempt 1' }),
    ]);
    expect(attempt).toMatchObject({ decision: { action: 'SUCCEED', rule: 'ALL_EXITED_ZERO', delaySeconds: 0 } });
    expect(attempt?.endedAt).not.toBeNull();
    expect(t.runtime.deps.compute.liveGroups()).toEqual([]);
    expect(t.errors).toEqual([]);
  });

  it('restarts on a listed exit code past max_restarts_on_errors: 0, never charging the error budget', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        resources:
          job_recovery:
            max_restarts_on_errors: 0
            recover_on_exit_codes: [29]
        run: |
          if [ "$RELAUNCH_ATTEMPT" -le 3 ]; then exit 29; fi
          echo done
      `,
    );

    const restart = (n: number) => ({
      attempt: n,
      outcome: 'EXITED',
      phase: 'run',
      exitCodes: [29],
      decision: 'RESTART',
      reason: `exit code 29 (run) is in recover_on_exit_codes; restart ${n}, unlimited`,
    });
    expect(attemptsOf(job)).toEqual([
      restart(1),
      restart(2),
      restart(3),
      { attempt: 4, outcome: 'EXITED', phase: 'run', exitCodes: [0], decision: 'SUCCEED', reason: 'exit code 0 (run); job succeeded' },
    ]);
    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 3, restartsOnErrors: 0 });

    expect(job.job.counters).toMatchObject({ restartsOnErrors: 0, restartsOnExitCodes: 3, recoveryCount: 3 });
    expect(job.job.attemptCount).toBe(4);
    expect(reportCodes(job.attempts)).toEqual([
      ['setup:0@0', 'run:29@0'],
      ['setup:0@0', 'run:29@0'],
      ['setup:0@0', 'run:29@0'],
      ['setup:0@0', 'run:0@0'],
    ]);
    expect(job.attempts.map((a) => a.decision?.rule)).toEqual([
      'RECOVER_ON_EXIT_CODE',
      'RECOVER_ON_EXIT_CODE',
      'RECOVER_ON_EXIT_CODE',
      'ALL_EXITED_ZERO',
    ]);
    expect(statusTrail(job.events)).toEqual([
      'PENDING',
      ...['STARTING', 'RUNNING', 'RECOVERING'],
      ...['STARTING', 'RUNNING', 'RECOVERING'],
      ...['STARTING', 'RUNNING', 'RECOVERING'],
      ...['STARTING', 'RUNNING', 'SUCCEEDED'],
    ]);
    expect(job.events.filter((e) => e.to === 'RECOVERING').map((e) => e.attempt)).toEqual([1, 2, 3]);
    expect(t.errors).toEqual([]);
  });

  it('restarts on ordinary errors up to max_restarts_on_errors, then fails (M=2: three attempts)', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        resources:
          job_recovery:
            max_restarts_on_errors: 2
        run: |
          echo "flaky failure" >&2
          exit 1
      `,
    );

    const lastReason = 'exit code 1 (run); max_restarts_on_errors (2) used up';
    expect(attemptsOf(job)).toEqual([
      { attempt: 1, outcome: 'EXITED', phase: 'run', exitCodes: [1], decision: 'RESTART', reason: 'exit code 1 (run); restart 1 of 2 on errors, 1 left' },
      { attempt: 2, outcome: 'EXITED', phase: 'run', exitCodes: [1], decision: 'RESTART', reason: 'exit code 1 (run); restart 2 of 2 on errors, 0 left' },
      { attempt: 3, outcome: 'EXITED', phase: 'run', exitCodes: [1], decision: 'FAIL', reason: lastReason },
    ]);
    // The third failure is charged (the stored count is 3) but is no restart: the view shows 2 of 2.
    expect(job.view).toMatchObject({ status: 'FAILED', recoveryCount: 2, restartsOnErrors: 2, failureReason: lastReason });
    expect(job.result).toMatchObject({ status: 'FAILED', error: 'FAILED', cause: lastReason });

    expect(job.job.counters).toMatchObject({ restartsOnErrors: 3, restartsOnExitCodes: 0, recoveryCount: 2 });
    expect(job.job.failureReason).toBe(lastReason);
    expect(reportCodes(job.attempts)).toEqual([
      ['setup:0@0', 'run:1@0'],
      ['setup:0@0', 'run:1@0'],
      ['setup:0@0', 'run:1@0'],
    ]);
    expect(job.attempts[2]?.reports[1]?.outputTail).toBe('flaky failure');
    expect(statusTrail(job.events)).toEqual([
      'PENDING',
      ...['STARTING', 'RUNNING', 'RECOVERING'],
      ...['STARTING', 'RUNNING', 'RECOVERING'],
      ...['STARTING', 'RUNNING', 'FAILED'],
    ]);
    expect(job.events.at(-1)).toMatchObject({ from: 'RUNNING', to: 'FAILED', attempt: 3, reason: lastReason });
  });

  it('ends FAILED_SETUP when setup fails after a run failure used the budget setup and run share', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        resources:
          job_recovery:
            max_restarts_on_errors: 1
        setup: |
          echo "installing, attempt $RELAUNCH_ATTEMPT"
          if [ "$RELAUNCH_ATTEMPT" -ge 2 ]; then echo "no matching distribution" >&2; exit 1; fi
        run: |
          exit 1
      `,
    );

    const lastReason = 'exit code 1 (setup); max_restarts_on_errors (1) used up';
    expect(attemptsOf(job)).toEqual([
      { attempt: 1, outcome: 'EXITED', phase: 'run', exitCodes: [1], decision: 'RESTART', reason: 'exit code 1 (run); restart 1 of 1 on errors, 0 left' },
      { attempt: 2, outcome: 'EXITED', phase: 'setup', exitCodes: [1], decision: 'FAIL', reason: lastReason },
    ]);
    expect(job.view).toMatchObject({ status: 'FAILED_SETUP', restartsOnErrors: 1, recoveryCount: 1, failureReason: lastReason });

    expect(job.job.counters).toMatchObject({ restartsOnErrors: 2, recoveryCount: 1 });
    // Attempt 1's setup passed and was reported; attempt 2 never reached run.
    expect(reportCodes(job.attempts)).toEqual([['setup:0@0', 'run:1@0'], ['setup:1@0']]);
    expect(job.attempts[1]?.reports[0]?.outputTail).toBe('installing, attempt 2\nno matching distribution');
    expect(statusTrail(job.events)).toEqual(['PENDING', 'STARTING', 'RUNNING', 'RECOVERING', 'STARTING', 'RUNNING', 'FAILED_SETUP']);
    expect(job.result).toMatchObject({ status: 'FAILED', error: 'FAILED_SETUP' });
  });

  it('fails at once on a code in fail_on_exit_codes, with restarts still left', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        resources:
          job_recovery:
            max_restarts_on_errors: 5
            fail_on_exit_codes: [3]
        run: |
          echo "input.csv: column 'label' is missing" >&2
          exit 3
      `,
    );

    const reason = 'exit code 3 (run) is in fail_on_exit_codes; failing at once, no restart';
    expect(attemptsOf(job)).toEqual([{ attempt: 1, outcome: 'EXITED', phase: 'run', exitCodes: [3], decision: 'FAIL', reason }]);
    expect(job.view).toMatchObject({ status: 'FAILED', restartsOnErrors: 0, recoveryCount: 0, failureReason: reason });
    expect(job.attempts[0]?.decision?.rule).toBe('FAIL_ON_EXIT_CODE');
    expect(job.job.counters).toMatchObject({ restartsOnErrors: 0, recoveryCount: 0 });
    expect(statusTrail(job.events)).toEqual(['PENDING', 'STARTING', 'RUNNING', 'FAILED']);
  });

  it('decides two nodes that end together on both codes, the recover-on one reported first: FAILED, as simulate says', async () => {
    const t = await open();
    const task = yaml`
      num_nodes: 2
      resources:
        job_recovery:
          fail_on_exit_codes: [42]
          recover_on_exit_codes: [3]
          max_restarts_on_exit_codes: 1
      run: |
        touch "ready.$RELAUNCH_ATTEMPT.$RELAUNCH_NODE_RANK"
        until [ -e "ready.$RELAUNCH_ATTEMPT.0" ] && [ -e "ready.$RELAUNCH_ATTEMPT.1" ]; do sleep 0.05; done
        if [ "$RELAUNCH_NODE_RANK" = 0 ]; then exit 3; fi
        sleep 0.3
        exit 42
    `;
    const job = await runToEnd(t, task);

    const simulated = simulate(parseTaskFile(task).spec, ['exit:3+42']).decisions[0];
    expect(attemptsOf(job)).toEqual([{ attempt: 1, outcome: 'EXITED', phase: 'run', exitCodes: [3, 42], decision: 'FAIL', reason: simulated?.reason }]);
    expect(job.view.status).toBe(simulated?.status);
  });

  it('reports a job that SIGKILLs itself as exit 137, decoded in the reason', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        run: |
          echo "about to be killed"
          kill -9 $$
          echo "never printed"
      `,
    );

    const reason = 'exit code 137 (SIGKILL, often out of memory) (run); max_restarts_on_errors is 0, so no restart';
    expect(attemptsOf(job)).toEqual([{ attempt: 1, outcome: 'EXITED', phase: 'run', exitCodes: [137], decision: 'FAIL', reason }]);
    expect(job.view).toMatchObject({ status: 'FAILED', failureReason: reason });
    expect(job.attempts[0]?.reports).toEqual([
      expect.objectContaining({ phase: 'setup', exitCode: 0 }),
      expect.objectContaining({ phase: 'run', exitCode: 137, outputTail: 'about to be killed' }),
    ]);
    expect(job.job.counters.restartsOnErrors).toBe(1);
  });
});
