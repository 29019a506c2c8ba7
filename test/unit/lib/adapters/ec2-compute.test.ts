// Ec2Compute against mocked EC2 and SSM: what it sends, how it fails over, and what it refuses.

import { gunzipSync } from 'node:zlib';
import { randomBytes } from 'node:crypto';
import {
  CreateFleetCommand,
  CreateLaunchTemplateCommand,
  CreateTagsCommand,
  DeleteLaunchTemplateCommand,
  DeleteTagsCommand,
  DescribeImagesCommand,
  DescribeInstancesCommand,
  EC2Client,
  EC2ServiceException,
  TerminateInstancesCommand,
  type CreateFleetCommandInput,
  type CreateFleetCommandOutput,
  type CreateLaunchTemplateCommandInput,
  type DescribeInstancesCommandInput,
  type RequestLaunchTemplateData,
} from '@aws-sdk/client-ec2';
import { AddTagsToResourceCommand, DeleteParametersCommand, GetParameterCommand, PutParameterCommand, SSMClient, SSMServiceException } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  Ec2Compute,
  fleetClientToken,
  InstancesStillRunningError,
  RELEASE_WAIT_BUDGET_MS,
} from '../../../../lib/adapters/ec2-compute.ts';
import type { Ec2ComputeConfig } from '../../../../lib/workflow/resources.ts';
import { aliasParameter, DEFAULT_IMAGE_PARAMETERS } from '../../../../lib/adapters/ec2-images.ts';
import { LAMBDA_NEEDS, LambdaName } from '../../../../infra/lambda-catalog.ts';
import { authorizationHeader } from '../../../../lib/agent/protocol.ts';
import { InvalidInputError, NoCapacityError, PrecheckError, TransientError, UnexpectedCloudResponseError } from '../../../../lib/errors.ts';
import { parseTaskFile } from '../../../../lib/task-file/parse.ts';
import { SsmParameters } from '../../../../lib/adapters/ssm-parameters.ts';
import type { InstanceRef, Placement } from '../../../../lib/model.ts';
import type { LaunchRequest } from '../../../../lib/ports.ts';
import type { Resources, TaskSpec } from '../../../../lib/task-file/types.ts';
import { taskSpec } from '../../../support/fixtures/specs.ts';
import { agentSetting } from '../../../support/fixtures/agent-settings.ts';

const mockEc2 = (client: EC2Client) => mockClient(client);
const mockSsm = (client: SSMClient) => mockClient(client);
type Ec2Mock = ReturnType<typeof mockEc2>;
type SsmMock = ReturnType<typeof mockSsm>;

const REGIONS = ['us-east-1', 'us-west-2'] as const;
const ACCOUNT = '123456789012';
type Region = (typeof REGIONS)[number];

const CONFIG: Ec2ComputeConfig = {
  regions: [
    { region: 'us-east-1', subnetsByZone: { 'us-east-1a': 'subnet-east-a', 'us-east-1b': 'subnet-east-b' }, securityGroupIds: ['sg-east'] },
    { region: 'us-west-2', subnetsByZone: { 'us-west-2a': 'subnet-west-a' }, securityGroupIds: ['sg-west'] },
  ],
  instanceProfileArn: 'arn:aws:iam::123456789012:instance-profile/relaunch-node',
  apiUrl: 'https://api.example.com/prod',
  namePrefix: 'relaunch',
};

const ZONE_OF_SUBNET: Readonly<Record<string, string>> = Object.fromEntries(
  CONFIG.regions.flatMap((region) => Object.entries(region.subnetsByZone).map(([zone, subnet]) => [subnet, zone])),
);

/** The AMI each region's SSM parameter names: `ami-<region>-<kind>`. */
function amiOf(region: string, parameter: string): string {
  const kind = Object.entries(DEFAULT_IMAGE_PARAMETERS).find(([, name]) => name === parameter)?.[0] ?? 'unknown';
  return `ami-${region}-${kind}`;
}

function awsError(code: string, message = `${code} (from the test)`): EC2ServiceException {
  return new EC2ServiceException({ name: code, $fault: 'client', $metadata: { httpStatusCode: 400 }, message });
}

function serverError(code: string, httpStatusCode: number): EC2ServiceException {
  return new EC2ServiceException({ name: code, $fault: 'server', $metadata: { httpStatusCode }, message: `${code} (from the test)` });
}

function spec(resources: Partial<Resources> = {}, overrides: Partial<TaskSpec> = {}): TaskSpec {
  return { ...taskSpec({ resources }), ...overrides };
}

function request(taskSpec: TaskSpec, overrides: Partial<LaunchRequest> = {}): LaunchRequest {
  return { jobId: 'job-1', attempt: 2, spec: taskSpec, market: 'on-demand', history: [], callbackSecret: 'cb-secret', ...overrides };
}

let clients: { ec2: Record<Region, EC2Client>; ssm: Record<Region, SSMClient> };
let ec2: Record<Region, Ec2Mock>;
let ssm: Record<Region, SsmMock>;
let sleeps: number[];
let launched: number;
/** Every instance the mocked fleets launched: what DescribeInstances says of it. */
let world: Map<string, { zone: string; type: string; ip: string | undefined }>;
/** Every launch template the mocked EC2 holds, by id: what CreateLaunchTemplate was sent. */
let templates: Map<string, CreateLaunchTemplateCommandInput>;

function compute(config: Partial<Ec2ComputeConfig> = {}): Ec2Compute {
  return new Ec2Compute({
    ec2: (region) => clients.ec2[region as Region],
    parameters: new SsmParameters((region) => clients.ssm[region as Region]),
    config: { ...CONFIG, ...config },
    sleep: async (ms) => {
      sleeps.push(ms);
    },
  });
}

/** A fleet that fills its capacity with its first override: instances i-1, i-2, ... with private IPs. */
function fleetLaunches(input: CreateFleetCommandInput, ip = true): Partial<CreateFleetCommandOutput> {
  const override = input.LaunchTemplateConfigs?.[0]?.Overrides?.[0];
  const ids = Array.from({ length: input.TargetCapacitySpecification?.TotalTargetCapacity ?? 0 }, () => {
    launched += 1;
    const id = `i-${launched}`;
    world.set(id, { zone: ZONE_OF_SUBNET[override?.SubnetId ?? ''] ?? 'unknown', type: override?.InstanceType ?? 'unknown', ip: ip ? `10.0.0.${launched}` : undefined });
    return id;
  });
  return { FleetId: 'fleet-1', Instances: [{ InstanceIds: ids, InstanceType: override?.InstanceType, LaunchTemplateAndOverrides: { Overrides: override } }], Errors: [] };
}

/** A fleet EC2 could not fill: one error per override, with this code. */
function fleetFails(input: CreateFleetCommandInput, code = 'InsufficientInstanceCapacity'): Partial<CreateFleetCommandOutput> {
  const overrides = (input.LaunchTemplateConfigs ?? []).flatMap((config) => config.Overrides ?? []);
  return {
    FleetId: 'fleet-0',
    Instances: [],
    Errors: overrides.map((override) => ({
      LaunchTemplateAndOverrides: { Overrides: { InstanceType: override.InstanceType, SubnetId: override.SubnetId } },
      Lifecycle: input.TargetCapacitySpecification?.DefaultTargetCapacityType === 'spot' ? 'spot' : 'on-demand',
      ErrorCode: code,
      ErrorMessage: `${code} (from the test)`,
    })),
  };
}

function describeWorld(input: DescribeInstancesCommandInput) {
  if (input.InstanceIds === undefined) return { Reservations: [] };
  const instances = input.InstanceIds.flatMap((id) => {
    const known = world.get(id);
    return known === undefined ? [] : [{ InstanceId: id, InstanceType: known.type, PrivateIpAddress: known.ip, Placement: { AvailabilityZone: known.zone } }];
  });
  return { Reservations: [{ OwnerId: ACCOUNT, Instances: instances }] };
}

beforeEach(() => {
  sleeps = [];
  launched = 0;
  world = new Map();
  templates = new Map();
  clients = {
    ec2: { 'us-east-1': new EC2Client({ region: 'us-east-1' }), 'us-west-2': new EC2Client({ region: 'us-west-2' }) },
    ssm: { 'us-east-1': new SSMClient({ region: 'us-east-1' }), 'us-west-2': new SSMClient({ region: 'us-west-2' }) },
  };
  ec2 = { 'us-east-1': mockEc2(clients.ec2['us-east-1']), 'us-west-2': mockEc2(clients.ec2['us-west-2']) };
  ssm = { 'us-east-1': mockSsm(clients.ssm['us-east-1']), 'us-west-2': mockSsm(clients.ssm['us-west-2']) };
  for (const region of REGIONS) {
    ssm[region].on(GetParameterCommand).callsFake((input: { Name: string }) => ({ Parameter: { Value: amiOf(region, input.Name) } }));
    ssm[region].on(PutParameterCommand).resolves({ Version: 1, Tier: 'Standard' });
    ssm[region].on(DeleteParametersCommand).callsFake((input: { Names: string[] }) => ({ DeletedParameters: [], InvalidParameters: input.Names }));
    ec2[region].on(DescribeImagesCommand).resolves({ Images: [{ ImageId: 'ami', RootDeviceName: '/dev/sda1' }] });
    ec2[region].on(CreateTagsCommand).resolves({});
    ec2[region].on(TerminateInstancesCommand).resolves({});
    ec2[region].on(DescribeInstancesCommand).callsFake(describeWorld);
    ec2[region].on(CreateLaunchTemplateCommand).callsFake((input: CreateLaunchTemplateCommandInput) => {
      const id = `lt-${region}-${templates.size + 1}`;
      templates.set(id, input);
      return { LaunchTemplate: { LaunchTemplateId: id, LaunchTemplateName: input.LaunchTemplateName } };
    });
    ec2[region].on(DeleteLaunchTemplateCommand).resolves({});
    ec2[region].on(CreateFleetCommand).callsFake((input: CreateFleetCommandInput) => fleetLaunches(input));
  }
});

function fleetInputs(region: Region): CreateFleetCommandInput[] {
  return ec2[region].commandCalls(CreateFleetCommand).map((call) => call.args[0].input as CreateFleetCommandInput);
}

/** The launch template data behind a fleet's `index`th config. */
function templateData(fleet: CreateFleetCommandInput | undefined, index = 0): RequestLaunchTemplateData {
  const id = fleet?.LaunchTemplateConfigs?.[index]?.LaunchTemplateSpecification?.LaunchTemplateId ?? '';
  const data = templates.get(id)?.LaunchTemplateData;
  if (data === undefined) throw new Error(`no launch template ${id}`);
  return data;
}

/** The fleet's overrides as `zone/type`, over every config. */
function overridesOf(fleet: CreateFleetCommandInput | undefined): string[] {
  return (fleet?.LaunchTemplateConfigs ?? []).flatMap((config) =>
    (config.Overrides ?? []).map((override) => `${ZONE_OF_SUBNET[override.SubnetId ?? ''] ?? '*'}/${override.InstanceType}`),
  );
}

