// What Ec2Compute sends EC2 for the resources of each corpus file relaunch accepts: the
// CreateFleet requests and their launch templates, as file snapshots a reviewer can read.
//
// The task texts are written here, each reproducing the `resources` (and num_nodes) of one
// file of ../shared/corpus/skypilot, so the snapshots need no corpus. One fixed deployment
// (two regions, three zones) and a mocked EC2/SSM. Each task is launched twice: once with
// no capacity anywhere, which shows every request the launch sends, in order; once with
// every request filled by its first candidate, which shows where the attempt lands. User
// data is shown as the agent settings that differ between tasks.

import { gunzipSync } from 'node:zlib';
import {
  CreateFleetCommand,
  CreateLaunchTemplateCommand,
  CreateTagsCommand,
  DeleteLaunchTemplateCommand,
  DescribeImagesCommand,
  DescribeInstancesCommand,
  EC2Client,
  type CreateFleetCommandInput,
  type CreateLaunchTemplateCommandInput,
  type DescribeInstancesCommandInput,
} from '@aws-sdk/client-ec2';
import { GetParameterCommand, PutParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import { describe, expect, it } from 'vitest';
import { Ec2Compute } from '../../../../lib/adapters/ec2-compute.ts';
import type { Ec2ComputeConfig } from '../../../../lib/workflow/resources.ts';
import { NoCapacityError } from '../../../../lib/errors.ts';
import { SsmParameters } from '../../../../lib/adapters/ssm-parameters.ts';
import { initialCounters } from '../../../../lib/policy/decide.ts';
import type { Market } from '../../../../lib/policy/types.ts';
import { parseJobFile } from '../../../../lib/task-file/parse.ts';
import type { TaskSpec } from '../../../../lib/task-file/types.ts';
import { agentSetting } from '../../../support/fixtures/agent-settings.ts';

const CONFIG: Ec2ComputeConfig = {
  regions: [
    { region: 'us-east-1', subnetsByZone: { 'us-east-1a': 'subnet-0east1a', 'us-east-1b': 'subnet-0east1b' }, securityGroupIds: ['sg-0east'] },
    { region: 'us-west-2', subnetsByZone: { 'us-west-2a': 'subnet-0west2a' }, securityGroupIds: ['sg-0west'] },
  ],
  instanceProfileArn: 'arn:aws:iam::123456789012:instance-profile/relaunch-node',
  apiUrl: 'https://api.example.com/v1',
  namePrefix: 'relaunch',
  openPorts: [{ from: 30000, to: 30010 }],
};

/**
 * The resources of each accepted corpus file, written anew. A pipeline's tasks are
 * separate documents; each is launched on its own.
 */
const TASKS: Readonly<Record<string, string>> = {
  '01-managed-jobs-retry': `
resources:
  cpus: 2+
  job_recovery:
    max_restarts_on_errors: 1
run: exit 1
---
run: exit 0
`,
  '05-multi-accel-unordered-any-of': `
resources:
  use_spot: true
  accelerators: {'A100:1', 'T4:1', 'V100:1'}
  any_of:
    - cloud: aws
    - cloud: gcp
run: nvidia-smi
`,
  '06-multiple-resources-any-of': `
resources:
  any_of:
    - cloud: aws
      region: us-east-1
      accelerators: A100:8
    - cloud: gcp
      accelerators: T4:4
    - cloud: aws
run: echo hi
`,
  '09-like-mixed-markets-two-nodes': `
num_nodes: 2
resources:
  accelerators: {H200:8, H100:8, A100-80GB:8}
  disk_size: 1024
  disk_tier: best
  ports: 30000
  any_of:
    - use_spot: true
    - use_spot: false
run: echo serve
`,
  '10-like-efa-two-nodes': `
num_nodes: 2
resources:
  accelerators: H100:8
  cpus: 100+
  memory: 1000+
  network_tier: best
  image_id: docker:vllm/vllm-openai:v0.10.0
run: echo serve
`,
  '17-efa-container': `
num_nodes: 2
resources:
  infra: aws
  instance_type: p4d.24xlarge
  image_id: docker:public.ecr.aws/hpc-cloud/nccl-tests:latest
run: echo nccl
`,
  '18-aws-ami-and-docker': `
resources:
  infra: aws/us-east-1
  cpus: 2+
  image_id:
    us-east-1: skypilot:cpu-ubuntu-2004
    docker: ubuntu:22.04
run: echo in a container
`,
  '21-distributed-pytorch': `
num_nodes: 2
resources:
  cpus: 4+
  accelerators: L4
run: echo torchrun
`,
  '22-pipeline-aws': `
name: pipeline
---
name: train1
resources:
  cloud: aws
  region: us-west-2
run: echo train
---
name: train2
run: echo train
---
name: eval1
run: echo eval
---
name: eval2
run: echo eval
`,
  '24-mixed-list-accelerators': `
resources:
  accelerators:
    - T4: 1
    - "V100:2"
    - A100: 1
run: echo listed
`,
  '28-torchtitan': `
num_nodes: 2
resources:
  accelerators: {H100:8, H200:8}
  disk_size: 1024GB
run: echo titan
`,
  '29-autoresearch-experiment': `
resources:
  accelerators: H100:1
  image_id: docker:nvcr.io/nvidia/pytorch:24.07-py3
run: echo experiment
`,
};

/** One task's launch as a reviewer reads it: its market, the templates and every fleet request in the order sent, and where it lands. */
interface LaunchRecord {
  readonly market: string;
  readonly launchTemplates: unknown[];
  readonly fleets: unknown[];
  readonly placement: unknown;
}

/** What one launch sent, and how it ended. */
interface Sent {
  readonly templates: unknown[];
  readonly fleets: unknown[];
  readonly outcome: unknown;
}

/** The agent's settings that vary between tasks, instead of its gzipped, base64 text. */
function agentSummary(userData: string | undefined): Record<string, string> {
  const script = gunzipSync(Buffer.from(userData ?? '', 'base64')).toString('utf8');
  const setting = (name: string) => agentSetting(script, name) ?? '';
  const environment = setting('JOB_ENV');
  return {
    NUM_NODES: setting('NUM_NODES'),
    CONTAINER_IMAGE: setting('CONTAINER_IMAGE'),
    CONTAINER_GPUS: setting('CONTAINER_GPUS'),
    DATA_CREDENTIALS_URL: setting('DATA_CREDENTIALS_URL'),
    SKYPILOT_NUM_GPUS_PER_NODE: /SKYPILOT_NUM_GPUS_PER_NODE='(\d+)'/.exec(environment)?.[1] ?? '',
  };
}

/**
 * Launches `spec` on `market` against a mocked EC2 in which each fleet launches its first
 * candidate (`fill`) or finds no capacity for any; returns what was sent.
 */
async function send(spec: TaskSpec, market: Market, fill: boolean): Promise<Sent> {
  const templates: unknown[] = [];
  const fleets: unknown[] = [];
  const world = new Map<string, { zone: string; type: string }>();
  const zoneOf = Object.fromEntries(CONFIG.regions.flatMap((r) => Object.entries(r.subnetsByZone).map(([zone, subnet]) => [subnet, zone])));
  const clients = Object.fromEntries(
    CONFIG.regions.map(({ region }) => {
      const ec2 = new EC2Client({ region });
      const ssm = new SSMClient({ region });
      const ec2Mock = mockClient(ec2);
      const ssmMock = mockClient(ssm);
      ssmMock.on(GetParameterCommand).callsFake((input: { Name: string }) => ({ Parameter: { Value: `ami-for-${input.Name.split('/').slice(3, 6).join('-')}` } }));
      ssmMock.on(PutParameterCommand).resolves({ Version: 1 });
      ec2Mock.on(DescribeImagesCommand).resolves({ Images: [{ RootDeviceName: '/dev/sda1' }] });
      ec2Mock.on(CreateTagsCommand).resolves({});
      ec2Mock.on(DeleteLaunchTemplateCommand).resolves({});
      ec2Mock.on(CreateLaunchTemplateCommand).callsFake((input: CreateLaunchTemplateCommandInput) => {
        const id = `lt-${templates.length + 1}`;
        const data = input.LaunchTemplateData ?? {};
        templates.push({ region, id, ...input, LaunchTemplateData: { ...data, UserData: agentSummary(data.UserData) } });
        return { LaunchTemplate: { LaunchTemplateId: id } };
      });
      ec2Mock.on(CreateFleetCommand).callsFake((input: CreateFleetCommandInput) => {
        fleets.push({ region, ...input });
        if (!fill) return { Instances: [], Errors: [{ ErrorCode: 'InsufficientInstanceCapacity' }] };
        const override = input.LaunchTemplateConfigs?.[0]?.Overrides?.[0];
        const ids = Array.from({ length: input.TargetCapacitySpecification?.TotalTargetCapacity ?? 0 }, (_, n) => `i-${fleets.length}${n}`);
        for (const id of ids) world.set(id, { zone: zoneOf[override?.SubnetId ?? ''] ?? '', type: override?.InstanceType ?? '' });
        return { Instances: [{ InstanceIds: ids }] };
      });
      ec2Mock.on(DescribeInstancesCommand).callsFake((input: DescribeInstancesCommandInput) => ({
        Reservations: [
          {
            OwnerId: '123456789012',
            Instances: (input.InstanceIds ?? []).map((id, n) => ({
              InstanceId: id,
              InstanceType: world.get(id)?.type,
              PrivateIpAddress: `10.0.0.${n + 10}`,
              Placement: { AvailabilityZone: world.get(id)?.zone },
            })),
          },
        ],
      }));
      return [region, { ec2, ssm }];
    }),
  );
  const compute = new Ec2Compute({
    ec2: (region) => (clients[region] as { ec2: EC2Client }).ec2,
    parameters: new SsmParameters((region) => (clients[region] as { ssm: SSMClient }).ssm),
    config: CONFIG,
    sleep: async () => undefined,
  });
  const request = { jobId: 'j-snapshot', attempt: 1, spec, market, history: [], callbackSecret: 'not-in-the-snapshot' };
  const outcome = await compute.launch(request).then(
    (result) => result.placement,
    (error: unknown) => (error instanceof NoCapacityError ? 'NoCapacityError' : Promise.reject(error)),
  );
  return { templates, fleets, outcome };
}

/** Every request of the first attempt (none filled), then where it lands (the first filled). */
async function launch(spec: TaskSpec): Promise<LaunchRecord> {
  // The first attempt's market, as LaunchAttempt takes it from the new job's counters.
  const { market } = initialCounters(spec.resources.useSpot);
  const everything = await send(spec, market, false);
  expect(everything.outcome).toBe('NoCapacityError');
  const landed = await send(spec, market, true);
  return { market, launchTemplates: everything.templates, fleets: everything.fleets, placement: landed.outcome };
}

describe('Ec2Compute: the EC2 requests for each accepted corpus file', () => {
  it.each(Object.keys(TASKS))('%s', async (name) => {
    const { tasks } = parseJobFile(TASKS[name] as string);
    const launches: LaunchRecord[] = [];
    for (const task of tasks) launches.push(await launch(task.spec));
    const body = tasks.length === 1 ? launches[0] : launches.map((record, index) => ({ task: index, ...record }));
    await expect(`${JSON.stringify(body, null, 2)}\n`).toMatchFileSnapshot(`__snapshots__/fleets/${name}.json`);
  });
});
