// Two deployments of relaunch in one account and region (two name prefixes, staging and
// prod), on moto: each janitor sweeps its own instances and launch templates and leaves
// the other's alone, whatever its table says about them.

import { CreateLaunchTemplateCommand, DescribeLaunchTemplatesCommand, EC2Client, RunInstancesCommand } from '@aws-sdk/client-ec2';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { TagKey } from '../../../lib/agent/tags.ts';
import { DEPLOYMENT_TAG_KEY } from '../../../lib/workflow/resources.ts';
import { evaluate } from './iam.ts';
import { awsError, tagOf, useWorld, type StackInWorld } from './world.ts';

const world = useWorld();
let staging: StackInWorld;
let prod: StackInWorld;
let ami: string;

beforeAll(async () => {
  staging = await world().deploy({ config: { namePrefix: 'staging' } });
  prod = await world().deploy({ config: { namePrefix: 'prod' } });
  ami = await world().amazonLinuxAmi();
});

afterEach(() => {
  vi.useRealTimers();
});

/** Runs a janitor as its schedule would, `minutes` from now (its clock only). */
async function janitorIn(stack: StackInWorld, minutes: number): Promise<Record<string, unknown>> {
  vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + minutes * 60_000 });
  try {
    return (await stack.invoke('janitor', { source: 'aws.events', 'detail-type': 'Scheduled Event', detail: {} })) as Record<string, unknown>;
  } finally {
    vi.useRealTimers();
  }
}

describe('two deployments in one account and region', () => {
  it("never sweep each other's live jobs or launch templates, and each still sweeps its own", async () => {
    const ec2 = new EC2Client({ region: 'us-east-1', endpoint: world().moto.endpoint });
    // prod runs a job; its launch's Lambda fails to delete its template, as one that died would.
    prod.answerNext('EC2', 'DeleteLaunchTemplate', () => {
      throw awsError('UnauthorizedOperation', 'the launch could not delete its template');
    });
    const jobId = await prod.submit(`name: prod-job\nresources:\n  cpus: 2\n  use_spot: true\n  image_id: ${ami}\nrun: sleep 3600\n`);
    await prod.awaiting(jobId, 1, 'AwaitBoot');
    const [agent] = await prod.agents(jobId, 1);
    await agent!.heartbeat();
    await prod.awaiting(jobId, 1, 'AwaitAttempt');
    const prodTemplates = await ec2.send(new DescribeLaunchTemplatesCommand({ Filters: [{ Name: `tag:${TagKey.jobId}`, Values: [jobId] }] }));
    expect(prodTemplates.LaunchTemplates).toHaveLength(1);

    // What staging's own launches left: an instance of a job its table never recorded, and a template.
    const orphan = await ec2.send(
      new RunInstancesCommand({
        ImageId: ami,
        InstanceType: 'm6i.large',
        MinCount: 1,
        MaxCount: 1,
        TagSpecifications: [{ ResourceType: 'instance', Tags: [{ Key: TagKey.jobId, Value: 'j-never-recorded' }, { Key: TagKey.attempt, Value: '1' }, { Key: DEPLOYMENT_TAG_KEY, Value: 'staging' }] }],
      }),
    );
    await ec2.send(
      new CreateLaunchTemplateCommand({
        LaunchTemplateName: 'staging-j-never-recorded-1-left',
        LaunchTemplateData: { ImageId: ami },
        TagSpecifications: [{ ResourceType: 'launch-template', Tags: [{ Key: TagKey.jobId, Value: 'j-never-recorded' }, { Key: DEPLOYMENT_TAG_KEY, Value: 'staging' }] }],
      }),
    );

    // An hour later, staging's janitor runs.
    const swept = (await janitorIn(staging, 60)) as { sweep: { released: { jobId: string }[] }; templates: { deleted: { jobId: string }[] } };
    expect(swept.sweep.released.map((r) => r.jobId)).toEqual(['j-never-recorded']);
    expect(swept.templates.deleted.map((t) => t.jobId)).toEqual(['j-never-recorded']);
    const [prodInstance] = await world().instances('us-east-1', { [TagKey.jobId]: jobId });
    expect(prodInstance?.State?.Name).toBe('running');
    const [orphanNow] = await world().instances('us-east-1', { [TagKey.jobId]: 'j-never-recorded' });
    expect(orphanNow?.InstanceId).toBe(orphan.Instances?.[0]?.InstanceId);
    expect(orphanNow?.State?.Name).toBe('terminated');
    const left = await ec2.send(new DescribeLaunchTemplatesCommand({ Filters: [{ Name: `tag:${TagKey.jobId}`, Values: [jobId] }] }));
    expect(left.LaunchTemplates).toHaveLength(1);

    // prod's own janitor keeps its live job and deletes its own leftover template.
    const prodSwept = (await janitorIn(prod, 60)) as { sweep: { released: unknown[]; kept: number }; templates: { deleted: { jobId: string }[] } };
    expect(prodSwept.sweep.released).toEqual([]);
    expect(prodSwept.templates.deleted.map((t) => t.jobId)).toEqual([jobId]);
    expect((await world().instances('us-east-1', { [TagKey.jobId]: jobId }))[0]?.State?.Name).toBe('running');
    expect((await prod.job(jobId)).status).toBe('RUNNING');

    // The job still ends as usual.
    await agent!.report('run', 0, 'done');
    expect((await prod.ended(jobId)).status).toBe('SUCCEEDED');
  });
});

