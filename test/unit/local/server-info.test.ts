// server.json: a live server is found while its folder's lock is held; a stale file (its
// pid dead, a zombie, or reused by another process), an old-format or a malformed one is
// not, and with the lock free no file is believed at all, so none wedges the data folder.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { OwnerLock } from '../../../local/owner-lock.ts';
import { findFolderOwner, findLocalServer, serverInfoPath, startIdentityOf, writeServerInfo } from '../../../local/server-info.ts';
import { waitFor } from '../../support/fixtures/wait.ts';

const URL = 'http://127.0.0.1:45678';
const ON_LINUX = existsSync('/proc/self/stat');

const children: ChildProcess[] = [];
const ROLE = { command: 'serve', takesJobs: true } as const;

let dataDir: string;
/** The folder's lock, held by this process as an owner would: server.json is read only then. */
let lock: OwnerLock | null;

beforeEach(() => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'relaunch-server-info-'));
  lock = OwnerLock.tryAcquire(dataDir);
});

afterEach(() => {
  lock?.release();
  rmSync(dataDir, { recursive: true, force: true });
});

afterAll(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** A process that runs until the tests end, and its pid. */
function live(command: string, args: readonly string[]): number {
  const child = spawn(command, args, { stdio: 'ignore' });
  children.push(child);
  return child.pid as number;
}

function readProcStat(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return '';
  }
}

function writeInfo(info: unknown): void {
  writeFileSync(serverInfoPath(dataDir), typeof info === 'string' ? info : JSON.stringify(info));
}

describe('writeServerInfo and findLocalServer', () => {
  it('records this process with its url, pid, start identity and role, and finds it', () => {
    writeServerInfo(dataDir, URL, ROLE);
    const found = findLocalServer(dataDir);
    expect(found).toEqual({ url: URL, pid: process.pid, startedAt: startIdentityOf(process.pid), command: 'serve', takesJobs: true, lock: lock?.identity });
    if (ON_LINUX) expect(found?.startedAt).toMatch(/^[0-9a-f-]{36}:[0-9]+$/);
    expect(readdirSync(dataDir).sort()).toEqual(['owner.lock', 'server.json']); // no temporary file left behind
  });

  it('replaces an older file whole', () => {
    writeInfo({ url: 'http://127.0.0.1:1', pid: 1, startedAt: 'old', extra: 'x'.repeat(1000) });
    writeServerInfo(dataDir, URL, { command: 'run', takesJobs: false });
    expect(findLocalServer(dataDir)).toMatchObject({ url: URL, command: 'run', takesJobs: false });
  });

  it('with the lock free, even a file this live process wrote is not believed: its owner has let the folder go', () => {
    writeServerInfo(dataDir, URL, ROLE);
    lock?.release();
    expect(findFolderOwner(dataDir)).toEqual({ kind: 'none' });
    expect(findLocalServer(dataDir)).toBeNull();
  });

  it('with the lock held and no file believed, the folder is busy (its owner is starting or stopping)', () => {
    expect(findFolderOwner(dataDir)).toEqual({ kind: 'busy' });
    writeInfo({ url: URL, pid: process.pid });
    expect(findFolderOwner(dataDir)).toEqual({ kind: 'busy' });
  });

  it('a folder that does not exist has no owner', () => {
    expect(findFolderOwner(path.join(dataDir, 'not-there'))).toEqual({ kind: 'none' });
  });
});

