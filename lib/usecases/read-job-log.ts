// Reading a job's output, a page at a time, one node's phase at a time: the same use case
// behind the API's route and the CLI's local runtime, whatever keeps the output (the node's
// files, CloudWatch Logs). The cursor a page gives back is opaque to its callers: it names
// the stream it belongs to, so one job's cursor can never read another's output.

import { InvalidInputError } from '../errors.ts';
import type { ControllerLogLine, ControllerLogReader, JobLogReader, JobStore } from '../ports.ts';
import type { JobView } from '../views.ts';
import { jobLogStreamName, type JobLogStream, type ShippedPhase } from '../job-log-names.ts';

/**
 * The most output one page carries, in bytes (UTF-8), one line longer than this aside:
 * even escaped as JSON at its worst (six bytes a control character), a page stays well
 * inside a Lambda's 6 MB answer, and a page of a busy log is a second's reading.
 */
export const MAX_LOG_PAGE_BYTES = 512 * 1024;

/** The longest cursor taken: a stream name and CloudWatch's forward token fit many times over. */
export const MAX_CURSOR_LENGTH = 2048;

/** The most controller lines one read returns. */
export const MAX_CONTROLLER_LINES = 5000;

/** How long before a job's creation its controller lines are looked for (clocks differ a little). */
const CONTROLLER_LOOKBACK_MS = 60_000;

/** What a page of a node's phase output is read from. */
export interface ReadJobLogInput {
  readonly jobId: string;
  readonly attempt: number;
  readonly nodeRank: number;
  readonly phase: ShippedPhase;
  /** A page's cursor, to read on from where it ended; undefined: from the stream's start. */
  readonly cursor?: string | undefined;
}

/** One page of a node's phase output (`GET /jobs/{id}/logs?attempt=&node=&phase=&cursor=`). */
export interface JobLogPageView {
  readonly jobId: string;
  readonly attempt: number;
  readonly nodeRank: number;
  readonly phase: ShippedPhase;
  /** The output read; '' when nothing new was there yet. */
  readonly text: string;
  /** Send it back to read on from here. */
  readonly cursor: string;
  /** The stream's page in the AWS console, on a deployed stack; null locally. */
  readonly consoleUrl: string | null;
}

/**
 * A page of one node's output of one phase. The job must exist (JobNotFoundError), and the
 * attempt, node and cursor belong to it (InvalidInputError naming `attempt`, `node` or
 * `cursor`): nothing reaches the reader that names a stream the job does not have.
 */
export async function readJobLog(input: ReadJobLogInput, deps: { readonly store: JobStore; readonly jobLogs: JobLogReader }): Promise<JobLogPageView> {
  const job = await deps.store.getJob(input.jobId);
  if (input.attempt > job.attemptCount) {
    const had = job.attemptCount === 0 ? 'no attempt yet' : `attempts 1-${job.attemptCount}`;
    throw new InvalidInputError([{ path: 'attempt', message: `expected an attempt of job ${job.jobId}, which has ${had}; got ${input.attempt}` }]);
  }
  const attempt = await deps.store.getAttempt(input.jobId, input.attempt);
  const spec = attempt.task !== undefined && attempt.task !== null ? (job.pipeline?.tasks[attempt.task] ?? job.spec) : job.spec;
  if (input.nodeRank >= spec.numNodes) {
    throw new InvalidInputError([{ path: 'node', message: `expected a node rank 0-${spec.numNodes - 1} (attempt ${input.attempt} runs ${spec.numNodes} ${spec.numNodes === 1 ? 'node' : 'nodes'}), got ${input.nodeRank}` }]);
  }
  const stream: JobLogStream = { jobId: input.jobId, attempt: input.attempt, nodeRank: input.nodeRank, phase: input.phase };
  const name = jobLogStreamName(stream);
  const position = input.cursor === undefined ? null : positionOf(input.cursor, name);
  const page = await deps.jobLogs.read(stream, position, MAX_LOG_PAGE_BYTES);
  return { ...stream, text: page.text, cursor: encodeCursor(name, page.position), consoleUrl: deps.jobLogs.consoleUrl(stream) };
}

