// Following a job: each status change and decision as it happens, and the job's output.

import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { isTerminal, type JobStatus } from '../lib/status.ts';
import type { AttemptView, JobView } from '../lib/views.ts';
import type { Io } from './exit.ts';
import type { JobsClient } from './jobs-client.ts';
import { attemptLogPath } from './logs-files.ts';

/** How often the job is read while it runs. */
const POLL_MS = 200;

/** What to show while following. */
export interface FollowOptions {
  /** Print status changes and decisions (false for --json). */
  readonly progress: boolean;
  /** Print the job's output from the local log files (needs a data folder). */
  readonly output: boolean;
  /** Stops following early (Ctrl-C). */
  readonly signal?: AbortSignal;
}

/** Follows the job until it is terminal (or the signal aborts); returns its last view. */
export async function followJob(client: JobsClient, jobId: string, io: Io, options: FollowOptions): Promise<JobView> {
  let status: JobStatus | null = null;
  const shown = new Map<number, { started: boolean; decided: boolean }>();
  const logs = new LogTail();
  for (;;) {
    const view = await client.getJob(jobId);
    for (const attempt of view.attempts) {
      const seen = shown.get(attempt.attempt) ?? { started: false, decided: false };
      if (options.progress && !seen.started) io.out(`${clock()} attempt ${attempt.attempt} launched (${where(attempt)})`);
      if (options.output && client.dataDir !== null) logs.print(attemptLogPath(client.dataDir, jobId, attempt.attempt), io);
      if (options.progress && !seen.decided && attempt.decision !== null) io.out(`${clock()} ${describeDecision(attempt)}`);
      shown.set(attempt.attempt, { started: true, decided: attempt.decision !== null });
    }
    if (options.progress && view.status !== status) io.out(`${clock()} ${jobId}: ${view.status}`);
    status = view.status;
    if (isTerminal(view.status) || options.signal?.aborted === true) return view;
    await sleep(POLL_MS, undefined, { signal: options.signal }).catch(() => undefined);
  }
}

/** `attempt 2: exit code 29 (run) → RESTART: <reason>`. */
export function describeDecision(attempt: AttemptView): string {
  const codes = attempt.exitCodes.length === 0 ? '' : ` exit ${attempt.exitCodes.map((c) => (c === null ? '?' : String(c))).join('+')}`;
  const phase = attempt.phase === null ? '' : ` (${attempt.phase})`;
  return `attempt ${attempt.attempt}: ${attempt.outcome ?? 'RUNNING'}${codes}${phase} -> ${attempt.decision ?? 'pending'}: ${attempt.reason ?? ''}`;
}

function where(attempt: AttemptView): string {
  const place = attempt.placement === null ? 'placing' : [attempt.placement.instanceType, attempt.placement.zone ?? attempt.placement.region].join(' in ');
  return `${attempt.market}, ${place}`;
}

function clock(): string {
  return new Date().toISOString().slice(11, 19);
}

/** Prints what was appended to each log file since the last look. */
class LogTail {
  private readonly offsets = new Map<string, number>();

  print(file: string, io: Io): void {
    let size: number;
    try {
      size = statSync(file).size;
    } catch {
      return;
    }
    const from = this.offsets.get(file) ?? 0;
    if (size <= from) return;
    const buffer = Buffer.alloc(size - from);
    const fd = openSync(file, 'r');
    try {
      readSync(fd, buffer, 0, buffer.length, from);
    } finally {
      closeSync(fd);
    }
    this.offsets.set(file, size);
    io.out(buffer.toString('utf8'));
  }
}
