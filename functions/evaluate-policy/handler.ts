// EvaluateRecoveryPolicy: the policy's decision on the attempt that just ended, with its reason.

import { evaluatePolicy } from '../../lib/usecases/evaluate-policy.ts';
import { WorkflowStateSchema, type WorkflowState } from '../../lib/workflow/contract.ts';
import { clock, random, store } from '../shared/deps.ts';
import { lambdaHandler } from '../shared/invocation.ts';
import { withJob } from '../shared/log.ts';
import { endsJob, recordDecision } from '../shared/metrics.ts';
import { notifyJobEnded } from '../shared/notify.ts';
import { parseEvent } from '../shared/parse.ts';

/** Step Functions passes the whole state and takes the answer as the new state. */
export const handler = lambdaHandler(async (event, log): Promise<WorkflowState> => {
  const state = parseEvent(WorkflowStateSchema, event, 'state');
  withJob(state);
  const next = await evaluatePolicy(state, { store: store(), clock, random });
  const decision = next.decision;
  log.info('recovery decided', {
    action: decision?.action,
    status: decision?.status,
    reason: decision?.reason,
    delaySeconds: decision?.delaySeconds,
    continueAsNew: decision?.continueAsNew,
    awaitError: state.awaitError?.Error,
  });
  if (decision !== undefined) {
    // The attempt as decided: its outcome, exit codes and placement are what the metrics count.
    recordDecision(await store().getAttempt(next.jobId, next.attempt), decision);
    if (endsJob(decision)) {
      await notifyJobEnded({ jobId: next.jobId, status: decision.status, reason: decision.reason, attempt: next.attempt });
    }
  }
  return next;
});
