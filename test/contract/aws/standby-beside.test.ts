// A standby of the warned node alone on moto (launch_on_warning with node reuse,
// docs/recovery.md): Ec2Compute launches only the warned rank beside the live attempt's
// other nodes, which keep serving it (their tags untouched) while their parameters take
// the standby's secret; a node of theirs gone before the launch is skipped; `join`, at the
// standby's adoption, moves their tags to it, with no SSM call, as often as it is asked.

import { CreateSecurityGroupCommand, DescribeInstancesCommand, EC2Client, TerminateInstancesCommand, type Instance } from '@aws-sdk/client-ec2';
import { GetParameterCommand, GetParametersByPathCommand, SSMClient } from '@aws-sdk/client-ssm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { agentSecretName, agentSecretPath } from '../../../lib/agent/secret-parameter.ts';
import { NODE_IPS_TAG_PREFIX, TagKey } from '../../../lib/agent/tags.ts';
import { Ec2Compute, type Ec2ComputeDeps } from '../../../lib/adapters/ec2-compute.ts';
import { Ec2Inventory } from '../../../lib/adapters/ec2-inventory.ts';
import { SsmParameters, type Ec2Parameters } from '../../../lib/adapters/ssm-parameters.ts';
import type { InstanceRef } from '../../../lib/model.ts';
import type { LaunchRequest, LaunchResult } from '../../../lib/ports.ts';
import { taskSpec } from '../../support/fixtures/specs.ts';
import { createNetwork } from './deploy.ts';
import { startMoto, useMotoEnvironment, type Moto } from './moto.ts';

const REGION = 'us-east-1';
const PREFIX = 'relaunch';

let moto: Moto;
let restoreEnv: () => void;
let ec2: EC2Client;
let ssm: SSMClient;
let config: Ec2ComputeDeps['config'];
let compute: Ec2Compute;
let ami: string;
let jobs = 0;
let jobId: string;

/** Parameters that fail the test at any call: what `join` is built with, as it makes none. */
const noParameters: Ec2Parameters = {
  read: async (_region, name) => {
    throw new Error(`join read the parameter ${name}`);
  },
  putSecret: async (_region, secret) => {
    throw new Error(`join put the parameter ${secret.name}`);
  },
  rewriteSecret: async (_region, secret) => {
    throw new Error(`join rewrote the parameter ${secret.name}`);
  },
  delete: async (_region, names) => {
    throw new Error(`join deleted the parameters ${names.join(', ')}`);
  },
};

beforeAll(async () => {
  moto = await startMoto();
  restoreEnv = useMotoEnvironment(moto);
  ec2 = new EC2Client({ region: REGION, endpoint: moto.endpoint });
  ssm = new SSMClient({ region: REGION, endpoint: moto.endpoint });
  const network = await createNetwork(moto, REGION, ['us-east-1a', 'us-east-1b']);
  const group = await ec2.send(new CreateSecurityGroupCommand({ GroupName: 'nodes', Description: 'nodes', VpcId: network.vpcId }));
  const published = await ssm.send(new GetParametersByPathCommand({ Path: '/aws/service/ami-amazon-linux-latest' }));
  ami = published.Parameters?.find((parameter) => parameter.Name?.endsWith('x86_64'))?.Value as string;
  config = {
    regions: [{ region: REGION, subnetsByZone: network.subnetsByZone, securityGroupIds: [group.GroupId as string] }],
    instanceProfileArn: 'arn:aws:iam::123456789012:instance-profile/relaunch-node',
    apiUrl: 'https://api.example.com/prod',
    namePrefix: PREFIX,
  };
  compute = new Ec2Compute({ ec2: () => ec2, parameters: new SsmParameters(() => ssm), config, sleep: async () => {} });
});
afterAll(async () => {
  ec2?.destroy();
  ssm?.destroy();
  restoreEnv?.();
  await moto?.stop();
});
beforeEach(() => {
  jobs += 1;
  jobId = `job-beside-${jobs}`;
});

/** Attempt `attempt` of the test's job: four nodes of one type, with this attempt's secret. */
function request(attempt: number, extra: Partial<LaunchRequest> = {}): LaunchRequest {
  const spec = taskSpec({ numNodes: 4, resources: { instanceType: 'm5.large', imageId: { kind: 'ami', imageId: ami } } });
  return { jobId, attempt, spec, market: 'on-demand', history: [], callbackSecret: `secret-of-attempt-${attempt}`, ...extra };
}

/** Every instance moto holds for the test's job, any state, by id. */
async function instances(): Promise<Map<string, Instance>> {
  const found = new Map<string, Instance>();
  const answer = await ec2.send(new DescribeInstancesCommand({ Filters: [{ Name: `tag:${TagKey.jobId}`, Values: [jobId] }] }));
  for (const reservation of answer.Reservations ?? []) for (const instance of reservation.Instances ?? []) found.set(instance.InstanceId as string, instance);
  return found;
}

function tag(instance: Instance | undefined, key: string): string | undefined {
  return instance?.Tags?.find((t) => t.Key === key)?.Value;
}

/** An instance's tags as `key=value`, sorted. */
function tagsOf(instance: Instance | undefined): string[] {
  return (instance?.Tags ?? []).map((t) => `${t.Key}=${t.Value}`).sort();
}

/** The callback secret in a node's parameter (the value's first word). */
async function secretOf(instanceId: string): Promise<string> {
  const parameter = await ssm.send(new GetParameterCommand({ Name: agentSecretName(agentSecretPath(PREFIX), instanceId), WithDecryption: true }));
  return (parameter.Parameter?.Value ?? '').split(' ')[0] as string;
}

