// `relaunch report` over 1,000 jobs run through the use cases into one in-memory store:
// every sum is known, because every job's steps are.

import { describe, expect, it } from 'vitest';
import { reportLines, reportOf, sinceOf, type ReportedJob } from '../../../../lib/accounting/report.ts';
import { InMemoryJobStore } from '../../../../lib/adapters/memory-job-store.ts';
import { toJobView } from '../../../../lib/views.ts';
import { jobWith, type Attempt } from './job-runner.ts';

const ok: Attempt = [{ boot: 30 }, { setup: 20 }, { run: 50, code: 0 }];
/** Four kinds of job, 250 of each: [attempts, wall seconds, useful seconds, preempted, failed]. */
const KINDS: readonly [readonly Attempt[], number, number, number, number][] = [
  [[ok], 101, 50, 0, 0],
  [[[{ boot: 30 }, { setup: 20 }, { preempt: 100 }], ok], 252, 50, 100, 0],
  [[[{ boot: 30 }, { setup: 20 }, { run: 40, code: 1 }]], 91, 0, 0, 40],
  [[[{ boot: 30 }, { setup: 20 }, { preempt: 10 }], [{ boot: 30 }, { setup: 20 }, { run: 5, code: 1 }]], 117, 0, 10, 5],
];
const JOBS = 1000;

async function thousandJobs(): Promise<ReportedJob[]> {
  const store = new InMemoryJobStore();
  for (let i = 0; i < JOBS; i += 1) {
    const [attempts] = KINDS[i % KINDS.length] as (typeof KINDS)[number];
    await jobWith({}, attempts, { store, jobId: `j-report-${String(i).padStart(4, '0')}` });
  }
  const ended = await store.listJobs();
  return Promise.all(
    ended.map(async (job) => {
      const view = toJobView(job, await store.listAttempts(job.jobId));
      return { jobId: view.jobId, name: view.name, status: view.status, account: view.account! };
    }),
  );
}

describe('relaunch report', () => {
  it('adds up 1,000 jobs of the in-memory store: statuses, wall time, goodput, time lost by cause, cost, the most expensive', async () => {
    const jobs = await thousandJobs();
    const report = reportOf(jobs, new Date('2026-01-01T00:00:00Z'));
    const per = JOBS / KINDS.length;
    const sum = (pick: (kind: (typeof KINDS)[number]) => number) => KINDS.reduce((total, kind) => total + per * pick(kind), 0);

    expect(report.jobs).toBe(JOBS);
    expect(report.byStatus).toEqual({ SUCCEEDED: 500, FAILED: 500 });
    expect(report.wallHours).toBeCloseTo(sum((k) => k[1]) / 3600, 6);
    expect(report.hoursByCause.useful).toBeCloseTo(sum((k) => k[2]) / 3600, 6);
    expect(report.hoursByCause.preempted).toBeCloseTo(sum((k) => k[3]) / 3600, 6);
    expect(report.hoursByCause.failed).toBeCloseTo(sum((k) => k[4]) / 3600, 6);
    expect(report.goodput).toBeCloseTo(sum((k) => k[2]) / sum((k) => k[1]), 6);
    expect(report.estimate).toBe(true);
    // Each job's figures are rounded to the micro-dollar in its view: 1,000 of them to the cent.
    expect(report.onDemandDollars).toBeCloseTo(report.dollars / 0.35, 2);
    // The preempted-then-succeeded kind ran its instances longest: 150 s + 100 s.
    expect(report.mostExpensive).toHaveLength(5);
    expect(report.mostExpensive[0]?.dollars).toBeCloseTo((250 / 3600) * 0.096 * 0.35, 6);
    expect(reportLines(report).join('\n')).toMatch(/jobs ended since 2026-01-01T00:00:00.000Z: 1000 \(FAILED 500, SUCCEEDED 500\)/);
  });

  it.each([
    ['7d', '2026-11-29T12:00:00.000Z'],
    ['12h', '2026-12-06T00:00:00.000Z'],
    ['30m', '2026-12-06T11:30:00.000Z'],
    ['2026-12-01', '2026-12-01T00:00:00.000Z'],
  ])('reads --since %s', (text, expected) => {
    expect(sinceOf(text, new Date('2026-12-06T12:00:00Z'))?.toISOString()).toBe(expected);
  });

  it.each(['7', 'a week', '-3d', ''])('refuses --since %j', (text) => {
    expect(sinceOf(text, new Date())).toBeNull();
  });
});
