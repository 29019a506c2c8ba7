// The janitor: Step Functions' "Execution Status Change" for an execution that ended outside
// its own states (stopped by a cancel in a Wait, by an operator, timed out, or failed where
// no Catch saw it) finishes its job: instances released, CANCELLED or FAILED_CONTROLLER.

import { executionEndedOf, ExecutionEndedEventSchema } from '../../lib/aws-events.ts';
import { onExecutionEnded, type ExecutionEndedResult } from '../../lib/usecases/execution-ended.ts';
import { clock, compute, store, jobSecrets } from '../shared/deps.ts';
import { lambdaHandler } from '../shared/invocation.ts';
import { withJob } from '../shared/log.ts';
import { announceJobEnded } from '../shared/notify.ts';
import { parseEvent } from '../shared/parse.ts';

/** EventBridge delivers at least once: the use case is idempotent, a repeat changes nothing. */
export const handler = lambdaHandler(async (event, log): Promise<ExecutionEndedResult> => {
  const ended = executionEndedOf(parseEvent(ExecutionEndedEventSchema, event, 'event'));
  withJob(ended);
  const result = await onExecutionEnded(ended, { store: store(), compute: compute(), secrets: jobSecrets(), clock });
  log.info('execution end applied', { status: ended.status, action: result.action, reason: result.reason });
  if (result.ended !== undefined) await announceJobEnded(result.ended);
  return result;
});
