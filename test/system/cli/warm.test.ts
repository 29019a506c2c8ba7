// launch_on_warning through the real binary: `run` says when the standby is launched and
// taken, `status` shows it and the gap before its run (table, lines and --json), `logs`
// says what an attempt's output does not, and a standby let go unused is shown as such.

import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { JobView } from '../../../lib/views.ts';
import { killStrayClis, parseStdout, removeTempDirs, runCli, runInProcess, SLOW, tempDir, writeTask } from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

/**
 * Attempt 1 is warned as its run starts; its job, stopped by the notice, ends once attempt
 * 2's setup (the standby's) has run, so the standby has set up by then.
 */
const TASK = `name: warm
resources:
  use_spot: true
  job_recovery:
    launch_on_warning: __OPTION__
setup: |
  echo "setup of attempt $RELAUNCH_ATTEMPT"
  if [ "$RELAUNCH_ATTEMPT" -eq 2 ]; then touch standby-ready; fi
run: |
  echo "run of attempt $RELAUNCH_ATTEMPT"
  if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then
    trap 'while [ ! -f standby-ready ]; do sleep 0.05; done; exit 0' TERM
    while [ ! -f standby-ready ]; do sleep 0.05; done
  fi
`;

describe.concurrent('relaunch run, status and logs of a job with a standby', { timeout: SLOW }, () => {
  it('show the standby launched on the warning, taken as attempt 2, and the gap before its run', async () => {
    const dir = await tempDir('warm');
    const data = join(dir, 'data');
    const task = await writeTask(dir, 'task.yaml', TASK.replace('__OPTION__', 'true'));
    const chaos = await writeTask(dir, 'chaos.yaml', 'faults:\n  - attempt: 1\n    preempt: {after: 0s, warning: 10s}\n');
    const ran = await runCli(['run', task, '--data-dir', data, '--chaos', chaos], { cwd: dir });
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ attempt 2 launched \(spot, local-process in local\) as the standby of attempt 1$/m);
    expect(ran.stdout).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ STARTING {3}taking standby attempt 2 \(spot\), started on the spot interruption warning of attempt 1$/m);
    expect(ran.stdout).toMatch(/ SUCCEEDED after 2 attempts; recoveries: 1, restarts on errors: 0 of 0$/m);
    const jobId = /^(j-\S+) SUCCEEDED/m.exec(ran.stdout)?.[1] as string;

    const status = await runInProcess(['status', jobId, '--data-dir', data]);
    const lines = status.stdout.split('\n');
    expect(lines.find((line) => line.startsWith('ATTEMPT'))).toMatch(/^ATTEMPT +OUTCOME +PHASE +EXIT CODES +DECISION +DURATION +GAP +REASON$/);
    expect(lines.find((line) => line.startsWith('2 '))).toMatch(/^2 +EXITED +run +0 +SUCCEED +\d+\.\ds +\d+\.\ds +exit code 0 \(run\); job succeeded$/);
    expect(lines).toContainEqual(
      expect.stringMatching(/^attempt 2: the standby of attempt 1, started on its spot interruption warning; taken as the next attempt at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+; run started at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+, \d+\.\d s after attempt 1 ended$/),
    );

    const view = parseStdout<JobView>(await runInProcess(['status', jobId, '--json', '--data-dir', data]));
    const standby = view.attempts[1];
    expect(standby?.standby).toMatchObject({ for: 1, on: 'interruption', state: 'adopted', releasedAt: null });
    expect(standby?.gapSeconds).toBeGreaterThanOrEqual(0);
    expect(Date.parse(standby?.runStartedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(view.attempts[0]?.endedAt ?? ''));

    const logs = await runInProcess(['logs', jobId, '--data-dir', data]);
    expect(logs.stdout).toContain('setup of attempt 2\nrun of attempt 2\n');
    expect(logs.stdout).toMatch(/\(attempt 2 was the standby of attempt 1: its setup ran beside attempt 1, and its run started once attempt 1 was decided, \d+\.\d s after attempt 1 ended\)/);
  });

  it('show a standby let go unused as NOT NEEDED, charged to nothing, and logs default to the attempt that ran', async () => {
    const dir = await tempDir('warm');
    const data = join(dir, 'data');
    // Attempt 1 succeeds once the standby has set up: a rebalance recommendation ends nothing.
    const task = await writeTask(dir, 'task.yaml', TASK.replace('__OPTION__', 'rebalance'));
    const chaos = await writeTask(dir, 'chaos.yaml', 'faults:\n  - attempt: 1\n    rebalance: {}\n');
    const ran = await runCli(['run', task, '--data-dir', data, '--chaos', chaos], { cwd: dir });
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ attempt 2 released, charged to nothing: not needed: attempt 1 was decided SUCCEED \(exit code 0 \(run\); job succeeded\)$/m);
    expect(ran.stdout).toMatch(/ SUCCEEDED after 1 attempt; recoveries: 0, restarts on errors: 0 of 0$/m);
    const jobId = /^(j-\S+) SUCCEEDED/m.exec(ran.stdout)?.[1] as string;

    const status = await runInProcess(['status', jobId, '--data-dir', data]);
    const lines = status.stdout.split('\n');
    // Its setup report may come before the release, or be refused after it.
    expect(lines.find((line) => line.startsWith('2 '))).toMatch(/^2 +NOT NEEDED +(setup +0|- +-) +- +\d+\.\ds +- +not needed: attempt 1 was decided SUCCEED/);
    expect(lines).toContainEqual(expect.stringMatching(/^attempt 2: the standby of attempt 1, started on its rebalance recommendation; released at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+, charged to nothing: not needed: /));
    expect(status.stdout).toContain('recoveries: 0, restarts on errors: 0');

    const logs = await runInProcess(['logs', jobId, '--data-dir', data]);
    expect(logs.stdout).toContain('run of attempt 1');
    expect(logs.stdout).not.toContain('setup of attempt 2');
    const standbyLogs = await runInProcess(['logs', jobId, '--attempt', '2', '--data-dir', data]);
    expect(standbyLogs.stdout).toContain('setup of attempt 2');
    expect(standbyLogs.stdout).toContain('(attempt 2 was the standby of attempt 1: released without running run, charged to nothing: not needed: ');
  });

  it('show a standby of the warned node alone: the nodes it is launched beside, its node in every line, and the survivor reused', async () => {
    const dir = await tempDir('warm');
    const data = join(dir, 'data');
    // Node 1 of attempt 1, warned, stops once the standby has set up; node 0 works until held.
    const task = await writeTask(
      dir,
      'task.yaml',
      `num_nodes: 2
resources:
  use_spot: true
  job_recovery:
    strategy: FAILOVER
    launch_on_warning: true
setup: |
  echo "setup of attempt $RELAUNCH_ATTEMPT"
  if [ "$RELAUNCH_ATTEMPT" -eq 2 ]; then touch standby-ready; fi
run: |
  if [ "$RELAUNCH_ATTEMPT" -eq 1 ] && [ "$RELAUNCH_NODE_RANK" -eq 0 ]; then exec sleep 600; fi
  if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then
    trap 'while [ ! -f standby-ready ]; do sleep 0.05; done; exit 0' TERM
    while [ ! -f standby-ready ]; do sleep 0.05; done
  fi
  echo "run of attempt $RELAUNCH_ATTEMPT"
`,
    );
    const chaos = await writeTask(dir, 'chaos.yaml', 'faults:\n  - attempt: 1\n    preempt: {node: 1, after: 0s, warning: 10s}\n');
    const ran = await runCli(['run', task, '--data-dir', data, '--chaos', chaos], { cwd: dir });
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ attempt 2 launched \(spot, local-process in local\) as the standby of attempt 1, beside its node 0$/m);
    expect(ran.stdout).toContain('(attempt 2, node 1) setup of attempt 2\n');
    expect(ran.stdout).toContain('(attempt 2, node 0) run of attempt 2\n');
    expect(ran.stdout).toMatch(/ SUCCEEDED after 2 attempts; recoveries: 1, restarts on errors: 0 of 0$/m);
    const jobId = /^(j-\S+) SUCCEEDED/m.exec(ran.stdout)?.[1] as string;

    const status = await runInProcess(['status', jobId, '--data-dir', data]);
    const lines = status.stdout.split('\n');
    expect(lines).toContainEqual(expect.stringMatching(/^attempt 2: the standby of attempt 1, beside its node 0, started on its spot interruption warning; taken as the next attempt at /));
    expect(lines).toContain('attempt 2: node 0 reused from attempt 1, node 1 new');
    const view = parseStdout<JobView>(await runInProcess(['status', jobId, '--json', '--data-dir', data]));
    expect(view.attempts[1]?.standby).toMatchObject({ for: 1, state: 'adopted', beside: [0] });
  });
});
