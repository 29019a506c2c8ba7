// `<dataDir>/server.json`: where the runtime that owns a data folder serves its API, so
// other commands on the same folder talk to it instead of opening the database twice.
// Who owns the folder is the folder's lock (owner-lock.ts); this file only says where the
// owner serves. A file is believed only while the lock is held and its pid is the process
// that wrote it (same start identity): one a crashed owner left, whatever its form, is
// never a reason to refuse the folder. A believed file also names the lock file its owner
// locked (device and inode): when the file at `owner.lock` is another one, or the lock is
// not held, the lock was removed or replaced behind the owner's back, and no command can
// tell who else may own the folder; each refuses, naming the owner, and deletes nothing.

import { closeSync, openSync, readFileSync, readSync, rmSync, statSync } from 'node:fs';
import { writeWhole } from './write-whole.ts';
import path from 'node:path';
import { isOwned, lockFileIdentity, ownerLockPath } from './owner-lock.ts';

/** What `server.json` holds. */
export interface ServerInfo {
  readonly url: string;
  readonly pid: number;
  /**
   * The process's start identity (`startIdentityOf`): which boot, and when in it the
   * process started. Files written before it was recorded lack it; they are never believed.
   */
  readonly startedAt: string;
  /** The relaunch command that owns the folder (`serve`, `run`, `status`...), for messages. */
  readonly command: string;
  /**
   * Whether its API takes jobs from other commands. Only `relaunch serve` does: any other
   * owner closes its runtime when its own work is done, and a job submitted through it
   * would die with it.
   */
  readonly takesJobs: boolean;
  /**
   * Which file the owner locked (`fileIdentity`: device and inode). Files written before it
   * was recorded lack it; then only whether the lock is held is checked.
   */
  readonly lock?: string;
}

/** Who owns a data folder, as other commands find it. */
export type FolderOwner =
  /** No process holds the folder's lock: the first to take it owns the folder. */
  | { readonly kind: 'none' }
  /** The owner serves its API at `server.url`. */
  | { readonly kind: 'serving'; readonly server: ServerInfo }
  /** A process holds the lock but has not said where it serves (it is starting, or stopping). */
  | { readonly kind: 'busy' }
  /**
   * A live owner serves at `server.url`, but the lock no longer shows it: its lock file was
   * removed or replaced. No command
   * may open the folder, and none may believe it owns it.
   */
  | { readonly kind: 'untrusted'; readonly server: ServerInfo; readonly why: string };

/** What the owner writes in server.json about itself, besides its url and process. */
export interface OwnerRole {
  readonly command: string;
  readonly takesJobs: boolean;
}

/** A server.json larger than this was not written by relaunch; it is not read. */
const MAX_INFO_BYTES = 4096;

/** Why a runtime owned by `role` (pid `pid`) takes no jobs from other commands, and what to do instead. */
export function takesNoJobsMessage(role: OwnerRole, pid: number): string {
  if (role.command === 'serve') return `the runtime serving this data folder (pid ${pid}) is stopping and takes no more jobs: submit again once it has stopped`;
  return `this data folder belongs to \`relaunch ${role.command}\` (pid ${pid}), whose runtime takes no other jobs and stops when its own work ends: start \`relaunch serve\` on the folder to share it between jobs, or give another --data-dir`;
}

/** Where the runtime of a data folder says it serves. */
export function serverInfoPath(dataDir: string): string {
  return path.join(path.resolve(dataDir), 'server.json');
}

/**
 * Records that this process serves the data folder at `url`, as `role`: its pid and start
 * identity. The caller holds the folder's lock. Written to a temporary file and renamed,
 * so a reader sees the old file or the new one, never half of one.
 *
 * @throws Error where /proc cannot tell this process's start identity (not Linux): a file
 *   without one would never be believed.
 */
export function writeServerInfo(dataDir: string, url: string, role: OwnerRole, lock: string | null = lockFileIdentity(dataDir)): void {
  const startedAt = startIdentityOf(process.pid);
  if (startedAt === null) throw new Error('cannot record where this runtime serves: /proc does not tell its start identity (the local runtime runs on Linux)');
  const file = serverInfoPath(dataDir);
  const info: ServerInfo = { url, pid: process.pid, startedAt, command: role.command, takesJobs: role.takesJobs, ...(lock === null ? {} : { lock }) };
  writeWhole(file, `${JSON.stringify(info)}\n`);
}

