// LaunchAttempt: start the job's next attempt on EC2, or end it at once (no capacity, cancelled).

import { launchAttempt } from '../../lib/usecases/launch-attempt.ts';
import { WorkflowStateSchema, type WorkflowState } from '../../lib/workflow/contract.ts';
import { clock, compute, store } from '../shared/deps.ts';
import { startInvocation, type LambdaContext } from '../shared/log.ts';
import { parseEvent } from '../shared/parse.ts';

/** Step Functions passes the whole state; `launched: false` sends the machine straight to the policy. */
export async function handler(event: unknown, context?: LambdaContext): Promise<WorkflowState> {
  const log = startInvocation(context);
  const state = parseEvent(WorkflowStateSchema, event, 'state');
  const next = await launchAttempt(state, { store: store(), compute: compute(), clock });
  log.info('attempt launched', {
    jobId: next.jobId,
    attempt: next.attempt,
    action: next.launched === true ? 'LAUNCHED' : 'NOT_LAUNCHED',
    reason: next.launched === true ? 'instances are starting' : 'the attempt ended without instances',
    attemptsInExecution: next.attemptsInExecution,
  });
  return next;
}
