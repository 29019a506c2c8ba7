// The contract between the state machine (infra/, local/) and the task handlers (functions/):
// state names, error names and payload schemas, written once and imported by both sides.

import * as z from '../zod.ts';
import { OutcomeKind, RecoveryAction } from '../policy/types.ts';
import { JobStatus } from '../status.ts';

/** State names, as the AWS console's execution history shows them. */
export const StateName = {
  LaunchAttempt: 'LaunchAttempt',
  /**
   * A Choice: AwaitBoot, unless the launch ended the attempt without instances (then the
   * policy) or is waiting for its slot in the launch pace (WaitForLaunchPace).
   */
  AwaitOrEvaluate: 'AwaitOrEvaluate',
  /** Until every node's first heartbeat, on the boot_timeout clock. */
  AwaitBoot: 'AwaitBoot',
  /** Until the attempt ends, on the heartbeat timeout's clock. */
  AwaitAttempt: 'AwaitAttempt',
  /**
   * On a warning that the live attempt's instances may go (launch_on_warning): launches the
   * next attempt as a standby, then back to AwaitAttempt.
   */
  LaunchStandby: 'LaunchStandby',
  EvaluateRecoveryPolicy: 'EvaluateRecoveryPolicy',
  ReleaseInstances: 'ReleaseInstances',
  /** Until the launch's slot in the shared launch pace (skipped when it is due). */
  WaitForLaunchPace: 'WaitForLaunchPace',
  NextStep: 'RelaunchOrFinish',
  WaitBeforeRelaunch: 'WaitBeforeRelaunch',
  ContinueAsNewExecution: 'ContinueAsNewExecution',
  JobSucceeded: 'JobSucceeded',
  JobFailed: 'JobFailed',
  RecordControllerFailure: 'RecordControllerFailure',
  ControllerFailed: 'ControllerFailed',
  ContinuedAsNewExecution: 'ContinuedAsNewExecution',
} as const;
/** One of the machine's state names. */
export type StateName = (typeof StateName)[keyof typeof StateName];

/** The Task states that call a handler, in the order an attempt visits them. */
export const TASK_STATES = [
  StateName.LaunchAttempt,
  StateName.AwaitBoot,
  StateName.AwaitAttempt,
  StateName.LaunchStandby,
  StateName.EvaluateRecoveryPolicy,
  StateName.ReleaseInstances,
  StateName.ContinueAsNewExecution,
  StateName.RecordControllerFailure,
] as const;
/** A state that invokes a handler (a key of the machine's Lambda map). */
export type TaskStateName = (typeof TASK_STATES)[number];

/** The two states that park the execution on a task token stored on the attempt. */
export const AWAIT_STATES = [StateName.AwaitBoot, StateName.AwaitAttempt] as const;
/** A state whose task token the attempt holds. */
export type AwaitStateName = (typeof AWAIT_STATES)[number];

/**
 * Error names the machine's Catch clauses match. The first two are Step Functions' own;
 * JobCancelled is what cancel fails AwaitBoot or AwaitAttempt with; StandbyWanted is what a
 * warning on the live attempt fails AwaitAttempt with, when the job's launch_on_warning
 * asks for a standby (its Catch goes to LaunchStandby).
 */
export const WorkflowError = {
  HeartbeatTimeout: 'States.HeartbeatTimeout',
  Timeout: 'States.Timeout',
  JobCancelled: 'JobCancelled',
  StandbyWanted: 'StandbyWanted',
  All: 'States.ALL',
} as const;
/** One of the error names a Catch clause matches. */
export type WorkflowError = (typeof WorkflowError)[keyof typeof WorkflowError];

/** Lambda's transient errors: retried with backoff so a throttle never becomes a recovery. */
export const LAMBDA_TRANSIENT_ERRORS = [
  'Lambda.ServiceException',
  'Lambda.AWSLambdaException',
  'Lambda.SdkClientException',
  'Lambda.TooManyRequestsException',
  'Lambda.ClientExecutionTimeoutException',
] as const;

/**
 * How Step Functions names a Lambda invocation that died without an answer: a timeout or
 * out of memory. Lambda.Unknown is the documented name; newer runtimes report a timeout
 * as Sandbox.Timedout, so both are matched.
 */
