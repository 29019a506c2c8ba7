// A job's life on moto: the real handlers, the deployment's own state machine definition,
// and what moto holds afterwards.

import { DescribeLaunchTemplatesCommand, DescribeLaunchTemplateVersionsCommand, DescribeSecurityGroupsCommand, EC2Client } from '@aws-sdk/client-ec2';
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

describe('multi-node and EFA jobs', () => {
  it.each([
    ['p4d.24xlarge', 4],
    ['p5.48xlarge', 32],
    ['g5.48xlarge', 1],
  ])('launch %s with network_tier: best with one EFA interface per network card (%i), all in the group that admits its own nodes', async (type, cards) => {
    // The template is kept (its delete refused) so that moto can be asked what it holds.
    stack.answerNext('EC2', 'DeleteLaunchTemplate', () => {
      throw awsError('UnauthorizedOperation', 'kept for the test');
    });
    const jobId = await stack.submit(`name: efa\nnum_nodes: 2\nresources:\n  instance_type: ${type}\n  network_tier: best\n  image_id: ${ami}\nrun: echo hi\n`);
    await stack.awaiting(jobId, 1, 'AwaitBoot');
    const ec2 = new EC2Client({ region: 'us-east-1', endpoint: world().moto.endpoint });
    const [template] = (await ec2.send(new DescribeLaunchTemplatesCommand({ Filters: [{ Name: `tag:${TagKey.jobId}`, Values: [jobId] }] }))).LaunchTemplates ?? [];
    const versions = await ec2.send(new DescribeLaunchTemplateVersionsCommand({ LaunchTemplateId: template?.LaunchTemplateId, Versions: ['$Latest'] }));
    const interfaces = versions.LaunchTemplateVersions?.[0]?.LaunchTemplateData?.NetworkInterfaces ?? [];
    const group = stack.deployment.only('AWS::EC2::SecurityGroup').physical.ref;
    expect(interfaces.map((nic) => [nic.NetworkCardIndex, nic.DeviceIndex, nic.InterfaceType, nic.Groups])).toEqual(
      Array.from({ length: cards }, (_, card) => [card, card === 0 ? 0 : 1, card === 0 ? 'efa' : 'efa-only', [group]]),
    );
    // The group every node is in admits every other member (NCCL, torchrun's rendezvous).
    const groups = await ec2.send(new DescribeSecurityGroupsCommand({ GroupIds: [group] }));
    expect(groups.SecurityGroups?.[0]?.IpPermissions).toContainEqual(expect.objectContaining({ IpProtocol: '-1', UserIdGroupPairs: [expect.objectContaining({ GroupId: group })] }));
    expect(await world().instances('us-east-1', { [TagKey.jobId]: jobId })).toHaveLength(2);
    const cancelled = await stack.api('DELETE', `/jobs/${jobId}`);
    expect(cancelled.statusCode).toBe(202);
    expect((await stack.ended(jobId)).status).toBe('FAILED');
    expect((await stack.job(jobId)).status).toBe('CANCELLED');
  });

  it('are refused at submit, naming num_nodes and the setting, by a stack whose nodes may not reach each other', async () => {
    const closed = await world().deploy('Closed', { config: { namePrefix: 'closed', nodeToNodeTraffic: false } });
    const answer = await closed.api('POST', '/jobs', { body: `name: two\nnum_nodes: 2\nresources:\n  image_id: ${ami}\nrun: echo hi\n`, headers: { 'content-type': 'application/yaml' } });
    expect(answer.statusCode).toBe(400);
    expect(answer.body.issues).toEqual([expect.objectContaining({ path: 'num_nodes', message: expect.stringContaining('relaunch:nodeToNodeTraffic') })]);
    const one = await closed.submit(`name: one\nresources:\n  cpus: 2\n  image_id: ${ami}\nrun: echo hi\n`);
    await closed.api('DELETE', `/jobs/${one}`);
    await closed.ended(one);
  });
});
