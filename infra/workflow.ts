// The controller's state machine, built once: the CDK construct deploys it, asl.ts renders it
// to plain ASL for the local runtime. Names, paths and error names come from the contract.

import { Duration } from 'aws-cdk-lib';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import type { Construct } from 'constructs';
import { InstancesStillRunningError, TransientError } from '../lib/errors.ts';
import { RecoveryAction } from '../lib/policy/types.ts';
import { JobStatus } from '../lib/status.ts';
import {
  ATTEMPT_PATH,
  AWAIT_ERROR_PATH,
  AWAITED_PATH,
  BOOT_TIMEOUT_SECONDS_PATH,
  CONTINUE_AS_NEW_PATH,
  CONTROLLER_ERROR_CAUSE_PATH,
  CONTROLLER_ERROR_PATH,
  DECISION_ACTION_PATH,
  DELAY_SECONDS_PATH,
  FAIL_CAUSE_PATH,
  FAIL_ERROR_PATH,
  JOB_ID_PATH,
  LAUNCHED_PATH,
  LAUNCH_WAIT_SECONDS_PATH,
  HEARTBEAT_TIMEOUT_SECONDS,
  STANDBY_PATH,
  LAMBDA_CRASH_ERRORS,
  LAMBDA_TRANSIENT_ERRORS,
  StateName,
  WorkflowError,
  type TaskStateName,
} from '../lib/workflow/contract.ts';
import { LAMBDA_NEEDS, TASK_LAMBDAS } from './lambda-catalog.ts';

/** The Lambda behind every Task state, by state name. */
export type ControllerTasks = Readonly<Record<TaskStateName, lambda.IFunction>>;

/**
 * Retry for Lambda's own transient faults (throttles, service errors): full jitter so a
 * burst of executions does not retry in step. A throttle must never become a recovery.
 */
export const LAMBDA_RETRY: sfn.RetryProps = {
  errors: [...LAMBDA_TRANSIENT_ERRORS],
  interval: Duration.seconds(2),
  maxAttempts: 6,
  backoffRate: 2,
  maxDelay: Duration.seconds(30),
  jitterStrategy: sfn.JitterType.FULL,
};

/**
 * Retry for a step whose AWS call was throttled or failed on AWS's side after the SDK's
 * retries (TransientError, raised by the adapters): a few tries spread over about two
 * minutes, so a throttled table or API never ends a job FAILED_CONTROLLER. Every step is
 * safe to run again (test/unit/functions/idempotency.test.ts).
 */
export const TRANSIENT_RETRY: sfn.RetryProps = {
  errors: [TransientError.errorName],
  interval: Duration.seconds(5),
  maxAttempts: 4,
  backoffRate: 2,
  maxDelay: Duration.seconds(60),
  jitterStrategy: sfn.JitterType.FULL,
};

/**
 * Retry for a Lambda that died without an answer (timed out, out of memory): twice,
 * since a step that dies the same way three times in a row will not be saved by a
 * fourth, and the catch-all then frees the job's instances.
 */
export const LAMBDA_CRASH_RETRY: sfn.RetryProps = {
  errors: [...LAMBDA_CRASH_ERRORS],
  interval: Duration.seconds(5),
  maxAttempts: 2,
  backoffRate: 2,
  maxDelay: Duration.seconds(60),
  jitterStrategy: sfn.JitterType.FULL,
};

/**
 * LAMBDA_CRASH_RETRY plus States.Timeout, for a Task that invokes a Lambda and takes its
 * answer: there the Task's timeout means the invocation was lost. Not for AwaitBoot and
 * AwaitAttempt, whose States.Timeout is the attempt's own boot clock (caught, not retried).
 */
export const LAMBDA_TASK_TIMEOUT_RETRY: sfn.RetryProps = {
  ...LAMBDA_CRASH_RETRY,
  errors: [...LAMBDA_CRASH_ERRORS, WorkflowError.Timeout],
};

/**
 * How long the machine gives a Lambda Task beyond its function's own timeout: enough for
 * a cold start and the invoke itself, so the function's timeout (a crash error) comes
 * first and a retry after States.Timeout never overlaps a live invocation.
 */
export const TASK_TIMEOUT_MARGIN_SECONDS = 30;

/** A Lambda Task's TimeoutSeconds: its function's timeout (LAMBDA_NEEDS) plus the margin. */
export function taskTimeoutSeconds(state: TaskStateName): number {
  return LAMBDA_NEEDS[TASK_LAMBDAS[state]].timeoutSeconds + TASK_TIMEOUT_MARGIN_SECONDS;
}

