// `relaunch cancel JOB`: cancel a job through the same use case as `DELETE /jobs/{id}`.

import type { Command } from 'commander';
import { openTarget, withTargetOptions, type Target, type TargetOptions } from '../context.ts';
import { jobIdArgument } from '../job-id.ts';
import { exitWith, ExitStatus, reportError, subcommand, type Io } from '../exit.ts';

/** The `cancel` subcommand. */
export function cancelCommand(io: Io): Command {
  return withTargetOptions(
    subcommand('cancel', io).description('cancel a job; its instances (or processes) are released').argument('<job>', 'a job id', jobIdArgument),
  ).action(async (jobId: string, options: TargetOptions) => exitWith(await cancel(jobId, options, io)));
}

async function cancel(jobId: string, options: TargetOptions, io: Io): Promise<ExitStatus> {
  let target: Target | null = null;
  try {
    target = await openTarget(options, io, { command: 'cancel' });
    const { status } = await target.client.cancel(jobId);
    io.out(`${jobId}: ${status}`);
    return ExitStatus.OK;
  } catch (error) {
    return reportError(io, error);
  } finally {
    await target?.close();
  }
}
