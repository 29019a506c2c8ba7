// `relaunch ssh` end to end. On AWS: a job's node found through the API (a stand-in on
// 127.0.0.1 answering GET /jobs/{id} as the deployed API does), then `aws ssm start-session`
// run as a child: a fake `aws` on PATH records its exact argv; with no `aws` at all, the
// command to run and what to install (exit 2). Locally: a real shell in the node's working
// folder with the job's environment, on a job a `relaunch serve` runs.

import { createServer, type Server } from 'node:http';
import { chmod, mkdir, readFile, realpath, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isTerminal } from '../../../lib/status.ts';
import type { AttemptView, JobView } from '../../../lib/views.ts';
import { jobWorkDir, nodeDiskDir } from '../../../local/paths.ts';
import { killStrayClis, parseStdout, removeTempDirs, runCli, SLOW, startCli, tempDir, waitFor, waitForOutput, writeTask, type Cli } from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

const JOB = 'j-0m8x2k1qz-4fz0aa';

function attempt(n: number, endedAt: string | null, instances: AttemptView['instances']): AttemptView {
  return {
    attempt: n, outcome: endedAt === null ? null : 'PREEMPTED', phase: 'run', exitCodes: [], decision: null, reason: null, rule: null, delaySeconds: null,
    countersAfter: null, outputTails: [], agentFailure: null, market: 'spot', placement: { region: 'eu-west-1', zone: 'eu-west-1b', instanceType: 'g5.xlarge' },
    startedAt: '2026-12-06T10:00:00.000Z', endedAt, decidedAt: null, runStartedAt: null, gapSeconds: null, standby: null, instances,
  };
}

/** Attempt 1 preempted (its instance gone), attempt 2 running on two nodes. */
const DEPLOYED_JOB = {
  jobId: JOB, name: 'train', status: 'RUNNING', recoveryCount: 1, restartsOnErrors: 0, failureReason: null, numNodes: 2,
  createdAt: '2026-12-06T10:00:00.000Z', updatedAt: '2026-12-06T10:05:00.000Z',
  attempts: [
    attempt(1, '2026-12-06T10:04:00.000Z', [{ nodeRank: 0, instanceId: 'i-0aaaaaaaaaaaaaaaa' }, { nodeRank: 1, instanceId: 'i-0bbbbbbbbbbbbbbbb' }]),
    attempt(2, null, [{ nodeRank: 0, instanceId: 'i-0cccccccccccccccc' }, { nodeRank: 1, instanceId: 'i-0dddddddddddddddd' }]),
  ],
};

describe('relaunch ssh on a deployed stack', { timeout: SLOW }, () => {
  let api: Server;
  let url = '';
  let dir = '';
  let withAws = '';
  let withoutAws = '';

  beforeAll(async () => {
    api = createServer((request, response) => {
      const known = request.method === 'GET' && request.url === `/v1/jobs/${JOB}`;
      response.writeHead(known ? 200 : 404, { 'content-type': 'application/json' });
      response.end(JSON.stringify(known ? DEPLOYED_JOB : { error: 'not found' }));
    });
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(api.address() as AddressInfo).port}/v1`;
    dir = await tempDir('ssh-aws');
    withAws = join(dir, 'bin');
    withoutAws = join(dir, 'empty');
    await mkdir(withAws);
    await mkdir(withoutAws);
    // The fake aws writes each argument on a line of its own, and exits 0 as a session that ended well.
    await writeFile(join(withAws, 'aws'), `#!/bin/sh\nprintf '%s\\n' "$@" > "${join(dir, 'argv')}"\n`);
    await writeFile(join(withAws, 'session-manager-plugin'), '#!/bin/sh\nexit 0\n');
    await chmod(join(withAws, 'aws'), 0o755);
    await chmod(join(withAws, 'session-manager-plugin'), 0o755);
  });

  afterAll(() => new Promise<void>((resolve) => api.close(() => resolve())));

  const ssh = (path: string, ...args: string[]) => runCli(['ssh', JOB, '--api', url, ...args], { cwd: dir, env: { PATH: path } });

  it('runs aws ssm start-session on the live attempt\'s node 0, in its region', async () => {
    const run = await ssh(withAws);
    expect(run.code, run.stderr).toBe(0);
    expect((await readFile(join(dir, 'argv'), 'utf8')).split('\n')).toEqual(['ssm', 'start-session', '--target', 'i-0cccccccccccccccc', '--region', 'eu-west-1', '']);
  });

  it('takes --node, and a command after -- as an interactive command document', async () => {
    const run = await ssh(withAws, '--node', '1', '--', 'nvidia-smi', '-L');
    expect(run.code, run.stderr).toBe(0);
    expect((await readFile(join(dir, 'argv'), 'utf8')).split('\n')).toEqual([
      'ssm', 'start-session', '--target', 'i-0dddddddddddddddd', '--region', 'eu-west-1',
      '--document-name', 'AWS-StartInteractiveCommand', '--parameters', '{"command":["nvidia-smi -L"]}', '',
    ]);
  });

  it('without the AWS CLI, prints the exact command and what to install, exit 2', async () => {
    const run = await ssh(withoutAws);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('the AWS CLI v2 (aws): https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html');
    expect(run.stderr).toContain('the Session Manager plugin (session-manager-plugin): https://docs.aws.amazon.com/systems-manager/latest/userguide/session-manager-working-with-install-plugin.html');
    expect(run.stderr).toContain('\n  aws ssm start-session --target i-0cccccccccccccccc --region eu-west-1\n');
  });

  it('says an ended attempt\'s nodes are gone, and which attempt runs now', async () => {
    const run = await ssh(withAws, '--attempt', '1');
    expect(run.code).toBe(2);
    expect(run.stderr.trim()).toBe(`error: --attempt: attempt 1 of job ${JOB} ended PREEMPTED: its nodes are gone; attempt 2 runs now (relaunch ssh ${JOB} --attempt 2)`);
  });

  it('refuses a node the attempt does not have, naming --node', async () => {
    const run = await ssh(withAws, '--node', '2');
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("error: --node: expected a node rank 0-1 of attempt 2's 2 placed, got 2");
  });
});

