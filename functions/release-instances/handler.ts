// ReleaseInstances: terminate the attempt's instances, whatever the decision was.

import { releaseInstances } from '../../lib/usecases/release-instances.ts';
import { WorkflowStateSchema, type WorkflowState } from '../../lib/workflow/contract.ts';
import { releasingCompute, store } from '../shared/deps.ts';
import { startInvocation, type LambdaContext } from '../shared/log.ts';
import { parseEvent } from '../shared/parse.ts';

/** Takes the state and hands it on unchanged, so the decision reaches the Choice. */
export async function handler(event: unknown, context?: LambdaContext): Promise<WorkflowState> {
  const log = startInvocation(context);
  const state = parseEvent(WorkflowStateSchema, event, 'state');
  const next = await releaseInstances(state, { store: store(), compute: releasingCompute() });
  log.info('instances released', {
    jobId: state.jobId,
    attempt: state.attempt,
    action: state.decision?.action,
    reason: state.decision?.reason,
  });
  return next;
}
