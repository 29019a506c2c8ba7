// `<dataDir>/server.json`: where the runtime that owns a data folder serves its API, so
// other commands on the same folder talk to it instead of opening the database twice.
// A server that died without removing it leaves a pid the system may give to another
// process; the file therefore records the process's start identity too, and a pid whose
// identity differs is a stale file, not a live server.

import { closeSync, openSync, readFileSync, readlinkSync, readSync, realpathSync, renameSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** What `server.json` holds. */
export interface ServerInfo {
  readonly url: string;
  readonly pid: number;
  /**
   * The process's start identity (`startIdentityOf`): which boot, and when in it the
   * process started. Absent in files written before it was recorded, and null where
   * /proc is not there to read it.
   */
  readonly startedAt?: string | null;
}

/** A server.json larger than this was not written by relaunch; it is not read. */
const MAX_INFO_BYTES = 4096;

/** Where the runtime of a data folder says it serves. */
export function serverInfoPath(dataDir: string): string {
  return path.join(path.resolve(dataDir), 'server.json');
}

/**
 * Records that this process serves the data folder at `url`: its pid and start identity.
 * Written to a temporary file and renamed, so a reader sees the old file or the new one,
 * never half of one.
 */
export function writeServerInfo(dataDir: string, url: string): void {
  const file = serverInfoPath(dataDir);
  const info: ServerInfo = { url, pid: process.pid, startedAt: startIdentityOf(process.pid) };
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(info)}\n`);
  renameSync(temporary, file);
}

/**
 * The live server of a data folder, or null. A file is trusted only when its pid is a
 * running process (not a zombie) that is still the process that wrote it: its start
 * identity matches, or, for a file without one, it runs this same Node executable. A
 * missing, unreadable or malformed file, or one not naming a loopback http URL, is null.
 */
export function findLocalServer(dataDir: string): ServerInfo | null {
  const info = readServerInfo(serverInfoPath(dataDir));
  if (info === null || !isRunning(info.pid)) return null;
  if (typeof info.startedAt === 'string') {
    const now = startIdentityOf(info.pid);
    // No identity to compare: without /proc, kill(0) is all there is; with it, the process just ended.
    if (now === null) return procAvailable() ? null : info;
    return now === info.startedAt ? info : null;
  }
  return runsThisExecutable(info.pid) ? info : null;
}

/**
 * A process's start identity on Linux: the boot id and the start time in clock ticks
 * since boot (field 22 of /proc/<pid>/stat), e.g. `3f1c...:123456`. A pid reused by a new
 * process, in this boot or a later one, has another. Null where /proc cannot tell (not
 * Linux, or no such process).
 */
export function startIdentityOf(pid: number): string | null {
  try {
    const bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    const startTime = procStatFields(pid)[STARTTIME_AFTER_COMM];
    return startTime === undefined ? null : `${bootId}:${startTime}`;
  } catch {
    return null;
  }
}

/** Field 22 (starttime), counted in the fields after `(comm)`, which start at field 3. */
const STARTTIME_AFTER_COMM = 22 - 3;

/** The fields of /proc/<pid>/stat after the command name, which may itself hold spaces and parentheses. */
function procStatFields(pid: number): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

function readServerInfo(file: string): ServerInfo | null {
  let text: string;
  try {
    // Only a small regular file: a FIFO or a device put in its place would block or never end.
    const info = statSync(file);
    if (!info.isFile() || info.size > MAX_INFO_BYTES) return null;
    const fd = openSync(file, 'r');
    try {
      const buffer = Buffer.alloc(MAX_INFO_BYTES);
      text = buffer.subarray(0, readSync(fd, buffer, 0, MAX_INFO_BYTES, 0)).toString('utf8');
    } finally {
      closeSync(fd);
    }
  } catch {
    return null;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null) return null;
  const { url, pid, startedAt } = parsed as Record<string, unknown>;
  // pid 0 and negative pids name process groups (-1: every process), which always "exist".
  if (typeof pid !== 'number' || !Number.isSafeInteger(pid) || pid <= 0) return null;
  if (typeof url !== 'string' || !isLoopbackHttp(url)) return null;
  if (startedAt !== undefined && startedAt !== null && typeof startedAt !== 'string') return null;
  return { url, pid, ...(startedAt === undefined ? {} : { startedAt }) };
}

/** The local server listens on 127.0.0.1 only: any other address in the file is not its. */
function isLoopbackHttp(url: string): boolean {
  if (!URL.canParse(url)) return false;
  const parsed = new URL(url);
  return parsed.protocol === 'http:' && (parsed.hostname === '127.0.0.1' || parsed.hostname === 'localhost') && parsed.port !== '';
}

/** Whether the pid is a process that runs: not gone, and not a zombie waiting to be reaped. */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    return procStatFields(pid)[0] !== 'Z';
  } catch {
    return true; // no /proc to ask: kill(0) is all there is
  }
}

/**
 * For a file written before start identities were recorded: whether the pid runs the
 * Node executable this process runs, as the server that wrote it did. A pid reused by any
 * other program (a shell, `sleep`) is not the server. True where /proc cannot tell.
 */
function runsThisExecutable(pid: number): boolean {
  let executable: string;
  try {
    // A binary replaced while it runs (an upgrade) reads as "<path> (deleted)".
    executable = readlinkSync(`/proc/${pid}/exe`).replace(/ \(deleted\)$/, '');
  } catch (error) {
    // EACCES: another user's process, which /proc will not describe; ENOENT without /proc: no way to tell.
    return (error as NodeJS.ErrnoException).code !== 'ENOENT' || !procAvailable();
  }
  return executable === realpathSync(process.execPath);
}

function procAvailable(): boolean {
  try {
    statSync('/proc/self/stat');
    return true;
  } catch {
    return false;
  }
}
