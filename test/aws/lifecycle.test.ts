// A job's life on moto: the real handlers, the deployment's own state machine definition,
// and what moto holds afterwards.

import { DescribeLaunchTemplatesCommand, EC2Client } from '@aws-sdk/client-ec2';
import { GetParametersByPathCommand, SSMClient } from '@aws-sdk/client-ssm';
import { beforeAll, describe, expect, it } from 'vitest';
import { TagKey } from '../../lib/agent/tags.ts';
import { SPOT_ROLE_MISSING_ERROR } from '../../lib/adapters/ec2-compute.ts';
import { awsError, tagOf, useWorld, type StackInWorld } from './world.ts';

const world = useWorld();
let stack: StackInWorld;
let ami: string;

beforeAll(async () => {
  stack = await world().deploy('Relaunch');
  const ssm = new SSMClient({ region: 'us-east-1', endpoint: world().moto.endpoint });
  const published = await ssm.send(new GetParametersByPathCommand({ Path: '/aws/service/ami-amazon-linux-latest' }));
  ami = published.Parameters?.find((p) => p.Name?.endsWith('x86_64'))?.Value as string;
});

describe('a spot job on moto', () => {
  it('launches through CreateFleet, runs, reports and ends SUCCEEDED with nothing left behind', async () => {
    const jobId = await stack.submit(`name: train\nresources:\n  cpus: 2\n  use_spot: true\n  image_id: ${ami}\nrun: echo hi\n`);
    await stack.awaiting(jobId, 1, 'AwaitBoot');
    const [agent] = await stack.agents(jobId, 1);
    expect(agent).toBeDefined();
    expect((await agent!.heartbeat()).statusCode).toBe(200);
    await stack.awaiting(jobId, 1, 'AwaitAttempt');
    const reported = await agent!.report('run', 0, 'done');
    expect(reported.statusCode, JSON.stringify(reported.body)).toBe(200);
    const result = await stack.ended(jobId);
    expect(result.status).toBe('SUCCEEDED');
    const [instance] = await world().instances('us-east-1', { [TagKey.jobId]: jobId });
    expect(instance?.State?.Name).toBe('terminated');
    expect(tagOf(instance!, TagKey.nodeRank)).toBe('0');
    const ec2 = new EC2Client({ region: 'us-east-1', endpoint: world().moto.endpoint });
    const templates = await ec2.send(new DescribeLaunchTemplatesCommand({}));
    expect(templates.LaunchTemplates ?? []).toEqual([]);
    expect((await stack.job(jobId)).status).toBe('SUCCEEDED');
  });
});

describe('an account that never ran spot', () => {
  it.each([
    ['refused for the whole request', (stack: StackInWorld) => stack.answerNext('EC2', 'CreateFleet', () => {
      throw awsError(SPOT_ROLE_MISSING_ERROR, 'The provided credentials do not have permission to create the service-linked role for EC2 Spot Instances.');
    })],
    ['refused in the answer\'s Errors', (stack: StackInWorld) => stack.answerNext('EC2', 'CreateFleet', () => ({
      FleetId: 'fleet-11111111-2222-3333-4444-555555555555',
      Instances: [],
      Errors: [{ ErrorCode: SPOT_ROLE_MISSING_ERROR, ErrorMessage: 'The provided credentials do not have permission to create the service-linked role for EC2 Spot Instances.', Lifecycle: 'spot', LaunchTemplateAndOverrides: { Overrides: { InstanceType: 'm6i.large' } } }],
    }))],
  ])('ends the job FAILED_PRECHECKS saying how to create the spot role, not "no capacity", when EC2 is %s', async (_, refuse) => {
    refuse(stack);
    const jobId = await stack.submit(`name: spot\nresources:\n  cpus: 2\n  use_spot: true\n  image_id: ${ami}\nrun: echo hi\n`);
    const result = await stack.ended(jobId);
    expect(result.status).toBe('FAILED');
    const job = await stack.job(jobId);
    expect(job.status).toBe('FAILED_PRECHECKS');
    expect(String(job.failureReason)).toContain('aws iam create-service-linked-role --aws-service-name spot.amazonaws.com');
    expect(String(job.failureReason)).toContain('AWSServiceRoleForEC2Spot');
    expect(await world().instances('us-east-1', { [TagKey.jobId]: jobId })).toEqual([]);
  });
});

describe('the default image', () => {
  it('is read from AWS\'s public parameter with a grant that covers its ARN with and without an account (moto publishes no Ubuntu parameter: the job ends saying so)', async () => {
    const jobId = await stack.submit('name: default-image\nresources:\n  cpus: 2\nrun: echo hi\n');
    await stack.ended(jobId);
    const job = await stack.job(jobId);
    expect(job.status).toBe('FAILED_NO_RESOURCE');
    expect(String(job.failureReason)).toContain('no image for it there');
  });
});
