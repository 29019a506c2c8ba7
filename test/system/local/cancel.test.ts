// End to end, cancelling a job: while its process runs, and while the controller waits to
// relaunch it. Either way the machine ends it CANCELLED and no process is left.

import { StateName } from '../../../lib/workflow/contract.ts';
import { attemptLogs } from '../../../local/paths.ts';
import { describe, expect, it } from 'vitest';
import { alive, finish, liveInGroup, runToEnd, statusTrail, useLocalRuntimes, waitFor, waitUntilAwaiting, yaml } from '../../support/local-harness.ts';

const open = useLocalRuntimes();

describe('cancel, end to end', () => {
  it('cancels a running job: CANCELLED, and its process group is gone', async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(
      // The sleeps are setup's, so no phase ends (and no report arrives) before the cancel,
      // however the machine schedules the agent.
      yaml`
        setup: |
          sleep 30 &
          sleep 30
        run: "true"
      `,
    );
    await waitUntilAwaiting(t, jobId, 1);
    const pids = await waitFor('the job process', () => {
      const live = t.runtime.deps.compute.liveGroups();
      return live.length === 1 ? live : undefined;
    });
    const [leader] = pids as [number];
    expect(alive(leader)).toBe(true);
    await waitFor('the background sleep', () => (liveInGroup(leader).length >= 2 ? true : undefined));

    expect(await t.runtime.cancel(jobId)).toBe('CANCELLING');
    const job = await finish(t, jobId);

    expect(job.result).toMatchObject({ status: 'FAILED', error: 'CANCELLED' });
    expect(job.view).toMatchObject({ status: 'CANCELLED', failureReason: 'cancelled by the user; no restart' });
    expect(job.view.attempts).toMatchObject([{ attempt: 1, outcome: 'CANCELLED', decision: 'FAIL', reason: 'cancelled by the user; no restart' }]);
    // The node, told to stop after the cancel ended the attempt, still says where its job was:
    // in setup, its code unknown (no code came).
    const { store } = t.runtime.deps;
    const stopped = await waitFor('the stopped setup', async () => {
      const reports = (await store.getAttempt(jobId, 1)).reports;
      return reports.length > 0 ? reports : undefined;
    });
    expect(stopped).toMatchObject([{ nodeRank: 0, phase: 'setup', stopped: 'shutdown' }]);
    expect(stopped[0]?.exitCode).toBeUndefined();
    expect(job.attempts[0]?.decision?.rule).toBe('CANCELLED');
    expect(statusTrail(job.events)).toEqual(['PENDING', 'STARTING', 'RUNNING', 'CANCELLING', 'CANCELLED']);
    expect(job.events[3]).toMatchObject({ from: 'RUNNING', to: 'CANCELLING', reason: 'cancelled by the user', attempt: 1 });
    // The whole group, the background sleep included, is gone.
    expect(alive(leader)).toBe(false);
    expect(liveInGroup(leader)).toEqual([]);
    expect(t.runtime.deps.compute.liveGroups()).toEqual([]);
    // Cancelling again changes nothing.
    expect(await t.runtime.cancel(jobId)).toBe('CANCELLED');
    expect(t.errors).toEqual([]);
  });

  it('cancels a job waiting for its launch slot at once: CANCELLED, never launched', async () => {
    // One instance at once, then one every 100 s: the 2-node launch waits 100 s.
    const t = await open({ launchPace: { burst: 1, perSecond: 0.01 } });
    const { jobId } = await t.runtime.submit(yaml`
      num_nodes: 2
      run: echo never
    `);
    await waitFor('the wait for a launch slot', () => (t.transitions.some((x) => x.state === StateName.WaitForLaunchPace) ? true : undefined));
    expect(await t.runtime.cancel(jobId)).toBe('CANCELLING');
    const job = await finish(t, jobId);

    expect(job.result.status).toBe('ABORTED');
    expect(job.view).toMatchObject({ status: 'CANCELLED', attempts: [], failureReason: 'cancelled by the user' });
    expect(t.launches).toEqual([]);
    expect(statusTrail(job.events)).toEqual(['PENDING', 'CANCELLING', 'CANCELLED']);

    // Its slot was given back: a 1-node job launches at once instead of 100 s later.
    const next = await runToEnd(t, yaml`
      run: echo next
    `);
    expect(next.view.status).toBe('SUCCEEDED');
    expect(t.transitions.filter((x) => x.execution === next.jobId).map((x) => x.state)).not.toContain(StateName.WaitForLaunchPace);
    expect(t.errors).toEqual([]);
  });

  it('cancels a job waiting out an hour of restart backoff at once: CANCELLED, and no new process starts', async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(
      yaml`
        resources:
          job_recovery:
            recover_on_exit_codes: [29]
            restart_backoff:
              initial_seconds: 3600
              factor: 1
              max_seconds: 3600
              jitter: none
        run: |
          echo "attempt $RELAUNCH_ATTEMPT"
          exit 29
      `,
    );
    await waitFor('the backoff wait', () => (t.transitions.some((x) => x.state === StateName.WaitBeforeRelaunch) ? true : undefined));
    expect(await t.runtime.cancel(jobId)).toBe('CANCELLING');
    const job = await finish(t, jobId);

    // The cancel stopped the execution in its Wait; the janitor ended the job.
    expect(job.result.status).toBe('ABORTED');
    expect(job.view).toMatchObject({ status: 'CANCELLED', recoveryCount: 1, failureReason: 'cancelled by the user' });
    expect(job.view.attempts).toMatchObject([
      {
        attempt: 1,
        outcome: 'EXITED',
        exitCodes: [29],
        decision: 'RESTART',
        reason: 'exit code 29 (run) is in recover_on_exit_codes; restart 1, unlimited; next attempt in 3600 s',
      },
    ]);
    expect(t.launches.map((l) => l.attempt)).toEqual([1]);
    expect(attemptLogs(t.runtime.dataDir, jobId, 2)).toEqual([]);
    expect(statusTrail(job.events)).toEqual(['PENDING', 'STARTING', 'RUNNING', 'RECOVERING', 'CANCELLING', 'CANCELLED']);
    expect(t.transitions.map((x) => x.state).at(-1)).toBe(StateName.WaitBeforeRelaunch);
    expect(t.runtime.deps.compute.liveGroups()).toEqual([]);
    expect(t.errors).toEqual([]);
  });
});
