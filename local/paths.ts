// Where the local runtime keeps each node's folder (its agent's scripts and output) and
// each job's working folder, for the compute that writes them and the commands that read
// them.

import { closeSync, existsSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync, readSync, renameSync, statSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import type { Phase } from '../lib/policy/types.ts';

/** `<dataDir>/nodes/<jobId>/<attempt>/<rank>`: one node's folder, the agent's root. */
export function nodeDir(dataDir: string, jobId: string, attempt: number, rank: number): string {
  return path.join(attemptDir(dataDir, jobId, attempt), String(rank));
}

/** `<dataDir>/jobs/<jobId>`: a job's working folder when the task has no workdir. */
export function jobWorkDir(dataDir: string, jobId: string): string {
  return path.join(path.resolve(dataDir), 'jobs', jobId);
}

/** `<dataDir>/sources`: the store of uploaded workdirs and file mounts, one archive per SHA-256. */
export function sourcesDir(dataDir: string): string {
  return path.join(path.resolve(dataDir), 'sources');
}

/**
 * `<dataDir>/buckets/<name>`: the folder standing in for a named bucket; a nameless mount's
 * data is in `<dataDir>/buckets/relaunch-local/mounts/<jobId>/<path>`, as it would be in the
 * stack's own bucket.
 */
export function bucketDir(dataDir: string, name: string): string {
  return path.join(path.resolve(dataDir), 'buckets', name);
}

/**
 * `<dataDir>/buckets/.created/<name>`: the mark `run` leaves on a bucket folder it created,
 * holding the job it was created for (the tags of a bucket on S3). Bucket names cannot
 * start with a dot, so no bucket is named `.created`.
 */
export function createdBucketMark(dataDir: string, name: string): string {
  return path.join(path.resolve(dataDir), 'buckets', '.created', name);
}

/** The bucket a nameless mount's folder is in, locally. */
export const LOCAL_OWN_BUCKET = 'relaunch-local';

/**
 * `<dataDir>/nodes/<jobId>/<attempt>/<rank>/disk`: a node's own disk, fresh each attempt
 * as an instance's is, for a task with a workdir or file mounts: `home` is its home
 * folder, `root` holds the absolute paths it mounts.
 */
export function nodeDiskDir(dataDir: string, jobId: string, attempt: number, rank: number): string {
  return path.join(nodeDir(dataDir, jobId, attempt, rank), 'disk');
}

/** One phase's output on one node, as the agent writes it. */
export interface PhaseLog {
  /** `<attempt>/<rank>/<phase>`: names the log whatever its file is called (a kept node renames it when it moves on). */
  readonly key: string;
  readonly rank: number;
  readonly phase: Phase;
  readonly file: string;
  /** Set when the agent could not write all of it (a full disk): the log stops early. */
  readonly truncatedMark: string;
}

/** The logs of an attempt's phases, node by node, setup before run; [] before any node started. */
export function attemptLogs(dataDir: string, jobId: string, attempt: number): PhaseLog[] {
  const dir = attemptDir(dataDir, jobId, attempt);
  if (!existsSync(dir)) return [];
  // A kept node's folder in a later attempt is a link to the folder it was launched in.
  const ranks = readdirSync(dir, { withFileTypes: true })
    .filter((entry) => /^[0-9]+$/.test(entry.name) && (entry.isDirectory() || entry.isSymbolicLink()))
    .map((entry) => Number(entry.name))
    .sort((a, b) => a - b);
  return ranks.flatMap((rank) =>
    (['setup', 'run'] as const).map((phase) => ({
      key: `${attempt}/${rank}/${phase}`,
      rank,
      phase,
      file: attemptFile(dataDir, jobId, attempt, rank, phase, 'log'),
      truncatedMark: attemptFile(dataDir, jobId, attempt, rank, phase, 'log.truncated'),
    })),
  );
}

/**
 * `<dataDir>/nodes/<jobId>/<attempt>/<rank>/attempt`: the attempt a node serves, written by
 * its agent when it moves to the next one (restart in place). A node that never moved has none.
 */
export const NODE_ATTEMPT_FILE = 'attempt';

/**
 * The file `<phase>.<rest>` (`run.log`, `setup.report.json`, ...) of attempt `attempt` on
 * node `rank`. A node kept for the next attempt is the same agent in the same folder (the
 * later attempt's folder is a link to it): when it moves on, its agent renames the ended
 * attempt's files to `<phase>.attempt-<n>.<rest>` and writes the attempt it now serves into
 * NODE_ATTEMPT_FILE. So the attempt's file is its renamed one when that exists; else the
 * plain name, but only while the folder serves this attempt (its mark says so, or it has no
 * mark and is not a link: the node's own launch folder); else the renamed name, which does
 * not exist (the node has not moved to the attempt yet, or the phase wrote nothing in it).
 * Re-resolve on every read: the name changes when the node moves.
 */
export function attemptFile(dataDir: string, jobId: string, attempt: number, rank: number, phase: Phase, rest: string): string {
  const dir = nodeDir(dataDir, jobId, attempt, rank);
  const renamed = path.join(dir, `${phase}.attempt-${attempt}.${rest}`);
  if (existsSync(renamed)) return renamed;
  return servesAttempt(dataDir, jobId, attempt, rank) ? path.join(dir, `${phase}.${rest}`) : renamed;
}

/**
 * Whether node `rank`'s folder of attempt `attempt` is, right now, the folder of a node
 * serving that attempt (see attemptFile): false once the node moved to a later attempt, and
 * for a kept node's link until its agent has moved to this one. A folder that does not exist
 * serves it (nothing else can be there).
 */
export function servesAttempt(dataDir: string, jobId: string, attempt: number, rank: number): boolean {
  const dir = nodeDir(dataDir, jobId, attempt, rank);
  let mark: string;
  try {
    mark = readFileSync(path.join(dir, NODE_ATTEMPT_FILE), 'utf8').trim();
  } catch {
    try {
      return !lstatSync(dir).isSymbolicLink();
    } catch {
      return true;
    }
  }
  return mark === String(attempt);
}

/**
 * Makes node `rank`'s folder of `attempt` a link to `target` (the folder of the attempt the
 * kept node was launched for), relative, so the data folder can move. Said again (a launch
 * tried again) it leaves a link to the same folder as it is and points one to another folder
 * at `target`; it never replaces a real folder there (one a node was launched in).
 */
export function linkNodeDir(dataDir: string, jobId: string, attempt: number, rank: number, target: string): void {
  const link = nodeDir(dataDir, jobId, attempt, rank);
  const to = path.relative(path.dirname(link), path.resolve(target));
  mkdirSync(path.dirname(link), { recursive: true });
  let existing: string | null;
  try {
    existing = lstatSync(link).isSymbolicLink() ? readlinkSync(link) : '';
  } catch {
    existing = null;
  }
  // Linked here already, or a real folder (never replaced).
  if (existing === to || existing === '') return;
  if (existing === null) {
    try {
      symlinkSync(to, link);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      // Made between the look and the link: look again.
      linkNodeDir(dataDir, jobId, attempt, rank, target);
      return;
    }
  }
  // A link elsewhere: replaced whole, by a rename over it.
  const fresh = `${link}.link-${process.pid}`;
  symlinkSync(to, fresh);
  renameSync(fresh, link);
}

function attemptDir(dataDir: string, jobId: string, attempt: number): string {
  return path.join(path.resolve(dataDir), 'nodes', jobId, String(attempt));
}

/**
 * A log's text from the byte `startOf` picks (given the file's size) to its end, with
 * where that was and the size read to; null when the file does not exist (the phase has
 * not written it).
 */
export function readLogFrom(file: string, startOf: (size: number) => number): { readonly text: string; readonly start: number; readonly size: number } | null {
  let size: number;
  try {
    size = statSync(file).size;
  } catch {
    return null;
  }
  const start = Math.min(size, Math.max(0, startOf(size)));
  const buffer = Buffer.alloc(size - start);
  if (buffer.length > 0) {
    const fd = openSync(file, 'r');
    try {
      readSync(fd, buffer, 0, buffer.length, start);
    } finally {
      closeSync(fd);
    }
  }
  return { text: buffer.toString('utf8'), start, size };
}
