// `relaunch logs JOB`: an attempt's output, from the local runtime's log files or, on a
// deployed stack, through the API's log pages (CloudWatch Logs behind them); with
// --controller, the controller's side of the job (its launches, ends and decisions, and on
// a deployed stack the controller functions' own lines about it).

import type { Command } from 'commander';
import { InvalidInputError } from '../../lib/errors.ts';
import { openTarget, withTargetOptions, type Target, type TargetOptions } from '../context.ts';
import { jobRefArgument, resolveJob, type JobRef } from '../job-id.ts';
import { exitWith, ExitStatus, reportError, subcommand, type Io } from '../exit.ts';
import { ApiLogTail, attemptNodes, followJob, LogTail, nodeLogs } from '../follow.ts';
import { standbyOfWords } from '../../lib/reused-nodes.ts';
import type { AttemptView, JobView } from '../../lib/views.ts';
import { attemptLogs } from '../../local/paths.ts';
import { controllerTimeline, formatTimeline } from '../controller-log.ts';

interface LogsOptions extends TargetOptions {
  readonly attempt?: number;
  readonly task?: number;
  readonly node?: number;
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
      .option('--node <rank>', "only this node's output (0 for the head node)", nodeRank)
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
    const job = await target.client.getJob(jobId);
    if (target.client.dataDir === null && target.client.readLog === undefined) {
      throw new InvalidInputError([{ path: 'logs', message: `${target.client.where} serves no job output; each phase's last lines are in relaunch status ${jobId} --json` }]);
    }
    if (options.node !== undefined && options.node >= job.numNodes) {
      throw new InvalidInputError([{ path: '--node', message: `expected a node rank 0-${job.numNodes - 1} (the job runs ${job.numNodes} ${job.numNodes === 1 ? 'node' : 'nodes'}), got ${options.node}` }]);
    }
    if (options.follow === true) {
      await followJob(target.client, jobId, io, { progress: false, output: true, ...(options.node === undefined ? {} : { node: options.node }) });
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
    const text = await attemptOutput(target, job, attempt, options.node);
    const whose = options.node === undefined ? `attempt ${attempt}` : `node ${options.node} of attempt ${attempt}`;
    io.out(text === '' ? `(${whose} wrote no output)` : text);
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
 * An attempt's whole output, node by node, setup before run: from the data folder's log
 * files where the client has one, else every page of the API's logs.
 */
async function attemptOutput(target: Target, job: JobView, attempt: number, node: number | undefined): Promise<string> {
  const { dataDir } = target.client;
  if (dataDir !== null) return new LogTail().read(nodeLogs(attemptLogs(dataDir, job.jobId, attempt), node));
  const view = job.attempts[attempt - 1];
  if (view === undefined) return '';
  const tail = new ApiLogTail(target.client, job.jobId);
  let text = '';
  // Each read follows a few pages of each log; a long log takes several.
  for (;;) {
    const more = await tail.read(attempt, attemptNodes(job, view, node));
    if (more === '') return text;
    text += more;
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
  const functions = target.client.controllerLog === undefined ? null : await target.client.controllerLog(jobId);
  io.out(formatTimeline(controllerTimeline(job, events, functions?.lines ?? [])));
  if (events === null) {
    const also = functions === null ? '' : ", and the controller functions' lines naming the job";
    io.out(`(${target.client.where} does not serve the job's status changes: these are its attempts' launches, ends and decisions${also})`);
  }
  if (functions !== null && !functions.complete) io.out(`(only the controller functions' first ${functions.lines.length} lines about the job are shown)`);
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
  const which = `attempt ${attempt.attempt} was the standby of ${standbyOfWords(standby)}`;
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

/** `--node`: a node rank, 0 for the head node. */
function nodeRank(value: string): number {
  if (!/^(0|[1-9][0-9]{0,8})$/.test(value)) {
    throw new InvalidInputError([{ path: '--node', message: `expected a node rank (0 for the head node), got "${value.slice(0, 40)}"` }]);
  }
  return Number(value);
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
