// Each local node's stand-in routes (IMDS, SSM, the API's agent routes under
// `/_node/<instance>/...`) answer only that node, as EC2's instance metadata answers only
// its own instance: a process that is not the node's agent (here curl, run apart) gets no
// answer at all, whatever instance it names, and a node reaches only its own attempt.

import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { jobWorkDir } from '../../../local/paths.ts';
import { localInstanceId } from '../../../local/process-compute.ts';
import { finish, useLocalRuntimes, waitUntilAwaiting, yaml } from '../../support/local-harness.ts';

const open = useLocalRuntimes();
const execFileAsync = promisify(execFile);

/** One request with curl, a process of its own: the HTTP status, or `no answer` when the connection was dropped. */
async function curl(url: string, options: { method?: string; headers?: string[]; body?: string } = {}): Promise<string> {
  const args = ['-s', '-o', '/dev/null', '-w', '%{http_code}', '-X', options.method ?? 'GET', ...(options.headers ?? []).flatMap((h) => ['-H', h])];
  if (options.body !== undefined) args.push('--data-binary', options.body);
  try {
    const { stdout } = await execFileAsync('curl', [...args, url]);
    return stdout;
  } catch (error) {
    // 52: the server closed the connection without answering.
    if ((error as { code?: number }).code === 52) return 'no answer';
    throw error;
  }
}

const GATED = yaml`
  run: |
    while [ ! -f go ]; do sleep 0.1; done
`;

describe("a node's stand-in routes", () => {
  it("answer no one but the node: no instance's metadata, secret or agent routes without its credential, and the node's own agent runs its job to the end", async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(GATED);
    const { jobId: other } = await t.runtime.submit(GATED);
    await waitUntilAwaiting(t, jobId, 1);
    await waitUntilAwaiting(t, other, 1);
    const instanceId = localInstanceId(jobId, 1, 0);
    const base = `${t.runtime.url}/_node/${instanceId}`;
    const tokenRequest = { method: 'PUT', headers: ['x-aws-ec2-metadata-token-ttl-seconds: 60'] };

    // As the routes were before: the instance id alone.
    expect(await curl(`${base}/imds/latest/api/token`, tokenRequest)).toBe('no answer');
    expect(await curl(`${base}/imds/latest/meta-data/iam/security-credentials/relaunch-local-node`)).toBe('no answer');
    expect(await curl(`${base}/ssm/`, { method: 'POST', body: '{}' })).toBe('no answer');
    expect(await curl(`${base}/jobs/${jobId}/attempts/1/report`, { method: 'POST', body: '{}' })).toBe('no answer');
    // A credential that is not the node's, and one of another node.
    expect(await curl(`${base}/not-the-credential/imds/latest/api/token`, tokenRequest)).toBe('no answer');
    const otherInstance = t.runtime.deps.compute.instance(localInstanceId(other, 1, 0));
    expect(otherInstance).toBeDefined();
    expect(await curl(`${base}/${otherInstance?.routeToken}/imds/latest/api/token`, tokenRequest)).toBe('no answer');

    // The node's own credential: its metadata answers, and its routes reach only its own attempt.
    const own = `${base}/${t.runtime.deps.compute.instance(instanceId)?.routeToken}`;
    expect(await curl(`${own}/imds/latest/api/token`, tokenRequest)).toBe('200');
    const report = JSON.stringify({ nodeRank: 0, phase: 'run', exitCode: 0, outputTail: '' });
    expect(await curl(`${own}/jobs/${other}/attempts/1/report`, { method: 'POST', body: report })).toBe('403');
    expect(await curl(`${own}/jobs/${jobId}/attempts/2/report`, { method: 'POST', body: report })).toBe('403');

    for (const job of [jobId, other]) writeFileSync(path.join(jobWorkDir(t.dataDir, job), 'go'), '');
    for (const job of [jobId, other]) {
      expect((await finish(t, job)).view).toMatchObject({ status: 'SUCCEEDED', attempts: [{ outcome: 'EXITED', exitCodes: [0] }] });
    }
  });

  it("keep the node's credential and callback secret off every command line: the agent's curls read their URLs and headers on stdin", async () => {
    const t = await open({ heartbeatIntervalMs: 100 });
    // The job reads every process's command line (one argument a line) until it has seen a
    // heartbeat's curl (its -w argument) among them, then a few rounds more.
    const { jobId } = await t.runtime.submit(yaml`
      run: |
        while [ ! -f go ]; do sleep 0.05; done
        : > cmdlines
        until grep -qx '%{http_code[}]' cmdlines; do cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' >> cmdlines; sleep 0.01; done
        for i in 1 2 3 4 5; do cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' >> cmdlines; sleep 0.01; done
    `);
    await waitUntilAwaiting(t, jobId, 1);
    // The node's credential, while the node is there to hold it.
    const routeToken = t.runtime.deps.compute.instance(localInstanceId(jobId, 1, 0))?.routeToken as string;
    writeFileSync(path.join(jobWorkDir(t.dataDir, jobId), 'go'), '');

    const { view } = await finish(t, jobId);

    expect(view).toMatchObject({ status: 'SUCCEEDED', attempts: [{ outcome: 'EXITED', exitCodes: [0] }] });
    const seen = readFileSync(path.join(jobWorkDir(t.dataDir, jobId), 'cmdlines'), 'utf8');
    expect(seen.split('\n')).toContain('curl');
    const secret = t.launches[0]?.callbackSecret as string;
    expect(routeToken.length).toBeGreaterThan(20);
    expect(seen.includes(routeToken)).toBe(false);
    expect(seen.includes(secret)).toBe(false);
  });
});
