// `relaunch logs JOB`: an attempt's output, from the local runtime's log files.

import type { Command } from 'commander';
import { InvalidInputError } from '../../lib/errors.ts';
import { openTarget, withTargetOptions, type Target, type TargetOptions } from '../context.ts';
import { jobIdArgument } from '../job-id.ts';
import { exitWith, ExitStatus, reportError, subcommand, type Io } from '../exit.ts';
import { followJob, LogTail } from '../follow.ts';
import { attemptLogs } from '../../local/paths.ts';

interface LogsOptions extends TargetOptions {
  readonly attempt?: number;
  readonly follow?: boolean;
}

/** The `logs` subcommand. */
export function logsCommand(io: Io): Command {
  return withTargetOptions(
    subcommand('logs', io)
      .description("print a job's output (the latest attempt unless --attempt)")
      .argument('<job>', 'a job id', jobIdArgument)
      .option('--attempt <n>', 'the attempt (1-based)', attemptNumber)
      .option('--follow', 'keep printing until the job ends'),
  ).action(async (jobId: string, options: LogsOptions) => exitWith(await printLogs(jobId, options, io)));
}

async function printLogs(jobId: string, options: LogsOptions, io: Io): Promise<ExitStatus> {
  let target: Target | null = null;
  try {
    target = await openTarget(options, io);
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
    const attempt = options.attempt ?? job.attempts.length;
    if (attempt < 1 || attempt > job.attempts.length) {
      throw new InvalidInputError([{ path: '--attempt', message: `expected 1-${job.attempts.length}, got ${attempt}` }]);
    }
    const text = new LogTail().read(attemptLogs(dataDir, jobId, attempt));
    io.out(text === '' ? `(attempt ${attempt} wrote no output)` : text);
    return ExitStatus.OK;
  } catch (error) {
    return reportError(io, error);
  } finally {
    await target?.close();
  }
}

/** `--attempt`: one attempt number, 1-based. */
function attemptNumber(value: string): number {
  if (!/^[1-9][0-9]*$/.test(value)) {
    throw new InvalidInputError([{ path: '--attempt', message: `expected an attempt number (1-based), got "${value}"` }]);
  }
  return Number(value);
}
