// Every handler's frame: the invocation's log lines started (with the job's keys when the
// event names its job), and an error that escapes the handler logged, job id included,
// before Lambda reports it. Step Functions sees the same error as before.

import type { Logger } from '@aws-lambda-powertools/logger';
import { startInvocation, type LambdaContext } from './log.ts';

/** What Lambda calls. */
export type LambdaHandler<Result> = (event: unknown, context?: LambdaContext) => Promise<Result>;

/** `body` as a Lambda handler: it gets the event and the invocation's logger. */
export function lambdaHandler<Result>(body: (event: unknown, log: Logger) => Promise<Result>): LambdaHandler<Result> {
  return async (event, context) => {
    const log = startInvocation(context, event);
    try {
      return await body(event, log);
    } catch (error) {
      log.error('invocation failed', { error: error as Error });
      throw error;
    }
  };
}
