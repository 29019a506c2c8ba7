// How long reading a big phase log takes (LogTail, cli/follow.ts): what `relaunch logs`
// and `run`'s live output do with a job that printed tens of MB, such as `yes x`. One
// node's log is passed on as read; with several nodes every line gets its node's name,
// which costs per line. Each figure is the median of three reads by a fresh LogTail.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LogTail } from '../cli/follow.ts';
import type { PhaseLog } from '../local/paths.ts';
import { median } from './stats.ts';
import type { Benchmark, BenchResult } from './types.ts';

/** A single node's log: about what a job writes when it fills the full-disk test's 96 MB folder. */
const SINGLE_NODE_BYTES = 50 * 1024 * 1024;
/** Each node's log when there are two. */
const TWO_NODE_BYTES = 5 * 1024 * 1024;
/** The lines `yes x` prints: the most lines for the bytes. */
const LINE = 'x\n';
/** Target: a single node's 50 MiB log is read in at most this long. */
const MAX_SINGLE_NODE_MS = 2_000;
const READS = 3;

function medianReadMs(logs: readonly PhaseLog[]): number {
  const times = Array.from({ length: READS }, () => {
    const began = performance.now();
    new LogTail().read(logs);
    return performance.now() - began;
  });
  return median(times);
}

export const logsBenchmark: Benchmark = {
  name: 'logs: reading a 50 MiB phase log',
  async run(): Promise<BenchResult> {
    const dir = mkdtempSync(path.join(tmpdir(), 'relaunch-bench-logs-'));
    try {
      const logOf = (rank: number, bytes: number): PhaseLog => {
        const file = path.join(dir, `node-${rank}-${bytes}.log`);
        writeFileSync(file, LINE.repeat(bytes / LINE.length));
        return { key: `${rank}/${bytes}`, rank, phase: 'run', file, truncatedMark: path.join(dir, `node-${rank}.truncated`) };
      };
      const single = medianReadMs([logOf(0, SINGLE_NODE_BYTES)]);
      const two = medianReadMs([logOf(0, TWO_NODE_BYTES), logOf(1, TWO_NODE_BYTES)]);
      return {
        lines: [
          '| logs read | median ms |',
          '|---|---:|',
          `| one node, 50 MiB of 2-byte lines | ${single.toFixed(0)} |`,
          `| two nodes, 5 MiB of 2-byte lines each, every line named | ${two.toFixed(0)} |`,
        ],
        checks: [{ target: `one node's 50 MiB log read in at most ${MAX_SINGLE_NODE_MS} ms`, met: single <= MAX_SINGLE_NODE_MS, detail: `${single.toFixed(0)} ms` }],
      };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
