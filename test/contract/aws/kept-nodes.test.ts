// Nodes kept from one attempt to the next on moto (docs/recovery.md, "replace only the lost
// nodes"): Ec2Compute launches only the ranks the kept nodes do not cover, beside them,
// moves their tags and rewrites their secrets; its release spares them; DynamoJobStore moves
// their instance index to the new attempt in the write that records it; the janitor's view
// sees them under the attempt they serve now. A standby of the warned node alone
// (launch_on_warning) launches only that rank beside the live attempt's other nodes, which
// keep serving it (their tags untouched) while their parameters take the standby's secret;
// `join`, at its adoption, moves their tags to it with no SSM call.

import { CreateSecurityGroupCommand, DescribeInstancesCommand, EC2Client, StopInstancesCommand, TerminateInstancesCommand, type Instance } from '@aws-sdk/client-ec2';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetParameterCommand, GetParametersByPathCommand, ListTagsForResourceCommand, SSMClient } from '@aws-sdk/client-ssm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { agentSecretName, agentSecretPath } from '../../../lib/agent/secret-parameter.ts';
import { NODE_IPS_TAG_PREFIX, TagKey } from '../../../lib/agent/tags.ts';
import { Ec2Compute, type Ec2ComputeDeps } from '../../../lib/adapters/ec2-compute.ts';
import { Ec2Inventory } from '../../../lib/adapters/ec2-inventory.ts';
import { DynamoJobStore } from '../../../lib/adapters/dynamo-job-store/index.ts';
import { SsmParameters, type Ec2Parameters } from '../../../lib/adapters/ssm-parameters.ts';
import type { InstanceRef } from '../../../lib/model.ts';
import type { LaunchRequest, LaunchResult } from '../../../lib/ports.ts';
import { ensureTable } from '../../../local/dynalite.ts';
import { onInstanceEvent } from '../../../lib/usecases/instance-event.ts';
import { FakeWorkflow } from '../../support/fakes/fake-workflow.ts';
import { taskSpec } from '../../support/fixtures/specs.ts';
import { attemptRecord } from '../../support/fixtures/records.ts';
import { sampleJob } from '../../support/job-store.contract.ts';
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
  jobId = `job-kept-${jobs}`;
});

