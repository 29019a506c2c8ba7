// The EC2 and Step Functions events relaunch listens to, written once for the EventBridge
// rules (infra/) and the handlers that parse them.

import * as z from './zod.ts';
import type { ExecutionEnded, ExecutionEndStatus } from './usecases/execution-ended.ts';
import { INSTANCE_GONE_STATES, type InstanceEvent } from './usecases/instance-event.ts';
import { ExecutionInputSchema } from './workflow/contract.ts';

/** The instance states that end an attempt: the EventBridge rule forwards only these. */
export const GONE_STATE_NAMES = Object.keys(INSTANCE_GONE_STATES);

/** The detail-types the InstanceEvents rules forward. */
export const EC2_DETAIL_TYPES = {
  interruption: 'EC2 Spot Instance Interruption Warning',
  /** EC2's word that a spot instance is at an elevated risk of interruption, often before the warning. */
  rebalance: 'EC2 Instance Rebalance Recommendation',
  stateChange: 'EC2 Instance State-change Notification',
} as const;

const instanceId = z.string().check(z.regex(/^i-[0-9a-f]+$/));
/** The three EC2 events, with the fields the handler reads. */
export const Ec2EventSchema = z.discriminatedUnion('detail-type', [
  z.object({
    'detail-type': z.literal(EC2_DETAIL_TYPES.interruption),
    time: z.string(),
    detail: z.object({ 'instance-id': instanceId }),
  }),
  z.object({
    'detail-type': z.literal(EC2_DETAIL_TYPES.rebalance),
    time: z.string(),
    detail: z.object({ 'instance-id': instanceId }),
  }),
  z.object({
    'detail-type': z.literal(EC2_DETAIL_TYPES.stateChange),
    time: z.string(),
    detail: z.object({ 'instance-id': instanceId, state: z.string() }),
  }),
]);

/** An EC2 event as `onInstanceEvent` takes it. */
export function instanceEventOf(event: z.infer<typeof Ec2EventSchema>): InstanceEvent {
  const instanceId = event.detail['instance-id'];
  switch (event['detail-type']) {
    case EC2_DETAIL_TYPES.interruption:
      return { instanceId, kind: 'SPOT_INTERRUPTION_WARNING', time: event.time };
    case EC2_DETAIL_TYPES.rebalance:
      return { instanceId, kind: 'REBALANCE_RECOMMENDATION', time: event.time };
    case EC2_DETAIL_TYPES.stateChange:
      return { instanceId, kind: 'STATE_CHANGE', state: event.detail.state, time: event.time };
  }
}


/** Step Functions' event for an execution's status change. */
export const EXECUTION_STATUS_CHANGE = 'Step Functions Execution Status Change';

/**
 * The ends the janitor's rule forwards: those no state of the machine records. SUCCEEDED
 * goes through JobSucceeded (or hands over to a new execution), so it is left out.
 */
export const UNRECORDED_END_STATUSES = ['FAILED', 'TIMED_OUT', 'ABORTED'] as const satisfies readonly ExecutionEndStatus[];

/** An execution's JSON input as the event carries it: the job it controls. */
const executionInput = z.pipe(
  z.string(),
  z.transform((text, ctx) => {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      ctx.issues.push({ code: 'custom', message: 'expected the execution\'s input as JSON text', input: text });
      return z.NEVER;
    }
  }),
);

/** Every end an execution can come to: what the rule that deletes `persistent: false` mounts forwards. */
export const END_STATUSES = ['SUCCEEDED', ...UNRECORDED_END_STATUSES] as const satisfies readonly ExecutionEndStatus[];

/** The status change of an execution that ended in one of `statuses`, with what the janitors read. */
function executionEndSchema<S extends readonly [ExecutionEndStatus, ...ExecutionEndStatus[]]>(statuses: S) {
  return z.object({
    'detail-type': z.literal(EXECUTION_STATUS_CHANGE),
    detail: z.object({
      executionArn: z.string().check(z.minLength(1)),
      status: z.enum(statuses),
      // Only the job is read: any execution this machine started names one.
      input: z.pipe(executionInput, z.object({ jobId: ExecutionInputSchema.shape.jobId })),
      error: z.optional(z.nullable(z.string())),
      cause: z.optional(z.nullable(z.string())),
    }),
  });
}

/** The status change of an execution that ended outside its own states, with what the janitor reads. */
export const ExecutionEndedEventSchema = executionEndSchema(UNRECORDED_END_STATUSES);

/** The status change of an execution that ended in any way. */
export const ExecutionFinishedEventSchema = executionEndSchema(END_STATUSES);

/** An execution's end as `onExecutionEnded` takes it. */
export function executionEndedOf(event: z.infer<typeof ExecutionFinishedEventSchema>): ExecutionEnded {
  const { detail } = event;
  return {
    jobId: detail.input.jobId,
    executionArn: detail.executionArn,
    status: detail.status,
    ...(detail.error == null ? {} : { error: detail.error }),
    ...(detail.cause == null ? {} : { cause: detail.cause }),
  };
}
