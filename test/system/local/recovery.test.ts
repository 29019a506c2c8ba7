// End to end, the ways an attempt ends without its own exit: a spot preemption, a lost
// heartbeat, a peer's failure on a multi-node job, and a late report from an old attempt.

import { writeFileSync } from 'node:fs';
import { preemptAttemptsPlan } from '../../../local/chaos.ts';
import { jobWorkDir } from '../../../local/paths.ts';
import { describe, expect, it } from 'vitest';
import { StaleAttemptError } from '../../../lib/errors.ts';
import { heartbeat, reportPhase } from '../../../lib/usecases/index.ts';
import {
  alive,
  finish,
  liveInGroup,
  reportCodes,
  runToEnd,
  stored,
  statusTrail,
  useLocalRuntimes,
  waitFor,
  waitUntilAwaiting,
  yaml,
} from '../../support/local-harness.ts';

const open = useLocalRuntimes();

describe('recovery without an exit code, end to end', () => {
  it('recovers from a spot preemption without charging the error budget (M=0, still succeeds)', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        resources:
          use_spot: true
          job_recovery:
            max_restarts_on_errors: 0
        run: |
          for i in 1 2 3; do echo "step $i"; done
          if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then trap 'echo "saving a checkpoint"; exit 143' TERM; sleep 30 & wait; fi
          echo "attempt $RELAUNCH_ATTEMPT done"
      `,
      { chaos: preemptAttemptsPlan([1]) },
    );

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 });
    expect(job.view.attempts).toMatchObject([
      {
        attempt: 1,
        outcome: 'PREEMPTED',
        // Reclaimed during run: the phase it was in, its code unknown (never setup's 0), and
        // its last lines, the one printed in its grace period included.
        phase: 'run',
        exitCodes: [null],
        outputTails: [{ nodeRank: 0, phase: 'run', text: 'step 1\nstep 2\nstep 3\nsaving a checkpoint' }],
        decision: 'RECOVER',
        reason: 'spot preemption; recovery 1, does not count toward max_restarts_on_errors',
        market: 'spot',
      },
      { attempt: 2, outcome: 'EXITED', exitCodes: [0], decision: 'SUCCEED', market: 'spot' },
    ]);

    const [first, second] = job.attempts;
    expect(first?.interruptionNoticedAt).not.toBeNull();
    // The stopped node's run has no code, only its last lines.
    expect(reportCodes([first as never])).toEqual([['setup:0@0', 'run:stopped(interruption)@0']]);
    expect(first?.decision?.rule).toBe('PREEMPTED_OR_LOST');
    expect(second?.interruptionNoticedAt).toBeNull();
    expect(job.job.counters).toMatchObject({ restartsOnErrors: 0, recoveryCount: 1, market: 'spot' });
    expect(statusTrail(job.events)).toEqual(['PENDING', 'STARTING', 'RUNNING', 'RECOVERING', 'STARTING', 'RUNNING', 'SUCCEEDED']);
    expect(t.errors).toEqual([]);
  });

  it('ends an attempt with no heartbeat as LOST and recovers on a fresh one', async () => {
    const t = await open({ heartbeatTimeoutMs: 5_000, heartbeatIntervalMs: 600_000 });
    const { jobId } = await t.runtime.submit(
      yaml`
        resources:
          job_recovery:
            max_restarts_on_errors: 0
        run: |
          if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then sleep 30; fi
          echo recovered
      `,
    );
    await waitUntilAwaiting(t, jobId, 1);
    const [silent] = await waitFor('the process of attempt 1', () => {
      const pids = t.runtime.deps.compute.liveGroups();
      return pids.length === 1 ? pids : undefined;
    });
    const job = await finish(t, jobId);

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 });
    expect(job.view.attempts).toMatchObject([
      // Lost in run (its setup had ended): run, its code unknown, never setup's 0.
      { attempt: 1, outcome: 'LOST', phase: 'run', exitCodes: [null], decision: 'RECOVER' },
      { attempt: 2, outcome: 'EXITED', exitCodes: [0], decision: 'SUCCEED' },
    ]);
    expect(job.view.attempts[0]?.reason).toMatch(
      /^instance lost \(no heartbeat for \d+ s\); recovery 1, does not count toward max_restarts_on_errors$/,
    );
    const [first] = job.attempts;
    expect(first?.outcome).toEqual({ kind: 'LOST', reason: expect.stringMatching(/^no heartbeat for \d+ s$/) });
    expect(first?.lastHeartbeatAt).not.toBeNull(); // the node beat once, at its start
    // Released once lost, the node (silent, not gone) says its run was stopped, with no code.
    expect(reportCodes(job.attempts)).toEqual([['setup:0@0', 'run:stopped(shutdown)@0'], ['setup:0@0', 'run:0@0']]);
    expect(statusTrail(job.events)).toEqual(['PENDING', 'STARTING', 'RUNNING', 'RECOVERING', 'STARTING', 'RUNNING', 'SUCCEEDED']);
    // The lost attempt's process does not outlive it.
    expect(alive(silent as number)).toBe(false);
  });

  it('stops the other node when one fails: recorded as killed (code unknown), and the failing code decides', async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(
      yaml`
        num_nodes: 2
        resources:
          job_recovery:
            max_restarts_on_errors: 0
            recover_on_exit_codes: [29]
        run: |
          if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then
            if [ "$RELAUNCH_NODE_RANK" -eq 1 ]; then
              while [ ! -f go ]; do sleep 0.02; done
              exit 29
            fi
            sleep 30
          fi
          echo "node $RELAUNCH_NODE_RANK done"
      `,
    );
    // Node 1 fails only once both nodes run: both setup reports stored (a node's group exists
    // from its start, before it has its secret, so the groups alone do not say so).
    await waitFor('both nodes of attempt 1 running', async () => {
      const attempt = (await t.runtime.deps.store.getJob(jobId)).attemptCount >= 1 ? await t.runtime.deps.store.getAttempt(jobId, 1) : null;
      return attempt !== null && attempt.reports.filter((report) => report.phase === 'setup').length === 2 ? true : undefined;
    });
    const pids = t.runtime.deps.compute.liveGroups();
    writeFileSync(`${jobWorkDir(t.runtime.dataDir, jobId)}/go`, '');
    const job = await finish(t, jobId);

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 });
    expect(job.view.attempts).toMatchObject([
      {
        attempt: 1,
        outcome: 'EXITED',
        phase: 'run',
        exitCodes: [null, 29],
        decision: 'RESTART',
        reason: 'exit code 29 on node 1 (run) is in recover_on_exit_codes; restart 1, unlimited',
      },
      { attempt: 2, outcome: 'EXITED', phase: 'run', exitCodes: [0, 0], decision: 'SUCCEED', reason: 'all 2 nodes exited 0 (run); job succeeded' },
    ]);
    expect(job.attempts[0]?.outcome).toEqual({
      kind: 'EXITED',
      phase: 'run',
      nodes: [
        { rank: 0, exitCode: null, killedByController: true, unknownReason: 'stopped because node 1 failed' },
        { rank: 1, exitCode: 29 },
      ],
    });
    // Node 0 was stopped by the controller: its run is reported stopped, with its last lines
    // and no code, so its SIGTERM is not a code.
    expect(reportCodes(job.attempts).map((codes) => codes.sort())).toEqual([
      ['run:29@1', 'run:stopped(shutdown)@0', 'setup:0@0', 'setup:0@1'],
      ['run:0@0', 'run:0@1', 'setup:0@0', 'setup:0@1'],
    ]);
    const runTails = job.attempts[1]?.reports.filter((r) => r.phase === 'run').map((r) => r.outputTail);
    expect(runTails?.sort()).toEqual(['node 0 done', 'node 1 done']);
    expect(job.job.counters).toMatchObject({ restartsOnErrors: 0, restartsOnExitCodes: 1, recoveryCount: 1 });
    expect(pids).toHaveLength(2);
    for (const pid of pids) expect(liveInGroup(pid)).toEqual([]);
    expect(t.errors).toEqual([]);
  });

  it('refuses a report and a heartbeat from an attempt that has been replaced, and changes nothing', async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(
      yaml`
        resources:
          job_recovery:
            recover_on_exit_codes: [29]
        run: |
          if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then exit 29; fi
          while [ ! -f go ]; do sleep 0.02; done
          echo finished
      `,
    );
    await waitUntilAwaiting(t, jobId, 2);
    // Attempt 2 settles first: its setup reports, then its run waits for `go`, writing
    // nothing more (a beat comes only every 30 s), so the snapshot below stays true.
    await waitFor('attempt 2 to report its setup', async () => ((await t.runtime.deps.store.getAttempt(jobId, 2)).reports.some((r) => r.phase === 'setup') ? true : undefined));
    const secret = t.launches[0]?.callbackSecret as string;
    expect(t.launches.map((l) => l.attempt)).toEqual([1, 2]);
    const before = await stored(t, jobId);
    const { deps } = t.runtime;

    const credentials = { jobId, attempt: 1, nodeRank: 0, secret };
    await expect(reportPhase({ ...credentials, phase: 'run', exitCode: 0, outputTail: 'late' }, deps)).rejects.toThrow(StaleAttemptError);
    await expect(reportPhase({ ...credentials, phase: 'setup', exitCode: 1, outputTail: 'late' }, deps)).rejects.toThrow(StaleAttemptError);
    await expect(heartbeat(credentials, deps)).rejects.toThrow(StaleAttemptError);
    // The same report again is acknowledged (an agent retrying a lost answer), as a duplicate.
    await expect(reportPhase({ ...credentials, phase: 'run', exitCode: 29, outputTail: '' }, deps)).resolves.toEqual({ status: 'duplicate' });

    expect(await stored(t, jobId)).toEqual(before);
    writeFileSync(`${jobWorkDir(t.runtime.dataDir, jobId)}/go`, '');
    const job = await finish(t, jobId);
    expect(job.view.attempts).toMatchObject([
      { attempt: 1, exitCodes: [29], decision: 'RESTART' },
      { attempt: 2, exitCodes: [0], decision: 'SUCCEED' },
    ]);
    expect(reportCodes(job.attempts)).toEqual([
      ['setup:0@0', 'run:29@0'],
      ['setup:0@0', 'run:0@0'],
    ]);
    expect(job.job.attemptCount).toBe(2);
  });
});
