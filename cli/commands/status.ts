// `relaunch status [JOB]`: a table of jobs, or one job with every attempt.

import type { Command } from 'commander';
import { accountLines } from '../../lib/accounting/format.ts';
import type { AttemptView, JobSummary, JobView } from '../../lib/views.ts';
import { openTarget, withTargetOptions, type Target, type TargetOptions } from '../context.ts';
import { jobIdArgument } from '../job-id.ts';
import { exitWith, ExitStatus, reportError, subcommand, type Io } from '../exit.ts';

interface StatusOptions extends TargetOptions {
  readonly json?: boolean;
}

/** The `status` subcommand. */
export function statusCommand(io: Io): Command {
  return withTargetOptions(
    subcommand('status', io)
      .description('list jobs, or show one job with every attempt: outcome, exit codes, decision, reason, duration, the gap before its run, and standbys')
      .argument('[job]', 'a job id', jobIdArgument)
      .option('--json', 'print JSON: {jobs: [...]} or the job'),
  ).action(async (jobId: string | undefined, options: StatusOptions) => exitWith(await showStatus(jobId, options, io)));
}

/** Prints the jobs, or the job (an unknown id is bad input: status 2). */
export async function showStatus(jobId: string | undefined, options: StatusOptions, io: Io): Promise<ExitStatus> {
  let target: Target | null = null;
  try {
    target = await openTarget(options, io, { command: 'status' });
    if (jobId === undefined) {
      const jobs = await target.client.listJobs();
      io.out(options.json === true ? JSON.stringify({ jobs }, null, 2) : jobTable(jobs));
    } else {
      const job = await target.client.getJob(jobId);
      io.out(options.json === true ? JSON.stringify(job, null, 2) : [jobDetail(job), ...accountLines(job.account)].join('\n'));
    }
    return ExitStatus.OK;
  } catch (error) {
    return reportError(io, error);
  } finally {
    await target?.close();
  }
}

function jobTable(jobs: readonly JobSummary[]): string {
  if (jobs.length === 0) return 'no jobs yet (relaunch run TASK.yaml starts one)';
  return table(
    ['JOB', 'NAME', 'STATUS', 'RECOVERIES', 'RESTARTS ON ERRORS', 'SUBMITTED'],
    jobs.map((job) => [job.jobId, job.name ?? '-', job.status, String(job.recoveryCount), `${job.restartsOnErrors} of ${job.maxRestartsOnErrors}`, job.createdAt]),
  );
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
    duration(attempt),
    attempt.gapSeconds === null ? '-' : `${attempt.gapSeconds.toFixed(1)}s`,
    attempt.reason ?? (attempt.standby?.state === 'released' ? (attempt.standby.releaseReason ?? '') : ''),
  ]);
  const columns = ['ATTEMPT', ...(tasks.length > 0 ? ['TASK'] : []), 'OUTCOME', 'PHASE', 'EXIT CODES', 'DECISION', 'DURATION', 'GAP', 'REASON'];
  return [...head, table(columns, rows), ...standbys(job.attempts), ...agentFailures(job.attempts)].join('\n');
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
function standbys(attempts: readonly AttemptView[]): string[] {
  const lines = attempts.flatMap((attempt) => {
    const standby = attempt.standby;
    if (standby === null) return [];
    const started = `attempt ${attempt.attempt}: the standby of attempt ${standby.for}, started on its ${standby.on === 'rebalance' ? 'rebalance recommendation' : 'spot interruption warning'}`;
    switch (standby.state) {
      case 'holding':
        return [`${started}; holding before run until attempt ${standby.for} is decided`];
      case 'released':
        return [`${started}; released at ${clockTime(standby.releasedAt)}, charged to nothing: ${standby.releaseReason ?? 'no reason recorded'}`];
      case 'adopted': {
        const gap = attempt.gapSeconds === null ? '' : `, ${attempt.gapSeconds.toFixed(1)} s after attempt ${standby.for} ended`;
        const run = attempt.runStartedAt === null ? '; run not started yet' : `; run started at ${clockTime(attempt.runStartedAt)}${gap}`;
        return [`${started}; taken as the next attempt at ${clockTime(standby.adoptedAt)}${run}`];
      }
    }
  });
  return lines.length === 0 ? [] : ['', ...lines];
}

/** `12:00:03.250` (UTC) of an ISO time; `?` when there is none. */
function clockTime(at: string | null): string {
  return at === null ? '?' : at.slice(11, 23);
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

function duration(attempt: AttemptView): string {
  const end = attempt.endedAt === null ? Date.now() : Date.parse(attempt.endedAt);
  const seconds = Math.max(0, (end - Date.parse(attempt.startedAt)) / 1000);
  return seconds < 60 ? `${seconds.toFixed(1)}s` : `${Math.floor(seconds / 60)}m${Math.round(seconds % 60)}s`;
}

/** Columns padded to their widest cell; the last column is not padded. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const all = [header, ...rows];
  const widths = header.map((_, column) => Math.max(...all.map((row) => (row[column] ?? '').length)));
  return all
    .map((row) => row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column] ?? 0))).join('  '))
    .join('\n');
}
