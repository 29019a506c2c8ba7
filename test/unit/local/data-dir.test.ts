// A data folder relaunch cannot write is refused before the runtime opens it: by
// assertWritableDataDir, and through the real CLI (exit 2, never "Database is closed").
// The read-only cases use a read-only tmpfs (tests run as root, whom no mode bit stops).

import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../../lib/errors.ts';
import { assertWritableDataDir, defaultDataDir } from '../../../local/data-dir.ts';
import { runCli, SLOW } from '../../support/cli.ts';

const root = mkdtempSync(path.join(tmpdir(), 'relaunch-data-dir-'));

/**
 * A read-only tmpfs for these tests, or null where mounting is not allowed (then the
 * read-only cases are skipped). Mounted while the tests are collected, so skipIf sees it.
 */
const readOnly = ((): string | null => {
  const mountPoint = path.join(root, 'read-only');
  mkdirSync(mountPoint);
  return spawnSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', mountPoint]).status === 0 ? mountPoint : null;
})();

beforeAll(() => {
  writeFileSync(path.join(root, 'a-file'), '');
  mkdirSync(path.join(root, 'with-db-file'));
  writeFileSync(path.join(root, 'with-db-file', 'db'), '');
});

afterAll(() => {
  if (readOnly !== null) spawnSync('umount', [readOnly]);
  rmSync(root, { recursive: true, force: true });
});

/** The message assertWritableDataDir refused with, or null when it accepted. */
function refusal(dir: string): string | null {
  try {
    assertWritableDataDir(dir);
    return null;
  } catch (error) {
    if (!(error instanceof InvalidInputError)) throw error;
    expect(error.issues.map((issue) => issue.path)).toEqual(['--data-dir']);
    return error.issues[0]?.message ?? '';
  }
}

const ro = (...parts: string[]) => path.join(readOnly as string, ...parts);

describe('defaultDataDir: one folder per user, in the XDG state folder', () => {
  it.each([
    ['XDG_STATE_HOME set', { XDG_STATE_HOME: '/srv/state' }, '/srv/state/relaunch'],
    ['XDG_STATE_HOME unset', {}, '/home/me/.local/state/relaunch'],
    ['XDG_STATE_HOME empty', { XDG_STATE_HOME: '' }, '/home/me/.local/state/relaunch'],
    ['XDG_STATE_HOME relative (the specification says to ignore it)', { XDG_STATE_HOME: 'state' }, '/home/me/.local/state/relaunch'],
  ])('%s', (_what, environment, expected) => {
    expect(defaultDataDir(environment, '/home/me')).toBe(expected);
  });
});

describe('assertWritableDataDir', () => {
  it.each([
    ['an existing writable folder', () => root],
    ['a folder to be made in a writable one', () => path.join(root, 'new', 'deeper')],
    ['a relative path', () => path.relative(process.cwd(), root)],
  ])('accepts %s', (_what, dir) => {
    expect(refusal(dir())).toBeNull();
  });

  it.each([
    ['a file', () => path.join(root, 'a-file'), (d: string) => `expected a folder relaunch can write, got "${d}", which is a file`],
    ['a path through a file', () => path.join(root, 'a-file', 'data'), (d: string) => `expected a folder relaunch can write, got "${d}", whose path runs through a file`],
    ['a device', () => '/dev/null', (d: string) => `expected a folder relaunch can write, got "${d}", which is a device`],
    [
      'a folder whose database folder is a file',
      () => path.join(root, 'with-db-file'),
      (d: string) => `expected a folder relaunch can write, got "${d}", whose database folder "${path.join(d, 'db')}" is a file, not a folder`,
    ],
  ])('refuses %s', (_what, dir, message) => {
    expect(refusal(dir())).toBe(message(dir()));
  });

  it.skipIf(readOnly === null)('refuses a read-only mount and a folder to be made in one', () => {
    expect(refusal(ro())).toBe(`expected a folder relaunch can write, got "${ro()}", which is on a read-only file system`);
    expect(refusal(ro('sub', 'data'))).toBe(
      `expected a folder relaunch can write, got "${ro('sub', 'data')}", which does not exist and cannot be made: "${ro()}" is on a read-only file system`,
    );
  });
});

describe('the CLI refuses an unwritable --data-dir at start, exit 2', { timeout: SLOW }, () => {
  it.skipIf(readOnly === null).each([
    ['status', ['status']],
    ['serve', ['serve', '--port', '0']],
    ['run --detach', ['run', '--detach', '__TASK__']],
  ])('%s on a read-only mount', async (_what, args) => {
    const task = path.join(root, 'task.yaml');
    writeFileSync(task, 'run: echo hi\n');
    const result = await runCli([...args.map((arg) => (arg === '__TASK__' ? task : arg)), '--data-dir', ro('data')], { cwd: root });
    // status only reads: a folder it names that does not exist is refused as such, before any write is tried.
    expect(result.stderr).toBe(
      args[0] === 'status'
        ? `error: --data-dir: expected an existing data folder, got "${ro('data')}", which does not exist (relaunch run makes one; this command only reads it)\n`
        : `error: --data-dir: expected a folder relaunch can write, got "${ro('data')}", which does not exist and cannot be made: "${ro()}" is on a read-only file system\n`,
    );
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
  });

  it.skipIf(readOnly === null)('status on the read-only mount itself says so, without a stack trace', async () => {
    const result = await runCli(['status', '--data-dir', ro()], { cwd: root });
    expect(result.stderr).toBe(`error: --data-dir: expected a folder relaunch can write, got "${ro()}", which is on a read-only file system\n`);
    expect(result.code).toBe(2);
  });

  it('serve on a file says so', async () => {
    const file = path.join(root, 'a-file');
    const result = await runCli(['serve', '--port', '0', '--data-dir', file], { cwd: root });
    expect(result.stderr).toBe(`error: --data-dir: expected a folder relaunch can write, got "${file}", which is a file\n`);
    expect(result.code).toBe(2);
  });
});
