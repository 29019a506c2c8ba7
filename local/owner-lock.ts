// One owner per data folder: an flock(2) on `<dataDir>/owner.lock`, held for the owner's
// whole life. Node has no flock call, so the util-linux `flock` command takes it on a file
// descriptor this process opened and hands to it: a flock belongs to the open file, which
// this process keeps open, so the lock stays after the command exits and goes only when
// this process closes the file or dies (kill -9 included: the kernel closes its files).
// Nothing is left to clean up after a crash, and no pid in a file decides who owns.
// A lock is only as good as what it locks: the file is opened without following a link or
// blocking (a FIFO put in its place is refused, never waited on), a lock the `flock`
// command says it took is checked from a second open file, and the owner records which
// file (device and inode) it locked, so a lock file removed or replaced while it runs is
// seen for what it is (server-info.ts).

import { spawnSync } from 'node:child_process';
import { closeSync, constants, fstatSync, lstatSync, openSync, type Stats } from 'node:fs';
import path from 'node:path';
import { InvalidInputError, RelaunchError } from '../lib/errors.ts';

/** The lock file's name in a data folder. */
export const OWNER_LOCK_FILE = 'owner.lock';

/** flock's exit status when another open file holds the lock (`--conflict-exit-code`). */
const HELD_ELSEWHERE = 75;

/** Where a data folder's lock lives. */
export function ownerLockPath(dataDir: string): string {
  return path.join(path.resolve(dataDir), OWNER_LOCK_FILE);
}

/** The data folder's lock, held by this process until `release`. */
export class OwnerLock {
  private fd: number | null;

  private constructor(
    fd: number,
    readonly dataDir: string,
    /** Which file this lock is on (`fileIdentity`): the owner records it in server.json. */
    readonly identity: string,
  ) {
    this.fd = fd;
  }

  /**
   * Takes the folder's lock if no other process holds it; null when one does. The folder
   * must exist.
   *
   * @throws InvalidInputError at `--data-dir` when the lock file cannot be opened, or the
   *   `flock` command (util-linux) is missing or fails.
   */
  static tryAcquire(dataDir: string): OwnerLock | null {
    const fd = openLockFile(dataDir, 'a');
    try {
      if (!lockOpenFile(fd, dataDir)) {
        closeSync(fd);
        return null;
      }
      assertLockHeld(dataDir);
    } catch (error) {
      closeSync(fd);
      throw error;
    }
    return new OwnerLock(fd, path.resolve(dataDir), fileIdentity(fstatSync(fd)));
  }

  /** Whether this process still holds the lock. */
  get held(): boolean {
    return this.fd !== null;
  }

  /** Lets the lock go (closing the file releases it). Idempotent. */
  release(): void {
    if (this.fd === null) return;
    const fd = this.fd;
    this.fd = null;
    closeSync(fd);
  }
}

/**
 * Whether some process holds the folder's lock now. Asked by taking the lock on a file of
 * its own and letting it go at once, so it answers true in the owner itself too. The file
 * is opened to read only (a flock needs no more), so a folder this user may not write is
 * asked all the same; a folder with no lock file has never been owned.
 */
export function isOwned(dataDir: string): boolean {
  const fd = openLockFile(dataDir, 'r');
  if (fd === null) return false;
  try {
    return !lockOpenFile(fd, dataDir);
  } finally {
    closeSync(fd);
  }
}

/** `<device>:<inode>` of a file: which file a lock is on, whatever its name now. */
export function fileIdentity(info: Pick<Stats, 'dev' | 'ino'>): string {
  return `${info.dev}:${info.ino}`;
}

/** The identity of the file now at `<dataDir>/owner.lock` (the name, not a link's target); null when none is there. */
export function lockFileIdentity(dataDir: string): string | null {
  try {
    return fileIdentity(lstatSync(ownerLockPath(dataDir)));
  } catch {
    return null;
  }
}

/**
 * Checks, from a second open file, that the lock just taken is held: a `flock` command
 * that exits 0 without locking (a stand-in on PATH, a broken build) would otherwise let
 * every process own the folder at once, and one would delete another's files.
 *
 * @throws InvalidInputError at `--data-dir` when the second open could take the lock too.
 */
