// `relaunch status [JOB]`: a table of jobs, or one job with every attempt.

import type { Command } from 'commander';
import { accountLines } from '../../lib/accounting/format.ts';
import type { JobStatus } from '../../lib/status.ts';
import type { AttemptView, JobSummary, JobView } from '../../lib/views.ts';
import { reusedNodesWords, standbyOfWords } from '../../lib/reused-nodes.ts';
import { openTarget, withTargetOptions, type Target, type TargetOptions } from '../context.ts';
import { jobRefArgument, resolveJob, type JobRef } from '../job-id.ts';
import type { JobsClient } from '../jobs-client.ts';
import { exitWith, ExitStatus, reportError, subcommand, type Io } from '../exit.ts';
import { logLinkLines } from '../log-links.ts';
import { inProgressLine, limitArgument, QUEUE_DEFAULT_LIMIT, queueRows, selectJobs, statusList } from '../queue.ts';
import { formatLength, formatTime } from '../times.ts';

interface StatusOptions extends TargetOptions {
  readonly json?: boolean;
  readonly all?: boolean;
  readonly limit?: number;
  readonly status?: readonly JobStatus[];
  readonly name?: string;
}

/** The `status` subcommand. */
export function statusCommand(io: Io): Command {
  return withTargetOptions(
    subcommand('status', io)
      .description('list jobs as `sky jobs queue` does (name, resources, times, attempts, recoveries, status), or show one job with every attempt')
      .argument('[job]', 'a job id, or a job name (the newest job of that name)', jobRefArgument)
      .option('--status <STATUS[,STATUS]>', 'only jobs in these statuses (repeatable), e.g. RUNNING,RECOVERING', statusList)
      .option('--name <name>', 'only jobs of this name')
      .option('--limit <n>', `at most this many jobs, the newest (default ${QUEUE_DEFAULT_LIMIT})`, limitArgument)
      .option('-a, --all', 'every job, with the columns STARTED, WHERE and DETAILS too')
      .option('--json', 'print JSON: {jobs: [...]} or the job'),
  ).action(async (ref: JobRef | undefined, options: StatusOptions) => exitWith(await showStatus(ref, options, io)));
}

/** Prints the jobs, or the job (an unknown id or name is bad input: status 2). */
export async function showStatus(ref: JobRef | undefined, options: StatusOptions, io: Io): Promise<ExitStatus> {
  let target: Target | null = null;
  try {
    target = await openTarget(options, io, { command: 'status' });
    if (ref === undefined) {
      await printQueue(target.client, options, io, Date.now());
    } else {
      const job = await target.client.getJob(await resolveJob(ref, target.client));
      io.out(options.json === true ? JSON.stringify(job, null, 2) : [jobDetail(job), ...accountLines(job.account), ...logLinkLines(job)].join('\n'));
    }
    return ExitStatus.OK;
  } catch (error) {
    return reportError(io, error);
  } finally {
    await target?.close();
  }
}

/** Views read at once while a queue is printed: enough to be quick, few enough for a deployed API's throttle. */
const VIEWS_AT_ONCE = 4;

/**
 * The queue: the jobs the filters keep (`--all` lifts the limit), a line of those in
 * progress, and a row per job from its view (resources, run time and attempts are its
 * attempts'); `--json` prints the kept jobs as `GET /jobs` lists them.
 */
export async function printQueue(client: Pick<JobsClient, 'listJobs' | 'getJob'>, options: Omit<StatusOptions, 'dataDir'>, io: Io, now: number, timeZone?: string): Promise<void> {
  const all = await client.listJobs();
  const limit = options.limit ?? (options.all === true ? null : QUEUE_DEFAULT_LIMIT);
  const matching = selectJobs(all, { statuses: options.status ?? [], name: options.name });
  const kept = limit === null ? matching : matching.slice(0, limit);
  if (options.json === true) {
    io.out(JSON.stringify({ jobs: kept }, null, 2));
    return;
  }
  if (all.length === 0) {
    io.out('no jobs yet (relaunch run TASK.yaml starts one)');
    return;
  }
  const views = await viewsOf(client, kept);
  const lines = [inProgressLine(all)];
  if (views.length === 0) lines.push('no job matches (relaunch status with no filter lists them all)');
  else {
    const [header = [], ...rows] = queueRows(views, { all: options.all === true, now, timeZone });
    lines.push(table(header, rows));
  }
  // Only jobs the filters keep and the limit cut are "more": those a filter left out are not.
  if (matching.length > kept.length) lines.push(`(the newest ${limit} shown: --limit N or --all for more)`);
  io.out(lines.join('\n'));
}

/** Each job's view, in the list's order, a few read at a time. */
async function viewsOf(client: Pick<JobsClient, 'getJob'>, jobs: readonly JobSummary[]): Promise<JobView[]> {
  const views: JobView[] = [];
  for (let at = 0; at < jobs.length; at += VIEWS_AT_ONCE) {
    views.push(...(await Promise.all(jobs.slice(at, at + VIEWS_AT_ONCE).map((job) => client.getJob(job.jobId)))));
  }
  return views;
}

/**
 * The job's counters, named as everywhere: recoveries are every relaunch, whatever its
 * cause; restarts on errors are those charged to max_restarts_on_errors, used of allowed.
 */
export function countersLine(job: JobView): string {
  return `recoveries: ${job.recoveryCount}, restarts on errors: ${job.restartsOnErrors} of ${job.recoveryPolicy.maxRestartsOnErrors}`;
}

