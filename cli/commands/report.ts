// `relaunch report [--since 7d] [--json]`: where the time and money of the jobs that ended
// since then went, for the local folder or a deployed stack (lib/accounting/report.ts).

import type { Command } from 'commander';
import { reportLines, reportOf, sinceOf, type ReportedJob } from '../../lib/accounting/report.ts';
import { InvalidInputError } from '../../lib/errors.ts';
import { isTerminal, type JobStatus } from '../../lib/status.ts';
import type { JobsClient } from '../jobs-client.ts';
import { openTarget, withTargetOptions, type Target, type TargetOptions } from '../context.ts';
import { exitWith, ExitStatus, reportError, subcommand, type Io } from '../exit.ts';

interface ReportOptions extends TargetOptions {
  readonly since: string;
  readonly json?: boolean;
}

/** The `report` subcommand. */
export function reportCommand(io: Io): Command {
  return withTargetOptions(
    subcommand('report', io)
      .description('jobs ended since a time: instance-hours, cost spot beside on demand, goodput, time lost by cause, the most expensive jobs')
      .option('--since <age>', 'how far back: 7d, 12h, 30m, or a date (2026-12-01)', '7d')
      .option('--json', 'print the report as JSON'),
  ).action(async (options: ReportOptions) => exitWith(await showReport(options, io)));
}

/** Prints the report (an unreadable --since is bad input: status 2). */
export async function showReport(options: ReportOptions, io: Io, now = new Date()): Promise<ExitStatus> {
  let target: Target | null = null;
  try {
    const since = sinceOf(options.since, now);
    if (since === null) throw new InvalidInputError([{ path: '--since', message: `expected an age such as 7d, 12h or 30m, or a date such as 2026-12-01, got ${JSON.stringify(options.since)}` }]);
    target = await openTarget(options, io, { command: 'report' });
    const report = reportOf(await endedSince(target.client, since), since);
    io.out(options.json === true ? JSON.stringify(report, null, 2) : reportLines(report).join('\n'));
    return ExitStatus.OK;
  } catch (error) {
    return reportError(io, error);
  } finally {
    await target?.close();
  }
}

/** The jobs that ended at `since` or later, with their accounts. */
async function endedSince(client: JobsClient, since: Date): Promise<ReportedJob[]> {
  const ended = (await client.listJobs()).filter((job) => isTerminal(job.status as JobStatus) && Date.parse(job.updatedAt) >= since.getTime());
  const jobs: ReportedJob[] = [];
  for (const summary of ended) {
    const job = await client.getJob(summary.jobId);
    if (job.account !== undefined) jobs.push({ jobId: job.jobId, name: job.name, status: job.status, account: job.account });
  }
  return jobs;
}
