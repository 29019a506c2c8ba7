// The controller's Task states as functions of their input: parse with the contract's
// schema, call one use case. Lambda handlers and the local runtime both bind these.

import * as z from '../zod.ts';
import {
  awaitAttempt,
  continueAsNew,
  evaluatePolicy,
  launchAttempt,
  recordControllerFailure,
  releaseInstances,
  type UseCaseDeps,
} from './index.ts';
import { launchStandby } from './standby-attempt.ts';
import {
  AwaitPayloadSchema,
  ControllerFailureStateSchema,
  LaunchStandbyInputSchema,
  StateName,
  WorkflowStateSchema,
  type AwaitPayload,
} from '../workflow/contract.ts';

/** A Task state's work: the state's input in, its output out. */
export type TaskHandler = (input: unknown) => Promise<unknown>;

/**
 * Every Task state but AwaitAttempt, whose result arrives later by task token (see
 * `awaitAttemptTask`).
 */
export function controllerTasks(deps: UseCaseDeps): Readonly<Record<string, TaskHandler>> {
  return {
    [StateName.LaunchAttempt]: (input) => launchAttempt(WorkflowStateSchema.parse(input), deps),
    [StateName.LaunchStandby]: (input) => launchStandby(LaunchStandbyInputSchema.parse(input), deps),
    [StateName.EvaluateRecoveryPolicy]: (input) => evaluatePolicy(WorkflowStateSchema.parse(input), deps),
    [StateName.ReleaseInstances]: (input) => releaseInstances(WorkflowStateSchema.parse(input), deps),
    [StateName.ContinueAsNewExecution]: (input) => continueAsNew(WorkflowStateSchema.parse(input), deps),
    [StateName.RecordControllerFailure]: (input) =>
      recordControllerFailure(ControllerFailureStateSchema.parse(input), deps),
  };
}

/** AwaitAttempt's work: store the task token on the attempt (the task then waits for it). */
export function awaitAttemptTask(deps: UseCaseDeps): (payload: unknown) => Promise<AwaitPayload> {
  return async (payload) => {
    const parsed = AwaitPayloadSchema.parse(payload);
    await awaitAttempt(parsed, deps);
    return parsed;
  };
}

/** The AwaitAttempt task's input, wherever the token comes from. */
export const AwaitTaskInputSchema = z.object({ Payload: z.omit(AwaitPayloadSchema, { taskToken: true }) });