export const LAMBDA_CRASH_ERRORS = ['Lambda.Unknown', 'Sandbox.Timedout'] as const;

/**
 * AwaitAttempt's heartbeat timeout and the agent's beat: the agent's protocol holds them (its
 * script reads the timeout), the state machine's side of it names them here too.
 */
export { HEARTBEAT_INTERVAL_SECONDS, HEARTBEAT_TIMEOUT_SECONDS } from '../agent/protocol.ts';

/**
 * After this many attempts in one execution the machine continues as a new one. An
 * attempt writes about 20 history events, so 500 attempts stay far below the
 * 25,000-event limit.
 */
export const MAX_ATTEMPTS_PER_EXECUTION = 500;

const jobId = z.string().check(z.minLength(1));

/** The error a failed AwaitAttempt leaves in the state, from Catch's ResultPath. */
export const AwaitErrorSchema = z.object({ Error: z.string(), Cause: z.optional(z.string()) });
/** A Task error as Catch stores it: Step Functions' `{ Error, Cause }`. */
export type AwaitError = z.infer<typeof AwaitErrorSchema>;

/** The decision as the machine's Choice reads it. */
export const DecisionOutputSchema = z.object({
  action: z.enum(RecoveryAction),
  status: z.enum(JobStatus),
  reason: z.string(),
  delaySeconds: z.number().check(z.int(), z.minimum(0)),
  continueAsNew: z.boolean(),
});
/** The decision the Choice reads, at `$.decision`. */
export type DecisionOutput = z.infer<typeof DecisionOutputSchema>;

/**
 * What LaunchStandby did, at STANDBY_PATH: the standby's attempt number when it launched
 * one (null when it did not), and why, in a sentence the console shows.
 */
export const StandbyResultSchema = z.object({
  attempt: z.nullable(z.number().check(z.int(), z.minimum(2))),
  launched: z.boolean(),
  reason: z.string(),
});
/** LaunchStandby's answer. */
export type StandbyResult = z.infer<typeof StandbyResultSchema>;

/** LaunchStandby's input: the job, and its live attempt, whose warning asked for a standby. */
export const LaunchStandbyInputSchema = z.object({
  jobId,
  standbyFor: z.number().check(z.int(), z.minimum(1)),
});
/** LaunchStandby's input, parsed. */
export type LaunchStandbyInput = z.infer<typeof LaunchStandbyInputSchema>;

/**
 * The state every step passes along. Handlers return the whole state (ResultPath unset),
 * so the console shows it at every step.
 */
export const WorkflowStateSchema = z.object({
  jobId,
  /** The current attempt (1-based); 0 before the first launch. */
  attempt: z.number().check(z.int(), z.minimum(0)),
  /** Attempts started by this execution, for continue-as-new. */
  attemptsInExecution: z.number().check(z.int(), z.minimum(0)),
  /** false when LaunchAttempt ended the attempt without instances (no capacity, cancelled). */
  launched: z.optional(z.boolean()),
  /**
   * AwaitBoot's timeout: the job's boot_timeout, set by LaunchAttempt. Step Functions reads
   * it through TimeoutSecondsPath, so it must be an integer >= 1.
   */
  bootTimeoutSeconds: z.optional(z.number().check(z.int(), z.minimum(1))),
  /** Set by LaunchAttempt when the launch pace gave it a later slot: WaitForLaunchPace waits this long. */
  launchWaitSeconds: z.optional(z.number().check(z.int(), z.minimum(1))),
  /** true once the launch holds its slot: LaunchAttempt, run again after the wait, launches without reserving. */
  launchReserved: z.optional(z.boolean()),
  awaited: z.optional(z.lazy(() => AwaitResultSchema)),
  awaitError: z.optional(AwaitErrorSchema),
  /** What the last LaunchStandby did (LaunchStandby's ResultPath), until the next launch. */
  standby: z.optional(StandbyResultSchema),
  decision: z.optional(DecisionOutputSchema),
});
/** The state every step passes along. */
export type WorkflowState = z.infer<typeof WorkflowStateSchema>;

/**
 * RecordControllerFailure's input: the state plus the error the catch-all stored at
 * CONTROLLER_ERROR_PATH.
 */
