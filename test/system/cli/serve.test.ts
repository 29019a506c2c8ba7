// `relaunch serve` end to end: the REST API on 127.0.0.1 over the local runtime, driven
// over real HTTP with curl (fetch where curl is missing), and how the server stops.

import { execFile, spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isTerminal } from '../../../lib/status.ts';
import { lockFileIdentity } from '../../../local/owner-lock.ts';
import { startIdentityOf } from '../../../local/server-info.ts';
import type { JobStatus } from '../../../lib/status.ts';
import {
  EXAMPLES,
  SLOW,
  killStrayClis,
  processGroupOf,
  removeTempDirs,
  runCli,
  serverInfo,
  startCli,
  tempDir,
  waitFor,
  waitForGroupGone,
  waitForOutput,
  waitForPid,
  writeTask,
  type Cli,
} from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

const HAVE_CURL = spawnSync('curl', ['--version']).status === 0;
const execFileAsync = promisify(execFile);

type Json = Record<string, unknown>;

/** One HTTP call: the status code and the parsed JSON body. */
async function call(method: string, url: string, body?: { file: string; type: string }): Promise<{ status: number; body: Json }> {
  if (HAVE_CURL) {
    const data = body === undefined ? [] : ['--data-binary', `@${body.file}`, '-H', `content-type: ${body.type}`];
    const { stdout } = await execFileAsync('curl', ['-sS', '-X', method, ...data, '-w', '\n%{http_code}', url]);
    const cut = stdout.lastIndexOf('\n');
    return { status: Number(stdout.slice(cut + 1)), body: JSON.parse(stdout.slice(0, cut)) as Json };
  }
  const response = await fetch(url, {
    method,
    headers: body === undefined ? {} : { 'content-type': body.type },
    body: body === undefined ? undefined : await readFile(body.file),
  });
  return { status: response.status, body: (await response.json()) as Json };
}

const YAML = 'application/yaml';

/** A job that records its pid and runs until it is killed. */
function longJob(pidfile: string): string {
  return ['name: long', 'envs:', `  PIDFILE: ${pidfile}`, 'run: |', '  echo $$ > "$PIDFILE"', '  sleep 60 &', '  wait', ''].join('\n');
}