describe.skipIf(!ON_LINUX)('a pid another process now has is a stale file', () => {
  it('a live `sleep` with the pid the file names, but not the start identity: not a server', () => {
    const pid = live('sleep', ['30']);
    writeInfo({ url: URL, pid, startedAt: startIdentityOf(process.pid), ...ROLE });
    expect(findLocalServer(dataDir)).toBeNull();
  });

  it('the same `sleep` with its own identity would be believed: the identity decides', () => {
    const pid = live('sleep', ['30']);
    writeInfo({ url: URL, pid, startedAt: startIdentityOf(pid), ...ROLE });
    expect(findLocalServer(dataDir)).toEqual({ url: URL, pid, startedAt: startIdentityOf(pid), ...ROLE });
  });

  it.each([
    ['from before start identities', {}],
    ['with startedAt null', { startedAt: null }],
  ])('a file %s is never believed, naming a Node process or not', (_what, extra) => {
    const node = live(process.execPath, ['-e', 'setTimeout(() => {}, 30000)']);
    writeInfo({ url: URL, pid: node, ...extra });
    expect(findLocalServer(dataDir)).toBeNull();
    writeInfo({ url: URL, pid: process.pid, ...extra });
    expect(findLocalServer(dataDir)).toBeNull();
  });

  it('a zombie (ended, not yet reaped) runs nothing', async () => {
    // The background `sleep` ends after the shell became `sleep 30`, which never reaps it.
    const parent = spawn('sh', ['-c', 'sleep 0.2 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'] });
    children.push(parent);
    const zombie = await new Promise<number>((resolve) => parent.stdout?.once('data', (chunk: Buffer) => resolve(Number(String(chunk).trim()))));
    await waitFor('the child to be a zombie', () => (/^\S+ \(.*\) Z /.test(readProcStat(zombie)) ? true : undefined), 5000);
    writeInfo({ url: URL, pid: zombie, startedAt: startIdentityOf(zombie), ...ROLE });
    expect(findLocalServer(dataDir)).toBeNull();
  });
});

describe('a dead pid is a stale file', () => {
  it('with its start identity', async () => {
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    const pid = child.pid as number;
    const startedAt = startIdentityOf(pid);
    const ended = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await ended;
    writeInfo({ url: URL, pid, startedAt, ...ROLE });
    expect(findLocalServer(dataDir)).toBeNull();
  });
});

/** A file this process would write as the owner. */
function mine(): Record<string, unknown> {
  return { url: URL, pid: process.pid, startedAt: startIdentityOf(process.pid), ...ROLE };
}

describe('a file relaunch did not write is no server', () => {
  it.each([
    ['nothing there', undefined],
    ['not JSON', '{"url": '],
    ['JSON null', 'null'],
    ['a list', `[${JSON.stringify(URL)}, ${process.pid}]`],
    ['pid 0 (this process group)', { ...mine(), pid: 0 }],
    ['pid -1 (every process)', { ...mine(), pid: -1 }],
    ['a negative pid (a process group)', { ...mine(), pid: -process.pid }],
    ['a fractional pid', { ...mine(), pid: 1.5 }],
    ['a pid as text', { ...mine(), pid: String(process.pid) }],
    ['no url', { ...mine(), url: undefined }],
    ['an https url', { ...mine(), url: 'https://127.0.0.1:45678' }],
    ['a remote url', { ...mine(), url: 'http://evil.example:45678' }],
    ['a url with no port', { ...mine(), url: 'http://127.0.0.1' }],
    ['not a url', { ...mine(), url: 'not a url' }],
    ['a start identity that is not text', { ...mine(), startedAt: 12 }],
    ['no command', { ...mine(), command: undefined }],
    ['takesJobs as text', { ...mine(), takesJobs: 'true' }],
    ['a file larger than any relaunch writes', JSON.stringify({ ...mine(), pad: 'x'.repeat(5000) })],
  ])('%s', (_what, content) => {
    if (content !== undefined) writeInfo(content);
    expect(findLocalServer(dataDir)).toBeNull();
  });

  it('the same file, whole, is believed: each case above breaks one thing only', () => {
    writeInfo(mine());
    expect(findLocalServer(dataDir)).toEqual(mine());
  });

  it('a folder where the file should be', () => {
    mkdirSync(serverInfoPath(dataDir));
    expect(findLocalServer(dataDir)).toBeNull();
  });

  it.skipIf(!ON_LINUX)('a FIFO where the file should be, without blocking on it', () => {
    spawnSync('mkfifo', [serverInfoPath(dataDir)]);
    expect(findLocalServer(dataDir)).toBeNull();
  });
});
