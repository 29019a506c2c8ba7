// One structured JSON logger for every relaunch Lambda: constant messages, data in fields,
// and the job's id and attempt on every line of an invocation once the handler knows them.

import { Logger } from '@aws-lambda-powertools/logger';
import { DEFAULT_SERVICE_NAME, SERVICE_NAME_ENV } from '../../lib/workflow/operations.ts';

/**
 * The Lambda context fields relaunch relies on (the runtime passes more). Declared here:
 * the project has no @types/aws-lambda, which Powertools' own types refer to.
 */
export interface LambdaContext {
  readonly functionName: string;
  readonly awsRequestId: string;
  readonly [key: string]: unknown;
}

/** The job an invocation works on, as every log line of it names it. */
export interface JobKeys {
  readonly jobId: string;
  readonly attempt?: number;
}

let instance: Logger | undefined;

/** The deployment's service name (the `service` of logs, metrics and traces). */
export function serviceName(): string {
  return process.env[SERVICE_NAME_ENV] || DEFAULT_SERVICE_NAME;
}

/** The shared logger, made on first use; POWERTOOLS_* variables tune it. */
export function logger(): Logger {
  instance ??= new Logger({ serviceName: serviceName() });
  return instance;
}

/**
 * Starts one invocation's log lines: the request id and function name on each, and the
 * previous invocation's job keys dropped. An event that names its job at the top (every
 * state the machine passes does) has it on every line from here, even the line of an
 * input that then fails to parse.
 */
export function startInvocation(context: LambdaContext | undefined, event?: unknown): Logger {
  const log = logger();
  log.resetKeys();
  if (context !== undefined) log.addContext(context);
  const keys = jobKeysOf(event);
  if (keys !== undefined) withJob(keys);
  return log;
}

/** Puts the job's id (and attempt, when known) on every later line of this invocation. */
export function withJob(keys: JobKeys): void {
  logger().appendKeys(keys.attempt === undefined ? { jobId: keys.jobId } : { jobId: keys.jobId, attempt: keys.attempt });
}

/** `jobId` and `attempt` at the top of a raw event, if it has them; nothing is validated here. */
function jobKeysOf(event: unknown): JobKeys | undefined {
  if (typeof event !== 'object' || event === null) return undefined;
  const { jobId, attempt } = event as { jobId?: unknown; attempt?: unknown };
  if (typeof jobId !== 'string' || jobId === '') return undefined;
  return typeof attempt === 'number' && Number.isInteger(attempt) ? { jobId, attempt } : { jobId };
}
