// One structured JSON logger for every relaunch Lambda: constant messages, data in fields.

import { Logger } from '@aws-lambda-powertools/logger';

/**
 * The Lambda context fields relaunch relies on (the runtime passes more). Declared here:
 * the project has no @types/aws-lambda, which Powertools' own types refer to.
 */
export interface LambdaContext {
  readonly functionName: string;
  readonly awsRequestId: string;
  readonly [key: string]: unknown;
}

let instance: Logger | undefined;

/** The shared logger, made on first use; POWERTOOLS_* variables tune it. */
export function logger(): Logger {
  instance ??= new Logger({ serviceName: 'relaunch' });
  return instance;
}

/** Starts one invocation's log lines: the request id and function name on each. */
export function startInvocation(context: LambdaContext | undefined): Logger {
  const log = logger();
  if (context !== undefined) log.addContext(context);
  return log;
}
