// The console links of a deployed job's logs, as `relaunch status JOB` prints them under its table.

import type { JobView } from '../lib/views.ts';
import type { JobViewWithLogs } from '../lib/usecases/read-job-log.ts';

/**
 * One line per log of the latest attempt that has any, each with its page in the AWS
 * console; nothing for a job whose API gives none (a local runtime). `--json` holds every
 * attempt's (`logStreams`).
 */
export function logLinkLines(job: JobView): string[] {
  const streams = (job as JobViewWithLogs).logStreams ?? [];
  const latest = streams.at(-1)?.attempt;
  if (latest === undefined) return [];
  const shown = streams.filter((stream) => stream.attempt === latest);
  const earlier = latest > 1 && streams.some((stream) => stream.attempt !== latest) ? ` (earlier attempts' in --json, logStreams)` : '';
  return [
    `logs of attempt ${latest} in the AWS console${earlier}:`,
    ...shown.map((stream) => `  node ${stream.nodeRank} ${stream.phase.padEnd(5)} ${stream.consoleUrl}`),
  ];
}
