// Where a real local job's time and money went, under chaos: a preemption, a lost node, no
// capacity, a warm standby and a restart on an exit code, each run end to end with real
// processes; every job's causes add up to its wall time within 1 s, and it is priced.

import { describe, expect, it } from 'vitest';
import { TIME_CAUSES } from '../../../lib/accounting/account.ts';
import type { AccountView } from '../../../lib/accounting/view.ts';
import { parseChaosFile } from '../../../lib/chaos-file/parse.ts';
import { runToEnd, useLocalRuntimes, yaml } from '../../support/local-harness.ts';

const open = useLocalRuntimes();

/** A spot job on m6i.large whose attempt 1 sleeps (the chaos ends it) and later ones exit `code`. */
function task(recovery: string, options: { laterCode?: number } = {}): string {
  return yaml`
    resources:
      instance_type: m6i.large
      use_spot: true
      job_recovery:
        ${recovery}
    setup: echo setting up
    run: |
      if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then echo 3 > "$RELAUNCH_PROGRESS_FILE"; sleep 30; fi
      exit ${String(options.laterCode ?? 0)}
  `;
}

function expectAccounted(account: AccountView | undefined): AccountView {
  expect(account).toBeDefined();
  const view = account as AccountView;
  const sum = TIME_CAUSES.reduce((total, cause) => total + view.seconds[cause], 0);
  expect(view.ended).toBe(true);
  expect(Math.abs(sum - view.wallSeconds)).toBeLessThan(1);
  expect(view.wallSeconds).toBeGreaterThan(0);
  expect(view.seconds.useful).toBeGreaterThan(0);
  // Local: the table's figures for the type it would use on AWS, always marked estimated.
  expect(view.cost).toMatchObject({ market: 'spot', estimate: true });
  expect(view.cost.dollars).toBeGreaterThan(0);
  expect((view.cost.onDemandDollars as number) * 0.35).toBeCloseTo(view.cost.dollars as number, 7);
  return view;
}

describe('a real local job’s account, under chaos', () => {
  it.each([
    ['a spot preemption', 'max_restarts_on_errors: 0', 'faults:\n  - attempt: 1\n    preempt: {after: 1s, warning: 1s}\n', 'preempted'],
    ['a lost node', 'max_restarts_on_errors: 0', 'faults:\n  - attempt: 1\n    lose: {after: 1s}\n', 'lost'],
  ] as const)('%s: the run lost is counted to its cause, the sums equal the wall time', async (_name, recovery, chaos, cause) => {
    const t = await open();
    const job = await runToEnd(t, task(recovery), { chaos: parseChaosFile(chaos) });

    expect(job.view.status).toBe('SUCCEEDED');
    const account = expectAccounted(job.view.account);
    expect(account.seconds[cause]).toBeGreaterThan(0);
    expect(account.seconds.boot + account.seconds.setup).toBeGreaterThan(0);
    expect(account.recoveries).toBe(1);
    expect(account.attempts[0]?.nodes[0]?.firstHeartbeatAt).not.toBeNull();
    expect(t.errors).toEqual([]);
  });

  // The relaunch's first wait for capacity is 60 s of real time: this test waits it out.
  it('no capacity on the relaunch: the failed launch and the wait are counted as waiting for capacity', { timeout: 180_000 }, async () => {
    const t = await open();
    const chaos = 'faults:\n  - attempt: 1\n    preempt: {after: 1s, warning: 1s}\n  - attempt: 2\n    no_capacity: 3\n';
    const job = await runToEnd(t, task('max_restarts_on_errors: 0'), { chaos: parseChaosFile(chaos) });

    expect(job.view.status).toBe('SUCCEEDED');
    const account = expectAccounted(job.view.account);
    expect(account.seconds.capacity).toBeGreaterThanOrEqual(60);
    expect(t.errors).toEqual([]);
  });

  it('a restart on an exit code: the run lost is counted as restarted', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        resources:
          instance_type: m6i.large
          use_spot: true
          job_recovery:
            recover_on_exit_codes: [29]
        run: |
          if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then sleep 1; exit 29; fi
          echo done
      `,
    );

    expect(job.view.status).toBe('SUCCEEDED');
    const account = expectAccounted(job.view.account);
    expect(account.seconds.restarted).toBeGreaterThan(0.5);
    // Attempt 1's node was released (a fresh one ran attempt 2): its going noted once the release resolved.
    const [first] = job.attempts;
    expect(typeof first?.instancesGoneAt).toBe('string');
    expect(Date.parse(first?.instancesGoneAt as string)).toBeGreaterThanOrEqual(Date.parse(first?.stopAskedAt as string));
    expect(t.errors).toEqual([]);
  });

  it('the agent’s setup report dates setup’s start: its steps before setup are counted apart from setup', async () => {
    const t = await open();
    const job = await runToEnd(
      t,
      yaml`
        resources:
          instance_type: m6i.large
          use_spot: true
        setup: sleep 1
        run: echo done
      `,
    );

    expect(job.view.status).toBe('SUCCEEDED');
    const account = expectAccounted(job.view.account);
    const [node] = account.attempts[0]?.nodes ?? [];
    expect(typeof node?.setupStartAt).toBe('string');
    const start = Date.parse(node?.setupStartAt as string);
    expect(start).toBeGreaterThanOrEqual(Date.parse(node?.firstHeartbeatAt as string));
    expect(start).toBeLessThanOrEqual(Date.parse(node?.setupEndAt as string));
    expect(account.attempts[0]?.setupStartAt).toBe(node?.setupStartAt);
    // The second setup slept is in boot, the agent's steps or setup, whatever the machine's load.
    expect(account.seconds.boot + account.seconds.agent + account.seconds.setup).toBeGreaterThanOrEqual(1);
    expect(t.errors).toEqual([]);
  });

  it('a warm standby: its instance-hours beside the warned attempt are counted apart', async () => {
    const t = await open();
    // The notice stops attempt 1's run, which ends only once the standby has set up (or its
    // instance goes at the warning's end), so the two overlap whatever the machine's load.
    const warm = yaml`
      resources:
        instance_type: m6i.large
        use_spot: true
        job_recovery:
          launch_on_warning: true
      setup: |
        if [ "$RELAUNCH_ATTEMPT" -eq 2 ]; then touch standby-ready; fi
      run: |
        if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then
          trap 'while [ ! -f standby-ready ]; do sleep 0.05; done; exit 0' TERM
          while :; do sleep 0.05; done
        fi
        echo done
    `;
    const chaos = 'faults:\n  - attempt: 1\n    preempt: {after: 1s, warning: 10s}\n';
    const job = await runToEnd(t, warm, { chaos: parseChaosFile(chaos) });

    expect(job.view.status).toBe('SUCCEEDED');
    const account = expectAccounted(job.view.account);
    expect(account.standbyInstanceHours).toBeGreaterThan(0);
    expect(t.errors).toEqual([]);
  });
});