describe('relaunch serve --port 0, driven with curl', { timeout: SLOW }, () => {
  let dir: string;
  let data: string;
  let server: Cli;
  let url: string;
  let succeededJob: string;

  const getUntilTerminal = (jobId: string): Promise<Json> =>
    waitFor(`job ${jobId} to end`, async () => {
      const { status, body } = await call('GET', `${url}/jobs/${jobId}`);
      expect(status).toBe(200);
      return isTerminal(body.status as JobStatus) ? body : undefined;
    });

  beforeAll(async () => {
    dir = await tempDir('serve');
    data = join(dir, 'data');
    server = startCli(['serve', '--port', '0', '--data-dir', data], { cwd: dir });
    const [, printed] = await waitForOutput(server, /^relaunch API on (http:\/\/127\.0\.0\.1:[1-9][0-9]*) /m);
    url = printed as string;
  }, SLOW);

  it('prints its URL first and records it, with its pid, in server.json', () => {
    expect(server.stdout().split('\n')[0]).toMatch(/^relaunch API on http:\/\/127\.0\.0\.1:\d+ /);
    // With the file it locked (device and inode): a lock file replaced under it is seen as such.
    expect(serverInfo(data)).toEqual({ url, pid: server.child.pid, startedAt: startIdentityOf(server.child.pid as number), command: 'serve', takesJobs: true, lock: lockFileIdentity(data) });
  });

  it('POST /jobs with a YAML body answers 202 {jobId}; GET /jobs/{id} shows it to the end, as run --json would', async () => {
    const submitted = await call('POST', `${url}/jobs`, { file: join(EXAMPLES, 'max-restarts.yaml'), type: YAML });
    expect(submitted.status).toBe(202);
    expect(submitted.body).toEqual({ jobId: expect.stringMatching(/^j-/), warnings: [] });
    succeededJob = submitted.body.jobId as string;

    const job = await getUntilTerminal(succeededJob);
    expect(Object.keys(job).sort()).toEqual([
      'account',
      'attempts',
      'createdAt',
      'failureReason',
      'jobId',
      'name',
      'numNodes',
      'recoveryCount',
      'recoveryPolicy',
      'restartsOnErrors',
      'status',
      'updatedAt',
    ]);
    expect(job).toMatchObject({
      jobId: succeededJob,
      name: 'max-restarts',
      status: 'SUCCEEDED',
      recoveryCount: 2,
      restartsOnErrors: 2,
      failureReason: null,
      attempts: [
        { attempt: 1, outcome: 'EXITED', phase: 'run', exitCodes: [1], decision: 'RESTART' },
        { attempt: 2, outcome: 'EXITED', phase: 'run', exitCodes: [1], decision: 'RESTART' },
        { attempt: 3, outcome: 'EXITED', phase: 'run', exitCodes: [0], decision: 'SUCCEED', reason: 'exit code 0 (run); job succeeded' },
      ],
    });
  });

  it('GET /jobs answers {jobs: [...]}', async () => {
    const { status, body } = await call('GET', `${url}/jobs`);
    expect(status).toBe(200);
    expect(body.jobs).toEqual(expect.arrayContaining([expect.objectContaining({ jobId: succeededJob, name: 'max-restarts', status: 'SUCCEEDED' })]));
  });

  it('DELETE /jobs/{id} cancels a running job: CANCELLED, its process group gone; a second DELETE changes nothing', async () => {
    const pidfile = join(dir, 'deleted.pid');
    const task = await writeTask(dir, 'long.yaml', longJob(pidfile));
    const { body } = await call('POST', `${url}/jobs`, { file: task, type: YAML });
    const jobId = body.jobId as string;
    const group = processGroupOf(await waitForPid(pidfile));

    const deleted = await call('DELETE', `${url}/jobs/${jobId}`);
    expect(deleted).toEqual({ status: 202, body: { jobId, status: 'CANCELLING', alreadyFinished: false } });
    const job = await getUntilTerminal(jobId);
    expect(job).toMatchObject({ status: 'CANCELLED', attempts: [{ attempt: 1, outcome: 'CANCELLED' }] });
    await waitForGroupGone(group);

    const again = await call('DELETE', `${url}/jobs/${jobId}`);
    expect(again).toEqual({ status: 200, body: { jobId, status: 'CANCELLED', alreadyFinished: true } });
  });

  it.each([
    {
      what: 'a YAML task with a bad value',
      file: 'bad.yaml',
      text: 'name: bad\nresources:\n  job_recovery:\n    max_restarts_on_errors: -1\nrun: echo hi\n',
      type: YAML,
      issue: { path: 'resources.job_recovery.max_restarts_on_errors', message: 'expected an integer >= 0, got -1', line: 4 },
    },
    {
      what: 'a JSON task with an unknown key',
      file: 'bad.json',
      text: '{"run": "echo hi", "resources": {"use_spot": true, "instance_typ": "m5.large"}}',
      type: 'application/json',
      issue: { path: 'resources.instance_typ', message: expect.stringContaining('unknown key') },
    },
  ])('$what answers 400 {error, issues: [{path, message}]} naming the field', async ({ file, text, type, issue }) => {
    const path = await writeTask(dir, file, text);
    const { status, body } = await call('POST', `${url}/jobs`, { file: path, type });
    expect(status).toBe(400);
    expect(body).toEqual({ error: 'the task is not valid (1 issue)', issues: [issue] });
  });

  it.each(['GET', 'DELETE'])('%s of an unknown job answers 404', async (method) => {
    expect(await call(method, `${url}/jobs/j-no-such-job`)).toEqual({ status: 404, body: { error: 'no job with id j-no-such-job' } });
  });

  // Last: it stops the server the tests above share.
  it('SIGINT with a job running: the job is cancelled, and the server exits 0 at once, removing server.json', async () => {
    const pidfile = join(dir, 'left-running.pid');
    const task = await writeTask(dir, 'left-running.yaml', longJob(pidfile));
    expect((await call('POST', `${url}/jobs`, { file: task, type: YAML })).status).toBe(202);
    const group = processGroupOf(await waitForPid(pidfile));

    const signalled = Date.now();
    server.child.kill('SIGINT');
    const { code, stderr } = await server.finished;
    // Cancelling a job and closing the database take well under a second; nothing may
    // hold the process up after that (a forgotten 5 s timer did).
    expect(Date.now() - signalled).toBeLessThan(4_500);
    expect(code, stderr).toBe(0);
    expect(stderr).toBe('');
    expect(serverInfo(data)).toBeUndefined();
    await waitForGroupGone(group);
  });
});

describe('relaunch serve, bad ports', { timeout: SLOW }, () => {
  // Short timeout: the regression this guards against is a hang.
  it('a port in use: exits 2 naming the port and --port, records no server, does not hang', async () => {
    const dir = await tempDir('serve-busy');
    const data = join(dir, 'data');
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const { port } = blocker.address() as AddressInfo;
    try {
      const result = await runCli(['serve', '--port', String(port), '--data-dir', data], { cwd: dir });
      expect(result.code).toBe(2);
      expect(result.stdout).toBe('');
      expect(result.stderr).toBe(`error: --port: expected a free port, but 127.0.0.1:${port} is in use by another program: give another with --port N (--port 0 takes any free one)\n`);
      expect(serverInfo(data)).toBeUndefined();

      const dashboard = await runCli(['dashboard', '--api', 'http://127.0.0.1:9', '--port', String(port)], { cwd: dir });
      expect(dashboard.code).toBe(2);
      expect(dashboard.stderr).toContain(`--port: expected a free port, but 127.0.0.1:${port} is in use`);
    } finally {
      blocker.close();
    }
  }, 30_000);

  it('--port outside 0-65535 is a usage error (2)', async () => {
    const dir = await tempDir('serve-port');
    const result = await runCli(['serve', '--port', '70000', '--data-dir', join(dir, 'data')], { cwd: dir });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--port: expected a port 0-65535, got "70000"');
  });
});
