// `relaunch logs JOB`: an attempt's output, from the local runtime's log files; with
// --controller, the controller's side of the job (its launches, ends and decisions).

import type { Command } from 'commander';
import { InvalidInputError } from '../../lib/errors.ts';
import { openTarget, withTargetOptions, type Target, type TargetOptions } from '../context.ts';
import { jobRefArgument, resolveJob, type JobRef } from '../job-id.ts';
import { exitWith, ExitStatus, reportError, subcommand, type Io } from '../exit.ts';
import { followJob, LogTail } from '../follow.ts';
import type { AttemptView, JobView } from '../../lib/views.ts';
import { attemptLogs } from '../../local/paths.ts';
import { controllerTimeline, formatTimeline } from '../controller-log.ts';

interface LogsOptions extends TargetOptions {
  readonly attempt?: number;
  readonly task?: number;
  readonly follow?: boolean;
  readonly controller?: boolean;
}

/** The `logs` subcommand. */
export function logsCommand(io: Io): Command {
  return withTargetOptions(
    subcommand('logs', io)
      .description("print a job's output (the latest attempt unless --attempt or --task)")
      .argument('<job>', 'a job id, or a job name (the newest job of that name)', jobRefArgument)
      .option('--attempt <n>', 'the attempt (1-based)', positive('--attempt', 'an attempt number'))
      .option('--task <n>', "a pipeline's task (1-based): its latest attempt", positive('--task', 'a task number'))
      .option('--follow', 'keep printing until the job ends')
      .option('--controller', "the controller's side instead: each launch, end and decision with its reason and time, and (locally) each status change"),
  ).action(async (ref: JobRef, options: LogsOptions) => exitWith(await printLogs(ref, options, io)));
}

async function printLogs(ref: JobRef, options: LogsOptions, io: Io): Promise<ExitStatus> {
  let target: Target | null = null;
  try {
    target = await openTarget(options, io, { command: 'logs' });
    const jobId = await resolveJob(ref, target.client);
    if (options.controller === true) return await printControllerLog(target, jobId, options, io);
    const { dataDir } = target.client;
    if (dataDir === null) {
      throw new InvalidInputError([
        { path: 'logs', message: `output is kept by the local runtime only; ${target.client.where} keeps each phase's last lines (relaunch status ${jobId} --json)` },
      ]);
    }
    const job = await target.client.getJob(jobId);
    if (options.follow === true) {
      await followJob(target.client, jobId, io, { progress: false, output: true });
      return ExitStatus.OK;
    }
    const attempt = options.attempt ?? (options.task === undefined ? latestThatRan(job) : latestOfTask(job, options.task));
    if (attempt < 1 || attempt > job.attempts.length) {
      throw new InvalidInputError([{ path: '--attempt', message: `expected 1-${job.attempts.length}, got ${attempt}` }]);
    }
    const ran = job.attempts[attempt - 1]?.task;
    if (options.task !== undefined && ran !== options.task - 1) {
      throw new InvalidInputError([{ path: '--task', message: `attempt ${attempt} ran task ${ran === undefined ? 1 : ran + 1}, not task ${options.task}` }]);
    }
    const text = new LogTail().read(attemptLogs(dataDir, jobId, attempt));
    io.out(text === '' ? `(attempt ${attempt} wrote no output)` : text);
    const standby = standbyNote(job.attempts[attempt - 1]);
    if (standby !== null) io.out(standby);
    const failed = job.attempts[attempt - 1]?.agentFailure ?? null;
    if (failed !== null) {
      io.out(`(node ${failed.nodeRank}: relaunch's agent failed at ${failed.step} before setup, not the job: ${failed.error})`);
    }
    return ExitStatus.OK;
  } catch (error) {
    return reportError(io, error);
  } finally {
    await target?.close();
  }
}

/**
 * The controller's timeline of the job. The status changes come from the store, which only
 * a local runtime's client reads; an API's answer holds every attempt's launch, end and
 * decision, so those are what it shows, and it says so.
 */
async function printControllerLog(target: Target, jobId: string, options: LogsOptions, io: Io): Promise<ExitStatus> {
  const other = options.follow === true ? '--follow' : options.attempt !== undefined ? '--attempt' : options.task !== undefined ? '--task' : null;
  if (other !== null) throw new InvalidInputError([{ path: '--controller', message: `prints the whole job's timeline: expected it without ${other}` }]);
  const job = await target.client.getJob(jobId);
  const events = target.client.listEvents === undefined ? null : await target.client.listEvents(jobId);
  io.out(formatTimeline(controllerTimeline(job, events)));
  if (events === null) io.out(`(${target.client.where} does not serve the job's status changes: these are its attempts' launches, ends and decisions)`);
  return ExitStatus.OK;
}

/**
 * The latest attempt that was not a standby let go unused: the one whose output a person
 * wants (a standby's setup output stays under its own number, `--attempt N`).
 */
function latestThatRan(job: JobView): number {
  const ran = job.attempts.filter((attempt) => attempt.standby?.state !== 'released');
  return ran.at(-1)?.attempt ?? job.attempts.length;
}

/** What the attempt's output does not say when it was a standby (launch_on_warning); null otherwise. */
function standbyNote(attempt: AttemptView | undefined): string | null {
  const standby = attempt?.standby ?? null;
  if (attempt === undefined || standby === null) return null;
  const which = `attempt ${attempt.attempt} was the standby of attempt ${standby.for}`;
  switch (standby.state) {
    case 'holding':
      return `(${which}: its setup ran beside attempt ${standby.for}; it holds before run until attempt ${standby.for} is decided)`;
    case 'released':
      return `(${which}: released without running run, charged to nothing: ${standby.releaseReason ?? 'no reason recorded'})`;
    case 'adopted': {
      const gap = attempt.gapSeconds === null ? '' : `, ${attempt.gapSeconds.toFixed(1)} s after attempt ${standby.for} ended`;
      return `(${which}: its setup ran beside attempt ${standby.for}, and its run started once attempt ${standby.for} was decided${gap})`;
    }
  }
}

/** A 1-based number option (`--attempt`, `--task`). */
function positive(option: string, what: string): (value: string) => number {
  return (value) => {
    if (!/^[1-9][0-9]{0,8}$/.test(value)) {
      throw new InvalidInputError([{ path: option, message: `expected ${what} (1-based), got "${value.slice(0, 40)}"` }]);
    }
    return Number(value);
  };
}

/** The latest attempt of a pipeline's task `task` (1-based). */
function latestOfTask(job: JobView, task: number): number {
  const tasks = job.tasks?.length ?? 1;
  if (task > tasks) throw new InvalidInputError([{ path: '--task', message: `expected 1-${tasks} (the job's tasks), got ${task}` }]);
  const attempts = job.attempts.filter((attempt) => (attempt.task ?? 0) === task - 1);
  const latest = attempts.at(-1);
  if (latest === undefined) throw new InvalidInputError([{ path: '--task', message: `task ${task} has not started yet` }]);
  return latest.attempt;
}
