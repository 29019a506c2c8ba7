// Faults as EC2 delivers them, injected by a chaos plan into real runs: the real agent in
// bash, the local API over HTTP, the instance events the local compute emits. Each test
// checks the final status, every attempt's outcome, codes and decision, and that no
// process of the job is left.

import { describe, expect, it } from 'vitest';
import { NO_CHAOS } from '../../../local/chaos.ts';
import { finish, reportCodes, runToEnd, useLocalRuntimes, yaml } from '../../support/local-harness.ts';
import { chaos, processesOfJob } from './world.ts';

const open = useLocalRuntimes();

/**
 * Beats fast and misses fast, so a silent node is found in seconds; the timeout leaves a
 * busy machine ten beats of slack before a node that runs is taken for lost.
 */
const QUICK_HEARTBEATS = { heartbeatIntervalMs: 500, heartbeatTimeoutMs: 5_000 };

describe('faults injected into real runs', () => {
  it('lets node 1 of 2 finish first: its instance shutting down decides nothing, and the job succeeds on attempt 1', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        num_nodes: 2
        run: |
          if [ "$RELAUNCH_NODE_RANK" -eq 0 ]; then sleep 2; fi
          echo "node $RELAUNCH_NODE_RANK done"
      `,
    );

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 0, restartsOnErrors: 0 });
    expect(job.view.attempts).toMatchObject([{ attempt: 1, outcome: 'EXITED', exitCodes: [0, 0], decision: 'SUCCEED' }]);
    // Node 1's instance did go away while node 0 ran: EC2 said so, and nothing changed.
    const shutdowns = t.runtime.deps.compute.emitted.filter((e) => e.event.state === 'terminated' && e.event.instanceId.endsWith('-1-1'));
    expect(shutdowns).toHaveLength(1);
    expect(processesOfJob(job.jobId)).toEqual([]);
    expect(t.errors).toEqual([]);
  });

  it('recovers a preempted node whose peer then exits 1 when it vanishes, without charging the error budget', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        num_nodes: 2
        resources:
          use_spot: true
          job_recovery:
            max_restarts_on_errors: 0
        run: |
          if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then
            if [ "$RELAUNCH_NODE_RANK" -eq 0 ]; then echo $$ > node0.pid; exec sleep 60; fi
            while [ ! -s node0.pid ]; do sleep 0.05; done
            while kill -0 "$(cat node0.pid)" 2>/dev/null; do sleep 0.05; done
            echo "peer vanished" >&2
            exit 1
          fi
          echo "node $RELAUNCH_NODE_RANK done"
      `,
      {
        chaos: chaos`
          faults:
            - attempt: 1
              preempt: {node: 0, after: 1s, warning: 1s}
        `,
      },
    );

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 });
    expect(job.view.attempts).toMatchObject([
      { attempt: 1, outcome: 'PREEMPTED', decision: 'RECOVER' },
      { attempt: 2, outcome: 'EXITED', exitCodes: [0, 0], decision: 'SUCCEED' },
    ]);
    expect(job.attempts[0]?.interruptionNoticedAt).not.toBeNull();
    expect(processesOfJob(job.jobId)).toEqual([]);
    expect(t.errors).toEqual([]);
  });

  it('keeps, and does not charge, a peer\'s exit 1 reported while a node of the attempt is warned', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        num_nodes: 2
        resources:
          use_spot: true
          job_recovery:
            max_restarts_on_errors: 0
        run: |
          if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then
            # Node 0 gets SIGTERM at its warning and takes its grace period to stop, longer than node 1 takes to fail.
            if [ "$RELAUNCH_NODE_RANK" -eq 0 ]; then trap 'echo saving' TERM; date +%s.%N > node0.started; while :; do sleep 0.1; done; fi
            while [ ! -s node0.started ]; do sleep 0.05; done
            # Fails 4 s after node 0's run started: 3 s after node 0's interruption warning.
            until awk -v t="$(cat node0.started)" -v now="$(date +%s.%N)" 'BEGIN { exit !(now - t >= 4) }'; do sleep 0.05; done
            exit 1
          fi
          echo "node $RELAUNCH_NODE_RANK done"
      `,
      {
        chaos: chaos`
          faults:
            - attempt: 1
              preempt: {node: 0, after: 1s, warning: 60s}
        `,
      },
    );

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 });
    expect(job.view.attempts).toMatchObject([
      { attempt: 1, outcome: 'PREEMPTED', decision: 'RECOVER' },
      { attempt: 2, outcome: 'EXITED', exitCodes: [0, 0], decision: 'SUCCEED' },
    ]);
    expect(reportCodes(job.attempts)[0]).toContain('run:1@1');
    expect(processesOfJob(job.jobId)).toEqual([]);
    expect(t.errors).toEqual([]);
  });

  it('recovers a lost instance: no report, no warning, only `terminated`', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        resources:
          job_recovery:
            max_restarts_on_errors: 0
        run: |
          if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then sleep 60; fi
          echo recovered
      `,
      {
        chaos: chaos`
          faults:
            - attempt: 1
              lose: {after: 500ms}
        `,
      },
    );

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 });
    expect(job.view.attempts).toMatchObject([
      { attempt: 1, outcome: 'LOST', decision: 'RECOVER' },
      { attempt: 2, outcome: 'EXITED', exitCodes: [0], decision: 'SUCCEED' },
    ]);
    expect(job.attempts[0]?.outcome).toEqual({ kind: 'LOST', reason: `instance local-${job.jobId}-1-0 was terminated`, nodes: [0] });
    expect(reportCodes(job.attempts)[0]).toEqual(['setup:0@0']);
    const first = t.runtime.deps.compute.emitted.filter((e) => e.event.instanceId === `local-${job.jobId}-1-0`);
    expect(first.map((e) => [e.event.state, e.delivered])).toEqual([
      ['running', false],
      ['terminated', true],
    ]);
    expect(processesOfJob(job.jobId)).toEqual([]);
  });

  it('ends a silenced node LOST at the heartbeat timeout and kills its still-running processes', async () => {
    const t = await open(QUICK_HEARTBEATS);
    const { jobId } = await t.runtime.submit(
      yaml`
        run: |
          if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then sleep 60; fi
          echo recovered
      `,
      {
        chaos: chaos`
          faults:
            - attempt: 1
              silence: {after: 0s}
        `,
      },
    );
    const job = await finish(t, jobId);

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1 });
    expect(job.view.attempts).toMatchObject([
      { attempt: 1, outcome: 'LOST', decision: 'RECOVER' },
      { attempt: 2, outcome: 'EXITED', exitCodes: [0], decision: 'SUCCEED' },
    ]);
    expect(job.attempts[0]?.outcome).toEqual({ kind: 'LOST', reason: 'no heartbeat for 5 s' });
    // Its setup report got through before the cut; its run never reported.
    expect(reportCodes(job.attempts)[0]).toEqual(['setup:0@0']);
    expect(processesOfJob(jobId)).toEqual([]);
  });

  it('still ends a lost attempt when EC2 events about it are dropped: the heartbeat timeout is the clock', async () => {
    const t = await open(QUICK_HEARTBEATS);
    const job = await runToEnd(
      t,
      yaml`
        run: |
          if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then sleep 60; fi
          echo recovered
      `,
      {
        chaos: chaos`
          faults:
            - attempt: 1
              lose: {after: 200ms}
            - attempt: 1
              drop_events: true
        `,
      },
    );

    expect(job.view.status).toBe('SUCCEEDED');
    expect(job.attempts[0]?.outcome).toEqual({ kind: 'LOST', reason: 'no heartbeat for 5 s' });
    const first = t.runtime.deps.compute.emitted.filter((e) => e.event.instanceId === `local-${job.jobId}-1-0`);
    expect(first.map((e) => [e.event.state, e.delivered])).toEqual([
      ['running', false],
      ['terminated', false],
    ]);
    expect(processesOfJob(job.jobId)).toEqual([]);
  });

  it('launches after launch tries that found no capacity, within the launch', async () => {
    const t = await open();
    const job = await runToEnd(t, 'run: echo placed\n', {
      chaos: chaos`
        faults:
          - attempt: 1
            no_capacity: 2
      `,
    });
    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 0 });
    expect(job.view.attempts).toMatchObject([{ attempt: 1, outcome: 'EXITED', exitCodes: [0] }]);
  });

  it('fails the first launch FAILED_NO_RESOURCE when every try finds no capacity, naming the error', async () => {
    const t = await open();
    const job = await runToEnd(t, 'run: echo never\n', {
      chaos: chaos`
        faults:
          - attempt: 1
            no_capacity: 3
      `,
    });
    expect(job.view.status).toBe('FAILED_NO_RESOURCE');
    expect(job.view.attempts).toMatchObject([{ attempt: 1, outcome: 'LAUNCH_FAILED', decision: 'FAIL' }]);
    expect(job.job.failureReason).toContain('InsufficientInstanceCapacity');
    expect(t.runtime.deps.compute.emitted).toEqual([]);
  });

  it('ends an attempt whose nodes cannot be started FAILED_PRECHECKS with the error, never a relaunch loop', async () => {
    const t = await open();
    const path = process.env.PATH;
    process.env.PATH = '/nonexistent';
    try {
      const job = await runToEnd(t, 'run: echo never\n');
      expect(job.view.status).toBe('FAILED_PRECHECKS');
      expect(job.view.attempts).toMatchObject([{ attempt: 1, outcome: 'LAUNCH_FAILED', decision: 'FAIL' }]);
      expect(job.job.failureReason).toMatch(/could not start the nodes of attempt 1: .*ENOENT/);
      expect(t.launches).toHaveLength(1);
    } finally {
      process.env.PATH = path;
    }
  });

  it('ends a phase when its shell exits, though a background child still holds its output', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        run: |
          sleep 60 &
          echo "left a child behind"
          exit 3
      `,
    );
    expect(job.view).toMatchObject({ status: 'FAILED', attempts: [{ outcome: 'EXITED', exitCodes: [3] }] });
    const [attempt] = job.attempts;
    expect(Date.parse(attempt?.endedAt ?? '') - Date.parse(attempt?.startedAt ?? '')).toBeLessThan(30_000);
    expect(attempt?.reports.at(-1)?.outputTail).toBe('left a child behind');
    expect(processesOfJob(job.jobId)).toEqual([]);
  });

  it('runs a task with no faults exactly as before', async () => {
    const t = await open();
    const job = await runToEnd(t, 'run: echo fine\n', { chaos: NO_CHAOS });
    expect(job.view).toMatchObject({ status: 'SUCCEEDED', attempts: [{ outcome: 'EXITED', exitCodes: [0] }] });
  });
});

describe('the boot clock, apart from the heartbeat timeout', () => {
  it('ends FAILED_NO_RESOURCE after max_boot_failures attempts whose node never sent a heartbeat within boot_timeout', async () => {
    // The heartbeat timeout is the default 300 s: only the 2 s boot clock can end these.
    const t = await open();
    const job = await runToEnd(t, 'resources:\n  job_recovery:\n    boot_timeout: 2s\nrun: echo never heard of\n', {
      chaos: chaos`
        faults:
          - {attempt: 1, silence: {from: boot}}
          - {attempt: 2, silence: {from: boot}}
          - {attempt: 3, silence: {from: boot}}
      `,
    });

    expect(job.view.status).toBe('FAILED_NO_RESOURCE');
    expect(job.view.attempts.map((a) => [a.outcome, a.decision])).toEqual([
      ['LOST', 'RECOVER'],
      ['LOST', 'RECOVER'],
      ['LOST', 'FAIL'],
    ]);
    for (const attempt of job.attempts) {
      expect(attempt.outcome).toMatchObject({ kind: 'LOST', neverBooted: true });
      expect(attempt.outcome?.kind === 'LOST' && attempt.outcome.reason).toMatch(/^no heartbeat from the node in the \d+ s since launch \(boot_timeout 2s\)$/);
      expect(attempt.lastHeartbeatAt).toBeNull();
    }
    expect(job.job.failureReason).toContain('the instances never reached relaunch: check the subnet\'s route to the API endpoint');
    expect(processesOfJob(job.jobId)).toEqual([]);
  });

  it('names the one node of two that never came up, though the other beats', async () => {
    const t = await open(QUICK_HEARTBEATS);
    // The boot clock is the product's own timer, and node 0's agent must beat inside it: a
    // 3 s clock was seen to run out first on a busy machine, with the whole suite beside it.
    const job = await runToEnd(
      t,
      yaml`
        num_nodes: 2
        resources:
          job_recovery:
            boot_timeout: 10s
            max_boot_failures: 1
        run: sleep 30
      `,
      { chaos: chaos`
        faults:
          - {attempt: 1, silence: {node: 1, from: boot}}
      ` },
    );

    expect(job.view.status).toBe('FAILED_NO_RESOURCE');
    expect(job.attempts).toHaveLength(1);
    expect(job.attempts[0]).toMatchObject({ nodesHeardFrom: [0], outcome: { kind: 'LOST', neverBooted: true } });
    expect(job.attempts[0]?.outcome).toMatchObject({ reason: expect.stringMatching(/^no heartbeat from node 1 of 2 in the \d+ s since launch \(boot_timeout 10s\)$/) });
    expect(processesOfJob(job.jobId)).toEqual([]);
  });

  it('lets a node boot slower than the heartbeat timeout, within boot_timeout, and succeeds on attempt 1', async () => {
    // Beats every 0.5 s, lost after 5 s without one; the node is silent for its first 8 s.
    const t = await open(QUICK_HEARTBEATS);
    const job = await runToEnd(
      t,
      yaml`
        resources:
          job_recovery:
            boot_timeout: 60s
        run: |
          sleep 3
          echo "slow but fine"
      `,
      { chaos: chaos`
        faults:
          - {attempt: 1, silence: {from: boot, for: 8s}}
      ` },
    );

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', attempts: [{ attempt: 1, outcome: 'EXITED', exitCodes: [0] }] });
    const attempt = job.attempts[0];
    expect(attempt?.nodesHeardFrom).toEqual([0]);
    // The first heartbeat did come more than a heartbeat timeout after the launch.
    expect(Date.parse(attempt?.lastHeartbeatAt ?? '') - Date.parse(attempt?.startedAt ?? '')).toBeGreaterThan(5_000);
    expect(processesOfJob(job.jobId)).toEqual([]);
  });
});
