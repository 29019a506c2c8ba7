// launch_on_warning end to end: real local jobs with the chaos file. A warned attempt's
// standby boots and runs setup while the warned job still runs, holds, and runs `run` only
// once the warned attempt has ended and the policy relaunched the job; otherwise it is let
// go unused. The warned job's end is handed to it by the test (a file), so each case waits
// on events, never on time.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { StaleAttemptError } from '../../../lib/errors.ts';
import type { AttemptRecord } from '../../../lib/model.ts';
import { reportPhase } from '../../../lib/usecases/index.ts';
import type { ChaosFault, ChaosPlan } from '../../../lib/chaos-file/types.ts';
import { jobWorkDir, nodeDir } from '../../../local/paths.ts';
import { alive, finish, statusTrail, useLocalRuntimes, waitFor, yaml, type TestRuntime } from '../../support/local-harness.ts';

/**
 * Each test runs two or three attempts of real processes, a standby among them: up to 22 s
 * each beside the rest of the suite on a 2-CPU machine, and past 30 s with two busy loops too.
 */
const MULTI_ATTEMPT = { timeout: 90_000 };

const open = useLocalRuntimes();

/**
 * A spot task with launch_on_warning whose attempt 1 runs until the test writes
 * `release-old` in the job's folder, then exits `oldCode`, or, when the notice stops it
 * first (SIGTERM, noted in `stopped-<node>`), stops then (unreported, as any job the notice
 * stops). Every run start is written to `runs`, with its attempt, node and time.
 */
function task(options: { option?: 'true' | 'rebalance'; oldCode?: number; numNodes?: number; setup?: string; maxRestarts?: number } = {}): string {
  return yaml`
    num_nodes: ${options.numNodes ?? 1}
    resources:
      use_spot: true
      job_recovery:
        launch_on_warning: ${options.option ?? 'true'}
        max_restarts_on_errors: ${options.maxRestarts ?? 0}
    setup: |
      ${options.setup ?? 'echo "setup of attempt $RELAUNCH_ATTEMPT"'}
    run: |
      echo "$RELAUNCH_ATTEMPT $RELAUNCH_NODE_RANK $(date +%s%3N)" >> runs
      if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then
        trap 'touch "stopped-$RELAUNCH_NODE_RANK"; while [ ! -f release-old ]; do sleep 0.05; done; exit 0' TERM
        while [ ! -f release-old ]; do sleep 0.05; done
        exit ${options.oldCode ?? 0}
      fi
      echo "attempt $RELAUNCH_ATTEMPT done"
  `;
}

/** Attempt 1's node `node` warned as its run starts; the instance goes `warning` later. */
function preempted(warning: string, node = 0): ChaosPlan {
  const warningMs = Number(warning.replace('s', '')) * 1000;
  return { faults: [{ kind: 'preempt', attempt: 1, node, afterMs: 0, warningMs } satisfies ChaosFault] };
}

const rebalanced: ChaosPlan = { faults: [{ kind: 'rebalance', attempt: 1, node: 0, afterMs: 0 }] };

/** Waits until attempt 2, the standby, has every node's setup reported: it holds. */
async function standbyHolding(t: TestRuntime, jobId: string, numNodes = 1): Promise<AttemptRecord> {
  return waitFor('the standby to hold after its setup', async () => {
    const standby = await t.runtime.deps.store.getAttempt(jobId, 2).catch(() => undefined);
    const setups = standby?.reports.filter((report) => report.phase === 'setup') ?? [];
    return standby !== undefined && setups.length === numNodes ? standby : undefined;
  });
}

/**
 * Waits until the notice has stopped attempt 1's agent on `node` (a warning shorter than the
 * grace period stops it at once): the standby can hold before the agent's next look at
 * its instance metadata, and a job let go before that would end on its own. The notice is
 * there from the moment the setup report is acknowledged, so the agent may see it before
 * the job's run has started, or before its TERM trap is set: then the run never starts, or
 * ends without `stopped-<node>`. The agent's own log says it stopped either way.
 */
async function stoppedByNotice(t: TestRuntime, jobId: string, node = 0): Promise<void> {
  const agentLog = path.join(nodeDir(t.dataDir, jobId, 1, node), 'agent.log');
  await waitFor(`the notice to stop node ${node}'s agent`, () =>
    existsSync(agentLog) && readFileSync(agentLog, 'utf8').includes('spot interruption notice in instance metadata: stopping') ? true : undefined,
  );
}

/** Lets attempt 1's job end (see `task`). */
function releaseOld(t: TestRuntime, jobId: string): void {
  writeFileSync(path.join(jobWorkDir(t.dataDir, jobId), 'release-old'), '');
}

