// One owner per data folder, with real processes: two `serve` at once, runs sharing the
// folder's one runtime, the owner killed with SIGKILL, and every form of server.json a
// crashed or older owner may leave behind. No folder is ever wedged, and no command is
// kept alive by a timer once its work is done.

import { execFile, spawn } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { serverInfoPath } from '../../../local/server-info.ts';
import {
  BIN,
  isAlive,
  killStrayClis,
  NOBODY_REACHES_CLI,
  removeTempDirs,
  runCli,
  serverInfo,
  SLOW,
  startCli,
  tempDir,
  waitFor,
  waitForOutput,
  waitForPid,
  writeTask,
  type Cli,
} from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

const execFileAsync = promisify(execFile);

/** What a stack trace looks like on stderr: a refusal must never show one. */
const STACK_LINE = /^\s+at /m;

/** A job that runs until `$GATE` exists, after writing its pid to `$PIDFILE`. */
const GATED = ['run: |', '  echo $$ > "$PIDFILE"', '  while [ ! -f "$GATE" ]; do sleep 0.1; done', '  echo "through the gate"', ''].join('\n');

describe('one owner per data folder', { timeout: SLOW }, () => {
  it('two serve started at once: one serves, the other exits 2 naming it, with no stack trace', async () => {
    const dir = await tempDir('two-serves');
    const data = join(dir, 'data');
    const both = [startCli(['serve', '--port', '0', '--data-dir', data], { cwd: dir }), startCli(['serve', '--port', '0', '--data-dir', data], { cwd: dir })];
    const loser = await Promise.race(both.map((cli) => cli.finished.then(() => cli)));
    const winner = both.find((cli) => cli !== loser) as Cli;
    const lost = await loser.finished;
    const [, url] = (await waitForOutput(winner, /relaunch API on (http:\/\/127\.0\.0\.1:\d+)/)) as unknown as [string, string];

    expect(lost.code, lost.stderr).toBe(2);
    expect(lost.stdout).toBe('');
    expect(lost.stderr).not.toMatch(STACK_LINE);
    expect(lost.stderr).toContain(`error: --data-dir: ${data} is already served at ${url} by \`relaunch serve\` (pid ${winner.child.pid})`);
    // The winner serves on, untouched.
    expect((await fetch(`${url}/jobs`)).status).toBe(200);
    winner.child.kill('SIGTERM');
    expect((await winner.finished).code).toBe(0);
  });

  it("a second run and a run --detach on a folder a run is using share its runtime: each job runs, none is refused", async () => {
    const dir = await tempDir('two-runs');
    const data = join(dir, 'data');
    const gate = join(dir, 'gate');
    const task = await writeTask(dir, 'gated.yaml', GATED);
    const first = startCli(['run', task, '--data-dir', data, '--env', `GATE=${gate}`, '--env', `PIDFILE=${join(dir, 'first.pid')}`], { cwd: dir });
    await waitForPid(join(dir, 'first.pid'));
    const runtime = serverInfo(data);
    expect(runtime).toMatchObject({ command: 'serve', takesJobs: true });

    const second = startCli(['run', task, '--data-dir', data, '--env', `GATE=${gate}`, '--env', `PIDFILE=${join(dir, 'second.pid')}`], { cwd: dir });
    const detached = await runCli(['run', task, '--detach', '--data-dir', data, '--env', `GATE=${gate}`, '--env', `PIDFILE=${join(dir, 'third.pid')}`], { cwd: dir });
    expect(detached.code, detached.stderr).toBe(0);
    await waitForPid(join(dir, 'second.pid'));
    await waitForPid(join(dir, 'third.pid'));
    expect(serverInfo(data)?.pid).toBe(runtime?.pid);

    await writeFile(gate, '');
    for (const run of [first, second]) {
      const done = await run.finished;
      expect(done.code, done.stderr).toBe(0);
      expect(done.stderr).not.toMatch(STACK_LINE);
      expect(done.stdout).toContain('through the gate');
      expect(done.stdout).toMatch(/ SUCCEEDED after 1 attempt; /);
    }
    const status = await runCli(['status', '--json', '--data-dir', data], { cwd: dir });
    expect(status.code, status.stderr).toBe(0);
    expect((JSON.parse(status.stdout) as { jobs: unknown[] }).jobs).toHaveLength(3);
    // The runtime goes once idle, and lets the folder go.
    await waitFor('the background runtime to exit', () => (isAlive(runtime?.pid as number) ? undefined : true));
    expect(serverInfo(data)).toBeUndefined();
  });

  it('a run submits through a serve that owns the folder, and the serve outlives it', async () => {
    const dir = await tempDir('run-via-serve');
    const data = join(dir, 'data');
    const server = startCli(['serve', '--port', '0', '--data-dir', data], { cwd: dir });
    await waitForOutput(server, /relaunch API on/);
    const task = await writeTask(dir, 'quick.yaml', 'run: echo quick\n');
    const run = await runCli(['run', task, '--data-dir', data], { cwd: dir });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/ SUCCEEDED after 1 attempt; /);
    expect(isAlive(server.child.pid as number)).toBe(true);
    server.child.kill('SIGTERM');
    expect((await server.finished).code).toBe(0);
  });

  it('kill -9 of the owner lets the folder go at once: the next serve takes it, whatever server.json it left', async () => {
    const dir = await tempDir('owner-killed');
    const data = join(dir, 'data');
    const first = startCli(['serve', '--port', '0', '--data-dir', data], { cwd: dir });
    await waitForOutput(first, /relaunch API on/);
    const left = serverInfo(data);
    expect(left?.pid).toBe(first.child.pid);
    first.child.kill('SIGKILL');
    await first.finished;

    // The dead owner's server.json is still there; the lock went with the process.
    expect(serverInfo(data)).toEqual(left);
    const second = startCli(['serve', '--port', '0', '--data-dir', data], { cwd: dir });
    const [, url] = (await waitForOutput(second, /relaunch API on (http:\/\/127\.0\.0\.1:\d+)/)) as unknown as [string, string];
    expect(serverInfo(data)).toMatchObject({ url, pid: second.child.pid, command: 'serve', takesJobs: true });
    second.child.kill('SIGTERM');
    expect((await second.finished).code).toBe(0);
  });
});

