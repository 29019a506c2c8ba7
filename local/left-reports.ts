// Reports a node wrote but the database never stored. A local node's agent writes each
// phase's report into its folder (`<phase>.report.json`) before it sends it; when the
// database refused it (a full disk) or the runtime stopped first, the file is all that is
// left of the exit code. The next runtime on the folder reads it, so no exit code a node
// reached is lost with the runtime that ran it.

import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import path from 'node:path';
import type { AttemptRecord, NodeReport } from '../lib/model.ts';
import type { Phase } from '../lib/policy/types.ts';
import { keepTail, storedTailMaxBytes } from '../lib/report-tail.ts';
import * as z from '../lib/zod.ts';
import { nodeDir } from './paths.ts';

/** The largest report file read: the agent's output tail is at most a few KiB. */
const MAX_REPORT_FILE_BYTES = 1024 * 1024;

const PHASES: readonly Phase[] = ['setup', 'run'];

/** A report as the agent writes it (the body of `POST .../report`). */
const ReportFileSchema = z.object({
  nodeRank: z.number().check(z.int(), z.minimum(0)),
  phase: z.enum(['setup', 'run']),
  exitCode: z.number().check(z.int(), z.minimum(0), z.maximum(255)),
  outputTail: z.string(),
});

/**
 * The reports of `attempt`'s nodes found in their folders and not stored on the attempt,
 * setup before run, node by node. A file that is missing, too large, not JSON, or not a
 * report of that node and phase is no report: the agent writes each whole before it sends
 * it, so any other file was not written by it.
 */
export function leftReports(dataDir: string, attempt: AttemptRecord, numNodes: number, at: string): NodeReport[] {
  const found: NodeReport[] = [];
  for (const { nodeRank } of attempt.instances) {
    for (const phase of PHASES) {
      if (attempt.reports.some((report) => report.nodeRank === nodeRank && report.phase === phase)) continue;
      const text = readSmallFile(path.join(nodeDir(dataDir, attempt.jobId, attempt.attempt, nodeRank), `${phase}.report.json`));
      if (text === null) continue;
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        continue;
      }
      const report = ReportFileSchema.safeParse(parsed);
      if (!report.success || report.data.nodeRank !== nodeRank || report.data.phase !== phase) continue;
      const { exitCode, outputTail } = report.data;
      found.push({ nodeRank, phase, exitCode, outputTail: keepTail(outputTail, storedTailMaxBytes(numNodes)), reportedAt: at });
    }
  }
  return found;
}

/** A regular file's text, read up to MAX_REPORT_FILE_BYTES; null when absent, unreadable or larger. */
function readSmallFile(file: string): string | null {
  let fd: number;
  try {
    // Non-blocking: a FIFO put in its place must not hold the open up.
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    if (!fstatSync(fd).isFile()) return null;
    const buffer = Buffer.alloc(MAX_REPORT_FILE_BYTES + 1);
    let length = 0;
    for (;;) {
      const read = readSync(fd, buffer, length, buffer.length - length, null);
      if (read === 0) break;
      length += read;
      if (length > MAX_REPORT_FILE_BYTES) return null;
    }
    return buffer.subarray(0, length).toString('utf8');
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}