/** Each run start the job wrote: attempt, node, and when (ms since the epoch). */
function runStarts(t: TestRuntime, jobId: string): { attempt: number; node: number; at: number }[] {
  const file = path.join(jobWorkDir(t.dataDir, jobId), 'runs');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((line) => line.split(' ').map(Number))
    .map(([attempt = 0, node = 0, at = 0]) => ({ attempt, node, at }));
}

/** The attempts whose run started, but attempt 1's, which a notice may stop before its run (see stoppedByNotice). */
function laterRuns(t: TestRuntime, jobId: string): number[] {
  return runStarts(t, jobId)
    .map((run) => run.attempt)
    .filter((attempt) => attempt !== 1);
}

describe('a standby launched on a spot interruption warning', MULTI_ATTEMPT, () => {
  it('runs setup while the warned job runs, holds, and runs once the warned attempt has ended and been relaunched', async () => {
    const t = await open();
    // The standby must hold before the warned instance goes: 24 s gives its launch and setup
    // room on a busy machine (10 s was seen to run out first), and stops the job 12 s in.
    const { jobId } = await t.runtime.submit(task(), { chaos: preempted('24s') });
    const held = await standbyHolding(t, jobId);
    expect(held.standby).toEqual({ for: 1, on: 'interruption' });
    // The warned attempt is still the live one, and nothing of the standby has run.
    expect((await t.runtime.deps.store.getJob(jobId)).attemptCount).toBe(1);
    expect(runStarts(t, jobId).map((run) => run.attempt)).toEqual([1]);
    await stoppedByNotice(t, jobId);
    releaseOld(t, jobId);
    const job = await finish(t, jobId);

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 });
    expect(job.view.attempts).toMatchObject([
      { attempt: 1, outcome: 'PREEMPTED', decision: 'RECOVER', reason: 'spot preemption; recovery 1, does not count toward max_restarts_on_errors' },
      { attempt: 2, outcome: 'EXITED', exitCodes: [0], decision: 'SUCCEED' },
    ]);
    const [old, standby] = job.attempts as [AttemptRecord, AttemptRecord];
    const oldEnd = Date.parse(old.endedAt ?? '');
    // It held: its setup was reported before the warned attempt ended, and its run started after.
    expect(Date.parse(standby.reports[0]?.reportedAt ?? '')).toBeLessThan(oldEnd);
    expect(Date.parse(standby.runStartedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(old.decision?.decidedAt ?? ''));
    const second = runStarts(t, jobId).find((run) => run.attempt === 2);
    expect(second?.at).toBeGreaterThanOrEqual(oldEnd);
    expect(standby.standby).toEqual({ for: 1, on: 'interruption', adoptedAt: expect.any(String) });
    // The standby is the relaunch: two launches in all.
    expect(t.launches.map((launch) => launch.attempt)).toEqual([1, 2]);
    expect(statusTrail(job.events)).toEqual(['PENDING', 'STARTING', 'RUNNING', 'RECOVERING', 'STARTING', 'RUNNING', 'SUCCEEDED']);
    expect(job.events.find((event) => event.to === 'STARTING' && event.attempt === 2)?.reason).toBe(
      'taking standby attempt 2 (spot), started on the spot interruption warning of attempt 1',
    );
    expect(t.errors).toEqual([]);
  });

  it('is released, charged to nothing, when the warned attempt succeeds inside the warning', async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(task(), { chaos: preempted('60s') });
    await standbyHolding(t, jobId);
    const standbyGroup = t.runtime.deps.compute.liveGroups().at(-1) as number;
    releaseOld(t, jobId);
    const job = await finish(t, jobId);

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 0, restartsOnErrors: 0 });
    expect(job.job).toMatchObject({ attemptCount: 1, counters: { recoveryCount: 0, restartsOnErrors: 0, recoverDecisions: 0 } });
    expect(job.view.attempts[0]).toMatchObject({ attempt: 1, outcome: 'EXITED', decision: 'SUCCEED' });
    const standby = job.attempts[1] as AttemptRecord;
    expect(standby).toMatchObject({ outcome: null, decision: null });
    expect(standby.standby?.releaseReason).toBe('not needed: attempt 1 was decided SUCCEED (exit code 0 (run); job succeeded)');
    expect(runStarts(t, jobId).map((run) => run.attempt)).toEqual([1]);
    await waitFor('the standby\'s processes to be gone', () => (alive(standbyGroup) ? undefined : true));
    expect(statusTrail(job.events)).toEqual(['PENDING', 'STARTING', 'RUNNING', 'SUCCEEDED']);
  });

  it('is released with the job when the job is cancelled while it holds', async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(task(), { chaos: preempted('60s') });
    await standbyHolding(t, jobId);
    await t.runtime.cancel(jobId);
    // The warned job, stopped by the release, may end at once rather than wait out its grace.
    releaseOld(t, jobId);
    const job = await finish(t, jobId);

    expect(job.view.status).toBe('CANCELLED');
    expect(job.attempts[1]?.standby?.releaseReason).toMatch(/^not needed: attempt 1 was decided FAIL \(cancelled by the user/);
    expect(runStarts(t, jobId).map((run) => run.attempt)).toEqual([1]);
    expect(t.runtime.deps.compute.liveGroups()).toEqual([]);
  });

  it('whose setup fails is an ordinary setup failure of its attempt, charged as it would be', async () => {
    const t = await open();
    const setup = 'if [ "$RELAUNCH_ATTEMPT" -eq 2 ]; then echo "no model"; exit 1; fi';
    const { jobId } = await t.runtime.submit(task({ setup, maxRestarts: 1 }), { chaos: preempted('10s') });
    await waitFor('the standby\'s setup to fail', async () => ((await t.runtime.deps.store.getAttempt(jobId, 2).catch(() => null))?.outcome?.kind === 'EXITED' ? true : undefined));
    await stoppedByNotice(t, jobId);
    releaseOld(t, jobId);
    const job = await finish(t, jobId);

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 2, restartsOnErrors: 1 });
    expect(job.view.attempts).toMatchObject([
      { attempt: 1, outcome: 'PREEMPTED', decision: 'RECOVER' },
      { attempt: 2, outcome: 'EXITED', phase: 'setup', exitCodes: [1], decision: 'RESTART', reason: 'exit code 1 (setup); restart 1 of 1 on errors, 0 left' },
      { attempt: 3, outcome: 'EXITED', decision: 'SUCCEED' },
    ]);
    expect(laterRuns(t, jobId)).toEqual([3]);
  });

  it('on node 1 of 2 starts both nodes of the next attempt, which run only once the warned attempt has ended', async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(task({ numNodes: 2 }), { chaos: preempted('10s', 1) });
    await standbyHolding(t, jobId, 2);
    await stoppedByNotice(t, jobId, 1);
    releaseOld(t, jobId);
    const job = await finish(t, jobId);

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1 });
    expect(job.view.attempts.map((a) => [a.outcome, a.decision])).toEqual([['PREEMPTED', 'RECOVER'], ['EXITED', 'SUCCEED']]);
    const oldEnd = Date.parse(job.attempts[0]?.endedAt ?? '');
    const runs = runStarts(t, jobId).filter((run) => run.attempt === 2);
    expect(runs.map((run) => run.node).sort()).toEqual([0, 1]);
    for (const run of runs) expect(run.at).toBeGreaterThanOrEqual(oldEnd);
    expect(t.launches.map((launch) => [launch.attempt, launch.spec.numNodes])).toEqual([[1, 2], [2, 2]]);
  });
});

