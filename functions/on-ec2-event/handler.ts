// EC2's events from EventBridge: a spot interruption warning or an instance state change
// ends (or marks) the attempt that owns the instance.

import { onInstanceEvent, type InstanceEventResult } from '../../lib/usecases/instance-event.ts';
import { store, workflow } from '../shared/deps.ts';
import { lambdaHandler } from '../shared/invocation.ts';
import { withJob } from '../shared/log.ts';
import { parseEvent } from '../shared/parse.ts';
import { Ec2EventSchema, instanceEventOf } from '../../lib/aws-events.ts';

/** EventBridge delivers at least once: a repeat or late event is ignored by the use case. */
export const handler = lambdaHandler(async (event, log): Promise<InstanceEventResult> => {
  const instanceEvent = instanceEventOf(parseEvent(Ec2EventSchema, event, 'event'));
  // The event names an instance only. One index query finds its job and attempt, so this
  // invocation's lines (an error's too) say which job the event was about.
  const owner = await store().findAttemptByInstance(instanceEvent.instanceId);
  if (owner !== null) withJob(owner);
  const result = await onInstanceEvent(instanceEvent, { store: store(), workflow: workflow() });
  log.info('instance event applied', { ...instanceEvent, action: result.action, reason: result.reason });
  return result;
});
