// A local node's instance metadata holds a look at spot/instance-action that finds no
// notice (node-network.ts): it answers 404 once NOTICE_HOLD_MS has passed, the notice as
// soon as one is written, and nothing at all once the instance stops running.

import type { ChildProcess } from 'node:child_process';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ApiResponse } from '../../../lib/http/index.ts';
import { answerNodeRequest, NOTICE_HOLD_MS, type NodeDirectory } from '../../../local/node-network.ts';
import { wakeHeldNoticeLooks, type LocalInstance } from '../../../local/process-compute.ts';
import { LocalSecretParameters, newNodeCredentials } from '../../../local/secret-parameters.ts';

const NOTICE = JSON.stringify({ action: 'terminate', time: '2026-12-06T00:02:00.000Z' });

function localInstance(): LocalInstance {
  return {
    instanceId: 'local-job-1-0',
    jobId: 'job',
    attempt: 1,
    servedBefore: null,
    rank: 0,
    rootDir: '/nonexistent',
    tags: new Map(),
    imdsTokens: new Set(['imds-token']),
    routeToken: 'route-token',
    arn: 'arn:aws:ec2:local:000000000000:instance/local-job-1-0',
    credentials: newNodeCredentials(),
    container: false,
    state: 'running',
    networkCut: false,
    interruptionNotice: null,
    heldNoticeLooks: new Set(),
    child: {} as ChildProcess,
    pgid: 0,
    timers: new Set(),
    terminated: Promise.resolve(),
    markTerminated: () => undefined,
  };
}

function lookAtNotice(instance: LocalInstance): Promise<ApiResponse | null> {
  const nodes: NodeDirectory = { instance: () => instance, runStarted: () => undefined, secretParameters: new LocalSecretParameters() };
  const request = {
    method: 'GET',
    path: `/_node/${instance.instanceId}/${instance.routeToken}/imds/latest/meta-data/spot/instance-action`,
    headers: { 'x-aws-ec2-metadata-token': 'imds-token' },
  };
  return answerNodeRequest(nodes, request, () => Promise.reject(new Error('no API route is asked')));
}

/** The look's answer so far: its status, 'no answer', or 'held'. */
async function settled(look: Promise<ApiResponse | null>): Promise<number | 'no answer' | 'held'> {
  const held = Symbol('held');
  const answer = await Promise.race([look, new Promise<typeof held>((resolve) => setImmediate(() => resolve(held)))]);
  if (answer === held) return 'held';
  return answer === null ? 'no answer' : answer.statusCode;
}

describe("a local node's look at spot/instance-action", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('is held for NOTICE_HOLD_MS while there is no notice, then answered 404', async () => {
    const instance = localInstance();
    const look = lookAtNotice(instance);
    await vi.advanceTimersByTimeAsync(NOTICE_HOLD_MS - 1);
    expect(await settled(look)).toBe('held');
    await vi.advanceTimersByTimeAsync(1);
    expect(await settled(look)).toBe(404);
    expect(instance.heldNoticeLooks.size).toBe(0);
  });

  it('is answered with the notice the moment one is written', async () => {
    const instance = localInstance();
    const look = lookAtNotice(instance);
    await vi.advanceTimersByTimeAsync(100);
    instance.interruptionNotice = NOTICE;
    wakeHeldNoticeLooks(instance);
    expect(await look).toMatchObject({ statusCode: 200, body: NOTICE });
    expect(instance.heldNoticeLooks.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('is answered at once when a notice is there already', async () => {
    const instance = localInstance();
    instance.interruptionNotice = NOTICE;
    expect(await settled(lookAtNotice(instance))).toBe(200);
  });

  it('gets no answer when the instance stops running while it is held', async () => {
    const instance = localInstance();
    const looks = [lookAtNotice(instance), lookAtNotice(instance)];
    await vi.advanceTimersByTimeAsync(100);
    expect(instance.heldNoticeLooks.size).toBe(2);
    instance.state = 'shutting-down';
    wakeHeldNoticeLooks(instance);
    expect(await Promise.all(looks.map(settled))).toEqual(['no answer', 'no answer']);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("a kept node's routes once it serves the next attempt", () => {
  /** The node's API request: the API's answer, or 'no answer'; every path the API was asked is in `asked`. */
  async function ask(instance: LocalInstance, path: string, asked: string[]): Promise<number | 'no answer'> {
    const nodes: NodeDirectory = { instance: () => instance, runStarted: () => undefined, secretParameters: new LocalSecretParameters() };
    const request = { method: 'POST', path: `/_node/${instance.instanceId}/${instance.routeToken}${path}`, headers: {}, body: '{"nodeRank":0}' };
    const answer = await answerNodeRequest(nodes, request, async (forwarded) => {
      asked.push(forwarded.path);
      return { statusCode: 200, headers: {}, body: '{}' };
    });
    return answer === null ? 'no answer' : answer.statusCode;
  }

  it('reaches the routes of the attempt it served before (the API answers them), and of no other attempt or job', async () => {
    const instance = { ...localInstance(), attempt: 3, servedBefore: 2 };
    const asked: string[] = [];
    expect(await ask(instance, '/jobs/job/attempts/2/next', asked)).toBe(200);
    expect(await ask(instance, '/jobs/job/attempts/2/report', asked)).toBe(200);
    expect(await ask(instance, '/jobs/job/attempts/3/heartbeat', asked)).toBe(200);
    expect(await ask(instance, '/jobs/job/attempts/1/report', asked)).toBe(403);
    expect(await ask(instance, '/jobs/job/attempts/1/next', asked)).toBe(403);
    expect(await ask(instance, '/jobs/other/attempts/2/next', asked)).toBe(403);
    expect(await ask(instance, '/jobs/other/attempts/2/report', asked)).toBe(403);
    expect(asked).toEqual(['/jobs/job/attempts/2/next', '/jobs/job/attempts/2/report', '/jobs/job/attempts/3/heartbeat']);
  });

  it('a node launched for its attempt reaches no earlier attempt at all', async () => {
    const instance = { ...localInstance(), attempt: 2 };
    const asked: string[] = [];
    expect(await ask(instance, '/jobs/job/attempts/1/next', asked)).toBe(403);
    expect(asked).toEqual([]);
  });
});
