// server.json: a live server is found; a stale file (its pid dead, a zombie, or reused by
// another process) or a malformed one is not, so it never wedges the data folder.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findLocalServer, serverInfoPath, startIdentityOf, writeServerInfo } from '../../local/server-info.ts';
import { waitFor } from '../fixtures/wait.ts';

const URL = 'http://127.0.0.1:45678';
const ON_LINUX = existsSync('/proc/self/stat');

const children: ChildProcess[] = [];
let dataDir: string;

beforeEach(() => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'relaunch-server-info-'));
});

afterEach(() => {
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
  it('records this process with its url, pid and start identity, and finds it', () => {
    writeServerInfo(dataDir, URL);
    const found = findLocalServer(dataDir);
    expect(found).toEqual({ url: URL, pid: process.pid, startedAt: startIdentityOf(process.pid) });
    if (ON_LINUX) expect(found?.startedAt).toMatch(/^[0-9a-f-]{36}:[0-9]+$/);
    expect(readdirSync(dataDir)).toEqual(['server.json']); // no temporary file left behind
  });

  it('replaces an older file whole', () => {
    writeInfo({ url: 'http://127.0.0.1:1', pid: 1, startedAt: 'old', extra: 'x'.repeat(1000) });
    writeServerInfo(dataDir, URL);
    expect(findLocalServer(dataDir)?.url).toBe(URL);
  });
});

describe.skipIf(!ON_LINUX)('a pid another process now has is a stale file', () => {
  it('a live `sleep` with the pid the file names, but not the start identity: not a server', () => {
    const pid = live('sleep', ['30']);
    writeInfo({ url: URL, pid, startedAt: startIdentityOf(process.pid) });
    expect(findLocalServer(dataDir)).toBeNull();
  });

  it('the same `sleep` with its own identity would be believed: the identity decides', () => {
    const pid = live('sleep', ['30']);
    writeInfo({ url: URL, pid, startedAt: startIdentityOf(pid) });
    expect(findLocalServer(dataDir)).toEqual({ url: URL, pid, startedAt: startIdentityOf(pid) });
  });

  it('a file from before start identities: a `sleep` is not the server, a Node process may be', () => {
    const sleeping = live('sleep', ['30']);
    writeInfo({ url: URL, pid: sleeping });
    expect(findLocalServer(dataDir)).toBeNull();
    const node = live(process.execPath, ['-e', 'setTimeout(() => {}, 30000)']);
    writeInfo({ url: URL, pid: node });
    expect(findLocalServer(dataDir)).toEqual({ url: URL, pid: node });
  });

  it('a zombie (ended, not yet reaped) runs nothing', async () => {
    // The background `sleep` ends after the shell became `sleep 30`, which never reaps it.
    const parent = spawn('sh', ['-c', 'sleep 0.2 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'] });
    children.push(parent);
    const zombie = await new Promise<number>((resolve) => parent.stdout?.once('data', (chunk: Buffer) => resolve(Number(String(chunk).trim()))));
    await waitFor('the child to be a zombie', () => (/^\S+ \(.*\) Z /.test(readProcStat(zombie)) ? true : undefined), 5000);
    writeInfo({ url: URL, pid: zombie });
    expect(findLocalServer(dataDir)).toBeNull();
    writeInfo({ url: URL, pid: zombie, startedAt: startIdentityOf(zombie) });
    expect(findLocalServer(dataDir)).toBeNull();
  });
});

describe('a dead pid is a stale file', () => {
  it.each([
    ['with a start identity', true],
    ['without one', false],
  ])('%s', async (_what, withIdentity) => {
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    const pid = child.pid as number;
    const startedAt = startIdentityOf(pid);
    const ended = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await ended;
    writeInfo(withIdentity ? { url: URL, pid, startedAt } : { url: URL, pid });
    expect(findLocalServer(dataDir)).toBeNull();
  });
});

describe('a file relaunch did not write is no server', () => {
  it.each([
    ['nothing there', undefined],
    ['not JSON', '{"url": '],
    ['JSON null', 'null'],
    ['a list', `[${JSON.stringify(URL)}, ${process.pid}]`],
    ['pid 0 (this process group)', { url: URL, pid: 0 }],
    ['pid -1 (every process)', { url: URL, pid: -1 }],
    ['a negative pid (a process group)', { url: URL, pid: -process.pid }],
    ['a fractional pid', { url: URL, pid: 1.5 }],
    ['a pid as text', { url: URL, pid: String(process.pid) }],
    ['no url', { pid: process.pid }],
    ['an https url', { url: 'https://127.0.0.1:45678', pid: process.pid }],
    ['a remote url', { url: 'http://evil.example:45678', pid: process.pid }],
    ['a url with no port', { url: 'http://127.0.0.1', pid: process.pid }],
    ['not a url', { url: 'not a url', pid: process.pid }],
    ['a start identity that is not text', { url: URL, pid: process.pid, startedAt: 12 }],
    ['a file larger than any relaunch writes', JSON.stringify({ url: URL, pid: process.pid, pad: 'x'.repeat(5000) })],
  ])('%s', (_what, content) => {
    if (content !== undefined) writeInfo(content);
    expect(findLocalServer(dataDir)).toBeNull();
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
