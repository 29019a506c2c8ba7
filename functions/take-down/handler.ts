// The take-down, a custom resource CloudFormation deletes after the functions that launch
// (`cdk destroy`): every instance of the deployment terminated, in every region, and every
// live job ended CANCELLED. It creates and updates nothing. A take-down that leaves an
// instance live fails the deletion, naming the instances, so the stack stays to try again.

import { takeDownDeployment, type TakeDownResult } from '../../lib/usecases/take-down.ts';
import { clock, compute, inventory, jobSecrets, launchTemplates, store } from '../shared/deps.ts';
import { answerCloudFormation, CustomResourceRequestSchema } from '../shared/cfn-response.ts';
import { lambdaHandler } from '../shared/invocation.ts';
import { announceJobEnded } from '../shared/notify.ts';
import { parseEvent } from '../shared/parse.ts';

/** The resource's one physical id: there is nothing to replace. */
export const TAKE_DOWN_RESOURCE_ID = 'relaunch-take-down';

export const handler = lambdaHandler(async (event, log): Promise<TakeDownResult | null> => {
  const request = parseEvent(CustomResourceRequestSchema, event, 'event');
  if (request.RequestType !== 'Delete') {
    await answerCloudFormation(request, TAKE_DOWN_RESOURCE_ID, { status: 'SUCCESS' });
    return null;
  }
  let result: TakeDownResult;
  try {
    result = await takeDownDeployment({ store: store(), compute: compute(), inventory: inventory(), templates: launchTemplates(), secrets: jobSecrets(), clock });
  } catch (error) {
    await answerCloudFormation(request, TAKE_DOWN_RESOURCE_ID, { status: 'FAILED', reason: `the take-down failed: ${(error as Error).message}` });
    throw error;
  }
  for (const attempt of result.released) log.warn('instances released', { jobId: attempt.jobId, attempt: attempt.attempt, instanceIds: attempt.instanceIds, action: 'TAKE_DOWN' });
  for (const job of result.ended) {
    log.info('job ended', { jobId: job.jobId, status: job.status, reason: job.reason, action: 'TAKE_DOWN' });
    await announceJobEnded(job);
  }
  log.info('deployment taken down', { released: result.released.length, left: result.left.length, ended: result.ended.length, templatesDeleted: result.templatesDeleted });
  if (result.left.length === 0) {
    await answerCloudFormation(request, TAKE_DOWN_RESOURCE_ID, { status: 'SUCCESS' });
    return result;
  }
  const ids = result.left.flatMap((left) => left.instanceIds);
  log.error('instances left', { instanceIds: ids, reason: result.left.map((left) => left.reason).join('; ') });
  const reason =
    `${ids.length} instance${ids.length === 1 ? '' : 's'} of this deployment still live: ${result.left.map((left) => left.reason).join('; ')}. ` +
    `Terminate them (aws ec2 terminate-instances --instance-ids ${ids.join(' ')}), or run cdk destroy again`;
  await answerCloudFormation(request, TAKE_DOWN_RESOURCE_ID, { status: 'FAILED', reason });
  return result;
});
