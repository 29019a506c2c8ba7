// The local API as a web page or a stray process would meet it: hostile headers, bodies
// and paths against a real runtime's server, and the per-node network paths (IMDS and
// the agent routes) probed from outside a node.

import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { useLocalRuntimes, waitUntilAwaiting, yaml, type TestRuntime } from '../../support/local-harness.ts';

const open = useLocalRuntimes();

interface Answer {
  readonly status: number | null;
  readonly body: string;
}

/** One raw request, every header as given (fetch would not let a test set Host); null status: no answer. */
function request(t: TestRuntime, method: string, path: string, headers: Record<string, string>, body?: Buffer | string): Promise<Answer> {
  const { port } = new URL(t.runtime.url);
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, setHost: false }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? null, body: text }));
    });
    req.on('error', () => resolve({ status: null, body: '' }));
    req.end(body);
  });
}

function host(t: TestRuntime): string {
  return new URL(t.runtime.url).host;
}

describe('the local API, from a hostile page or process', () => {
  it.each([
    ['text/plain (a form or a simple fetch)', { 'content-type': 'text/plain' }, 415],
    ['no content type', {}, 415],
    ['a foreign Origin', { 'content-type': 'application/yaml', origin: 'http://evil.example' }, 403],
    ['a rebinding Host', { 'content-type': 'application/yaml', host: 'evil.example:80' }, 403],
    ['a cross-site fetch', { 'content-type': 'application/json', 'sec-fetch-site': 'cross-site' }, 403],
  ])('refuses a submit with %s, and stores no job', async (_name, headers, status) => {
    const t = await open();
    const answer = await request(t, 'POST', '/jobs', { host: host(t), ...headers }, 'run: touch /tmp/pwned\n');
    expect(answer.status).toBe(status);
    expect(await t.runtime.deps.store.listJobs()).toEqual([]);
  });

  it.each([
    ['a local path no run uploaded (a file of the machine, read by the job)', 'file_mounts:\n  /x: /etc/passwd\nrun: x\n', 'file_mounts["/x"]', "uploaded into relaunch's store first"],
    ['a workdir no run uploaded', 'workdir: /home\nrun: x\n', 'workdir', "uploaded into relaunch's store first"],
    ['an upload the store does not have', `file_mounts:\n  /x: upload:dir:sha256:${'0'.repeat(64)}\nrun: x\n`, 'file_mounts["/x"]', 'is not there'],
    ['a bucket name climbing out of the data folder', 'file_mounts:\n  /x: {name: ../../../etc, mode: MOUNT}\nrun: x\n', 'file_mounts["/x"].name', 'expected an S3 bucket name'],
  ])('answers 400 for %s, and stores no job', async (_name, task, path, message) => {
    const t = await open();
    const answer = await request(t, 'POST', '/jobs', { host: host(t), 'content-type': 'application/yaml' }, task);
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body).issues).toContainEqual({ path, message: expect.stringContaining(message) });
    expect(await t.runtime.deps.store.listJobs()).toEqual([]);
  });

  it('answers 400 naming the byte offset of invalid UTF-8, and a job id that cannot exist with a clear error', async () => {
    const t = await open();
    const bytes = Buffer.concat([Buffer.from('run: echo '), Buffer.from([0xff, 0xfe]), Buffer.from('\n')]);
    const bad = await request(t, 'POST', '/jobs', { host: host(t), 'content-type': 'application/yaml' }, bytes);
    expect(bad.status).toBe(400);
    expect(bad.body).toContain('byte 10');

    const long = await request(t, 'GET', `/jobs/${'j'.repeat(2048)}`, { host: host(t) });
    expect([400, 404]).toContain(long.status);
    expect(JSON.parse(long.body)).toHaveProperty('error');
  });

  it('gives a node only its own IMDS and the agent routes, and a path of no live node no answer at all', async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(yaml`
      run: sleep 30
    `);
    await waitUntilAwaiting(t, jobId, 1);
    // The node's path, with the credential only its agent is given (test/unit/local/node-routes.test.ts).
    const routeToken = t.runtime.deps.compute.instance(`local-${jobId}-1-0`)?.routeToken;
    const node = `/_node/local-${jobId}-1-0/${routeToken}`;
    const headers = { host: host(t) };

    // IMDSv2: a token first, with a TTL; then the metadata with it.
    expect((await request(t, 'GET', `${node}/imds/latest/meta-data/ami-launch-index`, headers)).status).toBe(401);
    expect((await request(t, 'PUT', `${node}/imds/latest/api/token`, headers)).status).toBe(400);
    const token = await request(t, 'PUT', `${node}/imds/latest/api/token`, { ...headers, 'x-aws-ec2-metadata-token-ttl-seconds': '60' });
    expect(token.status).toBe(200);
    const withToken = { ...headers, 'x-aws-ec2-metadata-token': token.body };
    expect(await request(t, 'GET', `${node}/imds/latest/meta-data/ami-launch-index`, withToken)).toEqual({ status: 200, body: '0' });
    expect(await request(t, 'GET', `${node}/imds/latest/meta-data/tags/instance/relaunch:node-ips:0`, withToken)).toEqual({
      status: 200,
      body: '127.0.0.1',
    });
    expect((await request(t, 'GET', `${node}/imds/latest/meta-data/nothing-here`, withToken)).status).toBe(404);

    // The node's path reaches the agent routes only: no submit, list or cancel through it.
    expect((await request(t, 'POST', `${node}/jobs`, { ...headers, 'content-type': 'application/yaml' }, 'run: id\n')).status).toBe(403);
    expect((await request(t, 'DELETE', `${node}/jobs/${jobId}`, headers)).status).toBe(403);
    // An agent route without the attempt's secret is refused like any other caller.
    const beat = await request(t, 'POST', `${node}/jobs/${jobId}/attempts/1/heartbeat`, { ...headers, 'content-type': 'application/json' }, '{"nodeRank":0}');
    expect(beat.status).toBe(401);

    // No such node, a node of an attempt that never ran, a broken escape: no answer.
    for (const path of [`/_node/local-j-nope-1-0/${routeToken}/jobs`, `/_node/local-${jobId}-2-0/${routeToken}/imds/latest/api/token`, `/_node/%E0%A4%A/${routeToken}/jobs`]) {
      expect((await request(t, 'PUT', path, headers)).status).toBeNull();
    }
    expect((await t.runtime.deps.store.getJob(jobId)).status).toBe('RUNNING');
  });
});
