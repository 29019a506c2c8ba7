// CloudWatchJobLogs: a deployment's job output as its nodes shipped it to CloudWatch Logs
// (one stream per job, attempt, node and phase, lib/job-log-names.ts), read a page at a
// time with GetLogEvents from the head on; and CloudWatchControllerLog: the lines the
// controller's Lambdas logged naming a job (FilterLogEvents on their log groups). The API's
// function reads both with its own role, so a user needs no CloudWatch permission.

import { CloudWatchLogsClient, FilterLogEventsCommand, GetLogEventsCommand, type OutputLogEvent } from '@aws-sdk/client-cloudwatch-logs';
import { InvalidInputError } from '../errors.ts';
import type { ControllerLogLine, ControllerLogReader, JobLogPage, JobLogReader } from '../ports.ts';
import { jobLogGroupName, jobLogStreamConsoleUrl, jobLogStreamName, type JobLogStream } from '../job-log-names.ts';
import { awsErrorCode, sendAws } from './aws-errors.ts';

/** GetLogEvents' own bound on events a call. */
const MAX_EVENTS_PER_CALL = 10_000;

/**
 * Calls one read makes at most. GetLogEvents may answer a page with no events and a new
 * token while events lie further on (it scans by time); a read follows such tokens this
 * many times before it answers '' from where it got to, and a cut page costs one call more.
 */
const MAX_CALLS_PER_READ = 5;

/** The position of a stream's head: no token yet. */
const HEAD = '';

/** How CloudWatchJobLogs is set up. */
export interface CloudWatchJobLogsOptions {
  readonly client: CloudWatchLogsClient;
  /** The deployment's name prefix (jobLogGroupName). */
  readonly namePrefix: string;
  /** The deployment's region, for the console's links. */
  readonly region: string;
}

/** The JobLogReader of a deployed stack. */
export class CloudWatchJobLogs implements JobLogReader {
  private readonly logGroupName: string;

  constructor(private readonly options: CloudWatchJobLogsOptions) {
    this.logGroupName = jobLogGroupName(options.namePrefix);
  }

  /**
   * Events from `position` (GetLogEvents' forward token; '' or null: the head), each a line.
   * A page over `maxBytes` is asked for again with fewer events (one event at least), so the
   * token it answers with is exactly after what was returned. A stream not created yet (its
   * node has printed nothing) reads as ''.
   */
  async read(stream: JobLogStream, position: string | null, maxBytes: number): Promise<JobLogPage> {
    const logStreamName = jobLogStreamName(stream);
    let token = position === null || position === HEAD ? undefined : position;
    let limit = MAX_EVENTS_PER_CALL;
    for (let call = 1; ; call += 1) {
      const answer = await this.getLogEvents(logStreamName, token, limit);
      if (answer === 'no-stream') return { text: '', position: token ?? HEAD };
      const events = answer.events ?? [];
      const next = answer.nextForwardToken ?? token ?? HEAD;
      const lines = events.map((event) => lineOf(event));
      const fit = fittingCount(lines, maxBytes);
      if (fit < lines.length && call < MAX_CALLS_PER_READ) {
        limit = fit;
        continue;
      }
      if (lines.length === 0 && next !== (token ?? HEAD) && call < MAX_CALLS_PER_READ) {
        token = next;
        continue;
      }
      // Whole pages only: a cursor always points just past what was returned.
      return { text: lines.join(''), position: next };
    }
  }

  consoleUrl(stream: JobLogStream): string {
    return jobLogStreamConsoleUrl({ region: this.options.region, namePrefix: this.options.namePrefix, stream });
  }

  private async getLogEvents(logStreamName: string, nextToken: string | undefined, limit: number) {
    const command = new GetLogEventsCommand({ logGroupName: this.logGroupName, logStreamName, startFromHead: true, limit, ...(nextToken === undefined ? {} : { nextToken }) });
    try {
      return await sendAws(`CloudWatch Logs GetLogEvents of ${logStreamName}`, () => this.options.client.send(command));
    } catch (error) {
      const code = awsErrorCode(error);
      if (code === 'ResourceNotFoundException') return 'no-stream' as const;
      if (code === 'InvalidParameterException' && nextToken !== undefined) {
        throw new InvalidInputError([{ path: 'cursor', message: `expected a cursor a page of this log gave: CloudWatch Logs refused its token (${(error as Error).message})` }]);
      }
      throw error;
    }
  }
}

/** An event's message as a line of output: the shipper sends each line without its newline. */
function lineOf(event: OutputLogEvent): string {
  const message = event.message ?? '';
  return message.endsWith('\n') ? message : `${message}\n`;
}

/** How many of `lines`, from the first, fit in `maxBytes` (UTF-8); one at least. */
function fittingCount(lines: readonly string[], maxBytes: number): number {
  let bytes = 0;
  for (const [index, line] of lines.entries()) {
    bytes += Buffer.byteLength(line, 'utf8');
    if (bytes > maxBytes) return Math.max(1, index);
  }
  return lines.length;
}

/** How CloudWatchControllerLog is set up. */
export interface CloudWatchControllerLogOptions {
  readonly client: CloudWatchLogsClient;
  /** The controller functions' log groups, by the name each line's `source` shows. */
  readonly logGroups: Readonly<Record<string, string>>;
}

/** The ControllerLogReader of a deployed stack: FilterLogEvents for the job's id in each function's log group. */
export class CloudWatchControllerLog implements ControllerLogReader {
  constructor(private readonly options: CloudWatchControllerLogOptions) {}

  /**
   * Every group's lines holding the job id (a quoted term: the functions' JSON lines carry it
   * as `"jobId"`), merged oldest first; at most `maxLines` in all, the oldest kept.
   */
  async linesOf(jobId: string, since: string, maxLines: number): Promise<{ readonly lines: readonly ControllerLogLine[]; readonly complete: boolean }> {
    const startTime = Date.parse(since);
    let complete = true;
    const lines: ControllerLogLine[] = [];
    for (const [source, logGroupName] of Object.entries(this.options.logGroups)) {
      let nextToken: string | undefined;
      let found = 0;
      do {
        const command = new FilterLogEventsCommand({ logGroupName, filterPattern: `"${jobId}"`, startTime, ...(nextToken === undefined ? {} : { nextToken }) });
        let answer;
        try {
          answer = await sendAws(`CloudWatch Logs FilterLogEvents of ${logGroupName}`, () => this.options.client.send(command));
        } catch (error) {
          // A function that never ran since the deployment has no log group yet.
          if (awsErrorCode(error) === 'ResourceNotFoundException') break;
          throw error;
        }
        for (const event of answer.events ?? []) {
          lines.push({ at: new Date(event.timestamp ?? 0).toISOString(), source, message: (event.message ?? '').replace(/\n+$/, '') });
          found += 1;
        }
        nextToken = answer.nextToken;
        if (found >= maxLines && nextToken !== undefined) {
          complete = false;
          break;
        }
      } while (nextToken !== undefined);
    }
    lines.sort((a, b) => a.at.localeCompare(b.at));
    if (lines.length > maxLines) complete = false;
    return { lines: lines.slice(0, maxLines), complete };
  }
}