function jobDetail(job: JobView): string {
  const head = [
    `job:      ${job.jobId}${job.name === null ? '' : ` (${job.name})`}`,
    `status:   ${job.status}${job.failureReason === null ? '' : ` (${job.failureReason})`}`,
    countersLine(job),
    '',
  ];
  const tasks = job.tasks ?? [];
  if (tasks.length > 0) {
    head.push(table(['TASK', 'NAME', 'STATUS'], tasks.map((task) => [String(task.task + 1), task.name ?? '-', task.status])), '');
  }
  const rows = job.attempts.map((attempt) => [
    String(attempt.attempt),
    ...(tasks.length > 0 ? [attempt.task === undefined ? '-' : String(attempt.task + 1)] : []),
    outcomeCell(attempt),
    attempt.phase ?? '-',
    attempt.exitCodes.length === 0 ? '-' : attempt.exitCodes.map((c) => (c === null ? '?' : String(c))).join(','),
    attempt.decision ?? '-',
    attemptDuration(attempt),
    attempt.gapSeconds === null ? '-' : `${attempt.gapSeconds.toFixed(1)}s`,
    attempt.reason ?? (attempt.standby?.state === 'released' ? (attempt.standby.releaseReason ?? '') : ''),
  ]);
  const columns = ['ATTEMPT', ...(tasks.length > 0 ? ['TASK'] : []), 'OUTCOME', 'PHASE', 'EXIT CODES', 'DECISION', 'DURATION', 'GAP', 'REASON'];
  return [...head, table(columns, rows), ...standbys(job.attempts), ...reusedNodes(job.attempts), ...agentFailures(job.attempts)].join('\n');
}

/**
 * An attempt's outcome, or what it is while it has none: a standby holding before run
 * (STANDBY), one let go unused (NOT NEEDED), or RUNNING.
 */
function outcomeCell(attempt: AttemptView): string {
  if (attempt.standby?.state === 'released') return 'NOT NEEDED';
  if (attempt.outcome !== null) return attempt.outcome;
  return attempt.standby?.state === 'holding' ? 'STANDBY' : 'RUNNING';
}

/** A line for each standby (launch_on_warning): what started it, and what became of it. */
export function standbys(attempts: readonly AttemptView[]): string[] {
  const lines = attempts.flatMap((attempt) => {
    const standby = attempt.standby;
    if (standby === null) return [];
    const started = `attempt ${attempt.attempt}: the standby of ${standbyOfWords(standby)}, started on its ${standby.on === 'rebalance' ? 'rebalance recommendation' : 'spot interruption warning'}`;
    switch (standby.state) {
      case 'holding':
        return [`${started}; holding before run until attempt ${standby.for} is decided`];
      case 'released':
        return [`${started}; released at ${clockTime(standby.releasedAt)}, charged to nothing: ${standby.releaseReason ?? 'no reason recorded'}`];
      case 'adopted': {
        const gap = attempt.gapSeconds === null ? '' : `, ${attempt.gapSeconds.toFixed(1)} s after attempt ${standby.for} ended`;
        const notStarted = attempt.outcome === null ? '; run not started yet' : `; its run never started (it ended ${attempt.outcome})`;
        const run = attempt.runStartedAt === null ? notStarted : `; run started at ${clockTime(attempt.runStartedAt)}${gap}`;
        return [`${started}; taken as the next attempt at ${clockTime(standby.adoptedAt)}${run}`];
      }
    }
  });
  return lines.length === 0 ? [] : ['', ...lines];
}

/** A time as every command prints it; `?` when there is none. */
function clockTime(at: string | null): string {
  return at === null ? '?' : formatTime(at);
}

/**
 * A line for each attempt that runs on nodes a relaunch kept (restart in place, or the
 * survivors of a partial loss): per node, the attempt it was reused from, or `new`.
 */
export function reusedNodes(attempts: readonly AttemptView[]): string[] {
  const lines = attempts.flatMap((attempt) => {
    const words = reusedNodesWords(attempt);
    return words === null ? [] : [`attempt ${attempt.attempt}: ${words}`];
  });
  return lines.length === 0 ? [] : ['', ...lines];
}

/** A line for each attempt whose node's agent failed before setup: which step, and why. */
function agentFailures(attempts: readonly AttemptView[]): string[] {
  const lines = attempts.flatMap((attempt) => {
    const failed = attempt.agentFailure;
    if (failed === null) return [];
    return [`attempt ${attempt.attempt}: relaunch's agent failed on node ${failed.nodeRank} at ${failed.step}, before setup (not the job's failure): ${failed.error}`];
  });
  return lines.length === 0 ? [] : ['', ...lines];
}

/** How long an attempt lasted (to now while it lives), as the DURATION column shows it. */
export function attemptDuration(attempt: Pick<AttemptView, 'startedAt' | 'endedAt'>): string {
  const end = attempt.endedAt === null ? Date.now() : Date.parse(attempt.endedAt);
  const seconds = Math.max(0, (end - Date.parse(attempt.startedAt)) / 1000);
  // Tenths under a minute (a local attempt lasts seconds); longer, as every length is printed (119.6 s is 1m 59s, never 1m60s).
  return seconds < 60 ? `${seconds.toFixed(1)}s` : formatLength(seconds);
}

/** Columns padded to their widest cell; the last column is not padded. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const all = [header, ...rows];
  const widths = header.map((_, column) => Math.max(...all.map((row) => (row[column] ?? '').length)));
  return all
    .map((row) => row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column] ?? 0))).join('  '))
    .join('\n');
}