function assertLockHeld(dataDir: string): void {
  const probe = openLockFile(dataDir, 'r');
  if (probe === null) return; // removed this instant: findFolderOwner sees a lock file that is not the owner's
  try {
    if (!lockOpenFile(probe, dataDir)) return;
  } finally {
    closeSync(probe);
  }
  throw new InvalidInputError([
    {
      path: '--data-dir',
      message: `cannot take ownership of "${dataDir}": the flock command on PATH said it locked ${ownerLockPath(dataDir)}, yet a second open of the file could lock it too, so it keeps no other process out: put util-linux's flock first on PATH`,
    },
  ]);
}

/**
 * Opens the lock file: creating it if need be (`a`), or only if it exists (`r`, null when
 * it does not). Never through a symbolic link, never blocking (a FIFO would block an open
 * until someone opened its other end), and only a regular file: anything else put in its
 * place is refused, naming it.
 */
function openLockFile(dataDir: string, flags: 'a'): number;
function openLockFile(dataDir: string, flags: 'r'): number | null;
function openLockFile(dataDir: string, flags: 'a' | 'r'): number | null {
  const file = ownerLockPath(dataDir);
  const mode = flags === 'a' ? constants.O_RDWR | constants.O_CREAT : constants.O_RDONLY;
  let fd: number;
  try {
    // The user's alone: a flock needs only a file open to read, so a file others could read
    // would let any user of the machine hold the folder's lock and keep relaunch out of it.
    fd = openSync(file, mode | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    if (flags === 'r' && ['ENOENT', 'ENOTDIR'].includes(code)) return null;
    if (code === 'ELOOP') throw notALockFile(dataDir, 'a symbolic link');
    if (code === 'ENXIO') throw notALockFile(dataDir, 'a FIFO');
    throw new InvalidInputError([{ path: '--data-dir', message: `expected a folder relaunch can write, got "${dataDir}": its lock file ${file} cannot be opened (${code})` }]);
  }
  const info = fstatSync(fd);
  if (info.isFile()) return fd;
  closeSync(fd);
  throw notALockFile(dataDir, info.isFIFO() ? 'a FIFO' : info.isDirectory() ? 'a folder' : info.isSocket() ? 'a socket' : 'a device');
}

/** The refusal of a lock file that is not a regular file. */
function notALockFile(dataDir: string, what: string): InvalidInputError {
  const file = ownerLockPath(dataDir);
  return new InvalidInputError([
    {
      path: '--data-dir',
      message: `cannot tell who owns "${dataDir}": its lock file ${file} is ${what}, not the file relaunch makes; with no relaunch process on this folder, remove it (rm ${file}) and try again`,
    },
  ]);
}

/** Takes an exclusive flock on the open file `fd` without waiting; false when another open file holds it. */
function lockOpenFile(fd: number, dataDir: string): boolean {
  const result = spawnSync('flock', ['--exclusive', '--nonblock', '--conflict-exit-code', String(HELD_ELSEWHERE), '3'], {
    stdio: ['ignore', 'ignore', 'pipe', fd],
    encoding: 'utf8',
  });
  if (result.error !== undefined) {
    const missing = (result.error as NodeJS.ErrnoException).code === 'ENOENT';
    const why = missing ? 'the flock command (util-linux) is not installed' : `flock could not run (${result.error.message})`;
    throw new InvalidInputError([{ path: '--data-dir', message: `cannot take ownership of "${dataDir}": ${why}` }]);
  }
  if (result.status === 0) return true;
  if (result.status === HELD_ELSEWHERE) return false;
  const said = result.stderr.trim();
  throw new InvalidInputError([{ path: '--data-dir', message: `cannot take ownership of "${dataDir}": flock exited ${result.status ?? result.signal}${said === '' ? '' : `: ${said}`}` }]);
}

/** The data folder is owned by another process: this one may not open it. */
export class DataDirInUseError extends RelaunchError {
  override readonly name = 'DataDirInUseError';
  constructor(readonly dataDir: string) {
    super(`the data folder ${dataDir} is in use by another relaunch process`);
  }
}
