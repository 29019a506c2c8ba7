// The janitor: Step Functions' "Execution Status Change" for an execution that ended outside
// its own states (stopped by a cancel in a Wait, by an operator, timed out, or failed where
// no Catch saw it) finishes its job: instances released, CANCELLED or FAILED_CONTROLLER.

import { executionEndedOf, ExecutionEndedEventSchema } from '../../lib/aws-events.ts';
import { onExecutionEnded, type ExecutionEndedResult } from '../../lib/usecases/execution-ended.ts';
import { clock, releasingCompute, store } from '../shared/deps.ts';
import { startInvocation, type LambdaContext } from '../shared/log.ts';
import { parseEvent } from '../shared/parse.ts';

/** EventBridge delivers at least once: the use case is idempotent, a repeat changes nothing. */
export async function handler(event: unknown, context?: LambdaContext): Promise<ExecutionEndedResult> {
  const log = startInvocation(context);
  const ended = executionEndedOf(parseEvent(ExecutionEndedEventSchema, event, 'event'));
  const result = await onExecutionEnded(ended, { store: store(), compute: releasingCompute(), clock });
  log.info('execution end applied', { jobId: ended.jobId, status: ended.status, action: result.action, reason: result.reason });
  return result;
}
