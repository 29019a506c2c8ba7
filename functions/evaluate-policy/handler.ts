// EvaluateRecoveryPolicy: the policy's decision on the attempt that just ended, with its reason.

import { evaluatePolicy } from '../../lib/usecases/evaluate-policy.ts';
import { WorkflowStateSchema, type WorkflowState } from '../../lib/workflow/contract.ts';
import { clock, random, store } from '../shared/deps.ts';
import { startInvocation, type LambdaContext } from '../shared/log.ts';
import { parseEvent } from '../shared/parse.ts';

/** Step Functions passes the whole state and takes the answer as the new state. */
export async function handler(event: unknown, context?: LambdaContext): Promise<WorkflowState> {
  const log = startInvocation(context);
  const state = parseEvent(WorkflowStateSchema, event, 'state');
  const next = await evaluatePolicy(state, { store: store(), clock, random });
  log.info('recovery decided', {
    jobId: next.jobId,
    attempt: next.attempt,
    action: next.decision?.action,
    status: next.decision?.status,
    reason: next.decision?.reason,
    delaySeconds: next.decision?.delaySeconds,
    continueAsNew: next.decision?.continueAsNew,
    awaitError: state.awaitError?.Error,
  });
  return next;
}
