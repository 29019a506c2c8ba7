// Hostile YAML benchmark: how long the task parser (every task file and API body) and the
// chaos parser take to refuse texts shaped to cost them the most, each filling the 256 KiB
// body limit; and, for scale, a valid file at the largest shape they accept.

import { performance } from 'node:perf_hooks';
import { parseChaosFile } from '../lib/chaos-file/parse.ts';
import { parseJobFile } from '../lib/task-file/parse.ts';
import { HOSTILE_CHAOS, HOSTILE_TASKS } from './hostile-texts.ts';
import type { Benchmark, BenchResult } from './types.ts';

/** Target: the slowest refusal, well under a second. */
export const MAX_REFUSAL_MS = 250;
/** Tries of each text; the median is reported. */
const TRIES = 5;

/** Median ms of `parse(text)`, which must throw (a refusal). */
function refusalMs(parse: (text: string) => unknown, text: string): number {
  const times: number[] = [];
  for (let i = 0; i < TRIES; i += 1) {
    const start = performance.now();
    try {
      parse(text);
    } catch {
      times.push(performance.now() - start);
      continue;
    }
    throw new Error('a hostile text was accepted');
  }
  return times.sort((a, b) => a - b)[Math.floor(TRIES / 2)] ?? 0;
}

/** Median ms of parsing a text that is accepted. */
function acceptMs(parse: (text: string) => unknown, text: string): number {
  const times: number[] = [];
  for (let i = 0; i < TRIES; i += 1) {
    const start = performance.now();
    parse(text);
    times.push(performance.now() - start);
  }
  return times.sort((a, b) => a - b)[Math.floor(TRIES / 2)] ?? 0;
}

export const hostileYamlBenchmark: Benchmark = {
  name: 'hostile YAML: time to refuse a body shaped to cost the parser most',
  async run(): Promise<BenchResult> {
    const rows = [
      ...HOSTILE_TASKS.map((task) => ({ label: `task: ${task.name}`, bytes: task.text.length, ms: refusalMs(parseJobFile, task.text) })),
      { label: 'chaos file: a flow mapping of tens of thousands of keys', bytes: HOSTILE_CHAOS.length, ms: refusalMs(parseChaosFile, HOSTILE_CHAOS) },
    ];
    const task = `run: echo hi\nenvs:\n${Array.from({ length: 256 }, (_, i) => `  E${i}: x`).join('\n')}\n`;
    const pipeline = `name: p\n---\n${Array.from({ length: 16 }, () => task).join('---\n')}`;
    const valid = { label: 'valid: a pipeline of 16 tasks of 256 envs (accepted)', bytes: pipeline.length, ms: acceptMs(parseJobFile, pipeline) };
    const slowest = Math.max(...rows.map((row) => row.ms));
    return {
      lines: [
        `median of ${TRIES} tries each (ms)`,
        '',
        '| text | bytes | ms |',
        '|---|---:|---:|',
        ...[...rows, valid].map((row) => `| ${row.label} | ${row.bytes} | ${row.ms.toFixed(1)} |`),
      ],
      checks: [{ target: `every hostile text refused within ${MAX_REFUSAL_MS} ms`, met: slowest <= MAX_REFUSAL_MS, detail: `slowest ${slowest.toFixed(1)} ms` }],
    };
  },
};
