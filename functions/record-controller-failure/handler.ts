// RecordControllerFailure: relaunch's own fault ends the job FAILED_CONTROLLER and frees its instances.

import { recordControllerFailure, type ControllerFailureState } from '../../lib/usecases/controller-failure.ts';
import { ControllerFailureStateSchema } from '../../lib/workflow/contract.ts';
import { clock, releasingCompute, store } from '../shared/deps.ts';
import { startInvocation, type LambdaContext } from '../shared/log.ts';
import { parseEvent } from '../shared/parse.ts';

/** Returns the state with a FAIL decision whose reason the ControllerFailed state shows. */
export async function handler(event: unknown, context?: LambdaContext): Promise<ControllerFailureState> {
  const log = startInvocation(context);
  const state = parseEvent(ControllerFailureStateSchema, event, 'state');
  const next = await recordControllerFailure(state, { store: store(), compute: releasingCompute(), clock });
  log.error('controller failed', {
    jobId: state.jobId,
    attempt: state.attempt,
    action: next.decision?.action,
    status: next.decision?.status,
    reason: next.decision?.reason,
    error: state.controllerError?.Error,
  });
  return next;
}