/** The agent script a launch sent, un-gzipped. */
function userDataScript(data: RequestLaunchTemplateData): string {
  return gunzipSync(Buffer.from(data.UserData ?? '', 'base64')).toString('utf8');
}

/** The environment file the agent script carries. */
function agentEnvironment(script: string): string {
  return agentSetting(script, 'JOB_ENV') ?? '';
}

const TAGS = [
  { Key: 'Name', Value: 'relaunch-job-1-2' },
  { Key: 'relaunch:job-id', Value: 'job-1' },
  { Key: 'relaunch:attempt', Value: '2' },
  { Key: 'relaunch:deployment', Value: 'relaunch' },
];

describe('Ec2Compute.launch: what it sends', () => {
  it('one instant fleet over every fitting type and zone of the region, all or nothing, in one zone on one type', async () => {
    const result = await compute().launch(request(spec({ cpus: { value: 8, orMore: false }, memoryGb: { value: 32, orMore: false } })));

    expect(ssm['us-east-1']).toHaveReceivedCommandWith(GetParameterCommand, { Name: DEFAULT_IMAGE_PARAMETERS.x86_64 });
    expect(ec2['us-east-1']).toHaveReceivedCommandWith(DescribeImagesCommand, { ImageIds: ['ami-us-east-1-x86_64'] });
    const [fleet] = fleetInputs('us-east-1');
    expect(fleet).toEqual({
      ClientToken: 'job-1-2-us-east-1-0',
      Type: 'instant',
      LaunchTemplateConfigs: [
        {
          LaunchTemplateSpecification: { LaunchTemplateId: 'lt-us-east-1-1', Version: '$Latest' },
          Overrides: [
            { InstanceType: 'm6i.2xlarge', SubnetId: 'subnet-east-a' },
            { InstanceType: 'm7i.2xlarge', SubnetId: 'subnet-east-a' },
            { InstanceType: 'm6i.2xlarge', SubnetId: 'subnet-east-b' },
            { InstanceType: 'm7i.2xlarge', SubnetId: 'subnet-east-b' },
          ],
        },
      ],
      TargetCapacitySpecification: { TotalTargetCapacity: 1, OnDemandTargetCapacity: 1, DefaultTargetCapacityType: 'on-demand' },
      OnDemandOptions: { AllocationStrategy: 'lowest-price', SingleInstanceType: true, SingleAvailabilityZone: true, MinTargetCapacity: 1 },
      TagSpecifications: [
        { ResourceType: 'fleet', Tags: TAGS },
        { ResourceType: 'instance', Tags: TAGS },
        { ResourceType: 'volume', Tags: TAGS },
      ],
    });
    expect(result).toEqual({
      placement: { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm6i.2xlarge', market: 'on-demand', price: { hourly: 0.384, onDemandHourly: 0.384, source: 'price-table', estimate: false } },
      instances: [{ instanceId: 'i-1', nodeRank: 0, privateIp: '10.0.0.1' }],
    });
  });

  it('the launch template holds the image, IMDSv2, terminate-on-shutdown, tags and the root volume; it is deleted after the fleet', async () => {
    await compute().launch(request(spec()));

    expect(ec2['us-east-1']).toHaveReceivedCommandExactlyOnceWith(CreateLaunchTemplateCommand, {
      LaunchTemplateName: expect.stringMatching(/^relaunch-job-1-2-[0-9a-f]{16}$/),
      ClientToken: expect.stringMatching(/^relaunch-job-1-2-[0-9a-f]{16}$/),
      TagSpecifications: [{ ResourceType: 'launch-template', Tags: TAGS }],
    });
    const data = templateData(fleetInputs('us-east-1')[0]);
    expect(data).toEqual({
      ImageId: 'ami-us-east-1-x86_64',
      IamInstanceProfile: { Arn: CONFIG.instanceProfileArn },
      UserData: expect.any(String),
      // IMDSv2 only, one hop: a container on the node cannot reach the instance's credentials.
      MetadataOptions: { HttpTokens: 'required', HttpEndpoint: 'enabled', InstanceMetadataTags: 'enabled', HttpPutResponseHopLimit: 1 },
      InstanceInitiatedShutdownBehavior: 'terminate',
      BlockDeviceMappings: [{ DeviceName: '/dev/sda1', Ebs: { VolumeSize: 256, VolumeType: 'gp3', DeleteOnTermination: true, Encrypted: true } }],
      SecurityGroupIds: ['sg-east'],
      TagSpecifications: [
        { ResourceType: 'instance', Tags: TAGS },
        { ResourceType: 'volume', Tags: TAGS },
      ],
    });
    expect(ec2['us-east-1']).toHaveReceivedCommandExactlyOnceWith(DeleteLaunchTemplateCommand, { LaunchTemplateId: 'lt-us-east-1-1' });
    const order = ec2['us-east-1'].calls().map((call) => call.args[0].constructor.name);
    expect(order.indexOf('CreateFleetCommand')).toBeLessThan(order.indexOf('DeleteLaunchTemplateCommand'));
  });

  it('asks for spot capacity, price-capacity-optimized, terminated on interruption', async () => {
    const result = await compute().launch(request(spec(), { market: 'spot' }));

    expect(ec2['us-east-1']).toHaveReceivedCommandWith(CreateFleetCommand, {
      TargetCapacitySpecification: { TotalTargetCapacity: 1, SpotTargetCapacity: 1, DefaultTargetCapacityType: 'spot' },
      SpotOptions: {
        AllocationStrategy: 'price-capacity-optimized',
        InstanceInterruptionBehavior: 'terminate',
        SingleInstanceType: true,
        SingleAvailabilityZone: true,
        MinTargetCapacity: 1,
      },
    });
    expect(fleetInputs('us-east-1')[0]?.OnDemandOptions).toBeUndefined();
    expect(result.placement.market).toBe('spot');
  });

  it('ordered: prioritized (capacity-optimized-prioritized on spot), with the entries\' priorities', async () => {
    const alternatives = { mode: 'ordered' as const, options: [{ instanceType: 'g5.xlarge', useSpot: true }, { instanceType: 'g6.xlarge', useSpot: true }] };

    await compute().launch(request(spec({ useSpot: true, alternatives, region: 'us-west-2' }), { market: 'spot' }));

    const [fleet] = fleetInputs('us-west-2');
    expect(fleet?.SpotOptions?.AllocationStrategy).toBe('capacity-optimized-prioritized');
    expect(fleet?.LaunchTemplateConfigs?.[0]?.Overrides).toEqual([
      { InstanceType: 'g5.xlarge', SubnetId: 'subnet-west-a', Priority: 0 },
      { InstanceType: 'g6.xlarge', SubnetId: 'subnet-west-a', Priority: 1 },
    ]);

    await compute().launch(request(spec({ alternatives: { ...alternatives, options: alternatives.options.map((o) => ({ ...o, useSpot: false })) } })));
    expect(fleetInputs('us-east-1')[0]?.OnDemandOptions?.AllocationStrategy).toBe('prioritized');
  });

  it('one launch template per kind of node: a GPU type and a CPU type in one fleet boot different images', async () => {
    const alternatives = { mode: 'any_of' as const, options: [{ accelerators: [{ name: 'A100', count: 8 }], useSpot: false }, { instanceType: 'm6i.large', useSpot: false }] };

    await compute().launch(request(spec({ alternatives, region: 'us-west-2' })));

    const [fleet] = fleetInputs('us-west-2');
    expect(overridesOf(fleet)).toEqual(['us-west-2a/p4d.24xlarge', 'us-west-2a/m6i.large']);
    expect(templateData(fleet, 0).ImageId).toBe('ami-us-west-2-x86_64-gpu');
    expect(templateData(fleet, 1).ImageId).toBe('ami-us-west-2-x86_64');
    expect(ec2['us-west-2']).toHaveReceivedCommandTimes(DeleteLaunchTemplateCommand, 2);
  });

  it('network_tier best: an EFA interface per network card on types that have it, the security groups on each; others keep the default network', async () => {
    const alternatives = { mode: 'any_of' as const, options: [{ instanceType: 'p4d.24xlarge', useSpot: false }, { instanceType: 'g5.xlarge', useSpot: false }] };

    await compute().launch(request(spec({ alternatives, networkTier: 'best', region: 'us-west-2' })));

    const [fleet] = fleetInputs('us-west-2');
    expect(templateData(fleet, 0).NetworkInterfaces).toEqual([
      { DeviceIndex: 0, NetworkCardIndex: 0, InterfaceType: 'efa', Groups: ['sg-west'], DeleteOnTermination: true },
      { DeviceIndex: 1, NetworkCardIndex: 1, InterfaceType: 'efa-only', Groups: ['sg-west'], DeleteOnTermination: true },
      { DeviceIndex: 1, NetworkCardIndex: 2, InterfaceType: 'efa-only', Groups: ['sg-west'], DeleteOnTermination: true },
      { DeviceIndex: 1, NetworkCardIndex: 3, InterfaceType: 'efa-only', Groups: ['sg-west'], DeleteOnTermination: true },
    ]);
    expect(templateData(fleet, 0).SecurityGroupIds).toBeUndefined();
    expect(templateData(fleet, 1).NetworkInterfaces).toBeUndefined();
    expect(templateData(fleet, 1).SecurityGroupIds).toEqual(['sg-west']);
  });

  it('use_spot inside any_of: a spot fleet, then an on-demand one in the same region', async () => {
    ec2['us-east-1'].on(CreateFleetCommand).callsFake((input: CreateFleetCommandInput) =>
      input.TargetCapacitySpecification?.DefaultTargetCapacityType === 'spot' ? fleetFails(input) : fleetLaunches(input),
    );
    const alternatives = { mode: 'any_of' as const, options: [{ useSpot: true }, { useSpot: false }] };

    const result = await compute().launch(request(spec({ instanceType: 'g5.xlarge', useSpot: true, alternatives }), { market: 'spot' }));

    expect(fleetInputs('us-east-1').map((fleet) => fleet.TargetCapacitySpecification?.DefaultTargetCapacityType)).toEqual(['spot', 'on-demand']);
    // The on-demand entry (the second) is the one that launched.
    expect(result.placement).toEqual({
      region: 'us-east-1',
      zone: 'us-east-1a',
      instanceType: 'g5.xlarge',
      market: 'on-demand',
      entry: 1,
      price: { hourly: 1.006, onDemandHourly: 1.006, source: 'price-table', estimate: false },
    });
  });

  it('records the candidates EC2 could not fill beside the one that launched', async () => {
    ec2['us-east-1'].on(CreateFleetCommand).callsFake((input: CreateFleetCommandInput) => ({
      ...fleetLaunches(input),
      Errors: [{ LaunchTemplateAndOverrides: { Overrides: { InstanceType: 'p5.48xlarge', SubnetId: 'subnet-east-b' } }, ErrorCode: 'InsufficientInstanceCapacity' }],
    }));

    const result = await compute().launch(request(spec({ instanceType: 'm6i.large' })));

    expect(result.placement.unavailable).toEqual(['p5.48xlarge in us-east-1b (on-demand): InsufficientInstanceCapacity']);
  });

  it('sends the agent as gzipped user data, with the API, where its secret is and the GPU count, never the secret', async () => {
    await compute().launch(request(spec({ accelerators: [{ name: 'A100', count: 8 }], diskSizeGb: 1024 })));

    const [fleet] = fleetInputs('us-east-1');
    expect(overridesOf(fleet)).toEqual(['us-east-1a/p4d.24xlarge', 'us-east-1b/p4d.24xlarge']);
    const data = templateData(fleet);
    expect(data.ImageId).toBe('ami-us-east-1-x86_64-gpu');
    expect(data.BlockDeviceMappings?.[0]?.Ebs?.VolumeSize).toBe(1024);
    const script = userDataScript(data);
    expect(script.startsWith('#!/bin/bash\n')).toBe(true);
    expect(script).not.toContain('cb-secret');
    expect(script).toContain("SECRET_PATH='/relaunch/agent-secrets'");
    expect(script).toContain("SSM_URL='https://ssm.us-east-1.amazonaws.com'");
    expect(script).toContain(`AUTH_PREFIX='${authorizationHeader('')}'`);
    expect(script).toContain("REPORT_URL='https://api.example.com/prod/jobs/job-1/attempts/2/report'");
    expect(agentEnvironment(script)).toContain("export SKYPILOT_NUM_GPUS_PER_NODE='8'");
  });

  it("has a node with S3 data ask the API for its job's data credentials, and one without S3 ask nothing", async () => {
    const data = { bucket: 'relaunch-data-1', allowedBuckets: ['team-data'] };
    const withS3 = parseTaskFile('file_mounts:\n  /ckpt: {source: s3://team-data/ckpt, mode: MOUNT}\nrun: x\n').spec;
    await compute({ data }).launch(request(withS3));
    await compute({ data }).launch(request(spec(), { attempt: 3 }));

    const [first, second] = fleetInputs('us-east-1');
    expect(userDataScript(templateData(first))).toContain("DATA_CREDENTIALS_URL='https://api.example.com/prod/jobs/job-1/attempts/2/data-credentials'");
    expect(userDataScript(templateData(second))).toContain("DATA_CREDENTIALS_URL=''");
  });

  it("puts each node's secret as a SecureString only that instance may read, once the instances exist", async () => {
    await compute().launch(request(spec(), { spec: { ...spec(), numNodes: 2 } }));

    const puts = ssm['us-east-1'].commandCalls(PutParameterCommand).map((call) => call.args[0].input);
    expect(puts).toEqual(
      ['i-1', 'i-2'].map((id) => ({
        Name: `/relaunch/agent-secrets/${id}`,
        Value: 'cb-secret',
        Type: 'SecureString',
        Tier: 'Intelligent-Tiering',
        Description: expect.any(String),
        Tags: [
          { Key: 'relaunch:instance-arn', Value: `arn:aws:ec2:us-east-1:123456789012:instance/${id}` },
          { Key: 'relaunch:job-id', Value: 'job-1' },
          { Key: 'relaunch:attempt', Value: '2' },
        ],
      })),
    );
    const order = [...ec2['us-east-1'].calls(), ...ssm['us-east-1'].calls()].map((call) => call.args[0].constructor.name);
    expect(order.indexOf('CreateFleetCommand')).toBeLessThan(order.indexOf('PutParameterCommand'));
  });

  it("puts the job's secrets beside the callback secret in each node's parameter, never in user data", async () => {
    await compute().launch(request(spec(), { secrets: { HF_TOKEN: 'hf_planted' } }));

    const [put] = ssm['us-east-1'].commandCalls(PutParameterCommand).map((call) => call.args[0].input);
    expect(put?.Value).toBe(`cb-secret HF_TOKEN=${Buffer.from('hf_planted').toString('base64')}`);
    expect(userDataScript(templateData(fleetInputs('us-east-1')[0]))).not.toContain('hf_planted');
  });

  it('takes a secret an earlier try already wrote as written, and retries SSM throttling', async () => {
    const exists = new SSMServiceException({ name: 'ParameterAlreadyExists', $fault: 'client', $metadata: { httpStatusCode: 400 }, message: 'exists' });
    const throttled = new SSMServiceException({ name: 'ThrottlingException', $fault: 'client', $metadata: { httpStatusCode: 400 }, message: 'slow down' });
    ssm['us-east-1'].on(PutParameterCommand).rejectsOnce(throttled).rejectsOnce(exists);

    const result = await compute().launch(request(spec()));

    expect(result.instances.map((instance) => instance.instanceId)).toEqual(['i-1']);
    expect(ssm['us-east-1']).toHaveReceivedCommandTimes(PutParameterCommand, 2);
    expect(ec2['us-east-1']).not.toHaveReceivedCommand(TerminateInstancesCommand);
  });

  it('gives the instances back when their secrets cannot be written, or EC2 does not say whose they are', async () => {
    const denied = new SSMServiceException({ name: 'AccessDeniedException', $fault: 'client', $metadata: { httpStatusCode: 400 }, message: 'no' });
    ssm['us-east-1'].on(PutParameterCommand).rejects(denied);

    await expect(compute().launch(request(spec()))).rejects.toMatchObject({ name: 'AccessDeniedException' });
    expect(ec2['us-east-1']).toHaveReceivedCommandWith(TerminateInstancesCommand, { InstanceIds: ['i-1'] });
    expect(ec2['us-east-1']).toHaveReceivedCommandWith(DeleteLaunchTemplateCommand, { LaunchTemplateId: 'lt-us-east-1-1' });

    ec2['us-east-1'].on(DescribeInstancesCommand).resolves({ Reservations: [{ Instances: [{ InstanceId: 'i-2', PrivateIpAddress: '10.0.0.9' }] }] });
    await expect(compute().launch(request(spec()))).rejects.toThrow(/without the account \(OwnerId\)/);
    expect(ec2['us-east-1']).toHaveReceivedCommandWith(TerminateInstancesCommand, { InstanceIds: ['i-2'] });
  });

  it('picks the arm64 image for a Graviton type', async () => {
    await compute().launch(request(spec({ instanceType: 'm7g.large' })));

    expect(ssm['us-east-1']).toHaveReceivedCommandWith(GetParameterCommand, { Name: DEFAULT_IMAGE_PARAMETERS.arm64 });
    expect(templateData(fleetInputs('us-east-1')[0]).ImageId).toBe('ami-us-east-1-arm64');
  });

  it("resolves SkyPilot's image aliases through AWS's public parameters, for the type's architecture", async () => {
    await compute().launch(request(spec({ imageId: { kind: 'alias', alias: 'gpu-ubuntu-2204' }, instanceType: 'p4d.24xlarge' })));
    await compute().launch(request(spec({ imageId: { kind: 'per-region', byRegion: { 'us-east-1': 'skypilot:cpu-ubuntu-2004' } }, instanceType: 'm7g.large' })));

    expect(ssm['us-east-1']).toHaveReceivedCommandWith(GetParameterCommand, { Name: '/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id' });
    expect(ssm['us-east-1']).toHaveReceivedCommandWith(GetParameterCommand, { Name: '/aws/service/canonical/ubuntu/server/20.04/stable/current/arm64/hvm/ebs-gp2/ami-id' });
    expect(aliasParameter('cpu-ubuntu-2404', 'x86_64')).toBe(DEFAULT_IMAGE_PARAMETERS.x86_64);
  });

  it("tells the agent the task's Docker image, on the default machine image", async () => {
    await compute().launch(request(spec({ containerImage: 'nvcr.io/nvidia/pytorch:24.07-py3', accelerators: [{ name: 'A100', count: 8 }] })));

    const data = templateData(fleetInputs('us-east-1')[0]);
    expect(data.ImageId).toBe('ami-us-east-1-x86_64-gpu');
    const script = userDataScript(data);
    expect(script).toContain("CONTAINER_IMAGE='nvcr.io/nvidia/pytorch:24.07-py3'");
    expect(script).toContain("CONTAINER_GPUS='1'");
  });

  it.each([
    ['low', 256, { VolumeType: 'gp3', Iops: 3000, Throughput: 125 }],
    ['medium', 256, { VolumeType: 'gp3', Iops: 6000, Throughput: 500 }],
    ['high', 1024, { VolumeType: 'gp3', Iops: 16000, Throughput: 1000 }],
    ['ultra', 256, { VolumeType: 'io2', Iops: 64000 }],
    ['best', 256, { VolumeType: 'io2', Iops: 64000 }],
    // 500 IOPS per GiB at most, gp3's 3,000 baseline at least, throughput a quarter of the IOPS.
    ['medium', 10, { VolumeType: 'gp3', Iops: 5000, Throughput: 500 }],
    ['high', 20, { VolumeType: 'gp3', Iops: 10000, Throughput: 1000 }],
    ['high', 4, { VolumeType: 'gp3', Iops: 3000, Throughput: 750 }],
    ['ultra', 8, { VolumeType: 'io2', Iops: 4000 }],
  ] as const)('sizes a %s-tier root volume of %i GB within what EBS allows', async (diskTier, diskSizeGb, volume) => {
    await compute().launch(request(spec({ diskTier, diskSizeGb })));

    expect(templateData(fleetInputs('us-east-1')[0]).BlockDeviceMappings?.[0]?.Ebs).toEqual({ VolumeSize: diskSizeGb, ...volume, DeleteOnTermination: true, Encrypted: true });
  });

  it('uses image_id as given, with no SSM lookup', async () => {
    await compute().launch(request(spec({ imageId: { kind: 'ami', imageId: 'ami-custom' } })));

    expect(ssm['us-east-1']).not.toHaveReceivedCommand(GetParameterCommand);
    expect(ec2['us-east-1']).toHaveReceivedCommandWith(DescribeImagesCommand, { ImageIds: ['ami-custom'] });
    expect(templateData(fleetInputs('us-east-1')[0]).ImageId).toBe('ami-custom');
  });

  it('sizes the root volume of a custom image on its own root device', async () => {
    ec2['us-east-1'].on(DescribeImagesCommand).resolves({ Images: [{ ImageId: 'ami-al2023', RootDeviceName: '/dev/xvda' }] });

    await compute().launch(request(spec({ imageId: { kind: 'ami', imageId: 'ami-al2023' }, diskSizeGb: 100 })));

    expect(templateData(fleetInputs('us-east-1')[0]).BlockDeviceMappings).toEqual([
      { DeviceName: '/dev/xvda', Ebs: { VolumeSize: 100, VolumeType: 'gp3', DeleteOnTermination: true, Encrypted: true } },
    ]);
  });

  it('skips a region the per-region image_id does not cover', async () => {
    const result = await compute().launch(request(spec({ imageId: { kind: 'per-region', byRegion: { 'us-west-2': 'ami-west' } }, instanceType: 'm6i.2xlarge' })));

    expect(ec2['us-east-1']).not.toHaveReceivedCommand(CreateFleetCommand);
    const [fleet] = fleetInputs('us-west-2');
    expect(overridesOf(fleet)).toEqual(['us-west-2a/m6i.2xlarge']);
    expect(templateData(fleet)).toMatchObject({ ImageId: 'ami-west', SecurityGroupIds: ['sg-west'] });
    expect(result.placement).toEqual({ region: 'us-west-2', zone: 'us-west-2a', instanceType: 'm6i.2xlarge', market: 'on-demand', price: { hourly: 0.384, onDemandHourly: 0.384, source: 'price-table', estimate: false } });
  });

  it('skips a region whose SSM parameter for the default image does not exist, looking it up once', async () => {
    ssm['us-east-1'].on(GetParameterCommand).rejects(awsError('ParameterNotFound'));

    const result = await compute().launch(request(spec({ instanceType: 'g5.xlarge' })));

    expect(ssm['us-east-1']).toHaveReceivedCommandTimes(GetParameterCommand, 1);
    expect(ec2['us-east-1']).not.toHaveReceivedCommand(CreateFleetCommand);
    expect(templateData(fleetInputs('us-west-2')[0]).ImageId).toBe('ami-us-west-2-x86_64-gpu');
    expect(result.placement.region).toBe('us-west-2');
  });

  it('ranks nodes by instance id and tags every node with its rank and every node IP, head first, for the agent to read from IMDS', async () => {
    ec2['us-east-1'].on(CreateFleetCommand).resolves({ Instances: [{ InstanceIds: ['i-b', 'i-a'] }] });
    world.set('i-a', { zone: 'us-east-1b', type: 'm6i.2xlarge', ip: '10.0.0.11' });
    world.set('i-b', { zone: 'us-east-1b', type: 'm6i.2xlarge', ip: '10.0.0.12' });

    const result = await compute().launch(request(spec({}, { numNodes: 2 })));

    expect(ec2['us-east-1']).toHaveReceivedCommandWith(CreateFleetCommand, {
      TargetCapacitySpecification: { TotalTargetCapacity: 2, OnDemandTargetCapacity: 2, DefaultTargetCapacityType: 'on-demand' },
    });
    expect(fleetInputs('us-east-1')[0]?.OnDemandOptions?.MinTargetCapacity).toBe(2);
    expect(result.instances).toEqual([
      { instanceId: 'i-a', nodeRank: 0, privateIp: '10.0.0.11' },
      { instanceId: 'i-b', nodeRank: 1, privateIp: '10.0.0.12' },
    ]);
    expect(result.placement.zone).toBe('us-east-1b');
    const ips = { Key: 'relaunch:node-ips:0', Value: '10.0.0.11 10.0.0.12' };
    expect(ec2['us-east-1']).toHaveReceivedCommandWith(CreateTagsCommand, { Resources: ['i-a'], Tags: [{ Key: 'relaunch:node-rank', Value: '0' }, ips] });
    expect(ec2['us-east-1']).toHaveReceivedCommandWith(CreateTagsCommand, { Resources: ['i-b'], Tags: [{ Key: 'relaunch:node-rank', Value: '1' }, ips] });
  });

  it('asks again while EC2 does not list the new instances or their IPs yet', async () => {
    ec2['us-east-1'].on(DescribeInstancesCommand).rejectsOnce(awsError('InvalidInstanceID.NotFound')).callsFake(describeWorld);

    const result = await compute().launch(request(spec()));

    expect(result.instances).toEqual([{ instanceId: 'i-1', nodeRank: 0, privateIp: '10.0.0.1' }]);
    expect(sleeps).toEqual([500]);
  });

  it('moves to another region first after a preemption (EAGER_NEXT_REGION)', async () => {
    const history = [{ placement: { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm6i.2xlarge' }, outcome: 'PREEMPTED' as const }];

    const result = await compute().launch(request(spec(), { history }));

    expect(ec2['us-east-1']).not.toHaveReceivedCommand(CreateFleetCommand);
    expect(result.placement.region).toBe('us-west-2');
  });

  it('refuses ports the deployment does not open, before calling AWS', async () => {
    const ports = [{ from: 8080, to: 8080 }, { from: 9000, to: 9010 }];

    await expect(compute({ openPorts: [{ from: 8000, to: 8999 }] }).launch(request(spec({ ports })))).rejects.toThrow(
      "resources.ports: 8080, 9000-9010 are not open on relaunch's job instances (this deployment opens 8000-8999; see the relaunch:jobPorts context key)",
    );
    expect(ec2['us-east-1']).not.toHaveReceivedAnyCommand();

    await compute({ openPorts: [{ from: 8000, to: 9999 }] }).launch(request(spec({ ports })));
    expect(ec2['us-east-1']).toHaveReceivedCommand(CreateFleetCommand);
  });
});

describe('Ec2Compute.launch: failing over and failing', () => {
  it('fails over to the next region when a fleet comes back empty, every candidate in the message if none launches', async () => {
    ec2['us-east-1'].on(CreateFleetCommand).callsFake((input: CreateFleetCommandInput) => fleetFails(input));

    const result = await compute().launch(request(spec({ accelerators: [{ name: 'H100', count: 8 }, { name: 'H200', count: 8 }] }), { market: 'spot' }));

    expect(overridesOf(fleetInputs('us-east-1')[0])).toEqual([
      'us-east-1a/p5.48xlarge',
      'us-east-1a/p5e.48xlarge',
      'us-east-1a/p5en.48xlarge',
      'us-east-1b/p5.48xlarge',
      'us-east-1b/p5e.48xlarge',
      'us-east-1b/p5en.48xlarge',
    ]);
    expect(result.placement).toEqual({
      region: 'us-west-2',
      zone: 'us-west-2a',
      instanceType: 'p5.48xlarge',
      market: 'spot',
      // No spot price from EC2 here, and a type the table lacks: no figure, rather than a guess.
      price: { hourly: null, onDemandHourly: null, source: 'price-table', estimate: true },
    });
    expect(sleeps).toEqual([]);
  });

  it.each(['InsufficientInstanceCapacity', 'SpotMaxPriceTooLow', 'MaxSpotInstanceCountExceeded', 'InsufficientCapacity', 'Unsupported', 'VcpuLimitExceeded'])(
    'treats %s, per candidate or for the whole request, as no capacity and fails over to the next region',
    async (code) => {
      ec2['us-east-1'].on(CreateFleetCommand).callsFake((input: CreateFleetCommandInput) => fleetFails(input, code));
      const first = await compute().launch(request(spec({ instanceType: 'm6i.large' })));
      ec2['us-east-1'].on(CreateFleetCommand).rejects(awsError(code));
      const second = await compute().launch(request(spec({ instanceType: 'm6i.large' })));

      for (const result of [first, second]) expect(result.placement).toEqual({ region: 'us-west-2', zone: 'us-west-2a', instanceType: 'm6i.large', market: 'on-demand', price: { hourly: 0.096, onDemandHourly: 0.096, source: 'price-table', estimate: false } });
    },
  );

  it('throws NoCapacityError naming every candidate EC2 could not fill, and deletes its templates', async () => {
    for (const region of REGIONS) ec2[region].on(CreateFleetCommand).callsFake((input: CreateFleetCommandInput) => fleetFails(input));

    const launch = compute().launch(request(spec({ accelerators: [{ name: 'T4', count: 4 }] }), { market: 'spot' }));

    await expect(launch).rejects.toThrow(NoCapacityError);
    await expect(launch).rejects.toThrow(
      'no capacity for job job-1 attempt 2 (spot, 1 node): tried g4dn.12xlarge in us-east-1a (spot): InsufficientInstanceCapacity, ' +
        'g4dn.12xlarge in us-east-1b (spot): InsufficientInstanceCapacity, g4dn.12xlarge in us-west-2a (spot): InsufficientInstanceCapacity',
    );
    for (const region of REGIONS) expect(ec2[region]).toHaveReceivedCommandTimes(DeleteLaunchTemplateCommand, 1);
  });

  it('retries a throttled call with exponential backoff, never counting it as a failure', async () => {
    let calls = 0;
    ec2['us-east-1'].on(CreateFleetCommand).callsFake((input: CreateFleetCommandInput) => {
      calls += 1;
      if (calls <= 3) throw awsError('RequestLimitExceeded');
      return fleetLaunches(input);
    });
    ssm['us-east-1'].on(GetParameterCommand).rejectsOnce(awsError('ThrottlingException')).resolves({ Parameter: { Value: 'ami-x' } });

    const result = await compute().launch(request(spec({ instanceType: 'm6i.large' })));

    expect(result.placement.zone).toBe('us-east-1a');
    expect(ec2['us-east-1']).toHaveReceivedCommandTimes(CreateFleetCommand, 4);
    expect(sleeps).toEqual([500, 500, 1000, 2000]);
  });

  it('sends one ClientToken per job, attempt, region and request, the same on a retry, so a retried CreateFleet cannot launch twice', async () => {
    let calls = 0;
    ec2['us-east-1'].on(CreateFleetCommand).callsFake((input: CreateFleetCommandInput) => {
      calls += 1;
      if (calls === 1) throw serverError('InternalError', 500);
      return calls === 2 ? fleetFails(input) : fleetLaunches(input);
    });
    // FAILOVER after an attempt in us-east-1a: that zone's request first, then the rest of its region.
    const history = [{ placement: { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm6i.large' }, outcome: 'EXITED' as const }];
    const failover = spec({ instanceType: 'm6i.large' });
    const resources = { ...failover.resources, jobRecovery: { ...failover.resources.jobRecovery, strategy: 'FAILOVER' as const } };

    await compute().launch(request({ ...failover, resources }, { history }));

    expect(fleetInputs('us-east-1').map((fleet) => [fleet.ClientToken, overridesOf(fleet)])).toEqual([
      ['job-1-2-us-east-1-0', ['us-east-1a/m6i.large']],
      ['job-1-2-us-east-1-0', ['us-east-1a/m6i.large']],
      ['job-1-2-us-east-1-1', ['us-east-1b/m6i.large']],
    ]);
  });

  it('hashes a ClientToken longer than the 64 characters EC2 takes', async () => {
    const jobId = 'j'.repeat(60);

    await compute().launch(request(spec({ instanceType: 'm6i.large' }), { jobId }));

    const token = fleetInputs('us-east-1')[0]?.ClientToken ?? '';
    expect(token).toMatch(/^[0-9a-f]{64}$/);
    expect(token).toBe(fleetClientToken({ jobId, attempt: 2 }, 'us-east-1', 0));
    expect(fleetClientToken({ jobId, attempt: 3 }, 'us-east-1', 0)).not.toBe(token);
  });

  it('names the error when EC2 never lists a launched instance with a private IP, and gives it back', async () => {
    ec2['us-east-1'].on(CreateFleetCommand).callsFake((input: CreateFleetCommandInput) => fleetLaunches(input, false));

    await expect(compute().launch(request(spec({ instanceType: 'm6i.large' })))).rejects.toBeInstanceOf(UnexpectedCloudResponseError);
    expect(ec2['us-east-1']).toHaveReceivedCommandWith(TerminateInstancesCommand, { InstanceIds: ['i-1'] });
  });

  it('raises a throttle as TransientError once its retries are used up, trying no other region', async () => {
    const throttled = awsError('RequestLimitExceeded');
    ec2['us-east-1'].on(CreateFleetCommand).rejects(throttled);

    const launch = compute({ throttleRetries: 2 }).launch(request(spec()));

    await expect(launch).rejects.toBeInstanceOf(TransientError);
    await expect(launch).rejects.toMatchObject({
      name: TransientError.errorName,
      message: expect.stringMatching(/^EC2 CreateFleet in us-east-1: .*2 of relaunch's own.*RequestLimitExceeded/),
      cause: throttled,
    });
    expect(ec2['us-east-1']).toHaveReceivedCommandTimes(CreateFleetCommand, 3);
    expect(ec2['us-west-2']).not.toHaveReceivedCommand(CreateFleetCommand);
  });

  it.each([
    ['InternalError', serverError('InternalError', 500)],
    ['Unavailable', serverError('Unavailable', 503)],
    ['a 5xx with a code EC2 has not used before', serverError('SomethingNew', 502)],
  ])('retries %s from EC2, then raises it as TransientError', async (_case, fault) => {
    ec2['us-east-1'].on(CreateFleetCommand).rejects(fault);

    await expect(compute({ throttleRetries: 1 }).launch(request(spec()))).rejects.toMatchObject({ name: TransientError.errorName, cause: fault });
    expect(ec2['us-east-1']).toHaveReceivedCommandTimes(CreateFleetCommand, 2);
    expect(sleeps).toEqual([500]);
  });

  it('keeps capacity errors apart from transient ones, though EC2 answers them as server errors', async () => {
    ec2['us-east-1'].on(CreateFleetCommand).rejects(serverError('InsufficientInstanceCapacity', 500));
    ec2['us-west-2'].on(CreateFleetCommand).rejects(serverError('InsufficientInstanceCapacity', 500));

    const launch = compute().launch(request(spec({ instanceType: 'm6i.large' })));

    await expect(launch).rejects.toBeInstanceOf(NoCapacityError);
    expect(sleeps).toEqual([]);
    expect(ec2['us-east-1']).toHaveReceivedCommandTimes(CreateFleetCommand, 1);
    expect(ec2['us-west-2']).toHaveReceivedCommandTimes(CreateFleetCommand, 1);
  });

  it.each([
    ['an unknown instance type, as every candidate\'s error', 'errors', 'InvalidParameterValue', /EC2 cannot launch this task in us-east-1: m9z.large in us-east-1a \(on-demand\): InvalidParameterValue/],
    ['a bad AMI, as the request\'s error', 'throws', 'InvalidAMIID.NotFound', /InvalidAMIID.NotFound/],
  ])('refuses %s with a PrecheckError and tries nothing else', async (_name, how, code, message) => {
    if (how === 'errors') ec2['us-east-1'].on(CreateFleetCommand).callsFake((input: CreateFleetCommandInput) => fleetFails(input, code));
    else ec2['us-east-1'].on(CreateFleetCommand).rejects(awsError(code));

    const launch = compute().launch(request(spec({ instanceType: 'm9z.large' })));

    await expect(launch).rejects.toThrow(PrecheckError);
    await expect(launch).rejects.toThrow(message);
    expect(ec2['us-east-1']).toHaveReceivedCommandTimes(CreateFleetCommand, 1);
    expect(ec2['us-west-2']).not.toHaveReceivedCommand(CreateFleetCommand);
  });

  it('refuses a multi-node task where the nodes may not reach each other (submitted before the stack turned it off), before calling AWS', async () => {
    const launch = compute({ nodeToNodeTraffic: false }).launch(request(spec({}, { numNodes: 2 })));

    await expect(launch).rejects.toThrow(PrecheckError);
    await expect(launch).rejects.toThrow(/num_nodes: expected 1 on this deployment, got 2: .*relaunch:nodeToNodeTraffic/);
    expect(ec2['us-east-1']).not.toHaveReceivedAnyCommand();
    // One node needs no other.
    await compute({ nodeToNodeTraffic: false }).launch(request(spec()));
  });

  it('refuses an image_id EC2 does not know before launching anything', async () => {
    ec2['us-east-1'].on(DescribeImagesCommand).rejects(awsError('InvalidAMIID.Malformed'));

    await expect(compute().launch(request(spec({ imageId: { kind: 'ami', imageId: 'ami-nope' } })))).rejects.toThrow(
      /resources.image_id: ami-nope cannot be used in us-east-1: InvalidAMIID.Malformed/,
    );
    expect(ec2['us-east-1']).not.toHaveReceivedCommand(CreateFleetCommand);
  });

  it('refuses a per-region image_id that covers none of the usable regions', async () => {
    const taskSpec = spec({ imageId: { kind: 'per-region', byRegion: { 'eu-west-1': 'ami-eu' } } });

    await expect(compute().launch(request(taskSpec))).rejects.toThrow(
      'resources.image_id: names AMIs for eu-west-1, but relaunch may launch this task only in us-east-1, us-west-2',
    );
    expect(ec2['us-east-1']).not.toHaveReceivedCommand(CreateFleetCommand);
  });

  it('refuses an unknown accelerator before calling AWS', async () => {
    await expect(compute().launch(request(spec({ accelerators: [{ name: 'TPU-v5', count: 8 }] })))).rejects.toThrow(
      /unknown accelerator TPU-v5/,
    );
    expect(ssm['us-east-1']).not.toHaveReceivedAnyCommand();
    expect(ec2['us-east-1']).not.toHaveReceivedAnyCommand();
  });

  it('refuses a task too large for user data, creating no template', async () => {
    const run = `echo ${randomBytes(24_000).toString('base64')}`;

    await expect(compute().launch(request(spec({}, { run })))).rejects.toThrow(/too large for EC2 user data/);
    expect(ec2['us-east-1']).not.toHaveReceivedCommand(CreateLaunchTemplateCommand);
    expect(ec2['us-east-1']).not.toHaveReceivedCommand(CreateFleetCommand);
  });

  it('terminates a partial multi-node launch and tries the next request', async () => {
    ec2['us-east-1'].on(CreateFleetCommand).resolves({ Instances: [{ InstanceIds: ['i-lonely'] }] });

    const result = await compute().launch(request(spec({ instanceType: 'm6i.large' }, { numNodes: 2 })));

    expect(ec2['us-east-1']).toHaveReceivedCommandExactlyOnceWith(TerminateInstancesCommand, { InstanceIds: ['i-lonely'] });
    expect(result.placement.region).toBe('us-west-2');
    expect(result.instances.map((instance) => instance.instanceId)).toEqual(['i-1', 'i-2']);
  });

  it('terminates what it launched when tagging fails, and lets the error through', async () => {
    ec2['us-east-1'].on(CreateTagsCommand).rejects(awsError('UnauthorizedOperation'));

    await expect(compute().launch(request(spec()))).rejects.toThrow(/UnauthorizedOperation/);
    expect(ec2['us-east-1']).toHaveReceivedCommandWith(TerminateInstancesCommand, { InstanceIds: ['i-1'] });
  });

  it("lets relaunch's own configuration errors through as they are, still deleting the template", async () => {
    ec2['us-east-1'].on(CreateFleetCommand).rejects(awsError('InvalidSubnetID.NotFound'));

    const launch = compute().launch(request(spec()));

    await expect(launch).rejects.toThrow(/InvalidSubnetID.NotFound/);
    await expect(launch).rejects.not.toThrow(NoCapacityError);
    expect(ec2['us-east-1']).toHaveReceivedCommand(DeleteLaunchTemplateCommand);
  });

  it.each([
    ['a denied permission', 'UnauthorizedOperation'],
    ['a missing subnet', 'InvalidSubnetID.NotFound'],
  ])('never retries nor calls transient %s: waiting will not fix it', async (_case, code) => {
    const refused = awsError(code);
    ec2['us-east-1'].on(CreateFleetCommand).rejects(refused);

    await expect(compute().launch(request(spec()))).rejects.toBe(refused);
    expect(ec2['us-east-1']).toHaveReceivedCommandTimes(CreateFleetCommand, 1);
    expect(sleeps).toEqual([]);
  });

  it('takes a template already gone as deleted', async () => {
    ec2['us-east-1'].on(DeleteLaunchTemplateCommand).rejects(awsError('InvalidLaunchTemplateId.NotFound'));

    await expect(compute().launch(request(spec()))).resolves.toMatchObject({ placement: { region: 'us-east-1' } });
  });

  it('names at most 40 failed candidates in the reason, then how many more: it is stored with the job', async () => {
    for (const region of REGIONS) {
      ec2[region].on(CreateFleetCommand).resolves({
        Instances: [],
        Errors: Array.from({ length: 60 }, (_, index) => ({ ErrorCode: 'InsufficientInstanceCapacity', ErrorMessage: `none ${index}`, LaunchTemplateAndOverrides: { Overrides: { InstanceType: `m6i.large`, SubnetId: `subnet-${index}` } } })),
      });
    }

    const error = (await compute().launch(request(spec())).catch((caught: unknown) => caught)) as NoCapacityError;

    expect(error).toBeInstanceOf(NoCapacityError);
    expect(error.message).toMatch(/, and \d+ more$/);
    expect(error.message.length).toBeLessThan(8000);
  });

  it('keeps a launch whose template cannot be deleted (the janitor sweeps it), and a failure its own cause', async () => {
    ec2['us-east-1'].on(DeleteLaunchTemplateCommand).rejects(awsError('UnauthorizedOperation'));
    await expect(compute().launch(request(spec()))).resolves.toMatchObject({ placement: { region: 'us-east-1' } });

    for (const region of REGIONS) ec2[region].on(CreateFleetCommand).resolves({ Instances: [], Errors: [{ ErrorCode: 'InsufficientInstanceCapacity', ErrorMessage: 'none' }] });
    ec2['us-west-2'].on(DeleteLaunchTemplateCommand).rejects(awsError('RequestLimitExceeded'));
    await expect(compute().launch(request(spec()))).rejects.toThrow(NoCapacityError);
  });

  it('tells a node of a CPU type it has no GPUs, whatever the task asked for', async () => {
    const task = parseTaskFile('resources:\n  accelerators: A100:8\n  any_of:\n    - instance_type: m6i.large\nrun: x\n').spec;

    await compute().launch(request(task));

    const script = userDataScript(templateData(fleetInputs('us-east-1')[0]));
    expect(agentEnvironment(script)).toContain("export SKYPILOT_NUM_GPUS_PER_NODE='0'");
  });

  it('places a task with ports only in the stack\'s region, whose security group opens them', async () => {
    ec2['us-east-1'].on(CreateFleetCommand).resolves({ Instances: [], Errors: [{ ErrorCode: 'InsufficientInstanceCapacity', ErrorMessage: 'none' }] });
    const task = parseTaskFile('resources:\n  ports: 8080\nrun: x\n').spec;

    await expect(compute({ openPorts: [{ from: 8080, to: 8080 }] }).launch(request(task))).rejects.toThrow(NoCapacityError);
    expect(ec2['us-west-2']).not.toHaveReceivedCommand(CreateFleetCommand);
  });
});

describe('Ec2Compute.release', () => {
  const liveStates = { Name: 'instance-state-name', Values: ['pending', 'running', 'stopping', 'stopped'] };
  const attemptFilters = [
    { Name: 'tag:relaunch:deployment', Values: ['relaunch'] },
    { Name: 'tag:relaunch:job-id', Values: ['job-1'] },
    { Name: 'tag:relaunch:attempt', Values: ['2'] },
    liveStates,
  ];

  function reservations(...ids: string[]) {
    return { Reservations: [{ Instances: ids.map((InstanceId) => ({ InstanceId })) }] };
  }

  it("finds the attempt's live instances by tag, terminates them and checks they are going", async () => {
    ec2['us-east-1'].on(DescribeInstancesCommand).resolvesOnce(reservations('i-1', 'i-2')).resolves({ Reservations: [] });

    await compute().release('job-1', 2, [{ instanceId: 'i-1', nodeRank: 0, privateIp: null }]);

    expect(ec2['us-east-1']).toHaveReceivedNthCommandWith(DescribeInstancesCommand, 1, { Filters: attemptFilters });
    expect(ec2['us-east-1']).toHaveReceivedCommandExactlyOnceWith(TerminateInstancesCommand, { InstanceIds: ['i-1', 'i-2'] });
    expect(ec2['us-east-1']).toHaveReceivedNthCommandWith(DescribeInstancesCommand, 2, {
      Filters: [{ Name: 'instance-id', Values: ['i-1', 'i-2'] }, liveStates],
    });
    expect(ec2['us-west-2']).not.toHaveReceivedCommand(TerminateInstancesCommand);
  });

  it('deletes the secrets of the recorded instances and of those found by tag, in every region, once they are going', async () => {
    ec2['us-east-1'].on(DescribeInstancesCommand).resolvesOnce(reservations('i-7')).resolves({ Reservations: [] });

    await compute().release('job-1', 2, [{ instanceId: 'i-1', nodeRank: 0, privateIp: null }]);

    for (const region of REGIONS) {
      expect(ssm[region]).toHaveReceivedCommandExactlyOnceWith(DeleteParametersCommand, {
        Names: ['/relaunch/agent-secrets/i-1', '/relaunch/agent-secrets/i-7'],
      });
    }
    const order = [...ec2['us-east-1'].calls(), ...ssm['us-east-1'].calls()].map((call) => call.args[0].constructor.name);
    expect(order.indexOf('TerminateInstancesCommand')).toBeLessThan(order.indexOf('DeleteParametersCommand'));
  });

  it('deletes secrets ten names a call, as DeleteParameters takes them', async () => {
    const instances = Array.from({ length: 23 }, (_, index) => ({ instanceId: `i-${index}`, nodeRank: index, privateIp: null }));

    await compute().release('job-1', 2, instances);

    const batches = ssm['us-east-1'].commandCalls(DeleteParametersCommand).map((call) => call.args[0].input.Names?.length);
    expect(batches).toEqual([10, 10, 3]);
  });

  it('is idempotent: instances already gone need no call', async () => {
    await compute().release('job-1', 2, [{ instanceId: 'i-1', nodeRank: 0, privateIp: null }]);

    for (const region of REGIONS) expect(ec2[region]).not.toHaveReceivedCommand(TerminateInstancesCommand);
  });

  it('terminates what it just launched even before EC2 lists it, and takes NotFound as gone', async () => {
    const ec2Compute = compute();
    const { instances } = await ec2Compute.launch(request(spec({ region: 'us-west-2' })));
    ec2['us-west-2'].on(TerminateInstancesCommand).rejects(awsError('InvalidInstanceID.NotFound'));

    await ec2Compute.release('job-1', 2, instances);

    expect(ec2['us-west-2']).toHaveReceivedCommandWith(TerminateInstancesCommand, { InstanceIds: ['i-1'] });
    expect(ec2['us-east-1']).not.toHaveReceivedCommand(TerminateInstancesCommand);
  });

  it('terminates again while an instance still shows as running, then gives up with an error', async () => {
    ec2['us-east-1'].on(DescribeInstancesCommand).resolves(reservations('i-stuck'));

    await expect(compute({ releaseChecks: 3 }).release('job-1', 2, [])).rejects.toThrow(InstancesStillRunningError);
    expect(ec2['us-east-1']).toHaveReceivedCommandTimes(TerminateInstancesCommand, 3);
    expect(sleeps).toEqual([1000, 2000, 4000]);
  });

  it('stops waiting once its wait budget is spent, so it ends inside its Lambda timeout', async () => {
    ec2['us-east-1'].on(DescribeInstancesCommand).resolves(reservations('i-stuck'));

    await expect(compute({ releaseWaitBudgetMs: 5000 }).release('job-1', 2, [])).rejects.toThrow(InstancesStillRunningError);
    expect(sleeps).toEqual([1000, 2000, 2000]);
  });

  it('by default waits at most RELEASE_WAIT_BUDGET_MS, well under the release Lambda timeout', async () => {
    ec2['us-east-1'].on(DescribeInstancesCommand).resolves(reservations('i-stuck'));

    const error = await compute().release('job-1', 2, []).catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(InstancesStillRunningError);
    expect((error as Error).name).toBe(InstancesStillRunningError.errorName);
    expect(sleeps.reduce((sum, ms) => sum + ms, 0)).toBe(RELEASE_WAIT_BUDGET_MS);
    expect(RELEASE_WAIT_BUDGET_MS).toBeLessThanOrEqual(LAMBDA_NEEDS[LambdaName.releaseInstances].timeoutSeconds * 1000 / 3);
    expect(RELEASE_WAIT_BUDGET_MS).toBeLessThanOrEqual(LAMBDA_NEEDS[LambdaName.recordControllerFailure].timeoutSeconds * 1000 / 3);
  });

  it('retries a throttled terminate', async () => {
    ec2['us-east-1'].on(DescribeInstancesCommand).resolvesOnce(reservations('i-1')).resolves({ Reservations: [] });
    ec2['us-east-1'].on(TerminateInstancesCommand).rejectsOnce(awsError('RequestLimitExceeded')).resolves({});

    await compute().release('job-1', 2, []);

    expect(ec2['us-east-1']).toHaveReceivedCommandTimes(TerminateInstancesCommand, 2);
  });

  it('raises a terminate EC2 keeps throttling as TransientError, which the machine retries', async () => {
    ec2['us-east-1'].on(DescribeInstancesCommand).resolves(reservations('i-1'));
    ec2['us-east-1'].on(TerminateInstancesCommand).rejects(awsError('RequestLimitExceeded'));

    await expect(compute({ throttleRetries: 1 }).release('job-1', 2, [])).rejects.toThrow(/^EC2 TerminateInstances in us-east-1: /);
    expect(ec2['us-east-1']).toHaveReceivedCommandTimes(TerminateInstancesCommand, 2);
  });
});

describe('Ec2Compute.launch beside kept nodes (request.keep)', () => {
  const placement: Placement = { region: 'us-east-1', zone: 'us-east-1b', instanceType: 'p4d.24xlarge', market: 'spot', unavailable: ['x (spot): InsufficientInstanceCapacity'] };
  /** Four nodes of attempt 1: i-k0..i-k3, ranks 0..3. */
  const attempt1: InstanceRef[] = [0, 1, 2, 3].map((rank) => ({ instanceId: `i-k${rank}`, nodeRank: rank, privateIp: `10.0.1.${rank}`, runningAt: '2026-01-01T00:00:00.000Z' }));
  /** What EC2 says of each kept node: its state, the placement group the cluster runs in, the attempt its tag names, its IP when not the recorded one. */
  let kept: Map<string, { state: string; group?: string; attempt?: string; ip?: string }>;

  beforeEach(() => {
    kept = new Map();
    ec2['us-east-1'].on(DescribeInstancesCommand).callsFake((input: DescribeInstancesCommandInput) => {
      const ids = input.Filters?.find((filter) => filter.Name === 'instance-id')?.Values;
      if (ids === undefined) return describeWorld(input);
      const states = input.Filters?.find((filter) => filter.Name === 'instance-state-name')?.Values ?? [];
      const instances = ids.flatMap((id) => {
        const node = kept.get(id);
        const recorded = attempt1.find((ref) => ref.instanceId === id);
        if (node === undefined || recorded === undefined || !states.includes(node.state)) return [];
        return [
          {
            InstanceId: id,
            InstanceType: 'p4d.24xlarge',
            PrivateIpAddress: node.ip ?? (recorded.privateIp as string),
            State: { Name: node.state },
            Placement: { AvailabilityZone: 'us-east-1b', ...(node.group === undefined ? {} : { GroupName: node.group }) },
            Tags: [{ Key: 'relaunch:attempt', Value: node.attempt ?? '1' }],
          },
        ];
      });
      return { Reservations: [{ OwnerId: ACCOUNT, Instances: instances }] };
    });
  });

  /** The nodes were described by id, and only this deployment's instances of this job taken, whatever ids the request names. */
  function expectDescribedAsOwn(ids: readonly string[]): void {
    expect(ec2['us-east-1']).toHaveReceivedCommandWith(DescribeInstancesCommand, {
      Filters: [
        { Name: 'instance-id', Values: [...ids] },
        { Name: 'tag:relaunch:deployment', Values: ['relaunch'] },
        { Name: 'tag:relaunch:job-id', Values: ['job-1'] },
        { Name: 'instance-state-name', Values: ['pending', 'running'] },
      ],
    });
  }

  function keepRequest(nodes: readonly InstanceRef[], numNodes = 4): LaunchRequest {
    return request(spec({ instanceType: 'p4d.24xlarge', networkTier: 'best' }, { numNodes }), { keep: { placement, nodes }, market: 'on-demand' });
  }

  it('launches one fleet for the missing rank only, in the kept nodes\' zone, type, market and placement group', async () => {
    for (const rank of [0, 1, 3]) kept.set(`i-k${rank}`, { state: 'running', group: 'relaunch-cluster-pg' });

    const result = await compute().launch(keepRequest(attempt1.filter((node) => node.nodeRank !== 2)));

    const [fleet, more] = fleetInputs('us-east-1');
    expect(more).toBeUndefined();
    expect(fleetInputs('us-west-2')).toEqual([]);
    expect(fleet?.LaunchTemplateConfigs?.[0]?.Overrides).toEqual([{ InstanceType: 'p4d.24xlarge', SubnetId: 'subnet-east-b', Placement: { GroupName: 'relaunch-cluster-pg' } }]);
    expect(fleet?.TargetCapacitySpecification).toEqual({ TotalTargetCapacity: 1, SpotTargetCapacity: 1, DefaultTargetCapacityType: 'spot' });
    expect(fleet?.SpotOptions).toMatchObject({ SingleInstanceType: true, SingleAvailabilityZone: true, MinTargetCapacity: 1 });
    // EFA still: the new node's template has the interfaces the kept ones have.
    expect(templateData(fleet).NetworkInterfaces?.[0]?.InterfaceType).toBe('efa');
    // A kept node has no runningAt: its time up before is the attempt before's.
    expect(result.instances).toEqual([
      { instanceId: 'i-k0', nodeRank: 0, privateIp: '10.0.1.0', reusedFrom: 1 },
      { instanceId: 'i-k1', nodeRank: 1, privateIp: '10.0.1.1', reusedFrom: 1 },
      { instanceId: 'i-1', nodeRank: 2, privateIp: '10.0.0.1' },
      { instanceId: 'i-k3', nodeRank: 3, privateIp: '10.0.1.3', reusedFrom: 1 },
    ]);
    expect(result.placement).toMatchObject({ region: 'us-east-1', zone: 'us-east-1b', instanceType: 'p4d.24xlarge', market: 'spot' });
    expectDescribedAsOwn(['i-k0', 'i-k1', 'i-k3']);
  });

  it('moves the kept nodes to the new attempt: attempt, rank and IP tags, held-after left naming the attempt that ended, their parameter overwritten then tagged', async () => {
    for (const rank of [0, 1, 3]) kept.set(`i-k${rank}`, { state: 'running' });

    await compute().launch(keepRequest(attempt1.filter((node) => node.nodeRank !== 2)));

    const ips = { Key: 'relaunch:node-ips:0', Value: '10.0.1.0 10.0.1.1 10.0.0.1 10.0.1.3' };
    expect(ec2['us-east-1']).toHaveReceivedCommandWith(CreateTagsCommand, {
      Resources: ['i-k1'],
      Tags: [{ Key: 'relaunch:attempt', Value: '2' }, { Key: 'relaunch:node-rank', Value: '1' }, ips],
    });
    expect(ec2['us-east-1']).toHaveReceivedCommandWith(CreateTagsCommand, { Resources: ['i-1'], Tags: [{ Key: 'relaunch:node-rank', Value: '2' }, ips] });
    expect(ec2['us-east-1']).not.toHaveReceivedCommand(DeleteTagsCommand);
    const puts = ssm['us-east-1'].commandCalls(PutParameterCommand).map((call) => call.args[0].input);
    // SSM refuses tags with an overwrite: a kept node's parameter is overwritten bare, then tagged.
    expect(puts.find((put) => put.Name === '/relaunch/agent-secrets/i-k1')).toEqual({
      Name: '/relaunch/agent-secrets/i-k1',
      Value: 'cb-secret',
      Type: 'SecureString',
      Tier: 'Intelligent-Tiering',
      Overwrite: true,
    });
    expect(puts.find((put) => put.Name === '/relaunch/agent-secrets/i-1')).toMatchObject({ Value: 'cb-secret', Tags: expect.any(Array) });
    expect(puts.find((put) => put.Name === '/relaunch/agent-secrets/i-1')?.Overwrite).toBeUndefined();
    expect(ssm['us-east-1']).toHaveReceivedCommandWith(AddTagsToResourceCommand, {
      ResourceType: 'Parameter',
      ResourceId: '/relaunch/agent-secrets/i-k1',
      Tags: [
        { Key: 'relaunch:instance-arn', Value: `arn:aws:ec2:us-east-1:${ACCOUNT}:instance/i-k1` },
        { Key: 'relaunch:job-id', Value: 'job-1' },
        { Key: 'relaunch:attempt', Value: '2' },
      ],
    });
    expect(ssm['us-east-1']).toHaveReceivedCommandTimes(AddTagsToResourceCommand, 3);
  });

  it('restarts in place with no fleet and no template when every kept node runs', async () => {
    kept.set('i-k0', { state: 'running' });

    const result = await compute().launch(keepRequest([attempt1[0] as InstanceRef], 1));

    expect(ec2['us-east-1']).not.toHaveReceivedCommand(CreateFleetCommand);
    expect(ec2['us-east-1']).not.toHaveReceivedCommand(CreateLaunchTemplateCommand);
    expect(result).toEqual({
      placement: { region: 'us-east-1', zone: 'us-east-1b', instanceType: 'p4d.24xlarge', market: 'spot' },
      instances: [{ instanceId: 'i-k0', nodeRank: 0, privateIp: '10.0.1.0', reusedFrom: 1 }],
    });
  });

  it('gives up a kept node EC2 shows stopping (terminated, its secret deleted) and launches its rank anew', async () => {
    for (const rank of [0, 1, 2]) kept.set(`i-k${rank}`, { state: 'running' });
    kept.set('i-k3', { state: 'stopping' });

    const result = await compute().launch(keepRequest(attempt1));

    expect(ec2['us-east-1']).toHaveReceivedCommandWith(TerminateInstancesCommand, { InstanceIds: ['i-k3'] });
    expect(ssm['us-east-1']).toHaveReceivedCommandWith(DeleteParametersCommand, { Names: ['/relaunch/agent-secrets/i-k3'] });
    expect(result.instances.map((node) => [node.nodeRank, node.instanceId])).toEqual([[0, 'i-k0'], [1, 'i-k1'], [2, 'i-k2'], [3, 'i-1']]);
  });

  it('records a kept node as reused from the attempt its tag names, and from the one before on a retry that finds the tag moved already', async () => {
    kept.set('i-k0', { state: 'running', attempt: '1' });
    kept.set('i-k1', { state: 'running', attempt: '2' });

    const result = await compute().launch(keepRequest(attempt1.slice(0, 2), 2));

    expect(result.instances.map((node) => [node.instanceId, node.reusedFrom])).toEqual([['i-k0', 1], ['i-k1', 1]]);
  });

  it('refuses kept nodes in a region the deployment does not launch in, naming it, before calling AWS', async () => {
    const request = keepRequest([attempt1[0] as InstanceRef], 2);
    const elsewhere = { ...request, keep: { placement: { ...placement, region: 'eu-west-1' }, nodes: [attempt1[0] as InstanceRef] } };

    await expect(compute().launch(elsewhere)).rejects.toThrow(
      new PrecheckError('keep.placement.region: the kept nodes of job job-1 run in eu-west-1, where this deployment does not launch (it launches in us-east-1, us-west-2)'),
    );
    for (const region of REGIONS) expect(ec2[region].calls()).toEqual([]);
  });

  it('launches as the strategy says when no kept node runs any more', async () => {
    const result = await compute().launch(keepRequest(attempt1));

    expect(fleetInputs('us-east-1')[0]?.TargetCapacitySpecification).toMatchObject({ TotalTargetCapacity: 4 });
    expect(result.instances.every((node) => node.reusedFrom === undefined)).toBe(true);
  });

  it('names the kept nodes when there is no capacity beside them, and leaves them running', async () => {
    kept.set('i-k0', { state: 'running' });
    ec2['us-east-1'].on(CreateFleetCommand).callsFake((input: CreateFleetCommandInput) => fleetFails(input));

    await expect(compute().launch(keepRequest([attempt1[0] as InstanceRef], 2))).rejects.toThrow(
      new NoCapacityError(
        'no capacity for job job-1 attempt 2 beside its 1 kept node (spot, 1 node of p4d.24xlarge in us-east-1b): tried p4d.24xlarge in us-east-1b (spot): InsufficientInstanceCapacity',
      ),
    );
    expect(ec2['us-east-1']).not.toHaveReceivedCommand(TerminateInstancesCommand);
    expect(ec2['us-east-1']).toHaveReceivedCommand(DeleteLaunchTemplateCommand);
  });

  it('gives back only the new node when the nodes cannot be tagged, never a kept one', async () => {
    kept.set('i-k0', { state: 'running' });
    ec2['us-east-1'].on(CreateTagsCommand).rejects(awsError('UnauthorizedOperation'));

    await expect(compute().launch(keepRequest([attempt1[0] as InstanceRef], 2))).rejects.toThrow(/UnauthorizedOperation/);
    expect(ec2['us-east-1']).toHaveReceivedCommandExactlyOnceWith(TerminateInstancesCommand, { InstanceIds: ['i-1'] });
    expect(ssm['us-east-1']).toHaveReceivedCommandExactlyOnceWith(DeleteParametersCommand, { Names: ['/relaunch/agent-secrets/i-1'] });
  });

  describe("beside the live attempt's nodes instead (request.beside: a standby of the warned node alone)", () => {
    /** Attempt 1 is the live one; node 2 was warned. */
    const others = attempt1.filter((node) => node.nodeRank !== 2);

    function besideRequest(nodes: readonly InstanceRef[], numNodes = 4): LaunchRequest {
      return request(spec({ instanceType: 'p4d.24xlarge', networkTier: 'best' }, { numNodes }), { beside: { placement, nodes }, market: 'on-demand' });
    }

    it("launches one fleet for the warned rank only, in the other nodes' zone, type, market and placement group; the result names the new node alone", async () => {
      for (const node of others) kept.set(node.instanceId, { state: 'running', group: 'relaunch-cluster-pg' });

      const result = await compute().launch(besideRequest(others));

      const [fleet, more] = fleetInputs('us-east-1');
      expect(more).toBeUndefined();
      expect(fleet?.LaunchTemplateConfigs?.[0]?.Overrides).toEqual([{ InstanceType: 'p4d.24xlarge', SubnetId: 'subnet-east-b', Placement: { GroupName: 'relaunch-cluster-pg' } }]);
      expect(fleet?.TargetCapacitySpecification).toEqual({ TotalTargetCapacity: 1, SpotTargetCapacity: 1, DefaultTargetCapacityType: 'spot' });
      expect(result.instances).toEqual([{ instanceId: 'i-1', nodeRank: 2, privateIp: '10.0.0.1' }]);
      expect(result.placement).toMatchObject({ region: 'us-east-1', zone: 'us-east-1b', instanceType: 'p4d.24xlarge', market: 'spot' });
      expect(result.placement.unavailable).toBeUndefined();
      expectDescribedAsOwn(['i-k0', 'i-k1', 'i-k3']);
      expect(ec2['us-east-1']).toHaveReceivedCommand(DeleteLaunchTemplateCommand);
    });

    it("tags the new node alone, with every node's IP; writes the standby's secret to every parameter, the other nodes' overwritten; their tags untouched", async () => {
      kept.set('i-k0', { state: 'running' });
      kept.set('i-k1', { state: 'running', ip: '10.0.9.1' });
      kept.set('i-k3', { state: 'running' });

      await compute().launch(besideRequest(others));

      // Node 1's IP as EC2 describes it now, the others' as recorded.
      const ips = { Key: 'relaunch:node-ips:0', Value: '10.0.1.0 10.0.9.1 10.0.0.1 10.0.1.3' };
      expect(ec2['us-east-1']).toHaveReceivedCommandExactlyOnceWith(CreateTagsCommand, { Resources: ['i-1'], Tags: [{ Key: 'relaunch:node-rank', Value: '2' }, ips] });
      expect(ec2['us-east-1']).toHaveReceivedCommandTimes(CreateTagsCommand, 1);
      expect(ec2['us-east-1']).not.toHaveReceivedCommand(TerminateInstancesCommand);
      const puts = ssm['us-east-1'].commandCalls(PutParameterCommand).map((call) => call.args[0].input);
      for (const id of ['i-k0', 'i-k1', 'i-k3']) {
        expect(puts.find((put) => put.Name === `/relaunch/agent-secrets/${id}`)).toEqual({
          Name: `/relaunch/agent-secrets/${id}`,
          Value: 'cb-secret',
          Type: 'SecureString',
          Tier: 'Intelligent-Tiering',
          Overwrite: true,
        });
        expect(ssm['us-east-1']).toHaveReceivedCommandWith(AddTagsToResourceCommand, {
          ResourceType: 'Parameter',
          ResourceId: `/relaunch/agent-secrets/${id}`,
          Tags: [
            { Key: 'relaunch:instance-arn', Value: `arn:aws:ec2:us-east-1:${ACCOUNT}:instance/${id}` },
            { Key: 'relaunch:job-id', Value: 'job-1' },
            { Key: 'relaunch:attempt', Value: '2' },
          ],
        });
      }
      expect(puts.find((put) => put.Name === '/relaunch/agent-secrets/i-1')).toMatchObject({ Value: 'cb-secret', Tags: expect.any(Array) });
      expect(puts.find((put) => put.Name === '/relaunch/agent-secrets/i-1')?.Overwrite).toBeUndefined();
      expect(puts).toHaveLength(4);
    });

    it('skips a node EC2 no longer shows running: not launched anew, not terminated, its parameter neither rewritten nor deleted; its recorded IP still listed', async () => {
      kept.set('i-k0', { state: 'running' });
      kept.set('i-k1', { state: 'stopping' });
      kept.set('i-k3', { state: 'running' });

      const result = await compute().launch(besideRequest(others));

      expect(fleetInputs('us-east-1')[0]?.TargetCapacitySpecification).toMatchObject({ TotalTargetCapacity: 1 });
      expect(result.instances.map((node) => [node.nodeRank, node.instanceId])).toEqual([[2, 'i-1']]);
      expect(ec2['us-east-1']).not.toHaveReceivedCommand(TerminateInstancesCommand);
      expect(ssm['us-east-1']).not.toHaveReceivedCommand(DeleteParametersCommand);
      const written = ssm['us-east-1'].commandCalls(PutParameterCommand).map((call) => call.args[0].input.Name);
      expect(written.sort()).toEqual(['/relaunch/agent-secrets/i-1', '/relaunch/agent-secrets/i-k0', '/relaunch/agent-secrets/i-k3']);
      expect(ec2['us-east-1']).toHaveReceivedCommandWith(CreateTagsCommand, {
        Resources: ['i-1'],
        Tags: [{ Key: 'relaunch:node-rank', Value: '2' }, { Key: 'relaunch:node-ips:0', Value: '10.0.1.0 10.0.1.1 10.0.0.1 10.0.1.3' }],
      });
    });

    it("launches in the placement's zone when none of the nodes beside runs any more, its secret in its own parameter alone", async () => {
      const result = await compute().launch(besideRequest(others));

      expect(overridesOf(fleetInputs('us-east-1')[0])).toEqual(['us-east-1b/p4d.24xlarge']);
      expect(result.instances.map((node) => [node.nodeRank, node.instanceId])).toEqual([[2, 'i-1']]);
      expect(ssm['us-east-1'].commandCalls(PutParameterCommand).map((call) => call.args[0].input.Name)).toEqual(['/relaunch/agent-secrets/i-1']);
      expect(ec2['us-east-1']).not.toHaveReceivedCommand(TerminateInstancesCommand);
    });

    it('names the nodes beside when there is no capacity, leaves them and their parameters alone, and deletes the templates', async () => {
      for (const node of others) kept.set(node.instanceId, { state: 'running', group: 'relaunch-cluster-pg' });
      ec2['us-east-1'].on(CreateFleetCommand).callsFake((input: CreateFleetCommandInput) => fleetFails(input));

      await expect(compute().launch(besideRequest(others))).rejects.toThrow(
        new NoCapacityError(
          "no capacity for job job-1 attempt 2 beside the live attempt's 3 running nodes (spot, 1 node of p4d.24xlarge in us-east-1b): tried p4d.24xlarge in us-east-1b (spot): InsufficientInstanceCapacity",
        ),
      );
      expect(ec2['us-east-1']).not.toHaveReceivedCommand(TerminateInstancesCommand);
      expect(ec2['us-east-1']).not.toHaveReceivedCommand(CreateTagsCommand);
      expect(ssm['us-east-1']).not.toHaveReceivedCommand(PutParameterCommand);
      expect(ec2['us-east-1']).toHaveReceivedCommand(DeleteLaunchTemplateCommand);
    });

    it('refuses, before calling AWS: nodes in a region the deployment does not launch in, nodes covering every rank, and keep with beside', async () => {
      const elsewhere = { ...besideRequest(others), beside: { placement: { ...placement, region: 'eu-west-1' }, nodes: others } };
      await expect(compute().launch(elsewhere)).rejects.toThrow(
        new PrecheckError(
          'beside.placement.region: the nodes of job job-1 that attempt 2 goes beside run in eu-west-1, where this deployment does not launch (it launches in us-east-1, us-west-2)',
        ),
      );
      for (const region of REGIONS) expect(ec2[region].calls()).toEqual([]);

      await expect(compute().launch(besideRequest(attempt1))).rejects.toThrow(
        new InvalidInputError([
          { path: 'beside.nodes', message: 'expected nodes of fewer than all 4 ranks of job job-1, the standby launching the ranks they do not cover; got every rank' },
        ]),
      );
      const both = { ...besideRequest(others), keep: { placement, nodes: others } };
      await expect(compute().launch(both)).rejects.toThrow(/^beside: a launch keeps nodes \(keep\) or goes beside a live attempt's \(beside\), not both/);
      expect(ec2['us-east-1']).not.toHaveReceivedCommand(CreateFleetCommand);
    });
  });
});

describe('Ec2Compute.join (an adopted standby takes the nodes it was launched beside)', () => {
  const placement: Placement = { region: 'us-west-2', zone: 'us-west-2a', instanceType: 'm6i.large', market: 'spot' };
  const nodes: InstanceRef[] = [
    { instanceId: 'i-0', nodeRank: 0, privateIp: '10.0.0.10', reusedFrom: 1 },
    { instanceId: 'i-new', nodeRank: 1, privateIp: '10.0.0.11', runningAt: '2026-01-01T00:00:00.000Z' },
    { instanceId: 'i-2', nodeRank: 2, privateIp: '10.0.0.12', reusedFrom: 1 },
  ];
  const ips = { Key: 'relaunch:node-ips:0', Value: '10.0.0.10 10.0.0.11 10.0.0.12' };

  it('tags each kept node with the attempt, every node with its rank and every IP, in their region; no SSM call; the same again when repeated', async () => {
    const ec2Compute = compute();
    for (const round of [1, 2]) {
      await ec2Compute.join('job-1', 2, placement, [nodes[2], nodes[0], nodes[1]] as InstanceRef[]);

      expect(ec2['us-west-2']).toHaveReceivedCommandTimes(CreateTagsCommand, 3 * round);
      expect(ec2['us-west-2']).toHaveReceivedCommandWith(CreateTagsCommand, { Resources: ['i-0'], Tags: [{ Key: 'relaunch:attempt', Value: '2' }, { Key: 'relaunch:node-rank', Value: '0' }, ips] });
      expect(ec2['us-west-2']).toHaveReceivedCommandWith(CreateTagsCommand, { Resources: ['i-new'], Tags: [{ Key: 'relaunch:node-rank', Value: '1' }, ips] });
      expect(ec2['us-west-2']).toHaveReceivedCommandWith(CreateTagsCommand, { Resources: ['i-2'], Tags: [{ Key: 'relaunch:attempt', Value: '2' }, { Key: 'relaunch:node-rank', Value: '2' }, ips] });
    }
    for (const region of REGIONS) expect(ssm[region].calls()).toEqual([]);
    expect(ec2['us-east-1'].calls()).toEqual([]);
  });

  it('refuses nodes in a region the deployment does not launch in, naming placement.region, before calling AWS', async () => {
    await expect(compute().join('job-1', 2, { ...placement, region: 'eu-west-1' }, nodes)).rejects.toThrow(
      new PrecheckError('placement.region: the nodes joining job job-1 attempt 2 run in eu-west-1, where this deployment does not launch (it launches in us-east-1, us-west-2)'),
    );
    for (const region of REGIONS) expect(ec2[region].calls()).toEqual([]);
  });

  it('names the node whose IP is not known, tagging none', async () => {
    await expect(compute().join('job-1', 2, placement, [...nodes.slice(0, 2), { instanceId: 'i-2', nodeRank: 2, privateIp: null, reusedFrom: 1 }])).rejects.toThrow(
      new UnexpectedCloudResponseError('nodes without a private IP in us-west-2: i-2'),
    );
    expect(ec2['us-west-2']).not.toHaveReceivedCommand(CreateTagsCommand);
  });
});

describe('Ec2Compute.hold and release with kept nodes', () => {
  const placement: Placement = { region: 'us-west-2', zone: 'us-west-2a', instanceType: 'm6i.large' };

  it('hold tags the kept nodes with the attempt that ended, in their region', async () => {
    const nodes = [0, 2].map((rank) => ({ instanceId: `i-${rank}`, nodeRank: rank, privateIp: null }));

    await compute().hold('job-1', 3, { placement, nodes });

    expect(ec2['us-west-2']).toHaveReceivedCommandExactlyOnceWith(CreateTagsCommand, { Resources: ['i-0', 'i-2'], Tags: [{ Key: 'relaunch:held-after', Value: '3' }] });
    expect(ec2['us-east-1']).not.toHaveReceivedCommand(CreateTagsCommand);
  });

  it('release spares the instances in except, though their tags name the attempt: not terminated, secrets kept', async () => {
    ec2['us-east-1'].on(DescribeInstancesCommand).resolvesOnce({ Reservations: [{ Instances: [{ InstanceId: 'i-1' }, { InstanceId: 'i-2' }] }] }).resolves({ Reservations: [] });

    await compute().release('job-1', 2, [{ instanceId: 'i-1', nodeRank: 1, privateIp: null }], { except: ['i-2'] });

    expect(ec2['us-east-1']).toHaveReceivedCommandExactlyOnceWith(TerminateInstancesCommand, { InstanceIds: ['i-1'] });
    for (const region of REGIONS) expect(ssm[region]).toHaveReceivedCommandExactlyOnceWith(DeleteParametersCommand, { Names: ['/relaunch/agent-secrets/i-1'] });
  });

  it('release spares a kept node this object launched itself, and one passed among the instances', async () => {
    const ec2Compute = compute();
    const { instances } = await ec2Compute.launch(request(spec({ region: 'us-west-2' }, { numNodes: 2 })));

    await ec2Compute.release('job-1', 2, instances, { except: ['i-2'] });

    expect(ec2['us-west-2']).toHaveReceivedCommandExactlyOnceWith(TerminateInstancesCommand, { InstanceIds: ['i-1'] });
  });
});
