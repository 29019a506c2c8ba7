// The EC2 events relaunch listens to, written once for the EventBridge rule (infra/) and
// the handler that parses them.

import * as z from './zod.ts';
import { INSTANCE_GONE_STATES } from './usecases/instance-event.ts';

/** The instance states that end an attempt: the EventBridge rule forwards only these. */
export const GONE_STATE_NAMES = Object.keys(INSTANCE_GONE_STATES);

/** The detail-types the InstanceEvents rule forwards. */
export const EC2_DETAIL_TYPES = {
  interruption: 'EC2 Spot Instance Interruption Warning',
  stateChange: 'EC2 Instance State-change Notification',
} as const;

const instanceId = z.string().check(z.regex(/^i-[0-9a-f]+$/));
/** The two events, with the fields the handler reads. */
export const Ec2EventSchema = z.discriminatedUnion('detail-type', [
  z.object({
    'detail-type': z.literal(EC2_DETAIL_TYPES.interruption),
    time: z.string(),
    detail: z.object({ 'instance-id': instanceId }),
  }),
  z.object({
    'detail-type': z.literal(EC2_DETAIL_TYPES.stateChange),
    time: z.string(),
    detail: z.object({ 'instance-id': instanceId, state: z.string() }),
  }),
]);

