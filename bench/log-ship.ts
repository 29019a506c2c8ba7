// The agent's shipper to CloudWatch Logs against moto_server, judged against its goals. The
// measure is test/contract/aws/log-ship-measure.ts, which runs the shipped agent with the
// tests' stand-in API and moto (what it measures, and how, is said there); a benchmark may
// not import the tests' harness (scripts/folder-cycles.ts), so this runs it as a program and
// reads its one JSON line.
//
// `npm run bench -- log-ship` (about two and a half minutes).

import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Benchmark, BenchResult } from './types.ts';

/** The goals: per node, MB/s shipped, the shipper's CPU per MB, print to visible, and the job's slowdown. */
export const LOG_SHIP_GOALS = { throughputMBps: 5, cpuSecondsPerMB: 0.1, p99LatencyMs: 5_000, slowdownRatio: 1.05 } as const;

/** What the measure prints: the four figures, and lines saying how they came about. */
export interface LogShipMeasure {
  readonly figures: { readonly throughputMBps: number; readonly cpuSecondsPerMB: number; readonly p99LatencyMs: number; readonly slowdownRatio: number };
  readonly lines: readonly string[];
}

const MEASURE = fileURLToPath(new URL('../test/contract/aws/log-ship-measure.ts', import.meta.url));

export const logShipBenchmark: Benchmark = {
  name: "log-ship: the agent shipping a job's output to CloudWatch Logs on moto",
  async run(): Promise<BenchResult> {
    const { figures, lines } = await measured();
    const { throughputMBps, cpuSecondsPerMB, p99LatencyMs, slowdownRatio } = figures;
    return {
      lines: [JSON.stringify(figures), '', ...lines],
      checks: [
        { target: `throughput at least ${LOG_SHIP_GOALS.throughputMBps} MB/s per node`, met: throughputMBps >= LOG_SHIP_GOALS.throughputMBps, detail: `${throughputMBps} MB/s` },
        { target: `at most ${LOG_SHIP_GOALS.cpuSecondsPerMB} CPU-s per MB shipped`, met: cpuSecondsPerMB <= LOG_SHIP_GOALS.cpuSecondsPerMB, detail: `${cpuSecondsPerMB} CPU-s/MB` },
        { target: `p99 print-to-visible under ${LOG_SHIP_GOALS.p99LatencyMs} ms`, met: p99LatencyMs < LOG_SHIP_GOALS.p99LatencyMs, detail: `${p99LatencyMs} ms` },
        { target: `a CPU-bound job at most ${LOG_SHIP_GOALS.slowdownRatio}x slower with shipping`, met: slowdownRatio <= LOG_SHIP_GOALS.slowdownRatio, detail: `${slowdownRatio}x` },
      ],
    };
  },
};

/** Runs the measure as a child process; its stderr passes through, its last stdout line is the measure. */
function measured(): Promise<LogShipMeasure> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', MEASURE], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      const last = out.trimEnd().split('\n').at(-1) ?? '';
      if (code !== 0) reject(new Error(`the log-ship measure exited ${code}: ${last}`));
      else resolve(JSON.parse(last) as LogShipMeasure);
    });
  });
}
