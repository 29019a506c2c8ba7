// How long `relaunch` takes to start: the build `npm ci` makes (dist/cli, cli/build.ts)
// against the TypeScript sources through tsx (RELAUNCH_FROM_SOURCE=1), for a command that
// only reads a task file and one that opens the local data folder. CPU is the process's
// own (user and system), read at its exit; each figure is the median of five runs.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { buildCli } from '../cli/build.ts';
import { currentBuild } from '../cli/built.js';
import type { Benchmark, BenchResult } from './types.ts';
import { REPO_ROOT } from '../infra/lambda-catalog.ts';
import { median } from './stats.ts';

const BIN = path.join(REPO_ROOT, 'cli/bin.js');
const RUNS = 5;
/** Target: the build starts a command in at most half the CPU the sources take. */
const MAX_SHARE_OF_SOURCE = 0.5;
/** Prints the process's own CPU time, in ms, as the last line on stderr. */
const REPORT_CPU = 'data:text/javascript,import { writeSync } from "node:fs"; process.on("exit", () => { const u = process.cpuUsage(); writeSync(2, `\\ncpu-ms ${(u.user + u.system) / 1000}\\n`); });';

interface Start {
  readonly cpuMs: number;
  readonly wallMs: number;
}

function start(args: readonly string[], fromSource: boolean): Start {
  const began = performance.now();
  const run = spawnSync(process.execPath, ['--import', REPORT_CPU, BIN, ...args], {
    env: { ...process.env, RELAUNCH_FROM_SOURCE: fromSource ? '1' : '0' },
    encoding: 'utf8',
  });
  const wallMs = performance.now() - began;
  const cpu = /cpu-ms ([0-9.]+)\s*$/.exec(run.stderr);
  if (run.status !== 0 || cpu === null) throw new Error(`relaunch ${args.join(' ')} failed (${run.status}): ${run.stderr}`);
  return { cpuMs: Number(cpu[1]), wallMs };
}

function measure(args: readonly string[], fromSource: boolean): Start {
  start(args, fromSource); // once to warm the file cache and tsx's own cache
  const runs = Array.from({ length: RUNS }, () => start(args, fromSource));
  return { cpuMs: median(runs.map((r) => r.cpuMs)), wallMs: median(runs.map((r) => r.wallMs)) };
}

export const cliStartBenchmark: Benchmark = {
  name: 'cli-start: relaunch built and from source',
  async run(): Promise<BenchResult> {
    if (currentBuild(REPO_ROOT) === undefined) await buildCli(REPO_ROOT);
    const data = mkdtempSync(path.join(tmpdir(), 'relaunch-bench-start-'));
    try {
      const commands = [
        { label: 'relaunch validate examples/fail-fast.yaml', args: ['validate', path.join(REPO_ROOT, 'examples/fail-fast.yaml')] },
        { label: 'relaunch status (opens an empty local data folder)', args: ['status', '--data-dir', data] },
      ];
      const rows = commands.map((command) => ({ ...command, built: measure(command.args, false), source: measure(command.args, true) }));
      return {
        lines: [
          '| command | built: CPU ms | built: wall ms | from source: CPU ms | from source: wall ms |',
          '|---|---:|---:|---:|---:|',
          ...rows.map((row) => `| ${row.label} | ${row.built.cpuMs.toFixed(0)} | ${row.built.wallMs.toFixed(0)} | ${row.source.cpuMs.toFixed(0)} | ${row.source.wallMs.toFixed(0)} |`),
        ],
        checks: rows.map((row) => ({
          target: `${row.label}: built, at most ${MAX_SHARE_OF_SOURCE * 100}% of the CPU from source`,
          met: row.built.cpuMs <= MAX_SHARE_OF_SOURCE * row.source.cpuMs,
          detail: `${row.built.cpuMs.toFixed(0)} ms against ${row.source.cpuMs.toFixed(0)} ms (${((100 * row.built.cpuMs) / row.source.cpuMs).toFixed(0)}%)`,
        })),
      };
    } finally {
      rmSync(data, { recursive: true, force: true });
    }
  },
};
