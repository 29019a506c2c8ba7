// `relaunch logs` against an API that keeps no files on this machine, as a deployed stack's:
// the real binary, its output read through `GET /jobs/{id}/logs` a page at a time. The API
// is the real request handler over an in-memory store, served on 127.0.0.1, with a log
// reader the test writes into as a node's shipper would. And `--node` on a local runtime.

import { formatTime } from '../../../cli/times.ts';
import { join } from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { DashboardProxy } from '../../../cli/dashboard-proxy.ts';
import { HttpJobsClient } from '../../../cli/jobs-client.ts';
import type { ControllerLogReader } from '../../../lib/ports.ts';
import type { JobView } from '../../../lib/views.ts';
import { jobLogStreamConsoleUrl, type JobLogStream } from '../../../lib/job-log-names.ts';
import { killStrayClis, parseStdout, removeTempDirs, runCli, runInProcess, SLOW, startCli, tempDir, waitFor, waitForOutput, writeTask } from '../../support/cli.ts';
import { closeFakeApis, fakeApi, ShippedLogs } from '../../support/fake-log-api.ts';
import { givenLaunched, harness, initialState, JOB_ID, launchAndAwait, taskSpec } from '../../support/usecases-harness.ts';

afterAll(async () => {
  killStrayClis();
  await closeFakeApis();
  await removeTempDirs();
});

const node = (nodeRank: number, phase: 'setup' | 'run' = 'run'): JobLogStream => ({ jobId: JOB_ID, attempt: 1, nodeRank, phase });

let dir: string;
beforeEach(async () => {
  dir = await tempDir('logs-api');
});

describe('relaunch logs through an API', { timeout: SLOW }, () => {
  it('--follow prints each line as it is shipped, and the last lines shipped after the job ended, then exits', async () => {
    const h = harness();
    await givenLaunched(h);
    const api = await fakeApi(h, new ShippedLogs());
    api.logs.ship(node(0, 'setup'), 'installing');
    const follow = startCli(['logs', JOB_ID, '--follow', '--api', api.url], { cwd: dir });

    await waitForOutput(follow, /installing\n/);
    api.logs.ship(node(0), 'step 1');
    await waitForOutput(follow, /step 1\n/);
    api.logs.ship(node(0), 'step 2', 'step 3', 'step 4');
    await waitForOutput(follow, /step 4\n/);

    const at = h.clock.now().toISOString();
    await h.store.changeStatus(JOB_ID, { from: 'STARTING', to: 'RUNNING', reason: 'run started', attempt: 1, at });
    await h.store.changeStatus(JOB_ID, { from: 'RUNNING', to: 'SUCCEEDED', reason: 'every node exited 0', attempt: 1, at });
    // The node's last lines land once the follower has seen the job end, as a shipper's last batch may.
    await api.endSeen;
    api.logs.ship(node(0), 'checkpoint saved');

    const done = await follow.finished;
    expect(done.code, done.stderr).toBe(0);
    expect(done.stdout).toBe('installing\nstep 1\nstep 2\nstep 3\nstep 4\ncheckpoint saved\n');
  });

  it("prints an attempt's whole output, every page of every node, setup before run, each line naming its node", async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2 }));
    const api = await fakeApi(h, new ShippedLogs());
    api.logs.ship(node(0, 'setup'), 'setup 0');
    api.logs.ship(node(0), 'a', 'b', 'c', 'd', 'e');
    api.logs.ship(node(1), 'x', 'y', 'z');

    const all = await runCli(['logs', JOB_ID, '--api', api.url], { cwd: dir });
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout).toBe('(node 0) setup 0\n(node 0) a\n(node 0) b\n(node 0) c\n(node 0) d\n(node 0) e\n(node 1) x\n(node 1) y\n(node 1) z\n');

    const one = await runCli(['logs', JOB_ID, '--node', '1', '--api', api.url], { cwd: dir });
    expect(one.stdout).toBe('x\ny\nz\n');
    const none = await runCli(['logs', JOB_ID, '--node', '2', '--api', api.url], { cwd: dir });
    expect(none).toMatchObject({ code: 2, stderr: 'error: --node: expected a node rank 0-1 (the job runs 2 nodes), got 2\n' });
  });

  it('says so, once, when the API has no log route (a stack from before it), and goes on following the job', async () => {
    const h = harness();
    await givenLaunched(h);
    const api = await fakeApi(h, new ShippedLogs(undefined, false));
    const at = h.clock.now().toISOString();
    await h.store.changeStatus(JOB_ID, { from: 'STARTING', to: 'RUNNING', reason: 'run started', attempt: 1, at });
    await h.store.changeStatus(JOB_ID, { from: 'RUNNING', to: 'FAILED', reason: 'exit 1', attempt: 1, at });
    const note = `relaunch: ${api.url} serves no job output (deployed before relaunch read logs); each phase's last lines are in relaunch status ${JOB_ID} --json\n`;

    expect(await runCli(['logs', JOB_ID, '--api', api.url], { cwd: dir })).toMatchObject({ code: 0, stdout: note });
    expect(await runCli(['logs', JOB_ID, '--follow', '--api', api.url], { cwd: dir })).toMatchObject({ code: 0, stdout: note });
  });

  it("--controller merges the controller functions' lines naming the job into its timeline, in time order", async () => {
    const h = harness();
    await givenLaunched(h);
    const launchedAt = (await h.store.getAttempt(JOB_ID, 1)).startedAt;
    const later = new Date(Date.parse(launchedAt) + 1000).toISOString();
    const controllerLog: ControllerLogReader = {
      linesOf: async () => ({
        lines: [{ at: later, source: 'launch-attempt', message: JSON.stringify({ level: 'INFO', message: 'fleet created', jobId: JOB_ID, function_name: 'x', instanceIds: ['i-1'] }) }],
        complete: true,
      }),
    };
    const api = await fakeApi(h, new ShippedLogs(), controllerLog);

    const result = await runCli(['logs', JOB_ID, '--controller', '--api', api.url], { cwd: dir });
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stdout.trim().split('\n');
    // Times as every command prints them (cli/times.ts), in the zone the test runs in.
    expect(lines[0]).toMatch(new RegExp(`^${formatTime(launchedAt)}  attempt 1 launched`));
    expect(lines[1]).toBe(`${formatTime(later)}  launch-attempt: INFO fleet created instanceIds=["i-1"]`);
    expect(lines.at(-1)).toContain("and the controller functions' lines naming the job)");
  });
});