/** One node's log of one phase, and its page in the AWS console. */
export interface LogStreamLink {
  readonly attempt: number;
  readonly nodeRank: number;
  readonly phase: ShippedPhase;
  readonly consoleUrl: string;
}

/** The job object with its logs' console links, as a deployed API answers `GET /jobs/{id}`. */
export type JobViewWithLogs = JobView & { readonly logStreams?: readonly LogStreamLink[] };

/**
 * The view with `logStreams`: the console page of every log each launched attempt's nodes
 * have (setup and run), where the reader has a console (a deployed stack); the view as it
 * was otherwise. A stream the node never wrote to opens on an empty page.
 */
export function withLogLinks(view: JobView, reader: JobLogReader | undefined): JobViewWithLogs {
  if (reader === undefined) return view;
  const logStreams: LogStreamLink[] = [];
  for (const attempt of view.attempts) {
    if (attempt.placement === null) continue;
    const nodes = attempt.exitCodes.length > 0 ? attempt.exitCodes.length : view.numNodes;
    for (let nodeRank = 0; nodeRank < nodes; nodeRank += 1) {
      for (const phase of ['setup', 'run'] as const) {
        const consoleUrl = reader.consoleUrl({ jobId: view.jobId, attempt: attempt.attempt, nodeRank, phase });
        if (consoleUrl === null) return view;
        logStreams.push({ attempt: attempt.attempt, nodeRank, phase, consoleUrl });
      }
    }
  }
  return logStreams.length === 0 ? view : { ...view, logStreams };
}

/** What the controller's functions logged about a job (`GET /jobs/{id}/controller-log`). */
export interface ControllerLogView {
  readonly jobId: string;
  /** Oldest first. */
  readonly lines: readonly ControllerLogLine[];
  /** False when there were more than MAX_CONTROLLER_LINES: the newest are left out. */
  readonly complete: boolean;
}

/** The lines the controller's functions logged naming the job, from a little before its creation on. */
export async function readControllerLog(jobId: string, deps: { readonly store: JobStore; readonly controllerLog: ControllerLogReader }): Promise<ControllerLogView> {
  const job = await deps.store.getJob(jobId);
  const since = new Date(Date.parse(job.createdAt) - CONTROLLER_LOOKBACK_MS).toISOString();
  const { lines, complete } = await deps.controllerLog.linesOf(jobId, since, MAX_CONTROLLER_LINES);
  return { jobId, lines, complete };
}

/** The cursor a page gives back: the stream it belongs to and the reader's position in it. */
export function encodeCursor(streamName: string, position: string): string {
  return Buffer.from(JSON.stringify({ s: streamName, p: position }), 'utf8').toString('base64url');
}

/** The reader's position a cursor holds, once it is known to be one of this stream's. */
function positionOf(cursor: string, streamName: string): string {
  const bad = (message: string) => new InvalidInputError([{ path: 'cursor', message }]);
  if (cursor.length > MAX_CURSOR_LENGTH) throw bad(`expected a cursor a page of this log gave, got ${cursor.length} characters (at most ${MAX_CURSOR_LENGTH})`);
  let decoded: unknown;
  try {
    if (!/^[A-Za-z0-9_-]*$/.test(cursor)) throw new Error('not base64url');
    decoded = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw bad(`expected a cursor a page of this log gave, got "${cursor.slice(0, 40)}"`);
  }
  const { s, p } = (typeof decoded === 'object' && decoded !== null ? decoded : {}) as { s?: unknown; p?: unknown };
  if (typeof s !== 'string' || typeof p !== 'string') throw bad(`expected a cursor a page of this log gave, got "${cursor.slice(0, 40)}"`);
  if (s !== streamName) throw bad(`the cursor belongs to another log (${s.slice(0, 120)}), not ${streamName}`);
  return p;
}
