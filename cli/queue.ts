// The queue `relaunch status` prints, as a SkyPilot user reads `sky jobs queue`: a row per
// job with its name, resources, times, attempts, recoveries and status (SkyPilot's
// format_job_table in sky/jobs/utils.py has the same columns), its cost from its account,
// and the filters that pick rows.

import { usd } from '../lib/accounting/format.ts';
import { InvalidInputError } from '../lib/errors.ts';
import { isTerminal, JobStatus } from '../lib/status.ts';
import type { AttemptView, JobSummary, JobView } from '../lib/views.ts';
import { formatLength, formatTime } from './times.ts';

/** Rows a queue shows unless told otherwise: the newest 50, as `sky jobs queue` does. */
export const QUEUE_DEFAULT_LIMIT = 50;

/** Which jobs the queue shows. */
export interface QueueFilter {
  /** Only jobs in one of these statuses; empty: any. */
  readonly statuses: readonly JobStatus[];
  /** Only jobs of this name. */
  readonly name?: string;
}

/** The jobs a filter keeps, newest first (the list comes newest first). */
export function selectJobs(jobs: readonly JobSummary[], filter: QueueFilter): JobSummary[] {
  return jobs.filter((job) => (filter.statuses.length === 0 || filter.statuses.includes(job.status)) && (filter.name === undefined || job.name === filter.name));
}

/** Commander's parser for `--status`: one status or several (`RUNNING,RECOVERING`), repeatable; any case. */
export function statusList(value: string, previous: readonly JobStatus[] = []): JobStatus[] {
  const known = Object.values(JobStatus) as string[];
  const given = value.split(',').map((part) => part.trim().toUpperCase());
  const unknown = given.filter((part) => !known.includes(part));
  if (unknown.length > 0 || given.length === 0) {
    throw new InvalidInputError([{ path: '--status', message: `expected one or more of ${known.join(', ')} (comma-separated), got "${value.slice(0, 60)}"` }]);
  }
  return [...previous, ...(given as JobStatus[])];
}

/** Commander's parser for `--limit`: a whole number of jobs, 1 or more. */
export function limitArgument(value: string): number {
  if (!/^[1-9][0-9]{0,5}$/.test(value)) throw new InvalidInputError([{ path: '--limit', message: `expected a number of jobs (1 or more), got "${value.slice(0, 40)}"` }]);
  return Number(value);
}

/** How a queue is printed. */
export interface QueueLayout {
  /** Adds STARTED, WHERE and DETAILS (as `sky jobs queue --all` adds its own). */
  readonly all: boolean;
  /** The time durations of live jobs run up to, in ms since the epoch. */
  readonly now: number;
  /** The zone times are printed in; the machine's own by default. */
  readonly timeZone?: string;
}

/** The queue's columns, in order. */
export const QUEUE_COLUMNS = ['ID', 'NAME', 'RESOURCES', 'SUBMITTED', 'TOT. DURATION', 'JOB DURATION', 'COST', 'ATTEMPTS', 'RECOVERIES', 'STATUS'] as const;
/** What `--all` adds after them. */
export const QUEUE_ALL_COLUMNS = ['STARTED', 'WHERE', 'DETAILS'] as const;

/** The queue's rows, one per job, in the order given; the header first. */
export function queueRows(jobs: readonly JobView[], layout: QueueLayout): string[][] {
  const header: string[] = [...QUEUE_COLUMNS, ...(layout.all ? QUEUE_ALL_COLUMNS : [])];
  return [header, ...jobs.map((job) => queueRow(job, layout))];
}

function queueRow(job: JobView, layout: QueueLayout): string[] {
  const ran = attemptsThatRan(job);
  const row = [
    job.jobId,
    job.name ?? '-',
    resources(job),
    formatTime(job.createdAt, layout.timeZone),
    formatLength((endOf(job, layout.now) - Date.parse(job.createdAt)) / 1000),
    formatLength(runSeconds(ran, layout.now)),
    costCell(job),
    String(ran.length),
    String(job.recoveryCount),
    job.status,
  ];
  if (!layout.all) return row;
  const started = ran.find((attempt) => attempt.runStartedAt !== null)?.runStartedAt ?? null;
  const placed = [...ran].reverse().find((attempt) => attempt.placement !== null)?.placement ?? null;
  return [...row, started === null ? '-' : formatTime(started, layout.timeZone), placed === null ? '-' : (placed.zone ?? placed.region), job.failureReason ?? '-'];
}

/**
 * What the job's instances cost on the markets they ran on, as `relaunch status JOB`'s
 * summary line says it (lib/accounting, from the view the row is made of: no read of its
 * own): `~` marks the package table's estimate (every local job, and a launch EC2 gave no
 * spot price for). A live job's is its cost so far, to the latest time on its record.
 * `-` when nothing was priced: no instance yet, a type the table lacks, or a view with no
 * account (an API older than the accounting).
 */
function costCell(job: JobView): string {
  const cost = job.account?.cost;
  if (cost === undefined || cost.dollars === null) return '-';
  return `${cost.estimate ? '~' : ''}${usd(cost.dollars)}`;
}

/** Attempts that count: a standby let go unused never ran. */
function attemptsThatRan(job: JobView): AttemptView[] {
  return job.attempts.filter((attempt) => attempt.standby === null || attempt.standby.state === 'adopted');
}

/**
 * `2x m5.large spot`: the nodes, and the instance type and market of the latest attempt
 * placed (`-` for the type before any was).
 */
function resources(job: JobView): string {
  const latest = [...job.attempts].reverse().find((attempt) => attempt.placement !== null) ?? job.attempts.at(-1);
  const type = latest?.placement?.instanceType ?? '-';
  const market = latest === undefined ? '' : ` ${latest.market}`;
  return `${job.numNodes}x ${type}${market}`;
}

/** When a job's total duration ends: its last change once it has ended, now while it lives. */
function endOf(job: JobView, now: number): number {
  return isTerminal(job.status) ? Date.parse(job.updatedAt) : now;
}

/** Seconds the job's `run` ran, over all its attempts (SkyPilot's JOB DURATION): setup, launches and waits left out. */
function runSeconds(attempts: readonly AttemptView[], now: number): number {
  let total = 0;
  for (const attempt of attempts) {
    if (attempt.runStartedAt === null) continue;
    const end = attempt.endedAt === null ? now : Date.parse(attempt.endedAt);
    total += Math.max(0, end - Date.parse(attempt.runStartedAt));
  }
  return total / 1000;
}

/** A line over the table, as `sky jobs queue` prints one: the jobs in progress by status. */
export function inProgressLine(jobs: readonly JobSummary[]): string {
  const counts = new Map<string, number>();
  for (const job of jobs) if (!isTerminal(job.status)) counts.set(job.status, (counts.get(job.status) ?? 0) + 1);
  if (counts.size === 0) return 'no job in progress';
  // In the order of a job's life (JobStatus), whatever order the jobs came in.
  const ordered = Object.values(JobStatus).filter((status) => counts.has(status));
  return `in progress: ${ordered.map((status) => `${counts.get(status)} ${status}`).join(', ')}`;
}
