// EC2's events from EventBridge: a spot interruption warning or an instance state change
// ends (or marks) the attempt that owns the instance.

import { onInstanceEvent, type InstanceEventResult } from '../../lib/usecases/instance-event.ts';
import { store, workflow } from '../shared/deps.ts';
import { startInvocation, type LambdaContext } from '../shared/log.ts';
import { parseEvent } from '../shared/parse.ts';
import { Ec2EventSchema, instanceEventOf } from '../../lib/aws-events.ts';

/** EventBridge delivers at least once: a repeat or late event is ignored by the use case. */
export async function handler(event: unknown, context?: LambdaContext): Promise<InstanceEventResult> {
  const log = startInvocation(context);
  const instanceEvent = instanceEventOf(parseEvent(Ec2EventSchema, event, 'event'));
  const result = await onInstanceEvent(instanceEvent, { store: store(), workflow: workflow() });
  log.info('instance event applied', { ...instanceEvent, action: result.action, reason: result.reason });
  return result;
}
