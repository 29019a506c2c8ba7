// The account as `relaunch status JOB` prints it and `status --json` carries it: the
// summary line, the breakdown, and the view's figures, for a job known to the second.

import { describe, expect, it } from 'vitest';
import { accountLines, candidatePriceLines, summaryLine } from '../../../../lib/accounting/format.ts';
import { toJobView } from '../../../../lib/views.ts';
import { JOB_ID } from '../../../support/usecases-harness.ts';
import { jobWith, type Attempt } from './job-runner.ts';

const ok: Attempt = [{ boot: 30 }, { setup: 20 }, { run: 50, code: 0 }];

async function viewOf(attempts: readonly Attempt[], options: { useSpot?: boolean } = {}) {
  const { h } = await jobWith({}, attempts, { queued: 5, ...options });
  return toJobView(await h.store.getJob(JOB_ID), await h.store.listAttempts(JOB_ID));
}

describe('the account where users look', () => {
  it('sums up a spot job preempted once: goodput, recoveries, spot cost beside on demand, marked estimated', async () => {
    const job = await viewOf([[{ boot: 30 }, { setup: 20 }, { preempt: 100 }], ok]);

    // m5.large in us-east-1 from the table ($0.096 on demand, spot at 35% of it): attempt 1's
    // instance 150 s (launch to gone), attempt 2's 100 s (launch to end, no gone event).
    expect(job.account?.cost).toMatchObject({ market: 'spot', estimate: true });
    expect(job.account?.cost.dollars).toBeCloseTo((250 / 3600) * 0.096 * 0.35, 6);
    expect(job.account?.cost.onDemandDollars).toBeCloseTo((250 / 3600) * 0.096, 6);
    expect(summaryLine(job.account!)).toBe('goodput 19% · 1 recovery · ~$0.0023 spot ($0.0067 on demand), estimated');
  });

  it('prints the breakdown under the attempts, each cause with its time and share', async () => {
    const job = await viewOf([[{ boot: 30 }, { setup: 20 }, { preempt: 100 }], ok]);

    const text = accountLines(job.account).join('\n');

    expect(text).toContain('wall time 4m17s; run time lost 1m40s');
    expect(text).toMatch(/useful run\s+50\.0s \(19%\)/);
    expect(text).toMatch(/lost to preemptions\s+1m40s \(39%\)/);
    expect(text).toMatch(/boot\s+1m00s \(23%\)/);
    expect(text).toMatch(/queued before launch\s+5\.0s \(2%\)/);
    expect(text).toContain('instance-hours 0.069 used, 0.014 useful (5.00x)');
    expect(text).toMatch(/controller \$0\.000\d{3} \(Step Functions, Lambda, DynamoDB, API; estimated\)/);
  });

  it('gives status --json every figure and each attempt’s stretches, adding up to the wall time', async () => {
    const job = await viewOf([[{ boot: 30 }, { setup: 20 }, { run: 40, code: 1 }]], { useSpot: false });
    const account = job.account!;

    expect(account).toMatchObject({ ended: true, wallSeconds: 96, goodput: 0, recoveries: 0, cost: { market: 'on-demand', estimate: false } });
    expect(summaryLine(account)).toBe('goodput 0% · 0 recoveries · $0.0024 on demand');
    const stretches = [...account.between, ...account.attempts.flatMap((a) => a.segments)];
    expect(stretches.reduce((sum, s) => sum + s.seconds, 0)).toBeCloseTo(account.wallSeconds, 3);
    expect(account.attempts[0]?.segments.map((s) => [s.cause, s.seconds])).toEqual([
      ['boot', 30],
      ['setup', 20],
      ['failed', 40],
    ]);
  });

  it('shows the agent’s own steps apart from setup in the breakdown and in --json, with each node’s setup start', async () => {
    const job = await viewOf([[{ boot: 30 }, { setup: 20, ran: 15 }, { run: 50, code: 0 }]]);
    const account = job.account!;

    const text = accountLines(account).join('\n');
    expect(text).toMatch(/agent steps\s+5\.0s \(5%\)/);
    expect(text).toMatch(/setup\s+15\.0s \(14%\)/);
    expect(account.seconds).toMatchObject({ boot: 30, agent: 5, setup: 15, useful: 50 });
    const launch = Date.parse(account.attempts[0]!.launchRequestedAt);
    expect(account.attempts[0]).toMatchObject({ setupStartAt: new Date(launch + 35_000).toISOString(), nodes: [{ setupStartAt: new Date(launch + 35_000).toISOString() }] });
    expect(account.attempts[0]?.segments.map((s) => [s.cause, s.seconds])).toEqual([
      ['boot', 30],
      ['agent', 5],
      ['setup', 15],
      ['useful', 50],
    ]);
  });

  it("prices relaunch validate's candidates per instance-hour: on demand from the table, spot estimated", () => {
    const lines = candidatePriceLines(
      [
        { instanceType: 'm6i.2xlarge', market: 'spot' },
        { instanceType: 'm6i.2xlarge', market: 'spot' },
        { instanceType: 'g5.xlarge', market: 'on-demand', region: 'us-west-2' },
        { instanceType: 'x9.huge', market: 'on-demand' },
      ],
      'accelerators  ',
    );

    expect(lines).toEqual([
      '  price/hour    m6i.2xlarge: ~$0.1344 spot (estimated), $0.3840 on demand',
      '                g5.xlarge in us-west-2: $1.01 on demand',
      '                x9.huge: not in the price table',
    ]);
  });
});
