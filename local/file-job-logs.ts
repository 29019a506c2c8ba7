// FileJobLogs: the local runtime's JobLogReader. A node's output is the log file its agent
// writes (`<node folder>/<phase>.log`, or the attempt's name for it once a kept node moved
// on: paths.ts attemptFile), read from a byte offset, so `relaunch logs` and the
// jobs page read a local job through the same route and pages as a deployed one.

import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { InvalidInputError } from '../lib/errors.ts';
import type { JobLogPage, JobLogReader } from '../lib/ports.ts';
import type { JobLogStream } from '../lib/job-log-names.ts';
import { attemptFile } from './paths.ts';

/** The JobLogReader of a local runtime's data folder. */
export class FileJobLogs implements JobLogReader {
  constructor(private readonly dataDir: string) {}

  /**
   * The file's bytes from `position` (a byte offset; null: 0), at most `maxBytes`: cut
   * after the last whole line that fits, or, for a line longer than that alone, at the last
   * whole character; a file not written yet reads as ''. An offset past the file's end is
   * a cursor of another file (a log only grows).
   */
  async read(stream: JobLogStream, position: string | null, maxBytes: number): Promise<JobLogPage> {
    const from = offsetOf(position);
    const file = attemptFile(this.dataDir, stream.jobId, stream.attempt, stream.nodeRank, stream.phase, 'log');
    let fd: number;
    try {
      fd = openSync(file, 'r');
    } catch {
      return { text: '', position: String(from) };
    }
    try {
      const size = fstatSync(fd).size;
      if (from > size) throw new InvalidInputError([{ path: 'cursor', message: `expected a cursor a page of this log gave: it points past the log's end (byte ${from} of ${size})` }]);
      const buffer = Buffer.alloc(Math.min(maxBytes, size - from));
      const read = buffer.length === 0 ? 0 : readSync(fd, buffer, 0, buffer.length, from);
      const bytes = wholeUtf8(buffer.subarray(0, read), from + read < size);
      return { text: bytes.toString('utf8'), position: String(from + bytes.length) };
    } finally {
      closeSync(fd);
    }
  }

  consoleUrl(): null {
    return null;
  }
}

function offsetOf(position: string | null): number {
  if (position === null) return 0;
  if (!/^(0|[1-9][0-9]{0,14})$/.test(position)) throw new InvalidInputError([{ path: 'cursor', message: `expected a cursor a page of this log gave, got a position of "${position.slice(0, 40)}"` }]);
  return Number(position);
}

/**
 * The bytes up to the last newline when more follows them (a page cut by its bound), else
 * all of them; never a character cut in two (its rest is read with the next page).
 */
function wholeUtf8(bytes: Buffer, more: boolean): Buffer {
  if (more) {
    const newline = bytes.lastIndexOf(0x0a);
    if (newline >= 0) return bytes.subarray(0, newline + 1);
  }
  // Back off from a character whose bytes did not all arrive: its lead byte is within the last three.
  for (let back = 1; back <= Math.min(3, bytes.length); back += 1) {
    const byte = bytes[bytes.length - back] as number;
    if ((byte & 0xc0) === 0x80) continue;
    const needs = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return needs > back ? bytes.subarray(0, bytes.length - back) : bytes;
  }
  return bytes;
}
