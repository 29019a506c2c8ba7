// Ec2Inventory and Ec2LaunchTemplates: relaunch's live instances and launch templates in
// every region, every page, read from their tags.

import { DeleteLaunchTemplateCommand, DescribeInstancesCommand, DescribeLaunchTemplatesCommand, EC2Client, EC2ServiceException } from '@aws-sdk/client-ec2';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import { Ec2Inventory } from '../../../../lib/adapters/ec2-inventory.ts';
import { Ec2LaunchTemplates } from '../../../../lib/adapters/ec2-launch-templates.ts';
import { TagKey } from '../../../../lib/agent/tags.ts';
import { DEPLOYMENT_TAG_KEY } from '../../../../lib/workflow/resources.ts';

const ec2 = mockClient(EC2Client);
beforeEach(() => ec2.reset());

const launched = new Date('2026-03-01T11:00:00.000Z');
/** An instance of this deployment (`relaunch`) with the tags given besides. */
const instance = (id: string, tags: Record<string, string>) => ({
  InstanceId: id,
  LaunchTime: launched,
  Tags: Object.entries({ [DEPLOYMENT_TAG_KEY]: 'relaunch', ...tags }).map(([Key, Value]) => ({ Key, Value })),
});
const ours = { Key: DEPLOYMENT_TAG_KEY, Value: 'relaunch' };

describe('Ec2Inventory', () => {
  it('lists every live instance of this deployment with a job tag, in every region and page, with its job and attempt', async () => {
    ec2
      .on(DescribeInstancesCommand)
      .resolvesOnce({
        Reservations: [{ Instances: [instance('i-01', { [TagKey.jobId]: 'j-a', [TagKey.attempt]: '2', Name: 'x' })] }],
        NextToken: 'page-2',
      })
      .resolvesOnce({ Reservations: [{ Instances: [instance('i-02', { [TagKey.jobId]: 'j-b', [TagKey.attempt]: '1' })] }] })
      .resolvesOnce({ Reservations: [{ Instances: [instance('i-03', { [TagKey.jobId]: 'j-c', [TagKey.attempt]: '1' })] }] });
    const inventory = new Ec2Inventory({ regions: ['us-east-1', 'eu-west-1'], ec2: (region) => new EC2Client({ region }), deployment: 'relaunch' });

    const found = await inventory.listTagged();

    expect(found).toEqual([
      { instanceId: 'i-01', region: 'us-east-1', jobId: 'j-a', attempt: 2, launchedAt: launched.toISOString() },
      { instanceId: 'i-02', region: 'us-east-1', jobId: 'j-b', attempt: 1, launchedAt: launched.toISOString() },
      { instanceId: 'i-03', region: 'eu-west-1', jobId: 'j-c', attempt: 1, launchedAt: launched.toISOString() },
    ]);
    expect(ec2).toHaveReceivedCommandTimes(DescribeInstancesCommand, 3);
    expect(ec2).toHaveReceivedNthCommandWith(DescribeInstancesCommand, 2, { NextToken: 'page-2' });
    expect(ec2).toHaveReceivedCommandWith(DescribeInstancesCommand, {
      Filters: [
        { Name: 'tag-key', Values: [TagKey.jobId] },
        { Name: `tag:${DEPLOYMENT_TAG_KEY}`, Values: ['relaunch'] },
        { Name: 'instance-state-name', Values: ['pending', 'running', 'stopping', 'stopped'] },
      ],
    });
  });

  it.each([
    ['no attempt tag', { [TagKey.jobId]: 'j-a' }],
    ['an attempt tag that is not a number', { [TagKey.jobId]: 'j-a', [TagKey.attempt]: '2; rm -rf' }],
    ['attempt 0', { [TagKey.jobId]: 'j-a', [TagKey.attempt]: '0' }],
  ])('reads an instance with %s as attempt null', async (_name, tags) => {
    ec2.on(DescribeInstancesCommand).resolves({ Reservations: [{ Instances: [instance('i-01', tags)] }] });
    const [found] = await new Ec2Inventory({ regions: ['us-east-1'], ec2: () => new EC2Client({}), deployment: 'relaunch' }).listTagged();
    expect(found).toMatchObject({ jobId: 'j-a', attempt: null });
  });

  it('skips what is not this deployment\'s: no id, no job tag, an empty job tag, another deployment\'s or none; and an instance with no launch time has none', async () => {
    ec2.on(DescribeInstancesCommand).resolves({
      Reservations: [
        { Instances: [{ Tags: [{ Key: TagKey.jobId, Value: 'j-a' }, ours] }, instance('i-01', { Name: 'other' }), instance('i-02', { [TagKey.jobId]: '' })] },
        { Instances: [instance('i-04', { [TagKey.jobId]: 'j-c', [DEPLOYMENT_TAG_KEY]: 'staging' }), { InstanceId: 'i-05', Tags: [{ Key: TagKey.jobId, Value: 'j-d' }] }] },
        { Instances: [{ InstanceId: 'i-03', Tags: [{ Key: TagKey.jobId, Value: 'j-b' }, { Key: TagKey.attempt, Value: '4' }, ours] }] },
        {},
      ],
    });
    const found = await new Ec2Inventory({ regions: ['us-east-1'], ec2: () => new EC2Client({}), deployment: 'relaunch' }).listTagged();
    expect(found).toEqual([{ instanceId: 'i-03', region: 'us-east-1', jobId: 'j-b', attempt: 4, launchedAt: null }]);
  });

  it('raises a throttle that outlasted the SDK\'s retries as TransientError, naming the call and region', async () => {
    ec2.on(DescribeInstancesCommand).rejects(Object.assign(new Error('Request limit exceeded.'), { name: 'RequestLimitExceeded', $metadata: { httpStatusCode: 503 } }));
    const inventory = new Ec2Inventory({ regions: ['eu-west-1'], ec2: () => new EC2Client({}), deployment: 'relaunch' });
    await expect(inventory.listTagged()).rejects.toMatchObject({ name: 'TransientError', message: expect.stringContaining('EC2 DescribeInstances in eu-west-1') });
  });
});