/** Attempt 1 of four nodes, live; node 2 warned: the standby, attempt 2, is launched beside the other three. */
async function standbyOfNode2(): Promise<{ first: LaunchResult; beside: InstanceRef[]; warned: InstanceRef; before: Map<string, Instance> }> {
  const first = await compute.launch(request(1));
  const beside = first.instances.filter((node) => node.nodeRank !== 2);
  const warned = first.instances.find((node) => node.nodeRank === 2) as InstanceRef;
  return { first, beside, warned, before: await instances() };
}

describe("Ec2Compute beside the live attempt's nodes (a standby of the warned node alone), on moto", () => {
  it("launches only the warned rank, in the others' zone and type, every IP in its tags; the others keep serving attempt 1, their parameters holding attempt 2's secret", async () => {
    const { first, beside, warned, before } = await standbyOfNode2();

    const standby = await compute.launch(request(2, { beside: { placement: first.placement, nodes: beside } }));

    const now = await instances();
    const launchedNow = [...now.values()].filter((instance) => !before.has(instance.InstanceId as string));
    expect(launchedNow).toHaveLength(1);
    const fresh = launchedNow[0] as Instance;
    expect(fresh.Placement?.AvailabilityZone).toBe(first.placement.zone);
    expect(fresh.InstanceType).toBe(first.placement.instanceType);
    expect(standby.instances.map((node) => [node.nodeRank, node.instanceId, node.reusedFrom])).toEqual([[2, fresh.InstanceId, undefined]]);
    expect(standby.placement).toMatchObject({ region: REGION, zone: first.placement.zone, instanceType: 'm5.large' });
    // The new node's list: nodes 0, 1 and 3 where they are, itself as rank 2.
    const ips = [0, 1, 2, 3].map((rank) => (rank === 2 ? fresh.PrivateIpAddress : first.instances[rank]?.privateIp)).join(' ');
    expect(tag(fresh, `${NODE_IPS_TAG_PREFIX}0`)).toBe(ips);
    expect(tag(fresh, TagKey.nodeRank)).toBe('2');
    expect(tag(fresh, TagKey.attempt)).toBe('2');
    expect(await secretOf(fresh.InstanceId as string)).toBe('secret-of-attempt-2');
    for (const node of beside) {
      // Every tag as attempt 1's launch left it: attempt, rank, the old IP list.
      expect(tagsOf(now.get(node.instanceId))).toEqual(tagsOf(before.get(node.instanceId)));
      expect(tag(now.get(node.instanceId), TagKey.attempt)).toBe('1');
      expect(await secretOf(node.instanceId)).toBe('secret-of-attempt-2');
    }
    // The warned node is attempt 1's alone: untouched.
    expect(tagsOf(now.get(warned.instanceId))).toEqual(tagsOf(before.get(warned.instanceId)));
    expect(await secretOf(warned.instanceId)).toBe('secret-of-attempt-1');
    for (const instance of now.values()) expect(instance.State?.Name).toBe('running');
  });

  it('skips a node terminated before the launch: not launched anew, not tagged, its parameter not rewritten, nothing terminated', async () => {
    const { first, beside } = await standbyOfNode2();
    const gone = beside[1] as InstanceRef;
    await ec2.send(new TerminateInstancesCommand({ InstanceIds: [gone.instanceId] }));
    const before = await instances();

    const standby = await compute.launch(request(2, { beside: { placement: first.placement, nodes: beside } }));

    const now = await instances();
    expect(now.size).toBe(before.size + 1);
    expect(standby.instances.map((node) => node.nodeRank)).toEqual([2]);
    expect(tagsOf(now.get(gone.instanceId))).toEqual(tagsOf(before.get(gone.instanceId)));
    expect(await secretOf(gone.instanceId)).toBe('secret-of-attempt-1');
    for (const [id, instance] of now) expect(instance.State?.Name).toBe(id === gone.instanceId ? before.get(id)?.State?.Name : 'running');
    for (const node of beside.filter((node) => node !== gone)) expect(await secretOf(node.instanceId)).toBe('secret-of-attempt-2');
  });

  it("join at adoption moves the others to attempt 2, every node with the same IP list, with no SSM call; twice is the same; the janitor sees all four under attempt 2", async () => {
    const { first, beside } = await standbyOfNode2();
    const standby = await compute.launch(request(2, { beside: { placement: first.placement, nodes: beside } }));
    const nodes = [...beside.map((node) => ({ instanceId: node.instanceId, nodeRank: node.nodeRank, privateIp: node.privateIp, reusedFrom: 1 })), ...standby.instances];
    const joiner = new Ec2Compute({ ec2: () => ec2, parameters: noParameters, config, sleep: async () => {} });

    await joiner.join(jobId, 2, standby.placement, nodes);
    const once = await instances();
    await joiner.join(jobId, 2, standby.placement, nodes);
    const twice = await instances();

    const ips = [...nodes].sort((a, b) => a.nodeRank - b.nodeRank).map((node) => node.privateIp).join(' ');
    for (const node of nodes) {
      const instance = once.get(node.instanceId);
      expect(tag(instance, TagKey.attempt)).toBe('2');
      expect(tag(instance, TagKey.nodeRank)).toBe(String(node.nodeRank));
      expect(tag(instance, `${NODE_IPS_TAG_PREFIX}0`)).toBe(ips);
      expect(tagsOf(twice.get(node.instanceId))).toEqual(tagsOf(instance));
      expect(await secretOf(node.instanceId)).toBe('secret-of-attempt-2');
    }
    const listed = await new Ec2Inventory({ regions: [REGION], ec2: () => ec2, deployment: PREFIX }).listTagged();
    const mine = listed.filter((instance) => instance.jobId === jobId && instance.attempt === 2);
    expect(mine.map((instance) => instance.instanceId).sort()).toEqual(nodes.map((node) => node.instanceId).sort());
  });
});