/** Runs until cancelled; its envs are what the shell must see. */
const WAITING = ['name: waits', 'envs:', '  GREETING: hello there', 'run: touch ready && exec sleep 600', ''].join('\n');
/** Exits 3 on attempt 1, which restarts it in place on the same node; attempt 2 waits. */
const RESTARTED_IN_PLACE = [
  'name: restarted-in-place',
  'resources:',
  '  job_recovery:',
  '    recover_on_exit_codes: [3]',
  '    reuse_nodes: {setup: skip}',
  'run: |',
  '  if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then exit 3; fi',
  '  touch ready && exec sleep 600',
  '',
].join('\n');
const WITH_WORKDIR = ['name: waits-in-workdir', 'workdir: ./project', 'run: touch ready && exec sleep 600', ''].join('\n');

describe('relaunch ssh on a local job', { timeout: SLOW }, () => {
  let dir = '';
  let data = '';
  let server: Cli;
  // --data-dir goes before any `--`, after which everything is the shell's command.
  const cli = (command: string, ...args: string[]) => runCli([command, '--data-dir', data, ...args], { cwd: dir, env: { SHELL: '/bin/bash' } });

  /** Submits `yaml` and waits until its run has started: it leaves `ready` in its working folder. */
  async function started(name: string, yaml: string, folder: (jobId: string) => string): Promise<string> {
    const run = await cli('run', await writeTask(dir, name, yaml), '--detach');
    expect(run.code, run.stderr).toBe(0);
    const jobId = run.stdout.trim().split('\n').at(-1) ?? '';
    await waitFor('the job\'s run to start', () => (existsSync(join(folder(jobId), 'ready')) ? true : undefined));
    return jobId;
  }

  beforeAll(async () => {
    dir = await tempDir('ssh-local');
    data = join(dir, 'data');
    await mkdir(join(dir, 'project'));
    await writeFile(join(dir, 'project', 'train.py'), 'print(1)\n');
    server = startCli(['serve', '--port', '0', '--data-dir', data], { cwd: dir });
    await waitForOutput(server, /^relaunch API on /m);
  }, SLOW);

  afterAll(async () => {
    server.child.kill('SIGINT');
    await server.finished;
  });

  it("runs a command in the node's working folder with the job's environment", async () => {
    const jobId = await started('waits.yaml', WAITING, (id) => jobWorkDir(data, id));
    const run = await cli('ssh', jobId, '--', 'pwd; echo "$GREETING|$RELAUNCH_JOB_ID|$RELAUNCH_NODE_RANK|$SKYPILOT_NUM_NODES"');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.split('\n')).toEqual([await realpath(jobWorkDir(data, jobId)), `hello there|${jobId}|0|1`, '']);
    const failed = await cli('ssh', jobId, '--', 'exit 3');
    expect(failed.code).toBe(1);

    expect((await cli('cancel', jobId)).code).toBe(0);
    await waitFor('the job to end', async () => {
      const status = await cli('status', jobId, '--json');
      return isTerminal(parseStdout<JobView>(status).status) ? true : undefined;
    });
    const ended = await cli('ssh', jobId);
    expect(ended.code).toBe(2);
    expect(ended.stderr.trim()).toBe(`error: <job>: job ${jobId} ended CANCELLED: its nodes are gone (relaunch logs ${jobId} shows what they wrote)`);
  });

  it("opens the node a restart in place kept with the attempt it serves now: its folder of attempt 2 links to attempt 1's", async () => {
    const jobId = await started('in-place.yaml', RESTARTED_IN_PLACE, (id) => jobWorkDir(data, id));
    const run = await cli('ssh', jobId, '--', 'echo "$RELAUNCH_ATTEMPT|$SKYPILOT_TASK_ID"');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe(`2|${jobId}-2\n`);
    expect((await cli('cancel', jobId)).code).toBe(0);
  });

  it("opens a task with a workdir in the node's copy of it, its home the node's own", async () => {
    const jobId = await started('workdir.yaml', WITH_WORKDIR, (id) => join(nodeDiskDir(data, id, 1, 0), 'home', 'sky_workdir'));
    const home = join(nodeDiskDir(data, jobId, 1, 0), 'home');
    const run = await cli('ssh', jobId, '--', 'pwd; ls; echo "$HOME"');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.split('\n')).toEqual([join(home, 'sky_workdir'), 'ready', 'train.py', home, '']);
    expect((await cli('cancel', jobId)).code).toBe(0);
  });
});