describe('a standby launched on a rebalance recommendation', MULTI_ATTEMPT, () => {
  it('waits, with no termination coming, and is released when the warned attempt ends on its own', async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(task({ option: 'rebalance' }), { chaos: rebalanced });
    const held = await standbyHolding(t, jobId);
    expect(held.standby).toEqual({ for: 1, on: 'rebalance' });
    releaseOld(t, jobId);
    const job = await finish(t, jobId);

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 0 });
    const [old, standby] = job.attempts as [AttemptRecord, AttemptRecord];
    expect(old.rebalanceNoticedAt).toEqual(expect.any(String));
    // A recommendation is no interruption: the attempt's end is its own.
    expect(old.interruptionNoticedAt).toBeNull();
    expect(old.outcome).toMatchObject({ kind: 'EXITED' });
    expect(standby.standby?.releaseReason).toMatch(/^not needed: attempt 1 was decided SUCCEED/);
    expect(runStarts(t, jobId).map((run) => run.attempt)).toEqual([1]);
  });
});

describe("the warned node's report and its instance's end, in both orders", MULTI_ATTEMPT, () => {
  it('report first: its non-zero code, after the warning, is a preemption; the standby takes over', async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(task({ oldCode: 1 }), { chaos: preempted('60s') });
    await standbyHolding(t, jobId);
    releaseOld(t, jobId);
    const job = await finish(t, jobId);

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 });
    expect(job.view.attempts.map((a) => [a.outcome, a.decision])).toEqual([['PREEMPTED', 'RECOVER'], ['EXITED', 'SUCCEED']]);
    expect(job.attempts[0]?.reports.map((r) => `${r.phase}:${r.exitCode}`)).toEqual(['setup:0', 'run:1']);
    expect(runStarts(t, jobId).map((run) => run.attempt)).toEqual([1, 2]);
  });

  it('termination first: the late report is refused, and the standby takes over all the same', async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(task({ oldCode: 1 }), { chaos: preempted('10s') });
    await standbyHolding(t, jobId);
    await stoppedByNotice(t, jobId);
    releaseOld(t, jobId);
    await waitFor('attempt 1 to end', async () => ((await t.runtime.deps.store.getAttempt(jobId, 1)).outcome === null ? undefined : true));
    const late = reportPhase(
      { jobId, attempt: 1, nodeRank: 0, phase: 'run', exitCode: 1, outputTail: 'late', secret: t.launches[0]?.callbackSecret as string },
      t.runtime.deps,
    );
    await expect(late).rejects.toBeInstanceOf(StaleAttemptError);
    const job = await finish(t, jobId);

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 });
    expect(job.view.attempts.map((a) => [a.outcome, a.decision])).toEqual([['PREEMPTED', 'RECOVER'], ['EXITED', 'SUCCEED']]);
    // The notice stopped its run (reported stopped, its last lines kept and no code), or came
    // between setup's report and run's start, when there is no run to stop (stoppedByNotice).
    const reports = job.attempts[0]?.reports.map((r) => `${r.phase}:${r.stopped ?? r.exitCode}`);
    expect([['setup:0', 'run:interruption'], ['setup:0']]).toContainEqual(reports);
    expect(laterRuns(t, jobId)).toEqual([2]);
    expect(existsSync(path.join(nodeDir(t.dataDir, jobId, 2, 0), 'run.log'))).toBe(true);
  });
});

