// ContinueAsNewExecution: hand the job to a fresh execution before the history limit.

import { continuationExecutionName } from '../ids.ts';
import type { WorkflowState } from '../workflow/contract.ts';
import type { UseCaseDeps } from './deps.ts';

/**
 * Starts the execution `<jobId>-a<attempt>`, which carries on from the next attempt with
 * a fresh attempt budget, and records it as the job's controller. The name makes a retry
 * start the same execution, not a second one. Returns the state unchanged; the old
 * execution then ends.
 */
export async function continueAsNew(state: WorkflowState, deps: Pick<UseCaseDeps, 'store' | 'workflow'>): Promise<WorkflowState> {
  const { store, workflow } = deps;
  const executionArn = await workflow.start(continuationExecutionName(state.jobId, state.attempt), {
    jobId: state.jobId,
    attempt: state.attempt,
    attemptsInExecution: 0,
  });
  await store.setExecution(state.jobId, executionArn);
  return state;
}
