// Where the local runtime keeps each node's folder (its agent's scripts and output) and
// each job's working folder, for the compute that writes them and the commands that read
// them.

import { closeSync, existsSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
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
  const ranks = readdirSync(dir)
    .filter((entry) => /^[0-9]+$/.test(entry))
    .map(Number)
    .sort((a, b) => a - b);
  return ranks.flatMap((rank) =>
    (['setup', 'run'] as const).map((phase) => {
      const file = path.join(nodeDir(dataDir, jobId, attempt, rank), `${phase}.log`);
      return { rank, phase, file, truncatedMark: `${file}.truncated` };
    }),
  );
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
