// The contract between the state machine (infra/, local/) and the task handlers (functions/):
// state names, error names and payload schemas, written once and imported by both sides.

import { z } from 'zod';
import { JOB_STATUSES } from '../status.ts';

/** State names, as the AWS console's execution history shows them. */
export const StateName = {
  LaunchAttempt: 'LaunchAttempt',
  /** A Choice: AwaitAttempt, unless the launch ended the attempt without instances. */
  AwaitOrEvaluate: 'AwaitOrEvaluate',
  AwaitAttempt: 'AwaitAttempt',
  EvaluateRecoveryPolicy: 'EvaluateRecoveryPolicy',
  ReleaseInstances: 'ReleaseInstances',
  NextStep: 'RelaunchOrFinish',
  WaitBeforeRelaunch: 'WaitBeforeRelaunch',
  ContinueAsNewExecution: 'ContinueAsNewExecution',
  JobSucceeded: 'JobSucceeded',
  JobFailed: 'JobFailed',
  RecordControllerFailure: 'RecordControllerFailure',
  ControllerFailed: 'ControllerFailed',
  ContinuedAsNewExecution: 'ContinuedAsNewExecution',
} as const;
export type StateName = (typeof StateName)[keyof typeof StateName];

/** The Task states that call a handler, in the order an attempt visits them. */
export const TASK_STATES = [
  StateName.LaunchAttempt,
  StateName.AwaitAttempt,
  StateName.EvaluateRecoveryPolicy,
  StateName.ReleaseInstances,
  StateName.ContinueAsNewExecution,
  StateName.RecordControllerFailure,
] as const;
export type TaskStateName = (typeof TASK_STATES)[number];

/**
 * Error names the machine's Catch clauses match. The first two are Step Functions' own;
 * JobCancelled is what cancel resumes AwaitAttempt with.
 */
export const WorkflowError = {
  HeartbeatTimeout: 'States.HeartbeatTimeout',
  Timeout: 'States.Timeout',
  JobCancelled: 'JobCancelled',
  All: 'States.ALL',
} as const;

/** Lambda's transient errors: retried with backoff so a throttle never becomes a recovery. */
export const LAMBDA_TRANSIENT_ERRORS = [
  'Lambda.ServiceException',
  'Lambda.AWSLambdaException',
  'Lambda.SdkClientException',
  'Lambda.TooManyRequestsException',
  'Lambda.ClientExecutionTimeoutException',
] as const;

/**
 * How long AwaitAttempt waits between heartbeats before the attempt counts as lost. The
 * agent beats every HEARTBEAT_INTERVAL_SECONDS, so three can be missed.
 */
export const HEARTBEAT_TIMEOUT_SECONDS = 300;
export const HEARTBEAT_INTERVAL_SECONDS = 60;

/**
 * After this many attempts in one execution the machine continues as a new one. An
 * attempt writes about 20 history events, so 500 attempts stay far below the
 * 25,000-event limit.
 */
export const MAX_ATTEMPTS_PER_EXECUTION = 500;

const jobId = z.string().min(1);

/** The error a failed AwaitAttempt leaves in the state, from Catch's ResultPath. */
export const AwaitErrorSchema = z.object({ Error: z.string(), Cause: z.string().optional() });
export type AwaitError = z.infer<typeof AwaitErrorSchema>;

/** The decision as the machine's Choice reads it. */
export const DecisionOutputSchema = z.object({
  action: z.enum(['SUCCEED', 'RESTART', 'RECOVER', 'FAIL']),
  status: z.enum(JOB_STATUSES as [string, ...string[]]),
  reason: z.string(),
  delaySeconds: z.number().int().min(0),
  continueAsNew: z.boolean(),
});
export type DecisionOutput = z.infer<typeof DecisionOutputSchema>;

/**
 * The state every step passes along. Handlers return the whole state (ResultPath unset),
 * so the console shows it at every step.
 */
export const WorkflowStateSchema = z.object({
  jobId,
  /** The current attempt (1-based); 0 before the first launch. */
  attempt: z.number().int().min(0),
  /** Attempts started by this execution, for continue-as-new. */
  attemptsInExecution: z.number().int().min(0),
  /** false when LaunchAttempt ended the attempt without instances (no capacity, cancelled). */
  launched: z.boolean().optional(),
  awaited: z.lazy(() => AwaitResultSchema).optional(),
  awaitError: AwaitErrorSchema.optional(),
  decision: DecisionOutputSchema.optional(),
});
export type WorkflowState = z.infer<typeof WorkflowStateSchema>;

/** The execution's input. */
export const ExecutionInputSchema = z.object({
  jobId,
  /** 0 for a new job; the last attempt's number when continuing as a new execution. */
  attempt: z.number().int().min(0),
  attemptsInExecution: z.literal(0),
});
export type ExecutionInput = z.infer<typeof ExecutionInputSchema>;

/** AwaitAttempt's payload: the state plus the task token to store on the attempt. */
export const AwaitPayloadSchema = z.object({ jobId, attempt: z.number().int().min(1), taskToken: z.string().min(1) });
export type AwaitPayload = z.infer<typeof AwaitPayloadSchema>;

/** What resumes AwaitAttempt (SendTaskSuccess's output), stored at `$.awaited`. */
export const AwaitResultSchema = z.object({ outcome: z.enum(['EXITED', 'PREEMPTED', 'LOST', 'LAUNCH_FAILED', 'CANCELLED']) });
export type AwaitResult = z.infer<typeof AwaitResultSchema>;

/** Where AwaitAttempt's result and error land in the state. */
export const AWAITED_PATH = '$.awaited';
export const AWAIT_ERROR_PATH = '$.awaitError';
/** The Fail state's Error and Cause come from the decision. */
export const FAIL_ERROR_PATH = '$.decision.status';
export const FAIL_CAUSE_PATH = '$.decision.reason';
