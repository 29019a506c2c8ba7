// The local compute's emulated boot and its kept nodes, on a real local runtime (its API,
// node network and SSM stand-in) with the real agent: a new node is `pending` for the
// boot and its agent starts only after it; a node kept for the next attempt is the same
// running agent, moved to the attempt at once (tags, secret, reusedFrom), and only the
// ranks it does not cover are launched. Assertions are on states and the order things
// happen in, never on how long they took.

import { existsSync, lstatSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { GetParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { describe, expect, it } from 'vitest';
import { agentSecretName, agentSecretValue } from '../../../lib/agent/secret-parameter.ts';
import { TagKey } from '../../../lib/agent/tags.ts';
import type { InstanceRef } from '../../../lib/model.ts';
import type { LaunchRequest, LaunchResult } from '../../../lib/ports.ts';
import { parseTaskFile } from '../../../lib/task-file/parse.ts';
import { nodeDir } from '../../../local/paths.ts';
import { LOCAL_SECRET_PATH, type LocalInstance } from '../../../local/process-compute.ts';
import { alive, finish, useLocalRuntimes, waitFor, yaml, type TestRuntime } from '../../support/local-harness.ts';

/** Two booting nodes, each agent started twice over a job's life, and two released: on a busy 2-CPU machine. */
const SLOW = { timeout: 90_000 };

const open = useLocalRuntimes();

/** The instance as the compute holds it; fails the test when it holds none. */
function held(t: TestRuntime, instanceId: string): LocalInstance {
  const instance = t.runtime.deps.compute.instance(instanceId);
  if (instance === undefined) throw new Error(`the compute holds no instance ${instanceId}`);
  return instance;
}

/** Whether the node's launcher has started its agent (the agent's log is opened as it starts). */
function agentStarted(instance: LocalInstance): boolean {
  return existsSync(path.join(instance.rootDir, 'agent.log'));
}

function waitUntilRunning(t: TestRuntime, instanceId: string): Promise<true> {
  return waitFor(`${instanceId} to run`, () => (t.runtime.deps.compute.instance(instanceId)?.state === 'running' ? true : undefined));
}

/** What the node's agent reads from SSM: its parameter, asked with its own instance role, through its own network. */
async function secretOf(t: TestRuntime, instance: LocalInstance): Promise<string | undefined> {
  const client = new SSMClient({
    region: 'local',
    endpoint: `${t.runtime.url}/_node/${instance.instanceId}/${instance.routeToken}/ssm`,
    credentials: instance.credentials,
  });
  try {
    const answer = await client.send(new GetParameterCommand({ Name: agentSecretName(LOCAL_SECRET_PATH, instance.instanceId), WithDecryption: true }));
    return answer.Parameter?.Value;
  } finally {
    client.destroy();
  }
}

describe('the emulated boot of a new node', () => {
  it('keeps the node pending, its agent not started, until the boot is over; the job then runs as usual', SLOW, async () => {
    const t = await open();
    const { compute } = t.runtime.deps;
    // Looked at as the launch returns, before any timer can fire.
    const atLaunch: { state: string; agentStarted: boolean }[] = [];
    const launch = compute.launch.bind(compute);
    compute.launch = async (request) => {
      const result = await launch(request);
      for (const node of result.instances) atLaunch.push({ state: held(t, node.instanceId).state, agentStarted: agentStarted(held(t, node.instanceId)) });
      return result;
    };
    const { jobId } = await t.runtime.submit(yaml`
      run: echo booted
    `, { chaos: { faults: [], bootMs: 2_000 } });
    const done = await finish(t, jobId);

    expect(done.job.status).toBe('SUCCEEDED');
    expect(atLaunch).toEqual([{ state: 'pending', agentStarted: false }]);
    const [attempt] = done.attempts;
    const [node] = attempt?.instances ?? [];
    // The instance runs from the boot's end, the launch's request 2 s before at least.
    expect(Date.parse(node?.runningAt ?? '')).toBeGreaterThanOrEqual(Date.parse(attempt?.startedAt ?? '') + 2_000);
    // EC2's `running` came once the boot was over, before anything the agent did.
    const states = compute.emitted.filter((e) => e.event.instanceId === node?.instanceId).map((e) => e.event.state ?? e.event.kind);
    expect(states[0]).toBe('running');
  });

  it('a node released while it boots ends without its agent ever starting, and is never running', SLOW, async () => {
    const t = await open({ chaos: { faults: [], bootMs: 600_000 } });
    const { compute } = t.runtime.deps;
    const { spec } = parseTaskFile('run: echo never\n');
    const request = { jobId: 'j-compute-boot', attempt: 1, spec, market: 'on-demand', history: [], callbackSecret: 'secret' } as const;
    const launched = await compute.launch(request);
    const [node] = launched.instances;
    const instance = held(t, node?.instanceId ?? '');
    expect(instance.state).toBe('pending');
    expect(alive(instance.pgid)).toBe(true);
    await compute.release('j-compute-boot', 1, launched.instances);
    expect(compute.instance(instance.instanceId)).toBeUndefined();
    expect(agentStarted(instance)).toBe(false);
    expect(compute.emitted.filter((e) => e.event.instanceId === instance.instanceId).map((e) => e.event.state)).toEqual(['shutting-down', 'terminated']);
  });

  it('without a boot, starts the agent as the launch returns', SLOW, async () => {
    const t = await open();
    const { compute } = t.runtime.deps;
    const atLaunch: string[] = [];
    const launch = compute.launch.bind(compute);
    compute.launch = async (request) => {
      const result = await launch(request);
      for (const node of result.instances) atLaunch.push(held(t, node.instanceId).state);
      return result;
    };
    const done = await finish(t, (await t.runtime.submit('run: echo at once\n')).jobId);
    expect(done.job.status).toBe('SUCCEEDED');
    expect(atLaunch).toEqual(['running']);
  });
});

describe('a launch that keeps nodes of the attempt before', () => {
  /** A job the store does not know: the controller leaves its nodes alone, and only the test moves them. */
  const jobId = 'j-compute-keep';
  const { spec } = parseTaskFile('num_nodes: 3\nsetup: sleep 600\nrun: sleep 600\n');
  const request = (attempt: number, keep?: LaunchRequest['keep']): LaunchRequest => ({
    jobId,
    attempt,
    spec,
    market: 'on-demand',
    history: [],
    callbackSecret: `secret-of-attempt-${attempt}`,
    secrets: { TOKEN: `token-${attempt}` },
    ...(keep === undefined ? {} : { keep }),
  });
  const rank = (result: LaunchResult, nodeRank: number): InstanceRef => {
    const node = result.instances.find((instance) => instance.nodeRank === nodeRank);
    if (node === undefined) throw new Error(`no node ${nodeRank} in ${JSON.stringify(result.instances)}`);
    return node;
  };

  it('runs the kept nodes on at once as the new attempt, launches only the missing ranks (booting), and releases neither with the old attempt', SLOW, async () => {
    const t = await open({ chaos: { faults: [], bootMs: 2_000 } });
    const { compute } = t.runtime.deps;
    const first = await compute.launch(request(1));
    for (const node of first.instances) await waitUntilRunning(t, node.instanceId);
    const [kept0, lost1, kept2] = [rank(first, 0), rank(first, 1), rank(first, 2)];
    const pgid = held(t, kept0.instanceId).pgid;

    // Attempt 1 ends: node 1 went; nodes 0 and 2 are held and kept, node 2 then goes too.
    const keep = { placement: first.placement, nodes: [kept0, lost1, kept2] };
    await compute.hold(jobId, 1, keep);
    expect(held(t, kept0.instanceId).tags.get(TagKey.heldAfter)).toBe('1');
    await compute.release(jobId, 1, first.instances, { except: [kept0.instanceId, kept2.instanceId] });
    expect(compute.instance(lost1.instanceId)).toBeUndefined();
    await compute.release(jobId, 1, [kept2], { except: [kept0.instanceId] });
    expect(compute.instance(kept2.instanceId)).toBeUndefined();
    expect(held(t, kept0.instanceId).state).toBe('running');

    const second = await compute.launch(request(2, keep));
    const reused = held(t, kept0.instanceId);
    const atLaunch = second.instances.map((node) => ({ id: node.instanceId, state: held(t, node.instanceId).state, agentStarted: agentStarted(held(t, node.instanceId)) }));
    expect(second.instances.map((node) => [node.nodeRank, node.instanceId, node.reusedFrom])).toEqual([
      [0, kept0.instanceId, 1],
      [1, 'local-j-compute-keep-2-1', undefined],
      [2, 'local-j-compute-keep-2-2', undefined],
    ]);
    // The kept node is the same agent, running, now attempt 2's; the others boot.
    expect(atLaunch).toEqual([
      { id: kept0.instanceId, state: 'running', agentStarted: true },
      { id: 'local-j-compute-keep-2-1', state: 'pending', agentStarted: false },
      { id: 'local-j-compute-keep-2-2', state: 'pending', agentStarted: false },
    ]);
    expect(rank(second, 0).processGroupId).toBe(pgid);
    expect(alive(pgid)).toBe(true);
    expect(Date.parse(rank(second, 1).runningAt ?? '')).toBeGreaterThanOrEqual(Date.parse(rank(second, 0).runningAt ?? '') + 2_000);
    expect(second.placement).toEqual(first.placement);
    expect(reused.attempt).toBe(2);
    expect(reused.servedBefore).toBe(1);
    expect(Object.fromEntries(reused.tags)).toMatchObject({ [TagKey.attempt]: '2', [TagKey.nodeRank]: '0', [`${'relaunch:node-ips:'}0`]: '127.0.0.1 127.0.0.1 127.0.0.1' });
    // The mark stays, naming attempt 1: its agent may not have seen it yet.
    expect(reused.tags.get(TagKey.heldAfter)).toBe('1');
    expect(await secretOf(t, reused)).toBe(agentSecretValue('secret-of-attempt-2', { TOKEN: 'token-2' }));
    // Attempt 2's folder of the kept rank is a link to the node's own folder; a new rank's is its own.
    const { dataDir } = t.runtime;
    expect(lstatSync(nodeDir(dataDir, jobId, 2, 0)).isSymbolicLink()).toBe(true);
    expect(realpathSync(nodeDir(dataDir, jobId, 2, 0))).toBe(realpathSync(reused.rootDir));
    expect(lstatSync(nodeDir(dataDir, jobId, 2, 1)).isSymbolicLink()).toBe(false);

    // Attempt 1's hold and release, again (a retry, a sweep): the node is attempt 2's now.
    reused.tags.delete(TagKey.heldAfter);
    await compute.hold(jobId, 1, keep);
    expect(reused.tags.has(TagKey.heldAfter)).toBe(false);
    await compute.release(jobId, 1, first.instances);
    expect(held(t, kept0.instanceId).state).toBe('running');
    for (const id of ['local-j-compute-keep-2-1', 'local-j-compute-keep-2-2']) await waitUntilRunning(t, id);
    await waitFor('the new nodes to start their agents', () => (agentStarted(held(t, 'local-j-compute-keep-2-1')) && agentStarted(held(t, 'local-j-compute-keep-2-2')) ? true : undefined));

    await compute.release(jobId, 2, second.instances);
    for (const node of second.instances) expect(compute.instance(node.instanceId)).toBeUndefined();
    expect(compute.secretParameters.size).toBe(0);
  });

  it('with no capacity for the missing ranks, leaves the kept nodes as they were, for the caller to release', SLOW, async () => {
    const t = await open({ chaos: { faults: [{ kind: 'no_capacity', attempt: 2, tries: 3 }] } });
    const { compute } = t.runtime.deps;
    const first = await compute.launch(request(1));
    const keep = { placement: first.placement, nodes: [rank(first, 0), rank(first, 2)] };
    await compute.hold(jobId, 1, keep);
    await compute.release(jobId, 1, first.instances, { except: keep.nodes.map((node) => node.instanceId) });
    await expect(compute.launch(request(2, keep))).rejects.toThrow(/no capacity/);
    const still = held(t, rank(first, 0).instanceId);
    expect([still.state, still.attempt, still.tags.get(TagKey.heldAfter)]).toEqual(['running', 1, '1']);
    expect(await secretOf(t, still)).toBe(agentSecretValue('secret-of-attempt-1', { TOKEN: 'token-1' }));
    await compute.release(jobId, 1, keep.nodes);
    for (const node of first.instances) expect(compute.instance(node.instanceId)).toBeUndefined();
  });

  it('keeps every node: nothing launched, no capacity asked for', SLOW, async () => {
    const t = await open({ chaos: { faults: [{ kind: 'no_capacity', attempt: 2, tries: 3 }] } });
    const { compute } = t.runtime.deps;
    const first = await compute.launch(request(1));
    const keep = { placement: first.placement, nodes: first.instances };
    await compute.hold(jobId, 1, keep);
    await compute.release(jobId, 1, first.instances, { except: first.instances.map((node) => node.instanceId) });
    const second = await compute.launch(request(2, keep));
    expect(second.instances.map((node) => [node.instanceId, node.reusedFrom])).toEqual(first.instances.map((node) => [node.instanceId, 1]));
    // The launch tried again (its record's write failed, say): the same nodes, nothing started twice.
    const again = await compute.launch({ ...request(2, keep), callbackSecret: 'secret-of-attempt-2-again' });
    expect(again.instances).toEqual(second.instances.map((node) => ({ ...node, runningAt: expect.any(String) })));
    expect(await secretOf(t, held(t, rank(first, 1).instanceId))).toBe(agentSecretValue('secret-of-attempt-2-again', { TOKEN: 'token-2' }));
    expect(held(t, rank(first, 1).instanceId).servedBefore).toBe(1);
    for (const node of first.instances) expect(realpathSync(nodeDir(t.runtime.dataDir, jobId, 2, node.nodeRank))).toBe(realpathSync(held(t, node.instanceId).rootDir));
    await compute.release(jobId, 2, second.instances);
    expect(compute.secretParameters.size).toBe(0);
  });
});