export const ControllerFailureStateSchema = z.extend(WorkflowStateSchema, { controllerError: z.optional(AwaitErrorSchema) });

/** The execution's input. */
export const ExecutionInputSchema = z.object({
  jobId,
  /** 0 for a new job; the last attempt's number when continuing as a new execution. */
  attempt: z.number().check(z.int(), z.minimum(0)),
  attemptsInExecution: z.literal(0),
});
/** The execution's input. */
export type ExecutionInput = z.infer<typeof ExecutionInputSchema>;

/**
 * AwaitBoot's and AwaitAttempt's payload: the task token to store on the attempt and the
 * state it belongs to (absent: AwaitAttempt, as executions started before AwaitBoot send).
 * AwaitBoot's also carries its timeout, where the local engine reads it.
 */
export const AwaitPayloadSchema = z.object({
  jobId,
  attempt: z.number().check(z.int(), z.minimum(1)),
  taskToken: z.string().check(z.minLength(1)),
  state: z.optional(z.enum(AWAIT_STATES)),
  bootTimeoutSeconds: z.optional(z.number().check(z.int(), z.minimum(1))),
});
/** AwaitBoot's or AwaitAttempt's payload, parsed. */
export type AwaitPayload = z.infer<typeof AwaitPayloadSchema>;

/**
 * What resumes AwaitBoot or AwaitAttempt (SendTaskSuccess's output), stored at
 * `$.awaited`: how the attempt ended, or (AwaitBoot only) that every node is up.
 */
export const AwaitResultSchema = z.union([
  z.object({ outcome: z.enum(OutcomeKind) }),
  z.object({ booted: z.literal(true) }),
]);
/** What resumed AwaitBoot or AwaitAttempt. */
export type AwaitResult = z.infer<typeof AwaitResultSchema>;

// JSONPaths into WorkflowState: the machine reads and writes the fields the schemas above
// name, so each path sits here, beside them.

/** The job id, passed to AwaitAttempt. */
export const JOB_ID_PATH = '$.jobId';
/** The current attempt, passed to AwaitAttempt (and to LaunchStandby as the attempt it stands by for). */
export const ATTEMPT_PATH = '$.attempt';
/** Where LaunchStandby's result lands in the state (its ResultPath). */
export const STANDBY_PATH = '$.standby';
/** Where AwaitAttempt's result lands in the state (its ResultPath). */
export const AWAITED_PATH = '$.awaited';
/** Where the error AwaitAttempt's expected Catch (lost, timed out, cancelled) lands. */
export const AWAIT_ERROR_PATH = '$.awaitError';
/** false when LaunchAttempt ended the attempt without instances: AwaitOrEvaluate skips the wait. */
export const LAUNCHED_PATH = '$.launched';
/** How long WaitForLaunchPace waits; present only when the launch has a later slot. */
export const LAUNCH_WAIT_SECONDS_PATH = '$.launchWaitSeconds';
/** AwaitBoot's TimeoutSecondsPath. */
export const BOOT_TIMEOUT_SECONDS_PATH = '$.bootTimeoutSeconds';
/** The decision's action: RelaunchOrFinish branches on it. */
export const DECISION_ACTION_PATH = '$.decision.action';
/** The backoff before relaunching: WaitBeforeRelaunch waits this long (skipped when 0). */
export const DELAY_SECONDS_PATH = '$.decision.delaySeconds';
/** true when the execution should hand the job to a fresh one. */
export const CONTINUE_AS_NEW_PATH = '$.decision.continueAsNew';
/** The Fail state's Error: the decision's status (RecordControllerFailure's Error too). */
export const FAIL_ERROR_PATH = '$.decision.status';
/** The Fail state's Cause: the decision's reason (RecordControllerFailure's Cause too). */
export const FAIL_CAUSE_PATH = '$.decision.reason';
/** Where a Task's unexpected error lands before RecordControllerFailure (Catch's ResultPath). */
export const CONTROLLER_ERROR_PATH = '$.controllerError';
/** ControllerFailed's cause: the recorder's reason, or the raw error when the recorder failed. */
export const CONTROLLER_ERROR_CAUSE_PATH = `${CONTROLLER_ERROR_PATH}.Cause`;
