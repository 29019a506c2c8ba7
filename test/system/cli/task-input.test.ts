// Where a task comes from, through the real binary: a file that is not a regular file, too
// large, unreadable or not UTF-8, and standard input (`-`), each refused with exit status 2
// and a message naming it, at once and without reading what need not be read.

import { spawn, spawnSync } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { chmod, mkdir, truncate, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readTaskFile } from '../../../cli/task-file.ts';
import { InvalidInputError } from '../../../lib/errors.ts';
import { MAX_BODY_BYTES } from '../../../lib/http/handle.ts';
import { BIN, EXAMPLES, NOBODY_REACHES_CLI, removeTempDirs, SLOW, tempDir, type Finished } from '../../support/cli.ts';

/** What standard input of the CLI is: text written to a pipe, or a file opened for it. */
type Stdin = { readonly text: string | Buffer } | { readonly path: string } | undefined;

const spawned = new Set<number>();

/** Runs `node cli/bin.js ...args` (as `user` when given, through setpriv) to its end. */
function cli(args: readonly string[], options: { stdin?: Stdin; cwd: string; asNobody?: boolean }): Promise<Finished & { ms: number }> {
  const env = { ...process.env };
  delete env.RELAUNCH_API_URL;
  delete env.RELAUNCH_DATA_DIR;
  const fd = options.stdin !== undefined && 'path' in options.stdin ? openSync(options.stdin.path, 'r') : undefined;
  const stdin = fd ?? (options.stdin === undefined ? 'ignore' : 'pipe');
  const command = options.asNobody === true ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', process.execPath] : [process.execPath];
  const started = Date.now();
  const child = spawn(command[0] as string, [...command.slice(1), BIN, ...args], { cwd: options.cwd, env, stdio: [stdin, 'pipe', 'pipe'] });
  if (fd !== undefined) closeSync(fd);
  if (child.pid !== undefined) spawned.add(child.pid);
  if (options.stdin !== undefined && 'text' in options.stdin) {
    child.stdin?.on('error', () => undefined); // the CLI may stop reading before the end
    child.stdin?.end(options.stdin.text);
  }
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => {
      if (child.pid !== undefined) spawned.delete(child.pid);
      resolve({ code, signal, stdout, stderr, ms: Date.now() - started });
    });
  });
}

const IS_ROOT = process.getuid?.() === 0;

let dir: string;
let socket: net.Server;

beforeAll(async () => {
  dir = await tempDir('task-input');
  await chmod(dir, 0o755); // so the unprivileged user below may reach the files in it
  await mkdir(join(dir, 'a-folder'));
  await writeFile(join(dir, 'not-a-folder'), 'run: x\n');
  await writeFile(join(dir, 'too-large.yaml'), `run: ${'x'.repeat(MAX_BODY_BYTES)}\n`);
  await writeFile(join(dir, 'sparse.yaml'), '');
  await truncate(join(dir, 'sparse.yaml'), 10 * 1024 ** 3);
  await writeFile(join(dir, 'latin1.yaml'), Buffer.concat([Buffer.from('name: caf'), Buffer.from([0xe9]), Buffer.from('\nrun: echo\n')]));
  await writeFile(join(dir, 'unreadable.yaml'), 'run: x\n', { mode: 0o000 });
  spawnSync('mkfifo', [join(dir, 'fifo')]);
  socket = net.createServer();
  await new Promise<void>((resolve) => socket.listen(join(dir, 'socket'), resolve));
});

afterAll(async () => {
  for (const pid of spawned) process.kill(pid, 'SIGKILL');
  await new Promise((resolve) => socket.close(resolve));
  await removeTempDirs();
});

