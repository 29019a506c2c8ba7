// Where a deployed job's output lives in CloudWatch Logs: one log group per deployment, one
// stream per job, attempt, node and phase. The agent's shipper writes these streams, the
// scoped credentials it is given name them, and `relaunch logs` and the jobs page read them:
// written once here so the writer, IAM and the readers cannot drift apart.

/** The phases whose output is shipped. */
export type ShippedPhase = 'setup' | 'run';

/** A node's output of one phase of one attempt. */
export interface JobLogStream {
  readonly jobId: string;
  readonly attempt: number;
  readonly nodeRank: number;
  readonly phase: ShippedPhase;
}

/**
 * How long a deployment keeps its jobs' output unless `relaunch:logRetentionDays` says
 * otherwise: long enough to read a month's runs back, short enough not to pay for them forever.
 */
export const DEFAULT_JOB_LOG_RETENTION_DAYS = 30;

/** The log group of a deployment's jobs' output. */
export function jobLogGroupName(namePrefix: string): string {
  return `/${namePrefix}/jobs`;
}

/**
 * The stream of one node's phase: `<jobId>/attempt-<n>/node-<rank>/<phase>`, so the
 * console's stream list, sorted by name, groups a job's attempts and nodes. Job ids hold
 * letters, digits and `-`, never `:` or `*`, which stream names may not contain.
 */
export function jobLogStreamName(stream: JobLogStream): string {
  return `${nodeLogStreamPrefix(stream)}${stream.phase}`;
}

/** Every stream of one node of one attempt starts with this (the scope of its credentials). */
export function nodeLogStreamPrefix(node: Omit<JobLogStream, 'phase'>): string {
  return `${jobLogStreamPrefix(node.jobId)}attempt-${node.attempt}/node-${node.nodeRank}/`;
}

/** Every stream of a job starts with this. */
export function jobLogStreamPrefix(jobId: string): string {
  return `${jobId}/`;
}

/** Reads a stream name back; undefined for a name this deployment did not write. */
export function parseJobLogStreamName(name: string): JobLogStream | undefined {
  const match = /^([A-Za-z0-9-]+)\/attempt-([1-9][0-9]*)\/node-(0|[1-9][0-9]*)\/(setup|run)$/.exec(name);
  if (!match) return undefined;
  const [, jobId, attempt, nodeRank, phase] = match;
  return { jobId: jobId!, attempt: Number(attempt), nodeRank: Number(nodeRank), phase: phase as ShippedPhase };
}

/**
 * The stream's page in the AWS console. The console's fragment escapes `/` and other
 * characters of the names as `$252F` (a `%2F` whose `%` is written `$25`), the form the
 * console itself puts in its address bar.
 */
export function jobLogStreamConsoleUrl(options: { region: string; namePrefix: string; stream: JobLogStream }): string {
  const escape = (text: string) => encodeURIComponent(encodeURIComponent(text)).replace(/%/g, '$');
  const group = escape(jobLogGroupName(options.namePrefix));
  const stream = escape(jobLogStreamName(options.stream));
  return `https://${options.region}.console.aws.amazon.com/cloudwatch/home?region=${options.region}` +
    `#logsV2:log-groups/log-group/${group}/log-events/${stream}`;
}