describe('Ec2LaunchTemplates', () => {
  const templates = () => new Ec2LaunchTemplates({ regions: ['us-east-1', 'eu-west-1'], ec2: (region) => new EC2Client({ region }), deployment: 'relaunch' });
  const made = new Date('2026-03-01T11:00:00.000Z');

  it('lists this deployment\'s job-tagged templates of every region and page, skipping any without a job tag or of another deployment', async () => {
    ec2
      .on(DescribeLaunchTemplatesCommand)
      .resolvesOnce({ LaunchTemplates: [{ LaunchTemplateId: 'lt-1', CreateTime: made, Tags: [{ Key: TagKey.jobId, Value: 'j-a' }, ours] }], NextToken: 'p2' })
      .resolvesOnce({
        LaunchTemplates: [
          { LaunchTemplateId: 'lt-2', Tags: [{ Key: 'Name', Value: 'theirs' }] },
          { LaunchTemplateId: 'lt-4', Tags: [{ Key: TagKey.jobId, Value: 'j-c' }, { Key: DEPLOYMENT_TAG_KEY, Value: 'staging' }] },
        ],
      })
      .resolvesOnce({ LaunchTemplates: [{ LaunchTemplateId: 'lt-3', Tags: [{ Key: TagKey.jobId, Value: 'j-b' }, ours] }] });

    expect(await templates().listTagged()).toEqual([
      { templateId: 'lt-1', region: 'us-east-1', jobId: 'j-a', createdAt: made.toISOString() },
      { templateId: 'lt-3', region: 'eu-west-1', jobId: 'j-b', createdAt: null },
    ]);
    expect(ec2).toHaveReceivedNthCommandWith(DescribeLaunchTemplatesCommand, 1, {
      Filters: [
        { Name: 'tag-key', Values: [TagKey.jobId] },
        { Name: `tag:${DEPLOYMENT_TAG_KEY}`, Values: ['relaunch'] },
      ],
    });
    expect(ec2).toHaveReceivedNthCommandWith(DescribeLaunchTemplatesCommand, 2, { NextToken: 'p2' });
  });

  it('deletes a template, takes one already gone as deleted, and lets other errors through', async () => {
    const template = { templateId: 'lt-1', region: 'us-east-1', jobId: 'j-a', createdAt: null };
    const error = (name: string) => new EC2ServiceException({ name, $fault: 'client', $metadata: { httpStatusCode: 400 }, message: name });
    ec2.on(DeleteLaunchTemplateCommand).resolvesOnce({}).rejectsOnce(error('InvalidLaunchTemplateId.NotFound')).rejectsOnce(error('UnauthorizedOperation'));

    await templates().delete(template);
    await templates().delete(template);
    await expect(templates().delete(template)).rejects.toThrow('UnauthorizedOperation');
    expect(ec2).toHaveReceivedCommandWith(DeleteLaunchTemplateCommand, { LaunchTemplateId: 'lt-1' });
  });
});