describe('relaunch validate PATH refuses what is not a task file at once, exit 2', { timeout: SLOW }, () => {
  it.each([
    ['a missing file', 'missing.yaml', 'no such file'],
    ['a path through a file', 'not-a-folder/task.yaml', 'no such file (a part of the path is not a folder)'],
    ['a directory', 'a-folder', 'is a directory, expected a task file'],
    ['a character device', '/dev/zero', 'is a character device, expected a regular file (give - to read standard input)'],
    ['a FIFO', 'fifo', 'is a FIFO (named pipe), expected a regular file (give - to read standard input)'],
    ['a socket', 'socket', 'is a socket, expected a regular file (give - to read standard input)'],
    ['a file over the API limit', 'too-large.yaml', `expected a task of at most ${MAX_BODY_BYTES} bytes (the API's limit), got ${MAX_BODY_BYTES + 6} bytes`],
    ['a 10 GiB sparse file', 'sparse.yaml', `expected a task of at most ${MAX_BODY_BYTES} bytes (the API's limit), got ${10 * 1024 ** 3} bytes`],
    ['a Latin-1 file', 'latin1.yaml', 'invalid UTF-8 at byte 9: expected UTF-8 text, got 0xe9 0x0a 0x72 0x75'],
  ])('%s', async (_what, file, message) => {
    const path = file.startsWith('/') ? file : join(dir, file);
    const result = await cli(['validate', path], { cwd: dir });
    expect(result.stderr).toBe(`error: ${path}: ${message}\n`);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
  });

  it.skipIf(IS_ROOT && !NOBODY_REACHES_CLI)('a file it may not read', async () => {
    const path = join(dir, 'unreadable.yaml');
    const result = await cli(['validate', path], { cwd: dir, asNobody: IS_ROOT });
    expect(result.stderr).toBe(`error: ${path}: permission denied: relaunch may not read it\n`);
    expect(result.code).toBe(2);
  });

  it('a device is refused for what it is, before a byte is read', async () => {
    for (const path of ['/dev/zero', '/dev/urandom']) {
      // Only the check before opening names the device; read, either would be refused as
      // over the size limit, a megabyte later.
      const refusal: unknown = await readTaskFile(path).catch((error: unknown) => error);
      expect(refusal).toBeInstanceOf(InvalidInputError);
      expect((refusal as InvalidInputError).message).toMatch(/is a character device, expected a regular file/);
    }
  });
});

describe('relaunch validate - and run - read standard input', { timeout: SLOW }, () => {
  it('validate - prints the task read from standard input, named so', async () => {
    const result = await cli(['validate', '-'], { cwd: dir, stdin: { path: join(EXAMPLES, 'max-restarts.yaml') } });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout.split('\n').slice(0, 2)).toEqual(['standard input: a valid task', '  name          max-restarts']);
  });

  it('validate - --json gives the same spec as the file does', async () => {
    const file = join(EXAMPLES, 'max-restarts.yaml');
    const fromStdin = await cli(['validate', '--json', '-'], { cwd: dir, stdin: { path: file } });
    const fromFile = await cli(['validate', '--json', file], { cwd: dir });
    expect(fromStdin.code).toBe(0);
    expect(JSON.parse(fromStdin.stdout)).toEqual(JSON.parse(fromFile.stdout));
  });

  it.each([
    ['endless zeros', { path: '/dev/zero' }, `error: standard input: expected a task of at most ${MAX_BODY_BYTES} bytes (the API's limit), got more than ${MAX_BODY_BYTES} bytes`],
    ['one byte over the limit, through a pipe', { text: 'x'.repeat(MAX_BODY_BYTES + 1) }, `error: standard input: expected a task of at most ${MAX_BODY_BYTES} bytes (the API's limit), got more than ${MAX_BODY_BYTES} bytes`],
    ['bytes that are not UTF-8', { text: Buffer.from([0x72, 0x75, 0x6e, 0x3a, 0x20, 0xc3, 0x28]) }, 'error: standard input: invalid UTF-8 at byte 5: expected UTF-8 text, got 0xc3 0x28 and the end'],
    ['nothing at all', undefined, 'error: expected a task (a mapping with run, resources, ...), got an empty file'],
  ])('validate - refuses %s, exit 2', async (_what, stdin: Stdin, message) => {
    const result = await cli(['validate', '-'], { cwd: dir, stdin });
    expect(result.stderr).toBe(`${message}\n`);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
  });

  it('run - reads standard input too, and refuses what is not UTF-8 before starting anything', async () => {
    const data = join(dir, 'run-data');
    const result = await cli(['run', '-', '--data-dir', data], { cwd: dir, stdin: { text: Buffer.from([0x72, 0x75, 0x6e, 0x3a, 0x20, 0xff]) } });
    expect(result.stderr).toBe('error: standard input: invalid UTF-8 at byte 5: expected UTF-8 text, got 0xff and the end\n');
    expect(result.code).toBe(2);
  });
});
