// `relaunch report`: the accounts of the jobs that ended since a time, added up: jobs,
// instance-hours, cost spot beside on demand, goodput, run time lost by cause, and the most
// expensive jobs.

import { LOST_CAUSES, TIME_CAUSES, type TimeCause } from './account.ts';
import { CAUSE_WORDS, span, usd } from './format.ts';
import type { AccountView } from './view.ts';

/** One ended job as the report reads it. */
export interface ReportedJob {
  readonly jobId: string;
  readonly name: string | null;
  readonly status: string;
  readonly account: AccountView;
}

/** The report: every figure a sum over the jobs, goodput their useful time over their wall time. */
export interface Report {
  readonly since: string;
  readonly jobs: number;
  /** Jobs by terminal status. */
  readonly byStatus: Readonly<Record<string, number>>;
  readonly wallHours: number;
  /** Total useful run time / total wall time; null without wall time. */
  readonly goodput: number | null;
  readonly instanceHours: number;
  readonly usefulInstanceHours: number;
  readonly dollars: number;
  readonly onDemandDollars: number;
  readonly controllerDollars: number;
  /** true when any job's cost is an estimate. */
  readonly estimate: boolean;
  /** Wall hours by cause, over every job. */
  readonly hoursByCause: Readonly<Record<TimeCause, number>>;
  /** The most expensive jobs, most first. */
  readonly mostExpensive: readonly { readonly jobId: string; readonly name: string | null; readonly status: string; readonly dollars: number; readonly goodput: number | null }[];
}

/** How many of the most expensive jobs the report names. */
export const MOST_EXPENSIVE = 5;

/** The report over `jobs` (those that ended since `since`: the caller chooses them). */
export function reportOf(jobs: readonly ReportedJob[], since: Date): Report {
  const hoursByCause = Object.fromEntries(TIME_CAUSES.map((cause) => [cause, 0])) as Record<TimeCause, number>;
  const byStatus: Record<string, number> = {};
  let wall = 0;
  let instanceHours = 0;
  let usefulInstanceHours = 0;
  let dollars = 0;
  let onDemandDollars = 0;
  let controllerDollars = 0;
  let estimate = false;
  for (const { status, account } of jobs) {
    byStatus[status] = (byStatus[status] ?? 0) + 1;
    wall += account.wallSeconds;
    for (const cause of TIME_CAUSES) hoursByCause[cause] += account.seconds[cause] / 3600;
    instanceHours += account.instanceHours;
    usefulInstanceHours += account.usefulInstanceHours;
    dollars += account.cost.dollars ?? 0;
    onDemandDollars += account.cost.onDemandDollars ?? 0;
    controllerDollars += account.cost.controllerDollars;
    estimate ||= account.cost.estimate;
  }
  const mostExpensive = [...jobs]
    .filter((job) => job.account.cost.dollars !== null)
    .sort((a, b) => (b.account.cost.dollars ?? 0) - (a.account.cost.dollars ?? 0) || a.jobId.localeCompare(b.jobId))
    .slice(0, MOST_EXPENSIVE)
    .map((job) => ({ jobId: job.jobId, name: job.name, status: job.status, dollars: job.account.cost.dollars ?? 0, goodput: job.account.goodput }));
  return {
    since: since.toISOString(),
    jobs: jobs.length,
    byStatus,
    wallHours: wall / 3600,
    goodput: wall > 0 ? (hoursByCause.useful * 3600) / wall : null,
    instanceHours,
    usefulInstanceHours,
    dollars,
    onDemandDollars,
    controllerDollars,
    estimate,
    hoursByCause,
    mostExpensive,
  };
}

/** The report in words. */
export function reportLines(report: Report): string[] {
  const lost = LOST_CAUSES.reduce((sum, cause) => sum + report.hoursByCause[cause], 0);
  const statuses = Object.entries(report.byStatus)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([status, count]) => `${status} ${count}`)
    .join(', ');
  const mark = report.estimate ? ' (estimated)' : '';
  const lines = [
    `jobs ended since ${report.since}: ${report.jobs}${statuses === '' ? '' : ` (${statuses})`}`,
    `goodput ${report.goodput === null ? '-' : `${Math.round(report.goodput * 100)}%`} over ${span(report.wallHours * 3600)} of wall time; run time lost ${span(lost * 3600)}`,
    `instance-hours ${report.instanceHours.toFixed(3)} used, ${report.usefulInstanceHours.toFixed(3)} useful`,
    `cost ${usd(report.dollars)} on the markets used, ${usd(report.onDemandDollars)} on demand${mark}; controller ${usd(report.controllerDollars)}`,
    'time by cause:',
    ...TIME_CAUSES.filter((cause) => report.hoursByCause[cause] > 0).map((cause) => `  ${CAUSE_WORDS[cause].padEnd(32)} ${span(report.hoursByCause[cause] * 3600).padStart(8)}`),
  ];
  if (report.mostExpensive.length > 0) {
    lines.push('most expensive:');
    for (const job of report.mostExpensive) {
      lines.push(`  ${job.jobId}  ${(job.name ?? '-').padEnd(16)} ${job.status.padEnd(18)} ${usd(job.dollars).padStart(10)}  goodput ${job.goodput === null ? '-' : `${Math.round(job.goodput * 100)}%`}`);
    }
  }
  return lines;
}

/**
 * `7d`, `12h`, `30m` (or a date) as the time that long before `now`; null for anything
 * else, for the caller to word.
 */
export function sinceOf(text: string, now: Date): Date | null {
  const match = /^(\d{1,6})([dhm])$/.exec(text.trim());
  if (match !== null) {
    const seconds = Number(match[1]) * { d: 86_400, h: 3600, m: 60 }[match[2] as 'd' | 'h' | 'm'];
    return new Date(now.getTime() - seconds * 1000);
  }
  const date = /^\d{4}-\d{2}-\d{2}/.test(text) ? Date.parse(text) : Number.NaN;
  return Number.isNaN(date) ? null : new Date(date);
}
