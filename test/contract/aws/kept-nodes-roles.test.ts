// Nodes kept for the next attempt, through a deployed stack's own functions on moto: the
// release function holds them and releases the rest, the launch function launches beside
// them, each with the compute its handler builds (functions/shared/deps.ts) and every AWS
// call checked against that function's role (the world's IAM check after each test). The
// launch function also runs LaunchStandby (infra/lambda-catalog.ts): its standby of a
// warned node beside the live attempt's others, and the join at the standby's adoption.

import { GetParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { beforeAll, describe, expect, it } from 'vitest';
import { LambdaName } from '../../../infra/lambda-catalog.ts';
import { agentSecretName, agentSecretPath } from '../../../lib/agent/secret-parameter.ts';
import { TagKey } from '../../../lib/agent/tags.ts';
import type { InstanceRef } from '../../../lib/model.ts';
import type { LaunchRequest } from '../../../lib/ports.ts';
import { taskSpec } from '../../support/fixtures/specs.ts';
import { tagOf, useWorld, type StackInWorld } from './world.ts';

const world = useWorld();
let stack: StackInWorld;
let ami: string;

beforeAll(async () => {
  stack = await world().deploy();
  ami = await world().amazonLinuxAmi();
});

function request(attempt: number, extra: Partial<LaunchRequest> = {}): LaunchRequest {
  const spec = taskSpec({ numNodes: 4, resources: { cpus: { value: 2, orMore: false }, imageId: { kind: 'ami', imageId: ami } } });
  return { jobId: 'job-roles', attempt, spec, market: 'on-demand', history: [], callbackSecret: `secret-${attempt}`, ...extra };
}

describe("kept nodes through the functions' own roles", () => {
  it('the release function holds the kept nodes and terminates the rest; the launch function launches one node beside three and moves them', async () => {
    const first = await stack.asFunction(LambdaName.launchAttempt, (deps) => deps.compute().launch(request(1)));
    const kept = first.instances.filter((node) => node.nodeRank !== 2);
    const lost = first.instances.find((node) => node.nodeRank === 2) as InstanceRef;

    await stack.asFunction(LambdaName.releaseInstances, async (deps) => {
      await deps.compute().hold('job-roles', 1, { placement: first.placement, nodes: kept });
      await deps.compute().release('job-roles', 1, [lost], { except: kept.map((node) => node.instanceId) });
    });

    const afterRelease = await world().instances(stack.deployment.region, { [TagKey.jobId]: 'job-roles' });
    const state = (id: string) => afterRelease.find((instance) => instance.InstanceId === id)?.State?.Name;
    for (const node of kept) expect(state(node.instanceId)).toBe('running');
    expect(state(lost.instanceId)).toMatch(/shutting-down|terminated/);

    const second = await stack.asFunction(LambdaName.launchAttempt, (deps) => deps.compute().launch(request(2, { keep: { placement: first.placement, nodes: kept } })));

    expect(second.instances.map((node) => [node.nodeRank, node.reusedFrom])).toEqual([
      [0, 1],
      [1, 1],
      [2, undefined],
      [3, 1],
    ]);
    const live = (await world().instances(stack.deployment.region, { [TagKey.jobId]: 'job-roles' })).filter((instance) => instance.State?.Name === 'running');
    expect(live).toHaveLength(4);
    for (const instance of live) {
      expect(tagOf(instance, TagKey.attempt)).toBe('2');
      // The mark stays on the kept nodes, naming the attempt that ended (their agents may not have seen it yet).
      const wasKept = kept.some((node) => node.instanceId === instance.InstanceId);
      expect(tagOf(instance, TagKey.heldAfter)).toBe(wasKept ? '1' : undefined);
    }
    const ssm = new SSMClient({ region: stack.deployment.region, endpoint: world().moto.endpoint });
    for (const node of second.instances) {
      const parameter = await ssm.send(new GetParameterCommand({ Name: agentSecretName(agentSecretPath(stack.deployment.namePrefix), node.instanceId), WithDecryption: true }));
      expect(parameter.Parameter?.Value).toBe('secret-2');
    }
    ssm.destroy();

    // The next release (of attempt 2) takes every node, kept ones included: they carry its tag now.
    await stack.asFunction(LambdaName.releaseInstances, (deps) => deps.compute().release('job-roles', 2, []));
    const gone = await world().instances(stack.deployment.region, { [TagKey.jobId]: 'job-roles' });
    expect(gone.filter((instance) => instance.State?.Name === 'running')).toEqual([]);
  });

  it("the launch function launches a standby of the warned node beside the live attempt's others, and joins them at adoption", async () => {
    const first = await stack.asFunction(LambdaName.launchAttempt, (deps) => deps.compute().launch(request(1, { jobId: 'job-standby' })));
    const beside = first.instances.filter((node) => node.nodeRank !== 2);

    const standby = await stack.asFunction(LambdaName.launchAttempt, (deps) => deps.compute().launch(request(2, { jobId: 'job-standby', beside: { placement: first.placement, nodes: beside } })));

    expect(standby.instances.map((node) => node.nodeRank)).toEqual([2]);
    const ssm = new SSMClient({ region: stack.deployment.region, endpoint: world().moto.endpoint });
    for (const node of [...beside, ...standby.instances]) {
      const parameter = await ssm.send(new GetParameterCommand({ Name: agentSecretName(agentSecretPath(stack.deployment.namePrefix), node.instanceId), WithDecryption: true }));
      expect(parameter.Parameter?.Value).toBe('secret-2');
    }
    ssm.destroy();
    const attemptOf = async () =>
      new Map((await world().instances(stack.deployment.region, { [TagKey.jobId]: 'job-standby' })).map((instance) => [instance.InstanceId, tagOf(instance, TagKey.attempt)]));
    for (const node of beside) expect((await attemptOf()).get(node.instanceId)).toBe('1');

    const joined = [...beside.map((node) => ({ ...node, reusedFrom: 1 })), ...standby.instances];
    await stack.asFunction(LambdaName.launchAttempt, (deps) => deps.compute().join('job-standby', 2, standby.placement, joined));

    const after = await attemptOf();
    for (const node of joined) expect(after.get(node.instanceId)).toBe('2');
    expect(after.get(first.instances.find((node) => node.nodeRank === 2)?.instanceId)).toBe('1');
  });
});