describe("each deployment's roles", () => {
  it("may terminate, tag and launch from only their own deployment's resources, as moto holds them", async () => {
    const ec2 = new EC2Client({ region: 'us-east-1', endpoint: world().moto.endpoint });
    const stagingJob = await staging.submit(`name: staging-job\nresources:\n  cpus: 2\n  image_id: ${ami}\nrun: sleep 3600\n`);
    const prodJob = await prod.submit(`name: prod-job\nresources:\n  cpus: 2\n  image_id: ${ami}\nrun: sleep 3600\n`);
    await staging.awaiting(stagingJob, 1, 'AwaitBoot');
    await prod.awaiting(prodJob, 1, 'AwaitBoot');
    const [ownInstance] = await world().instances('us-east-1', { [TagKey.jobId]: stagingJob });
    const [otherInstance] = await world().instances('us-east-1', { [TagKey.jobId]: prodJob });
    expect(tagOf(ownInstance!, DEPLOYMENT_TAG_KEY)).toBe('staging');
    expect(tagOf(otherInstance!, DEPLOYMENT_TAG_KEY)).toBe('prod');
    const resourceTags = (tags: { Key?: string; Value?: string }[] = []) => Object.fromEntries(tags.map((tag) => [`aws:ResourceTag/${tag.Key}`, tag.Value as string]));
    const ask = async (fn: 'janitor' | 'release-instances' | 'launch-attempt', action: string, instance: typeof ownInstance, extra: Record<string, string | string[]> = {}) => {
      const { roleArn, statements } = staging.deployment.functions[fn];
      const resource = `arn:aws:ec2:us-east-1:${staging.deployment.account}:instance/${instance?.InstanceId}`;
      return evaluate(roleArn, statements, { action, resource, context: { ...resourceTags(instance?.Tags), ...extra } }, staging.deployment.account);
    };
    for (const fn of ['janitor', 'release-instances', 'launch-attempt'] as const) {
      expect(await ask(fn, 'ec2:TerminateInstances', ownInstance), fn).toBe('Allowed');
      expect(await ask(fn, 'ec2:TerminateInstances', otherInstance), fn).toBe('ImplicitlyDenied');
    }
    const nodeTag = { 'aws:RequestTag/relaunch:node-rank': '0', 'aws:TagKeys': ['relaunch:node-rank'] };
    expect(await ask('launch-attempt', 'ec2:CreateTags', ownInstance, nodeTag)).toBe('Allowed');
    expect(await ask('launch-attempt', 'ec2:CreateTags', otherInstance, nodeTag)).toBe('ImplicitlyDenied');
    // Nor may it relabel its own instance as another deployment's.
    expect(await ask('launch-attempt', 'ec2:CreateTags', ownInstance, { [`aws:RequestTag/${DEPLOYMENT_TAG_KEY}`]: 'prod', 'aws:TagKeys': [DEPLOYMENT_TAG_KEY] })).toBe('ImplicitlyDenied');
    // A launch template of the other deployment is not one it may launch from or delete.
    const template = await ec2.send(
      new CreateLaunchTemplateCommand({
        LaunchTemplateName: 'prod-template',
        LaunchTemplateData: { ImageId: ami },
        TagSpecifications: [{ ResourceType: 'launch-template', Tags: [{ Key: TagKey.jobId, Value: prodJob }, { Key: DEPLOYMENT_TAG_KEY, Value: 'prod' }] }],
      }),
    );
    const templateArn = `arn:aws:ec2:us-east-1:${staging.deployment.account}:launch-template/${template.LaunchTemplate?.LaunchTemplateId}`;
    const templateTags = { [`aws:ResourceTag/${TagKey.jobId}`]: prodJob, [`aws:ResourceTag/${DEPLOYMENT_TAG_KEY}`]: 'prod' };
    const launch = staging.deployment.functions['launch-attempt'];
    for (const action of ['ec2:CreateFleet', 'ec2:RunInstances', 'ec2:DeleteLaunchTemplate']) {
      expect(await evaluate(launch.roleArn, launch.statements, { action, resource: templateArn, context: templateTags }, staging.deployment.account), action).toBe('ImplicitlyDenied');
    }
    // Nor create a fleet's instances tagged as the other deployment's.
    const instanceArn = `arn:aws:ec2:us-east-1:${staging.deployment.account}:instance/i-00000000pending`;
    const asProd = { [`aws:RequestTag/${TagKey.jobId}`]: 'j-1', [`aws:RequestTag/${DEPLOYMENT_TAG_KEY}`]: 'prod', 'aws:TagKeys': [TagKey.jobId, DEPLOYMENT_TAG_KEY], 'ec2:InstanceType': 'm6i.large' };
    expect(await evaluate(launch.roleArn, launch.statements, { action: 'ec2:RunInstances', resource: instanceArn, context: asProd }, staging.deployment.account)).toBe('ImplicitlyDenied');
  });
});
