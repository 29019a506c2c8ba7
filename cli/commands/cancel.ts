// `relaunch cancel JOB... | --all`: cancel jobs, by id or name, through the same use case as
// `DELETE /jobs/{id}`; a job that had already ended is said to have, and left as it is.

import type { Command } from 'commander';
import { InvalidInputError } from '../../lib/errors.ts';
import { isTerminal } from '../../lib/status.ts';
import { openTarget, withTargetOptions, type Target, type TargetOptions } from '../context.ts';
import { jobRefArgument, resolveJob, type JobRef } from '../job-id.ts';
import type { JobsClient } from '../jobs-client.ts';
import { exitWith, ExitStatus, reportError, subcommand, type Io } from '../exit.ts';

interface CancelOptions extends TargetOptions {
  readonly all?: boolean;
  readonly yes?: boolean;
}

/** The `cancel` subcommand. */
export function cancelCommand(io: Io): Command {
  return withTargetOptions(
    subcommand('cancel', io)
      .description('cancel jobs (by id, or by name: the one running job of that name); their instances (or processes) are released')
      .argument('[jobs...]', 'job ids or names', (value: string, previous: JobRef[] = []) => [...previous, jobRefArgument(value)])
      .option('-a, --all', 'cancel every job that has not ended')
      .option('-y, --yes', 'taken for `sky jobs cancel -y`: relaunch asks nothing before it cancels'),
  ).action(async (refs: JobRef[] | undefined, options: CancelOptions) => exitWith(await cancel(refs ?? [], options, io)));
}

async function cancel(refs: readonly JobRef[], options: CancelOptions, io: Io): Promise<ExitStatus> {
  let target: Target | null = null;
  try {
    if (refs.length === 0 && options.all !== true) throw new InvalidInputError([{ path: '<job>', message: 'expected a job id or name, or --all for every job that has not ended' }]);
    if (refs.length > 0 && options.all === true) throw new InvalidInputError([{ path: '--all', message: 'cancels every job that has not ended: expected it without job ids or names' }]);
    target = await openTarget(options, io, { command: 'cancel' });
    const { client } = target;
    if (options.all === true) {
      const live = (await client.listJobs()).filter((job) => !isTerminal(job.status));
      if (live.length === 0) io.out('no job to cancel: every job has ended');
      for (const job of live) io.out(await cancelOne(client, job.jobId));
      return ExitStatus.OK;
    }
    // Each name is looked up before any job is cancelled: a bad one cancels nothing.
    const ids: string[] = [];
    for (const ref of refs) ids.push(await resolveJob(ref, client, { live: true }));
    for (const jobId of new Set(ids)) io.out(await cancelOne(client, jobId));
    return ExitStatus.OK;
  } catch (error) {
    return reportError(io, error);
  } finally {
    await target?.close();
  }
}

/**
 * Cancels one job; the line that says what became of it. A job that had already ended
 * is left as it was, and the line says so (the answer's `alreadyFinished`).
 */
export async function cancelOne(client: Pick<JobsClient, 'cancel'>, jobId: string): Promise<string> {
  const answer: { readonly status: string; readonly alreadyFinished?: boolean } = await client.cancel(jobId);
  if (answer.alreadyFinished === true) return `${jobId}: already ended ${answer.status}, nothing to cancel`;
  return `${jobId}: ${answer.status}`;
}