/** Attempt `attempt` of the test's job: four nodes of one type (or `numNodes`), with this attempt's secret. */
function request(attempt: number, extra: Partial<LaunchRequest> = {}, numNodes = 4): LaunchRequest {
  const spec = taskSpec({ numNodes, resources: { instanceType: 'm5.large', imageId: { kind: 'ami', imageId: ami } } });
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

/** Attempt 1 of four nodes, then held after it ended, keeping `ranks` (as ReleaseInstances does with a decision's keep). */
async function heldAfterFirst(ranks: readonly number[]): Promise<{ first: LaunchResult; kept: InstanceRef[] }> {
  const first = await compute.launch(request(1));
  const kept = first.instances.filter((node) => ranks.includes(node.nodeRank));
  await compute.hold(jobId, 1, { placement: first.placement, nodes: kept });
  await compute.release(jobId, 1, first.instances.filter((node) => !ranks.includes(node.nodeRank)), { except: kept.map((node) => node.instanceId) });
  return { first, kept };
}

describe('Ec2Compute with kept nodes, on moto', () => {
  it('launches only the missing rank, in the kept nodes\' zone and type; ranks kept, every parameter rewritten, tags moved, held tag gone', async () => {
    const { first, kept } = await heldAfterFirst([0, 1, 3]);
    const lost = first.instances.find((node) => node.nodeRank === 2) as InstanceRef;
    const held = await instances();
    for (const node of kept) expect(tag(held.get(node.instanceId), TagKey.heldAfter)).toBe('1');
    expect(held.get(lost.instanceId)?.State?.Name).toMatch(/shutting-down|terminated/);

    const second = await compute.launch(request(2, { keep: { placement: first.placement, nodes: kept } }));

    const now = await instances();
    const launchedNow = [...now.values()].filter((instance) => !first.instances.some((node) => node.instanceId === instance.InstanceId));
    expect(launchedNow).toHaveLength(1);
    expect(launchedNow[0]?.Placement?.AvailabilityZone).toBe(first.placement.zone);
    expect(launchedNow[0]?.InstanceType).toBe(first.placement.instanceType);
    expect(second.placement).toMatchObject({ region: REGION, zone: first.placement.zone, instanceType: 'm5.large' });
    expect(second.instances.map((node) => [node.nodeRank, node.instanceId, node.reusedFrom])).toEqual([
      [0, kept[0]?.instanceId, 1],
      [1, kept[1]?.instanceId, 1],
      [2, launchedNow[0]?.InstanceId, undefined],
      [3, kept[2]?.instanceId, 1],
    ]);
    // Node 0 survived: it is still the head, on the same IP.
    expect(second.instances[0]?.privateIp).toBe(first.instances[0]?.privateIp);
    const ips = second.instances.map((node) => node.privateIp).join(' ');
    for (const node of second.instances) {
      const instance = now.get(node.instanceId);
      expect(tag(instance, TagKey.attempt)).toBe('2');
      expect(tag(instance, TagKey.nodeRank)).toBe(String(node.nodeRank));
      expect(tag(instance, `${NODE_IPS_TAG_PREFIX}0`)).toBe(ips);
      // The mark stays on the kept nodes, naming the attempt that ended (their agents may not have seen it yet).
      expect(tag(instance, TagKey.heldAfter)).toBe(node.reusedFrom === undefined ? undefined : '1');
      expect(await secretOf(node.instanceId)).toBe('secret-of-attempt-2');
      const tags = await ssm.send(new ListTagsForResourceCommand({ ResourceType: 'Parameter', ResourceId: agentSecretName(agentSecretPath(PREFIX), node.instanceId) }));
      expect(tags.TagList).toContainEqual({ Key: TagKey.attempt, Value: '2' });
    }
  });

  it('restarts in place on one node: no launch at all, the node moved to the new attempt with its new secret', async () => {
    const first = await compute.launch(request(1, {}, 1));
    await compute.hold(jobId, 1, { placement: first.placement, nodes: first.instances });
    await compute.release(jobId, 1, [], { except: first.instances.map((node) => node.instanceId) });

    const second = await compute.launch(request(2, { keep: { placement: first.placement, nodes: first.instances } }, 1));

    const [node] = first.instances as [InstanceRef];
    expect(node.runningAt).toEqual(expect.any(String));
    // Its time up before is attempt 1's: attempt 2 counts it from its own launch.
    expect(second.instances).toEqual([{ instanceId: node.instanceId, nodeRank: 0, privateIp: node.privateIp, reusedFrom: 1 }]);
    expect(await instances()).toHaveProperty('size', 1);
    expect(await secretOf(first.instances[0]?.instanceId as string)).toBe('secret-of-attempt-2');
  });

  it('replaces a kept node that was terminated before the launch, in its rank', async () => {
    const { first, kept } = await heldAfterFirst([0, 1, 2, 3]);
    const gone = kept[1] as InstanceRef;
    await ec2.send(new TerminateInstancesCommand({ InstanceIds: [gone.instanceId] }));

    const second = await compute.launch(request(2, { keep: { placement: first.placement, nodes: kept } }));

    const rank1 = second.instances.find((node) => node.nodeRank === 1);
    expect(rank1?.instanceId).not.toBe(gone.instanceId);
    expect(rank1?.reusedFrom).toBeUndefined();
    expect(second.instances.filter((node) => node.reusedFrom === 1).map((node) => node.nodeRank)).toEqual([0, 2, 3]);
    const now = await instances();
    expect(now.get(rank1?.instanceId as string)?.Placement?.AvailabilityZone).toBe(first.placement.zone);
    // The gone node's secret went with it.
    await expect(secretOf(gone.instanceId)).rejects.toMatchObject({ name: 'ParameterNotFound' });
  });

  it('release with except leaves the kept nodes running with their secrets, and terminates the rest', async () => {
    const { first, kept } = await heldAfterFirst([0, 1, 3]);
    const lost = first.instances.find((node) => node.nodeRank === 2) as InstanceRef;

    const now = await instances();
    for (const node of kept) {
      expect(now.get(node.instanceId)?.State?.Name).toBe('running');
      expect(await secretOf(node.instanceId)).toBe('secret-of-attempt-1');
    }
    expect(now.get(lost.instanceId)?.State?.Name).toMatch(/shutting-down|terminated/);
    await expect(secretOf(lost.instanceId)).rejects.toMatchObject({ name: 'ParameterNotFound' });
  });

  it('the janitor\'s inventory sees a kept node under the attempt it serves now', async () => {
    const { first, kept } = await heldAfterFirst([0]);
    await compute.launch(request(2, { keep: { placement: first.placement, nodes: kept } }));

    const listed = await new Ec2Inventory({ regions: [REGION], ec2: () => ec2, deployment: PREFIX }).listTagged();

    const mine = listed.filter((instance) => instance.jobId === jobId);
    expect(mine).toHaveLength(4);
    expect(mine.find((instance) => instance.instanceId === kept[0]?.instanceId)?.attempt).toBe(2);
    expect(new Set(mine.map((instance) => instance.attempt))).toEqual(new Set([2]));
  });

  it('a stopped kept node is given up (terminated) and its rank launched anew', async () => {
    const { first, kept } = await heldAfterFirst([0, 1, 2, 3]);
    const stopped = kept[3] as InstanceRef;
    await ec2.send(new StopInstancesCommand({ InstanceIds: [stopped.instanceId] }));

    const second = await compute.launch(request(2, { keep: { placement: first.placement, nodes: kept } }));

    expect(second.instances.find((node) => node.nodeRank === 3)?.instanceId).not.toBe(stopped.instanceId);
    expect((await instances()).get(stopped.instanceId)?.State?.Name).toMatch(/shutting-down|terminated/);
  });
});

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

describe('DynamoJobStore with kept nodes, on moto', () => {
  it('moves a kept instance\'s index to the new attempt in the write that records it: an EC2 event for it ends the new attempt', async () => {
    const client = new DynamoDBClient({ endpoint: moto.endpoint });
    const tableName = `jobs-kept-${jobs}`;
    await ensureTable(client, tableName);
    const store = new DynamoJobStore({ client, tableName });
    const job = { ...sampleJob, jobId };
    await store.createJob(job);
    const at = '2026-01-01T00:00:01.000Z';
    await store.changeStatus(jobId, { from: 'PENDING', to: 'STARTING', reason: 'launching', attempt: 1, at });
    await store.putAttempt(attemptRecord(jobId, 1, at, { secretHash: 'a'.repeat(64) }));
    const placement = { region: REGION, zone: 'us-east-1a', instanceType: 'm5.large' };
    const firstNodes = [0, 1].map((rank) => ({ instanceId: `i-${rank}`, nodeRank: rank, privateIp: `10.0.0.${rank + 1}` }));
    await store.setInstances(jobId, 1, placement, firstNodes);
    await store.putAttempt(attemptRecord(jobId, 2, '2026-01-01T00:10:00.000Z', { secretHash: 'b'.repeat(64) }));

    await store.setInstances(jobId, 2, placement, [
      { ...firstNodes[0], reusedFrom: 1 } as InstanceRef,
      { instanceId: 'i-9', nodeRank: 1, privateIp: '10.0.0.9' },
    ]);

    expect((await store.findAttemptByInstance('i-0'))?.attempt).toBe(2);
    expect((await store.findAttemptByInstance('i-9'))?.attempt).toBe(2);
    // The node not kept stays with the attempt it served.
    expect((await store.findAttemptByInstance('i-1'))?.attempt).toBe(1);
    expect((await store.getAttempt(jobId, 2)).instances[0]).toMatchObject({ instanceId: 'i-0', reusedFrom: 1 });

    // EC2's word that the reused instance went ends the attempt it serves now, not the one before.
    const event = await onInstanceEvent({ instanceId: 'i-0', kind: 'STATE_CHANGE', state: 'terminated', time: '2026-01-01T00:20:00.000Z' }, { store, workflow: new FakeWorkflow() });
    expect(event).toMatchObject({ action: 'ended', reason: expect.stringContaining(`attempt 2 of job ${jobId} ended`) });
    expect((await store.getAttempt(jobId, 2)).outcome?.kind).toBe('LOST');
    expect((await store.getAttempt(jobId, 1)).outcome).toBeNull();
    client.destroy();
  });
});