describe('a standby of the warned node alone (reuse on)', MULTI_ATTEMPT, () => {
  it('boots and sets up node 1 while both nodes of the warned attempt work on; node 0 is kept and joins it, and both run attempt 2', async () => {
    const t = await open();
    // Node 1, warned, works until the test lets it go, then fails (a code after the warning
    // is its preemption); node 0 works until it is stopped.
    const { jobId } = await t.runtime.submit(
      yaml`
        num_nodes: 2
        resources:
          use_spot: true
          job_recovery:
            strategy: FAILOVER
            launch_on_warning: true
        setup: echo "setup of attempt $RELAUNCH_ATTEMPT on node $RELAUNCH_NODE_RANK"
        run: |
          echo "$RELAUNCH_ATTEMPT $RELAUNCH_NODE_RANK $(date +%s%3N)" >> runs
          if [ "$RELAUNCH_ATTEMPT" -eq 1 ] && [ "$RELAUNCH_NODE_RANK" -eq 1 ]; then
            while [ ! -f release-old ]; do sleep 0.05; done
            exit 1
          fi
          if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then exec sleep 600; fi
          echo "node $RELAUNCH_NODE_RANK of attempt $RELAUNCH_ATTEMPT"
      `,
      { chaos: preempted('60s', 1) },
    );
    const held = await standbyHolding(t, jobId, 1);
    expect(held.instances.map((node) => node.nodeRank)).toEqual([1]);
    expect(held.standby?.beside?.map((node) => node.nodeRank)).toEqual([0]);
    // Attempt 1 is still the live one, at work, while the replacement holds.
    expect((await t.runtime.deps.store.getAttempt(jobId, 1)).outcome).toBeNull();
    expect((await t.runtime.deps.store.getJob(jobId)).attemptCount).toBe(1);
    releaseOld(t, jobId);
    const job = await finish(t, jobId);

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 });
    const [old, standby] = job.attempts as [AttemptRecord, AttemptRecord];
    expect(old.outcome).toEqual({ kind: 'PREEMPTED', nodes: [1] });
    expect(old.decision?.keep?.nodes.map((node) => node.nodeRank)).toEqual([0]);
    // The replacement set up during the warning, before the warned attempt ended.
    const replacementSetup = standby.reports.find((report) => report.nodeRank === 1 && report.phase === 'setup');
    expect(Date.parse(replacementSetup?.reportedAt ?? '')).toBeLessThan(Date.parse(old.endedAt ?? ''));
    expect(standby.instances.map((node) => [node.nodeRank, node.instanceId === old.instances[node.nodeRank]?.instanceId, node.reusedFrom])).toEqual([
      [0, true, 1],
      [1, false, undefined],
    ]);
    // One launch for the relaunch, of one node; both nodes ran attempt 2, after attempt 1 ended.
    expect(t.launches.map((launch) => [launch.attempt, launch.beside?.nodes.length ?? 0])).toEqual([[1, 0], [2, 1]]);
    const runs = runStarts(t, jobId).filter((run) => run.attempt === 2);
    expect(runs.map((run) => run.node).sort()).toEqual([0, 1]);
    for (const run of runs) expect(run.at).toBeGreaterThanOrEqual(Date.parse(old.endedAt ?? ''));
    expect(t.errors).toEqual([]);
  });
});