/** Removes server.json: the owner does so as it starts (a crashed owner's file) and before it lets the lock go. */
export function removeServerInfo(dataDir: string): void {
  rmSync(serverInfoPath(dataDir), { force: true });
}

/**
 * The server.json of a process that is alive and still the one that wrote it (another
 * than this one), whatever the lock says; null when there is none. A process that has just
 * taken the folder's lock and finds one has been given a lock another live owner should
 * hold: the lock cannot be trusted, and that file is not its to delete.
 */
export function liveOwnerInfo(dataDir: string): ServerInfo | null {
  const info = readServerInfo(serverInfoPath(dataDir));
  if (info === null || info.pid === process.pid) return null;
  return isRunning(info.pid) && startIdentityOf(info.pid) === info.startedAt ? info : null;
}

/**
 * Why the folder's lock cannot be trusted while `server`, a live owner, serves it: its
 * lock file is gone or is another file. Null when it is the file the owner locked. (A lock
 * not held under a live owner's file is a `flock` that locks nothing, which
 * OwnerLock.tryAcquire refuses before anything is touched.)
 */
function lockDoubt(dataDir: string, server: ServerInfo): string | null {
  if (server.lock === undefined) return null;
  const now = lockFileIdentity(dataDir);
  if (now === null) return `its lock file ${ownerLockPath(dataDir)} was removed`;
  if (now !== server.lock) return `its lock file ${ownerLockPath(dataDir)} was replaced by another file`;
  return null;
}

/**
 * The refusal of a folder whose lock cannot be trusted, naming its live owner and what to
 * do: stop that process, and the folder is usable again.
 */
export function untrustedMessage(dataDir: string, server: ServerInfo, why: string): string {
  return `cannot tell who owns ${dataDir}: ${why} while \`relaunch ${server.command}\` (pid ${server.pid}) serves it at ${server.url}, so relaunch will not open it beside that process nor touch its files: stop it (kill ${server.pid}; it ends its jobs cleanly) and run the command again`;
}

/**
 * Who owns the data folder: nobody (its lock is free, whatever server.json says), an owner
 * serving at the url its server.json gives, or an owner that has not said where it serves.
 * server.json is believed only while the lock is held, and only when its pid is a running
 * process (not a zombie) that is still the one that wrote it (its start identity matches);
 * a missing, malformed or old-format file, or one not naming a loopback http URL, is not.
 */
export function findFolderOwner(dataDir: string): FolderOwner {
  const info = readServerInfo(serverInfoPath(dataDir));
  const believed = info !== null && isRunning(info.pid) && startIdentityOf(info.pid) === info.startedAt;
  if (believed) {
    const why = lockDoubt(dataDir, info);
    if (why !== null) return { kind: 'untrusted', server: info, why };
  }
  if (!isOwned(dataDir)) return { kind: 'none' };
  return believed ? { kind: 'serving', server: info } : { kind: 'busy' };
}

/** The live server of a data folder, or null (see findFolderOwner). */
export function findLocalServer(dataDir: string): ServerInfo | null {
  const owner = findFolderOwner(dataDir);
  return owner.kind === 'serving' ? owner.server : null;
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
  const { url, pid, startedAt, command, takesJobs, lock } = parsed as Record<string, unknown>;
  // pid 0 and negative pids name process groups (-1: every process), which always "exist".
  if (typeof pid !== 'number' || !Number.isSafeInteger(pid) || pid <= 0) return null;
  if (typeof url !== 'string' || !isLoopbackHttp(url)) return null;
  if (typeof startedAt !== 'string' || typeof command !== 'string' || typeof takesJobs !== 'boolean') return null;
  if (lock !== undefined && typeof lock !== 'string') return null;
  return { url, pid, startedAt, command, takesJobs, ...(lock === undefined ? {} : { lock }) };
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
    return false; // ended between the two looks
  }
}
