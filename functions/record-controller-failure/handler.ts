// RecordControllerFailure: relaunch's own fault ends the job FAILED_CONTROLLER and frees its instances.

import { recordControllerFailure, type ControllerFailureState } from '../../lib/usecases/controller-failure.ts';
import { JobStatus } from '../../lib/status.ts';
import { ControllerFailureStateSchema } from '../../lib/workflow/contract.ts';
import { clock, compute, store, jobSecrets } from '../shared/deps.ts';
import { lambdaHandler } from '../shared/invocation.ts';
import { withJob } from '../shared/log.ts';
import { announceJobEnded } from '../shared/notify.ts';
import { parseEvent } from '../shared/parse.ts';

/** Returns the state with a FAIL decision whose reason the ControllerFailed state shows. */
export const handler = lambdaHandler(async (event, log): Promise<ControllerFailureState> => {
  const state = parseEvent(ControllerFailureStateSchema, event, 'state');
  withJob(state);
  const next = await recordControllerFailure(state, { store: store(), compute: compute(), secrets: jobSecrets(), clock });
  const decision = next.decision;
  log.error('controller failed', {
    action: decision?.action,
    status: decision?.status,
    reason: decision?.reason,
    error: state.controllerError?.Error,
  });
  // A job that had already ended keeps its status (and was counted when it ended).
  if (decision?.status === JobStatus.FAILED_CONTROLLER) {
    await announceJobEnded({ jobId: state.jobId, status: JobStatus.FAILED_CONTROLLER, reason: decision.reason, attempt: state.attempt });
  }
  return next;
});
