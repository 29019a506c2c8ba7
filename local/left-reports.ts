// Reports a node wrote but the database never stored. A local node's agent writes each
// phase's report into its folder (`<phase>.report.json`, or `<phase>.stopped.json` for a
// phase it stopped before it exited) before it sends it; when the database refused it (a
// full disk) or the runtime stopped first, the file is all that is left of the exit code,
// or of the phase the node was in and its last lines. The next runtime on the folder reads
// it, so nothing a node reported is lost with the runtime that ran it.

import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import type { AttemptRecord, NodeReport } from '../lib/model.ts';
import type { Phase } from '../lib/policy/types.ts';
import { SETUP_MS_MAX, STOP_CAUSES } from '../lib/agent/protocol.ts';
import { keepTail, storedTailMaxBytes } from '../lib/report-tail.ts';
import * as z from '../lib/zod.ts';
import { attemptFile } from './paths.ts';

/** The largest report file read: the agent's output tail is at most a few KiB. */
const MAX_REPORT_FILE_BYTES = 1024 * 1024;

const PHASES: readonly Phase[] = ['setup', 'run'];

/** A report as the agent writes it (the body of `POST .../report`). */
const ReportFileSchema = z.object({
  nodeRank: z.number().check(z.int(), z.minimum(0)),
  phase: z.enum(['setup', 'run']),
  exitCode: z.number().check(z.int(), z.minimum(0), z.maximum(255)),
  /** How long setup itself ran (a setup report's; lib/agent/protocol.ts): dates setup's start. */
  setupMs: z.optional(z.number().check(z.int(), z.minimum(0))),
  outputTail: z.string(),
});

/** A stopped report as the agent writes it: the cause, the last lines, and never a code. */
const StoppedFileSchema = z.strictObject({
  nodeRank: z.number().check(z.int(), z.minimum(0)),
  phase: z.enum(['setup', 'run']),
  stopped: z.enum(STOP_CAUSES),
  outputTail: z.string(),
});

/**
 * The reports of `attempt`'s nodes found in their folders and not stored on the attempt,
 * setup before run, node by node: a phase's exit code (`<phase>.report.json`), else its
 * stopped report (`<phase>.stopped.json`), as the agent never writes both for one phase
 * and a code, when there is one, is what decides. A file that is missing, too large, not
 * JSON, or not a report of that node and phase is no report: the agent writes each whole
 * before it sends it, so any other file was not written by it. A node kept for a later
 * attempt keeps this attempt's files under its name (paths.ts attemptFile).
 */
export function leftReports(dataDir: string, attempt: AttemptRecord, numNodes: number, at: string): NodeReport[] {
  const found: NodeReport[] = [];
  const maxTail = storedTailMaxBytes(numNodes);
  for (const { nodeRank } of attempt.instances) {
    const file = (phase: Phase, rest: string) => attemptFile(dataDir, attempt.jobId, attempt.attempt, nodeRank, phase, rest);
    for (const phase of PHASES) {
      if (attempt.reports.some((report) => report.nodeRank === nodeRank && report.phase === phase)) continue;
      const ended = reportFile(file(phase, 'report.json'), ReportFileSchema, nodeRank, phase);
      if (ended !== null) {
        const setupTime = phase === 'setup' && ended.setupMs !== undefined ? { setupMs: Math.min(ended.setupMs, SETUP_MS_MAX) } : {};
        found.push({ nodeRank, phase, exitCode: ended.exitCode, outputTail: keepTail(ended.outputTail, maxTail), reportedAt: at, ...setupTime });
        continue;
      }
      const stopped = reportFile(file(phase, 'stopped.json'), StoppedFileSchema, nodeRank, phase);
      if (stopped !== null) found.push({ nodeRank, phase, stopped: stopped.stopped, outputTail: keepTail(stopped.outputTail, maxTail), reportedAt: at });
    }
  }
  return found;
}

/** The file's report when it is one of that node and phase by the schema; null otherwise. */
function reportFile<T extends { readonly nodeRank: number; readonly phase: Phase }>(file: string, schema: z.ZodMiniType<T>, nodeRank: number, phase: Phase): T | null {
  const text = readSmallFile(file);
  if (text === null) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  const report = schema.safeParse(parsed);
  if (!report.success || report.data.nodeRank !== nodeRank || report.data.phase !== phase) return null;
  return report.data;
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
