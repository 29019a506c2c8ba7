// LaunchAttempt: start the job's next attempt on EC2, or end it at once (no capacity,
// cancelled). LaunchStandby, which launches the next attempt early as a standby
// (launch_on_warning), runs here too: the same launch, the same grants.

import { launchAttempt } from '../../lib/usecases/launch-attempt.ts';
import { launchStandby } from '../../lib/usecases/standby-attempt.ts';
import { LaunchStandbyInputSchema, WorkflowStateSchema, type StandbyResult, type WorkflowState } from '../../lib/workflow/contract.ts';
import { clock, compute, jobSecrets, pace, store } from '../shared/deps.ts';
import { lambdaHandler } from '../shared/invocation.ts';
import { withJob } from '../shared/log.ts';
import { recordLaunchFailure, recordRelaunch } from '../shared/metrics.ts';
import { parseEvent } from '../shared/parse.ts';

/**
 * Step Functions passes the whole state (LaunchAttempt), or the job and its warned attempt
 * (LaunchStandby's payload, told apart by `standbyFor`); `launched: false` sends the
 * machine straight to the policy.
 */
export const handler = lambdaHandler(async (event, log): Promise<WorkflowState | StandbyResult> => {
  // Built inside each path: a missing setting (ConfigurationError) is a launch failure to count.
  const deps = () => ({ store: store(), compute: compute(), secrets: jobSecrets(), pace: pace(), clock });
  if (typeof event === 'object' && event !== null && 'standbyFor' in event) {
    const input = parseEvent(LaunchStandbyInputSchema, event, 'payload');
    withJob({ jobId: input.jobId, attempt: input.standbyFor });
    const result = await launchStandby(input, deps());
    log.info('standby', { action: result.launched ? 'STANDBY_LAUNCHED' : 'NO_STANDBY', reason: result.reason, standbyAttempt: result.attempt });
    return result;
  }
  const state = parseEvent(WorkflowStateSchema, event, 'state');
  withJob(state);
  let next: WorkflowState;
  try {
    next = await launchAttempt(state, deps());
  } catch (error) {
    const thrown = error instanceof Error ? error : new Error(String(error));
    recordLaunchFailure(state.jobId, state.attempt + 1, thrown.name, thrown.message);
    throw error;
  }
  withJob(next);
  if (next.launchWaitSeconds !== undefined) {
    log.info('launch paced', {
      action: 'WAIT_FOR_LAUNCH_PACE',
      reason: `the shared launch pace gives this launch a slot in ${next.launchWaitSeconds} s`,
    });
    return next;
  }
  const launchedAt = clock.now();
  log.info('attempt launched', {
    action: next.launched === true ? 'LAUNCHED' : 'NOT_LAUNCHED',
    reason: next.launched === true ? 'instances are starting' : 'the attempt ended without instances',
    attemptsInExecution: next.attemptsInExecution,
  });
  if (next.launched === true) {
    if (next.attempt > 1) recordRelaunch(await store().getAttempt(next.jobId, next.attempt - 1), launchedAt);
  } else {
    const { outcome } = await store().getAttempt(next.jobId, next.attempt);
    if (outcome?.kind === 'LAUNCH_FAILED') recordLaunchFailure(next.jobId, next.attempt, outcome.cause, outcome.reason);
  }
  return next;
});
