// The folder's lock tampered with while its owner runs, with real processes: owner.lock
// removed, replaced by another file, a `flock` command that locks nothing, a FIFO in its
// place. Each command refuses with a message naming the owner (or the file), never hangs,
// never shows a stack trace, and never deletes the live owner's server.json.

import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ownerLockPath } from '../../../local/owner-lock.ts';
import { serverInfoPath } from '../../../local/server-info.ts';
import { killStrayClis, removeTempDirs, runCli, SLOW, startCli, tempDir, waitForOutput, type Cli } from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

/** What a stack trace looks like on stderr: a refusal must never show one. */
const STACK_LINE = /^\s+at /m;

/** A serve on a fresh folder, once it says where it serves. */
async function serving(prefix: string): Promise<{ dir: string; data: string; server: Cli; url: string }> {
  const dir = await tempDir(prefix);
  const data = join(dir, 'data');
  const server = startCli(['serve', '--port', '0', '--data-dir', data], { cwd: dir });
  const [, url] = (await waitForOutput(server, /relaunch API on (http:\/\/127\.0\.0\.1:\d+)/)) as unknown as [string, string];
  return { dir, data, server, url };
}

/** A `flock` that says it locked and locks nothing, first on the returned PATH. */
function noOpFlock(dir: string): string {
  const bin = join(dir, 'fake-bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'flock'), '#!/bin/sh\nexit 0\n');
  chmodSync(join(bin, 'flock'), 0o755);
  return [bin, process.env.PATH].join(delimiter);
}

/** The owner is untouched: its server.json as it wrote it, and its API answering. */
async function ownerUntouched(data: string, info: string, url: string): Promise<void> {
  expect(readFileSync(serverInfoPath(data), 'utf8')).toBe(info);
  expect((await fetch(`${url}/jobs`)).status).toBe(200);
}

describe('a lock tampered with while its owner runs', { timeout: SLOW }, () => {
  it.each([
    ['removed', (lock: string) => rmSync(lock), 'was removed'],
    [
      'replaced by another file',
      (lock: string) => {
        rmSync(lock);
        writeFileSync(lock, '');
      },
      'was replaced by another file',
    ],
  ])('owner.lock %s: status, run and serve refuse naming the owner; its server.json stays', async (_what, tamper, said) => {
    const { dir, data, server, url } = await serving('lock-tampered');
    const info = readFileSync(serverInfoPath(data), 'utf8');
    tamper(ownerLockPath(data));
    const task = join(dir, 'quick.yaml');
    writeFileSync(task, 'run: echo quick\n');

    for (const args of [['status'], ['run', task], ['serve', '--port', '0']]) {
      const result = await runCli([...args, '--data-dir', data], { cwd: dir });
      expect(result.code, `${args[0]}: ${result.stderr}`).toBe(2);
      expect(result.stderr).not.toMatch(STACK_LINE);
      expect(result.stderr).not.toContain('Database is closed');
      expect(result.stderr).toContain(`error: --data-dir: cannot tell who owns ${data}: its lock file ${ownerLockPath(data)} ${said}`);
      expect(result.stderr).toContain(`\`relaunch serve\` (pid ${server.child.pid}) serves it at ${url}`);
      expect(result.stderr).toContain(`kill ${server.child.pid}`);
      await ownerUntouched(data, info, url);
    }

    // Once the owner is stopped, the folder is usable again.
    server.child.kill('SIGTERM');
    expect((await server.finished).code).toBe(0);
    const status = await runCli(['status', '--data-dir', data], { cwd: dir });
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain('no jobs yet');
  });

  it('a flock that locks nothing: commands beside a live owner refuse naming it, and a new folder is refused naming flock', async () => {
    const { dir, data, server, url } = await serving('lock-noop-flock');
    const info = readFileSync(serverInfoPath(data), 'utf8');
    const PATH = noOpFlock(dir);

    const status = await runCli(['status', '--data-dir', data], { cwd: dir, env: { PATH } });
    expect(status.code, status.stderr).toBe(2);
    expect(status.stderr).not.toMatch(STACK_LINE);
    expect(status.stderr).toContain(`error: --data-dir: cannot take ownership of "${data}": the flock command on PATH said it locked ${ownerLockPath(data)}, yet a second open of the file could lock it too`);
    await ownerUntouched(data, info, url);

    const fresh = join(dir, 'fresh');
    const serve = await runCli(['serve', '--port', '0', '--data-dir', fresh], { cwd: dir, env: { PATH } });
    expect(serve.code, serve.stderr).toBe(2);
    expect(serve.stderr).not.toMatch(STACK_LINE);
    expect(serve.stderr).toContain(`error: --data-dir: cannot take ownership of "${fresh}": the flock command on PATH said it locked ${ownerLockPath(fresh)}, yet a second open of the file could lock it too`);

    server.child.kill('SIGTERM');
    expect((await server.finished).code).toBe(0);
  });

  it('a FIFO in place of owner.lock: status and serve end at once, naming it, and leave it there', async () => {
    const dir = await tempDir('lock-fifo');
    const data = join(dir, 'data');
    mkdirSync(data);
    const lock = ownerLockPath(data);
    expect(spawnSync('mkfifo', [lock]).status).toBe(0);
    for (const args of [['status'], ['serve', '--port', '0']]) {
      const result = await runCli([...args, '--data-dir', data], { cwd: dir });
      expect(result.code, `${args[0]}: ${result.stderr}`).toBe(2);
      expect(result.stderr).not.toMatch(STACK_LINE);
      expect(result.stderr).toContain(`error: --data-dir: cannot tell who owns "${data}": its lock file ${lock} is a FIFO, not the file relaunch makes; with no relaunch process on this folder, remove it (rm ${lock})`);
    }
  }, 30_000);
});
