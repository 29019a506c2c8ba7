// Where a user's data folder is by default, and whether a data folder can be one, checked
// before the local runtime opens it: a folder relaunch cannot write would otherwise fail
// deep inside dynalite ("Database is closed", with a stack trace) or halfway through a job.

import { accessSync, constants, statSync, type Stats } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { InvalidInputError } from '../lib/errors.ts';

/**
 * The data folder when neither `--data-dir` nor RELAUNCH_DATA_DIR names one: one per user,
 * whatever folder a command runs in, so every `relaunch` of the user sees one queue, as
 * `sky jobs queue` does. It is state (a job queue, its logs, its database) in the XDG Base
 * Directory sense: `$XDG_STATE_HOME/relaunch`, or `~/.local/state/relaunch` when that is
 * unset or not an absolute path (the specification says to ignore a relative one).
 */
export function defaultDataDir(environment: NodeJS.ProcessEnv = process.env, home: string = homedir()): string {
  const state = environment.XDG_STATE_HOME;
  const base = state !== undefined && path.isAbsolute(state) ? state : path.join(home, '.local', 'state');
  return path.join(base, 'relaunch');
}

/** The database's folder in a data folder; LevelDB writes in it on every open. */
const DATABASE_FOLDER = 'db';

/**
 * Checks that `dir` is, or can be made as, a folder this process may write: the folder
 * and its database folder when they exist, else the nearest existing parent, in which it
 * would be made. Permission is asked of the system (`access(W_OK)`), so a read-only mount
 * is refused even for root, who may write anything else.
 *
 * @throws InvalidInputError at `--data-dir`, naming the folder and why it will not do: a
 *   file or a path through one, a read-only file system, or no permission to write.
 */
export function assertWritableDataDir(dir: string): void {
  const refuse = (why: string): never => {
    throw new InvalidInputError([{ path: '--data-dir', message: `expected a folder relaunch can write, got "${dir}", ${why}` }]);
  };
  const target = path.resolve(dir);
  let existing = target;
  let info = statOrUndefined(existing, refuse);
  while (info === undefined && path.dirname(existing) !== existing) {
    existing = path.dirname(existing);
    info = statOrUndefined(existing, refuse);
  }
  if (info === undefined) return refuse('under no folder that exists');
  if (!info.isDirectory()) {
    return refuse(existing === target ? `which is ${kindOf(info)}` : `but "${existing}" is ${kindOf(info)}, not a folder`);
  }
  const denied = writeDenied(existing);
  if (denied !== undefined) return refuse(existing === target ? `which is ${denied}` : `which does not exist and cannot be made: "${existing}" is ${denied}`);
  if (existing !== target) return;
  const database = path.join(target, DATABASE_FOLDER);
  const databaseInfo = statOrUndefined(database, refuse);
  if (databaseInfo === undefined) return;
  const databaseDenied = databaseInfo.isDirectory() ? writeDenied(database) : `${kindOf(databaseInfo)}, not a folder`;
  if (databaseDenied !== undefined) refuse(`whose database folder "${database}" is ${databaseDenied}`);
}

/** The path's status, undefined when nothing is there; a path that cannot be followed is refused. */
function statOrUndefined(where: string, refuse: (why: string) => never): Stats | undefined {
  try {
    return statSync(where);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ENOTDIR') return refuse('whose path runs through a file');
    return refuse(`whose path cannot be followed (${code ?? (error as Error).message})`);
  }
}

/** Why this process may not create files in the folder, or undefined when it may. */
function writeDenied(folder: string): string | undefined {
  try {
    accessSync(folder, constants.W_OK | constants.X_OK);
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EROFS') return 'on a read-only file system';
    if (code === 'EACCES' || code === 'EPERM') return 'not writable by this user';
    return `not writable (${code ?? (error as Error).message})`;
  }
}

function kindOf(info: Stats): string {
  if (info.isFile()) return 'a file';
  if (info.isCharacterDevice() || info.isBlockDevice()) return 'a device';
  if (info.isFIFO()) return 'a FIFO';
  if (info.isSocket()) return 'a socket';
  return 'not a folder';
}