/**
 * Builds the controller's chain in `scope`. Per attempt (the loop):
 *
 *   LaunchAttempt → AwaitOrEvaluate → AwaitBoot → AwaitAttempt → EvaluateRecoveryPolicy →
 *   ReleaseInstances → RelaunchOrFinish → [WaitBeforeRelaunch →] LaunchAttempt
 *
 * that is 7 transitions (8 with a backoff), 5 when the launch got no instances. A launch
 * the shared launch pace gives a later slot adds AwaitOrEvaluate → WaitForLaunchPace →
 * LaunchAttempt before it: 3 transitions, however long the wait. Every
 * handler returns the whole state (ResultPath unset) except the two waits, whose result
 * (what resumed them) lands at AWAITED_PATH. Every Task retries Lambda's service errors,
 * TransientError and a Lambda that died; the Tasks that take a Lambda's answer also
 * retry their own timeout. Any other error, or one that outlasts its retries, goes to
 * RecordControllerFailure (which marks FAILED_CONTROLLER and releases instances).
 *
 * An attempt has two clocks: AwaitBoot ends when every node has sent its first heartbeat,
 * and times out after the job's boot_timeout (TimeoutSecondsPath); AwaitAttempt then
 * waits for the end, failing after HEARTBEAT_TIMEOUT_SECONDS without a heartbeat.
 *
 * A warning that asks for a standby (launch_on_warning) fails AwaitAttempt with
 * StandbyWanted: AwaitAttempt → LaunchStandby → AwaitAttempt, two transitions, and the
 * standby's result at STANDBY_PATH for the console. The relaunch after the warned attempt
 * then takes the standby in LaunchAttempt, launching nothing.
 */
