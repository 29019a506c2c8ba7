// One queue per user, and any number of `relaunch run` at once, with real processes: runs
// from different folders share the user's data folder and its one background runtime,
// which is gone once idle; reading commands never make a data folder.

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { JobView } from '../../../lib/views.ts';
import { isAlive, killStrayClis, parseStdout, removeTempDirs, runCli, serverInfo, SLOW, startCli, stopServer, tempDir, waitFor, waitForPid, writeTask } from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

/** What a stack trace looks like on stderr. */
const STACK_LINE = /^\s+at /m;

/** A job that writes its pid to `$PIDFILE`, then runs until `$GATE` exists. */
const GATED = ['run: |', '  echo $$ > "$PIDFILE"', '  while [ ! -f "$GATE" ]; do sleep 0.1; done', '  echo "run $RUN_NUMBER through the gate"', ''].join('\n');

const RUNS = 4;

describe('one queue per user, several runs at once', { timeout: 4 * SLOW }, () => {
  it(`${RUNS} runs at once from ${RUNS} folders: one background runtime, each job SUCCEEDED, none lost; the runtime goes once idle`, async () => {
    const home = await tempDir('queue-home');
    // The user's state folder: no run names a data folder.
    const env = { XDG_STATE_HOME: join(home, 'state'), RELAUNCH_IDLE_EXIT_SECONDS: '1' };
    const data = join(home, 'state', 'relaunch');
    const gate = join(home, 'gate');
    const runs = await Promise.all(
      Array.from({ length: RUNS }, async (_, index) => {
        const cwd = await tempDir(`queue-run-${index}`);
        const task = await writeTask(cwd, 'gated.yaml', GATED);
        const pidfile = join(cwd, 'pid');
        const cli = startCli(['run', task, '--env', `GATE=${gate}`, '--env', `PIDFILE=${pidfile}`, '--env', `RUN_NUMBER=${index}`], { cwd, env });
        return { cli, cwd, pidfile };
      }),
    );
    // Every job runs at the same time: none waits for another to end.
    await Promise.all(runs.map(({ pidfile }) => waitForPid(pidfile, SLOW)));
    const server = serverInfo(data);
    expect(server).toMatchObject({ command: 'serve', takesJobs: true });

    // A reading command from yet another folder sees the same queue.
    const elsewhere = await tempDir('queue-elsewhere');
    const live = await runCli(['status', '--json'], { cwd: elsewhere, env });
    expect(live.code, live.stderr).toBe(0);
    expect(parseStdout<{ jobs: JobView[] }>(live).jobs).toHaveLength(RUNS);

    await writeFile(gate, '');
    const results = await Promise.all(runs.map(({ cli }) => cli.finished));
    results.forEach((result, index) => {
      expect(result.code, result.stderr).toBe(0);
      expect(result.stderr).not.toMatch(STACK_LINE);
      expect(result.stdout).toContain(`run ${index} through the gate`);
      expect(result.stdout).toMatch(/ SUCCEEDED after 1 attempt; /);
    });
    const ids = results.map((result) => /(j-[0-9a-z]+-[0-9a-z]+) SUCCEEDED after/.exec(result.stdout)?.[1]);
    expect(new Set(ids).size).toBe(RUNS);

    // One runtime served them all: one started serving, whatever else was started at once.
    const log = readFileSync(join(data, 'runtime.log'), 'utf8');
    expect(log.match(/relaunch API on /g) ?? [], log).toHaveLength(1);
    expect(serverInfo(data)?.pid ?? server?.pid).toBe(server?.pid);

    // Idle (no live job, no caller) for its bound, it goes, and lets the folder go.
    await waitFor('the background runtime to exit once idle', () => (isAlive(server?.pid as number) ? undefined : true), SLOW);
    expect(serverInfo(data)).toBeUndefined();
    const after = await runCli(['status', '--json'], { cwd: elsewhere, env });
    expect(after.code, after.stderr).toBe(0);
    const jobs = parseStdout<{ jobs: JobView[] }>(after).jobs;
    expect(jobs.map((job) => job.jobId).sort()).toEqual([...ids].sort());
    expect(jobs.every((job) => job.status === 'SUCCEEDED')).toBe(true);
    stopServer(server);
  });
});

describe('reading commands never make a data folder', { timeout: SLOW }, () => {
  const job = 'j-0m8x2k1qz-4fz0aa';

  it('with no data folder yet, status says no jobs and makes nothing; logs and cancel say the job is unknown', async () => {
    const cwd = await tempDir('no-folder');
    const env = { XDG_STATE_HOME: join(cwd, 'state') };
    const status = await runCli(['status'], { cwd, env });
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain('no jobs yet');
    for (const args of [['status', job], ['logs', job], ['cancel', job]]) {
      const result = await runCli(args, { cwd, env });
      expect(result.code, `${args[0]}: ${result.stderr}`).toBe(2);
      expect(result.stderr).toBe(`error: no job with id ${job}\n`);
      expect(result.stderr).not.toMatch(STACK_LINE);
    }
    const dashboard = await runCli(['dashboard'], { cwd, env });
    expect(dashboard.code, dashboard.stderr).toBe(2);
    // Nothing made: not the state folder, not a `.relaunch` where the command ran.
    expect(readdirSync(cwd)).toEqual([]);
  });

  it.each([
    ['--data-dir', (missing: string) => ({ args: ['--data-dir', missing], env: {} })],
    ['RELAUNCH_DATA_DIR', (missing: string) => ({ args: [], env: { RELAUNCH_DATA_DIR: missing } })],
  ])('a folder named by %s that does not exist is bad input for status, logs and cancel; nothing is made', async (named, given) => {
    const cwd = await tempDir('named-missing');
    const missing = join(cwd, 'nonexistent', 'x');
    const { args, env } = given(missing);
    for (const command of [['status'], ['logs', job], ['cancel', job]]) {
      const result = await runCli([...command, ...args], { cwd, env: { XDG_STATE_HOME: join(cwd, 'state'), ...env } });
      expect(result.code, `${command[0]}: ${result.stderr}`).toBe(2);
      expect(result.stderr).toBe(`error: ${named}: expected an existing data folder, got "${missing}", which does not exist (relaunch run makes one; this command only reads it)\n`);
    }
    expect(existsSync(join(cwd, 'nonexistent'))).toBe(false);
    expect(readdirSync(cwd)).toEqual([]);
  });
});