describe('a stale server.json never wedges the folder', { timeout: SLOW }, () => {
  /** A process that runs until the tests end: a pid a stale file can name. */
  const sleeper = spawn('sleep', ['600'], { stdio: 'ignore' });
  afterAll(() => sleeper.kill('SIGKILL'));
  const deadUrl = 'http://127.0.0.1:9';

  it.each([
    ['from before start identities, naming a live Node process', () => ({ url: deadUrl, pid: process.pid })],
    ['with startedAt null, naming a live Node process', () => ({ url: deadUrl, pid: process.pid, startedAt: null })],
    ['with startedAt null, naming a live sleep', () => ({ url: deadUrl, pid: sleeper.pid, startedAt: null })],
    ['naming a live process with a start identity it does not have', () => ({ url: deadUrl, pid: sleeper.pid, startedAt: 'x:1', command: 'serve', takesJobs: true })],
    ['not JSON at all', () => '{"url": '],
  ])('%s: status opens the folder', async (_what, content) => {
    const dir = await tempDir('stale-info');
    const data = join(dir, 'data');
    const written = content();
    mkdirSync(data);
    writeFileSync(serverInfoPath(data), typeof written === 'string' ? written : JSON.stringify(written));

    const status = await runCli(['status', '--data-dir', data], { cwd: dir });
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain('no jobs yet');
  });

  const asNobody = process.getuid?.() === 0 && NOBODY_REACHES_CLI;
  it.runIf(asNobody)(`from before start identities, read by another user, to whom the process's /proc/<pid>/exe is unreadable${asNobody ? '' : ' (skipped: needs root, and nobody able to reach this checkout)'}`, async () => {
    const dir = await tempDir('stale-other-user');
    chmodSync(dir, 0o777);
    const data = join(dir, 'data');
    mkdirSync(data, { mode: 0o777 });
    chmodSync(data, 0o777);
    writeFileSync(serverInfoPath(data), JSON.stringify({ url: deadUrl, pid: sleeper.pid }), { mode: 0o666 });
    // Run as nobody: root's processes are not theirs to describe.
    const nobody = ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, BIN, 'status', '--data-dir', data];
    const { stdout } = await execFileAsync('setpriv', nobody, { cwd: dir, env: { ...process.env, HOME: dir } });
    expect(stdout).toContain('no jobs yet');
  });
});
