// ReleaseInstances: terminate the attempt's instances, whatever the decision was, and a
// standby's the decision does not need.

import { releaseInstances } from '../../lib/usecases/release-instances.ts';
import { WorkflowStateSchema, type WorkflowState } from '../../lib/workflow/contract.ts';
import { clock, compute, store, jobSecrets } from '../shared/deps.ts';
import { lambdaHandler } from '../shared/invocation.ts';
import { withJob } from '../shared/log.ts';
import { parseEvent } from '../shared/parse.ts';

/** Takes the state and hands it on unchanged, so the decision reaches the Choice. */
export const handler = lambdaHandler(async (event, log): Promise<WorkflowState> => {
  const state = parseEvent(WorkflowStateSchema, event, 'state');
  withJob(state);
  const next = await releaseInstances(state, { store: store(), compute: compute(), secrets: jobSecrets(), clock });
  log.info('instances released', { action: state.decision?.action, reason: state.decision?.reason });
  return next;
});