describe('relaunch status through an API whose logs have console pages', { timeout: SLOW }, () => {
  it("prints the latest attempt's log links under the table, and --json holds every stream's", async () => {
    const h = harness();
    await givenLaunched(h);
    const api = await fakeApi(h, new ShippedLogs('eu-west-1'));
    const url = (phase: 'setup' | 'run') => jobLogStreamConsoleUrl({ region: 'eu-west-1', namePrefix: 'relaunch', stream: node(0, phase) });

    const human = await runCli(['status', JOB_ID, '--api', api.url], { cwd: dir });
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toContain(`logs of attempt 1 in the AWS console:\n  node 0 setup ${url('setup')}\n  node 0 run   ${url('run')}\n`);

    const json = parseStdout<{ logStreams: unknown }>(await runCli(['status', JOB_ID, '--json', '--api', api.url], { cwd: dir }));
    expect(json.logStreams).toEqual([
      { attempt: 1, nodeRank: 0, phase: 'setup', consoleUrl: url('setup') },
      { attempt: 1, nodeRank: 0, phase: 'run', consoleUrl: url('run') },
    ]);
  });
});

describe('relaunch run through an API that keeps whole logs', { timeout: SLOW }, () => {
  it("prints the job's output live, between its status changes, as it does locally", async () => {
    const h = harness();
    const api = await fakeApi(h, new ShippedLogs());
    const file = await writeTask(dir, 'task.yaml', 'name: train\nrun: python train.py\n');
    const run = startCli(['run', file, '--api', api.url], { cwd: dir });

    const jobId = await waitFor('the job to be submitted', async () => (await h.store.listJobs())[0]?.jobId);
    await launchAndAwait(h, initialState(jobId));
    await waitForOutput(run, /attempt 1 launched/);
    const stream = { jobId, attempt: 1, nodeRank: 0, phase: 'run' } as const;
    api.logs.ship(stream, 'epoch 1 loss 0.9');
    await waitForOutput(run, /epoch 1 loss 0\.9\n/);
    api.logs.ship(stream, 'epoch 2 loss 0.4');
    await waitForOutput(run, /epoch 2 loss 0\.4\n/);
    const at = h.clock.now().toISOString();
    await h.store.changeStatus(jobId, { from: 'STARTING', to: 'RUNNING', reason: 'run started', attempt: 1, at });
    await h.store.changeStatus(jobId, { from: 'RUNNING', to: 'SUCCEEDED', reason: 'every node exited 0', attempt: 1, at });

    const done = await run.finished;
    expect(done.code, done.stderr).toBe(0);
    expect(done.stdout).toMatch(/attempt 1 launched[^]*epoch 1 loss 0\.9\nepoch 2 loss 0\.4\n[^]*SUCCEEDED/);
  });
});

describe("relaunch dashboard's full log of an attempt on an API with log pages", { timeout: SLOW }, () => {
  it('answers every node\'s setup and run output as text, read page by page through the API, as the local page does', async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2 }));
    const api = await fakeApi(h, new ShippedLogs('eu-west-1'));
    api.logs.ship(node(0, 'setup'), 'pip install');
    api.logs.ship(node(0), 'a', 'b', 'c');
    api.logs.ship(node(1), '<b>not markup</b>');
    const proxy = await DashboardProxy.start({ client: new HttpJobsClient(api.url) });
    try {
      const log = await fetch(`${proxy.url}jobs/${JOB_ID}/attempts/1/log`);
      expect(log.status).toBe(200);
      expect(log.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(await log.text()).toBe('==> node 0, setup <==\npip install\n\n==> node 0, run <==\na\nb\nc\n\n==> node 1, run <==\n<b>not markup</b>\n');
      expect((await fetch(`${proxy.url}jobs/${JOB_ID}/attempts/2/log`)).status).toBe(404);
      expect((await fetch(`${proxy.url}jobs/${JOB_ID}/attempts/0/log`)).status).toBe(400);
    } finally {
      await proxy.close();
    }
  });
});

describe('relaunch logs --node on a local runtime', { timeout: SLOW }, () => {
  it("prints only that node's output, with no node prefix", async () => {
    const file = await writeTask(dir, 'task.yaml', 'num_nodes: 2\nrun: echo "hello from node $RELAUNCH_NODE_RANK"\n');
    const data = join(dir, 'data');
    const run = await runCli(['run', file, '--json', '--data-dir', data], { cwd: dir });
    expect(run.code, run.stderr).toBe(0);
    const { jobId } = parseStdout<JobView>(run);

    expect((await runInProcess(['logs', jobId, '--data-dir', data])).stdout).toBe('(node 0) hello from node 0\n(node 1) hello from node 1\n');
    expect((await runInProcess(['logs', jobId, '--node', '1', '--data-dir', data])).stdout).toBe('hello from node 1\n');
    expect(await runInProcess(['logs', jobId, '--node', '-1', '--data-dir', data])).toMatchObject({ code: 2 });
  });
});