export function buildControllerDefinition(scope: Construct, fns: ControllerTasks): sfn.IChainable {
  const controllerFailed = sfn.Fail.jsonPath(scope, StateName.ControllerFailed, {
    stateName: StateName.ControllerFailed,
    error: JobStatus.FAILED_CONTROLLER,
    causePath: CONTROLLER_ERROR_CAUSE_PATH,
  });
  // The recorder's reason (one readable line) replaces the raw error as the Fail cause; if
  // the recorder itself fails, the raw error (a Lambda's JSON cause) is what remains.
  const recordControllerFailure = lambdaTask(scope, StateName.RecordControllerFailure, fns, {
    resultSelector: { 'Error.$': FAIL_ERROR_PATH, 'Cause.$': FAIL_CAUSE_PATH },
    resultPath: CONTROLLER_ERROR_PATH,
  });
  recordControllerFailure.addCatch(controllerFailed, { errors: [WorkflowError.All], resultPath: sfn.JsonPath.DISCARD });
  recordControllerFailure.next(controllerFailed);

  const handlerTask = (name: TaskStateName): tasks.LambdaInvoke => {
    const task = lambdaTask(scope, name, fns, {});
    task.addCatch(recordControllerFailure, { errors: [WorkflowError.All], resultPath: CONTROLLER_ERROR_PATH });
    return task;
  };

  const launch = handlerTask(StateName.LaunchAttempt);
  const evaluate = handlerTask(StateName.EvaluateRecoveryPolicy);
  const release = handlerTask(StateName.ReleaseInstances);
  // A release that ran out of its wait budget with instances still going tries again.
  release.addRetry({ errors: [InstancesStillRunningError.errorName], interval: Duration.seconds(30), maxAttempts: 4, backoffRate: 1.5 });
  const continueAsNew = handlerTask(StateName.ContinueAsNewExecution);

  // A warning on the live attempt asks for its standby: launched as any attempt is, by
  // LaunchAttempt's function, given the job and the warned attempt; then the wait goes on.
  const launchStandby = lambdaTask(scope, StateName.LaunchStandby, fns, {
    payload: sfn.TaskInput.fromObject({ jobId: sfn.JsonPath.stringAt(JOB_ID_PATH), standbyFor: sfn.JsonPath.numberAt(ATTEMPT_PATH) }),
    resultPath: STANDBY_PATH,
  });
  launchStandby.addCatch(recordControllerFailure, { errors: [WorkflowError.All], resultPath: CONTROLLER_ERROR_PATH });

  // Each wait stores its token on the attempt; the payload says which state it belongs to.
  const awaitTask = (name: typeof StateName.AwaitBoot | typeof StateName.AwaitAttempt, timing: Partial<tasks.LambdaInvokeJsonPathProps>) => {
    const task = tasks.LambdaInvoke.jsonPath(scope, name, {
      stateName: name,
      lambdaFunction: fns[name],
      integrationPattern: sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
      payload: sfn.TaskInput.fromObject({
        jobId: sfn.JsonPath.stringAt(JOB_ID_PATH),
        attempt: sfn.JsonPath.numberAt(ATTEMPT_PATH),
        taskToken: sfn.JsonPath.taskToken,
        state: name,
        ...(name === StateName.AwaitBoot ? { bootTimeoutSeconds: sfn.JsonPath.numberAt(BOOT_TIMEOUT_SECONDS_PATH) } : {}),
      }),
      resultPath: AWAITED_PATH,
      retryOnServiceExceptions: false,
      ...timing,
    });
    task.addRetry(LAMBDA_RETRY);
    task.addRetry(TRANSIENT_RETRY);
    task.addRetry(LAMBDA_CRASH_RETRY);
    // The attempt ended without a report: never up, lost (no heartbeat), or cancelled.
    // The policy reads the outcome from the store; the error is kept for the console.
    task.addCatch(evaluate, {
      errors: [WorkflowError.HeartbeatTimeout, WorkflowError.Timeout, WorkflowError.JobCancelled],
      resultPath: AWAIT_ERROR_PATH,
    });
    // The attempt runs on: the error is no fact about it, so the state keeps none of it (the
    // console shows it, with its cause, as the wait's end).
    if (name === StateName.AwaitAttempt) task.addCatch(launchStandby, { errors: [WorkflowError.StandbyWanted], resultPath: sfn.JsonPath.DISCARD });
    task.addCatch(recordControllerFailure, { errors: [WorkflowError.All], resultPath: CONTROLLER_ERROR_PATH });
    return task;
  };
  const awaitBoot = awaitTask(StateName.AwaitBoot, { taskTimeout: sfn.Timeout.at(BOOT_TIMEOUT_SECONDS_PATH) });
  const awaitAttempt = awaitTask(StateName.AwaitAttempt, {
    heartbeatTimeout: sfn.Timeout.duration(Duration.seconds(HEARTBEAT_TIMEOUT_SECONDS)),
  });

  const jobSucceeded = sfn.Succeed.jsonPath(scope, StateName.JobSucceeded, { stateName: StateName.JobSucceeded });
  const jobFailed = sfn.Fail.jsonPath(scope, StateName.JobFailed, {
    stateName: StateName.JobFailed,
    errorPath: FAIL_ERROR_PATH,
    causePath: FAIL_CAUSE_PATH,
  });
  const continued = sfn.Succeed.jsonPath(scope, StateName.ContinuedAsNewExecution, {
    stateName: StateName.ContinuedAsNewExecution,
  });
  const wait = sfn.Wait.jsonPath(scope, StateName.WaitBeforeRelaunch, {
    stateName: StateName.WaitBeforeRelaunch,
    time: sfn.WaitTime.secondsPath(DELAY_SECONDS_PATH),
  });

  const nextStep = sfn.Choice.jsonPath(scope, StateName.NextStep, { stateName: StateName.NextStep })
    .when(sfn.Condition.stringEquals(DECISION_ACTION_PATH, RecoveryAction.SUCCEED), jobSucceeded)
    .when(sfn.Condition.stringEquals(DECISION_ACTION_PATH, RecoveryAction.FAIL), jobFailed)
    // Far into its history the execution hands the job to a fresh one (which launches at
    // once: a pending backoff is not carried over).
    .when(sfn.Condition.booleanEquals(CONTINUE_AS_NEW_PATH, true), continueAsNew)
    // A relaunch with no backoff skips the Wait: one transition less per attempt.
    .when(sfn.Condition.numberGreaterThan(DELAY_SECONDS_PATH, 0), wait)
    .otherwise(launch);

  // A launch the shared pace gave a later slot waits here: a Wait is one transition,
  // where a Lambda retrying a throttled EC2 would hold a function for minutes.
  const waitForPace = sfn.Wait.jsonPath(scope, StateName.WaitForLaunchPace, {
    stateName: StateName.WaitForLaunchPace,
    time: sfn.WaitTime.secondsPath(LAUNCH_WAIT_SECONDS_PATH),
  });

  const awaitOrEvaluate = sfn.Choice.jsonPath(scope, StateName.AwaitOrEvaluate, { stateName: StateName.AwaitOrEvaluate })
    .when(sfn.Condition.isPresent(LAUNCH_WAIT_SECONDS_PATH), waitForPace)
    .when(sfn.Condition.booleanEquals(LAUNCHED_PATH, false), evaluate)
    .otherwise(awaitBoot);

  launch.next(awaitOrEvaluate);
  // Resumed with `booted`, or with the outcome of an attempt that ended while booting:
  // AwaitAttempt then resumes itself at once.
  awaitBoot.next(awaitAttempt);
  awaitAttempt.next(evaluate);
  launchStandby.next(awaitAttempt);
  evaluate.next(release);
  release.next(nextStep);
  wait.next(launch);
  waitForPace.next(launch);
  continueAsNew.next(continued);
  return launch;
}

/**
 * A Lambda task that passes the whole state in and takes the handler's answer as the
 * state, with a timeout a little above its function's and the retries every such task has.
 */
function lambdaTask(
  scope: Construct,
  name: TaskStateName,
  fns: ControllerTasks,
  options: { resultPath?: string; resultSelector?: Record<string, unknown>; payload?: sfn.TaskInput },
): tasks.LambdaInvoke {
  const task = tasks.LambdaInvoke.jsonPath(scope, name, {
    stateName: name,
    lambdaFunction: fns[name],
    payloadResponseOnly: true,
    // Our own Retry below replaces CDK's default one, to add MaxDelay and jitter.
    retryOnServiceExceptions: false,
    taskTimeout: sfn.Timeout.duration(Duration.seconds(taskTimeoutSeconds(name))),
    ...options,
  });
  task.addRetry(LAMBDA_RETRY);
  task.addRetry(TRANSIENT_RETRY);
  task.addRetry(LAMBDA_TASK_TIMEOUT_RETRY);
  return task;
}
