// ContinueAsNewExecution: hand the job to a fresh execution before the history limit.

import { continueAsNew } from '../../lib/usecases/continue-as-new.ts';
import { WorkflowStateSchema, type WorkflowState } from '../../lib/workflow/contract.ts';
import { store, workflow } from '../shared/deps.ts';
import { lambdaHandler } from '../shared/invocation.ts';
import { withJob } from '../shared/log.ts';
import { parseEvent } from '../shared/parse.ts';

/** Starts the continuation (idempotent by name) and returns the state unchanged. */
export const handler = lambdaHandler(async (event, log): Promise<WorkflowState> => {
  const state = parseEvent(WorkflowStateSchema, event, 'state');
  withJob(state);
  const next = await continueAsNew(state, { store: store(), workflow: workflow() });
  log.info('execution continued as new', {
    action: 'CONTINUE_AS_NEW',
    reason: `${state.attemptsInExecution} attempts in this execution`,
  });
  return next;
});
