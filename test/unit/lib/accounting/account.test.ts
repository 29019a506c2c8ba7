// A job's time by cause and its timeline, for every rule of docs/recovery.md, through the
// real use cases on a clock the test moves: each figure is known to the second, and the
// causes add up to the wall time.

import { describe, expect, it } from 'vitest';
import { TIME_CAUSES, type JobAccount, type TimeCause } from '../../../../lib/accounting/account.ts';
import type { RecoveryPolicy } from '../../../../lib/task-file/types.ts';
import { jobWith, type Attempt } from './job-runner.ts';

/** The causes with time on them, in seconds. */
function nonZero(account: JobAccount): Partial<Record<TimeCause, number>> {
  return Object.fromEntries(Object.entries(account.seconds).filter(([, seconds]) => seconds > 0));
}

function sumOf(account: JobAccount): number {
  return TIME_CAUSES.reduce((sum, cause) => sum + account.seconds[cause], 0);
}

const ok: Attempt = [{ boot: 30 }, { setup: 20 }, { run: 50, code: 0 }];

describe('a job’s time by cause, for each rule of docs/recovery.md', () => {
  it.each<[string, Partial<RecoveryPolicy>, readonly Attempt[], Partial<Record<TimeCause, number>>, number | null]>([
    ['rule 1: every node exits 0', {}, [ok], { queued: 5, boot: 30, setup: 20, useful: 50, controller: 1 }, 50 / 106],
    [
      'rule 2: a spot preemption, then success',
      {},
      [[{ boot: 30 }, { setup: 20 }, { preempt: 100 }], ok],
      { queued: 5, boot: 60, setup: 40, preempted: 100, useful: 50, controller: 2 },
      50 / 257,
    ],
    [
      'rule 2: a lost instance (no warning), then success',
      {},
      [[{ boot: 30 }, { setup: 20 }, { lose: 70 }], ok],
      { queued: 5, boot: 60, setup: 40, lost: 70, useful: 50, controller: 2 },
      50 / 227,
    ],
    [
      'rule 3: a code in recover_on_exit_codes restarts, then success',
      { recoverOnExitCodes: [29] },
      [[{ boot: 30 }, { setup: 20 }, { run: 40, code: 29 }], ok],
      { queued: 5, boot: 60, setup: 40, restarted: 40, useful: 50, controller: 2 },
      50 / 197,
    ],
    [
      'rule 4: a failing exit within max_restarts_on_errors, after restart_backoff, then success',
      { maxRestartsOnErrors: 1, restartBackoff: { initialSeconds: 30, factor: 2, maxSeconds: 300, jitter: 'none' } },
      [[{ boot: 30 }, { setup: 20 }, { run: 40, code: 1 }], ok],
      { queued: 5, boot: 60, setup: 40, failed: 40, backoff: 30, useful: 50, controller: 2 },
      50 / 227,
    ],
    [
      'rule 4: the budget spent, the job FAILED',
      {},
      [[{ boot: 30 }, { setup: 20 }, { run: 40, code: 1 }]],
      { queued: 5, boot: 30, setup: 20, failed: 40, controller: 1 },
      0,
    ],
    [
      'rule 4: setup fails, FAILED_SETUP',
      {},
      [[{ boot: 30 }, { setup: 20, code: 3 }]],
      { queued: 5, boot: 30, setup: 20, controller: 1 },
      0,
    ],
    [
      'fail_on_exit_codes: FAILED at once',
      { failOnExitCodes: [7], maxRestartsOnErrors: 5 },
      [[{ boot: 30 }, { setup: 20 }, { run: 15, code: 7 }]],
      { queued: 5, boot: 30, setup: 20, failed: 15, controller: 1 },
      0,
    ],
    [
      'a relaunch that finds no capacity waits, then runs',
      {},
      [[{ boot: 30 }, { setup: 20 }, { preempt: 100 }], 'no-capacity', ok],
      { queued: 5, boot: 60, setup: 40, preempted: 100, capacity: 61, useful: 50, controller: 2 },
      50 / 318,
    ],
  ])('%s', async (_name, recovery, attempts, expected, goodput) => {
    const { account } = await jobWith(recovery, attempts, { queued: 5 });

    expect(nonZero(account)).toEqual(expected);
    expect(Math.abs(sumOf(account) - account.wallSeconds)).toBeLessThan(1);
    expect(account.goodput).toBeCloseTo(goodput ?? 0, 6);
  });

  it('counts lost work from the last progress the job wrote, not from the start of run', async () => {
    const { account } = await jobWith({}, [[{ boot: 30 }, { setup: 20 }, { beat: 60, progress: { step: 1200, ageSeconds: 10 } }, { preempt: 40 }], ok]);

    // Run from 50 s to 150 s; the step was written at 100 s: 50 s kept, 50 s lost.
    expect(nonZero(account)).toEqual({ boot: 60, setup: 40, useful: 100, preempted: 50, controller: 2 });
    const attempt1 = account.timelines[0];
    expect(attempt1?.runStartAt).toBe(account.submittedAt + 50_000);
  });

  it('records each node’s timeline: up, first heartbeat, setup, run, stop asked, gone', async () => {
    const { account } = await jobWith({}, [[{ boot: 30 }, { setup: 20 }, { preempt: 100 }], ok], { numNodes: 2 });
    const t0 = account.submittedAt;
    const [first, second] = account.timelines;

    expect(first).toMatchObject({ launchRequestedAt: t0, upAt: t0 + 30_000, setupEndAt: t0 + 50_000, runStartAt: t0 + 50_000, endedAt: t0 + 150_000, stopAskedAt: t0 + 151_000 });
    // Node 0 preempted: its going ended the attempt. Node 1 went when the release resolved (noted once).
    expect(first?.nodes.map((node) => [node.nodeRank, node.firstHeartbeatAt, node.goneAt])).toEqual([
      [0, t0 + 30_000, t0 + 150_000],
      [1, t0 + 30_000, t0 + 151_000],
    ]);
    expect(second).toMatchObject({ launchRequestedAt: t0 + 151_000, upAt: t0 + 181_000, setupEndAt: t0 + 201_000, runStartAt: t0 + 201_000, endedAt: t0 + 251_000 });
    // Each node's agent shuts its instance down on its run report.
    expect(second?.nodes.map((node) => [node.runEndAt, node.goneAt])).toEqual([
      [t0 + 251_000, t0 + 251_000],
      [t0 + 251_000, t0 + 251_000],
    ]);
  });

  it.each<[string, readonly Attempt[], Partial<Record<TimeCause, number>>]>([
    ['setup ran 15 s of the 20 s after the first heartbeat: 5 s were the agent’s own steps', [[{ boot: 30 }, { setup: 20, ran: 15 }, { run: 50, code: 0 }]], { queued: 5, boot: 30, agent: 5, setup: 15, useful: 50, controller: 1 }],
    ['a setup skipped on a kept node (0 ms): all of it the agent’s', [[{ boot: 30 }, { setup: 20, ran: 0 }, { run: 50, code: 0 }]], { queued: 5, boot: 30, agent: 20, useful: 50, controller: 1 }],
    ['a setup longer than the node was up is clamped to its first heartbeat', [[{ boot: 30 }, { setup: 20, ran: 3600 }, { run: 50, code: 0 }]], { queued: 5, boot: 30, setup: 20, useful: 50, controller: 1 }],
    [
      'a preemption, then success, each attempt split',
      [[{ boot: 30 }, { setup: 20, ran: 12 }, { preempt: 100 }], [{ boot: 30 }, { setup: 20, ran: 18 }, { run: 50, code: 0 }]],
      { queued: 5, boot: 60, agent: 10, setup: 30, preempted: 100, useful: 50, controller: 2 },
    ],
    [
      'an agent that failed a step before setup (AGENT_FAILED): all of it the agent’s, with or without durations',
      [[{ boot: 30 }, { agentFailure: 20 }], [{ boot: 30 }, { setup: 20, ran: 20 }, { run: 50, code: 0 }]],
      { queued: 5, boot: 60, agent: 20, setup: 20, useful: 50, controller: 2 },
    ],
    ['a failing setup counts its own time as setup', [[{ boot: 30 }, { setup: 20, code: 3, ran: 4 }]], { queued: 5, boot: 30, agent: 16, setup: 4, controller: 1 }],
  ])('splits the agent’s own steps from setup by the setup report’s duration: %s', async (_name, attempts, expected) => {
    const { account } = await jobWith({}, attempts, { queued: 5 });

    expect(nonZero(account)).toEqual(expected);
    expect(Math.abs(sumOf(account) - account.wallSeconds)).toBeLessThan(1);
  });

  it('dates each node’s setup start by its report, and the attempt’s by the first node to start setup', async () => {
    const { account } = await jobWith({}, [[{ boot: 30 }, { setup: 20, ran: [15, 5] }, { run: 50, code: 0 }]], { numNodes: 2 });
    const t0 = account.submittedAt;
    const [attempt] = account.timelines;

    expect(attempt?.nodes.map((node) => [node.nodeRank, node.setupStartAt, node.setupEndAt])).toEqual([
      [0, t0 + 35_000, t0 + 50_000],
      [1, t0 + 45_000, t0 + 50_000],
    ]);
    expect(attempt).toMatchObject({ upAt: t0 + 30_000, setupStartAt: t0 + 35_000, setupEndAt: t0 + 50_000 });
    expect(nonZero(account)).toEqual({ boot: 30, agent: 5, setup: 15, useful: 50, controller: 1 });
    expect(Math.abs(sumOf(account) - account.wallSeconds)).toBeLessThan(1);
  });

  it('leaves setup’s start unknown for an agent that sends no duration: the agent’s steps stay inside setup', async () => {
    const { account } = await jobWith({}, [ok]);

    expect(account.timelines[0]).toMatchObject({ setupStartAt: null, nodes: [{ setupStartAt: null }] });
    expect(account.seconds.agent).toBe(0);
    expect(account.seconds.setup).toBe(20);
  });

  it('counts instance-seconds per node against the useful ones', async () => {
    const { account } = await jobWith({}, [[{ boot: 30 }, { setup: 20 }, { preempt: 100 }], ok], { numNodes: 2 });

    // Attempt 1: node 0 from 0 s to its preemption at 150 s, node 1 to its release at 151 s.
    // Attempt 2: 151 s to their run reports at 251 s.
    expect(account.instanceSeconds).toBe(150 + 151 + 2 * 100);
    expect(account.usefulInstanceSeconds).toBe(2 * 50);
    expect(account.instanceRatio).toBe(501 / 100);
    expect(account.recoveries).toBe(1);
  });
});
