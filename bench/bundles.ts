// Bundle benchmark: each Lambda bundled exactly as the CDK construct bundles it (the same
// options, from infra/lambda-catalog.ts), its size, and its cold init: a fresh `node`
// process importing the bundle, median of several runs.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as esbuild from 'esbuild';
import { handlerEntry, LAMBDA_BUNDLE, LAMBDA_NAMES, type LambdaName } from '../infra/lambda-catalog.ts';
import type { BenchResult, Benchmark, TargetCheck } from './types.ts';

/** Targets: a bundle under 1 MB, and its import under 150 ms. */
export const MAX_BUNDLE_BYTES = 1024 * 1024;
export const MAX_COLD_INIT_MS = 150;
/** Fresh processes per bundle; the median is reported. */
const RUNS = 7;

/** One Lambda's numbers. */
export interface BundleMeasurement {
  readonly name: LambdaName;
  readonly bytes: number;
  readonly buildMs: number;
  readonly coldInitMs: number;
  readonly coldInitRunsMs: readonly number[];
}

/** Bundles one Lambda into `dir`/index.mjs with the construct's options; returns its path. */
export async function bundleLambda(name: LambdaName, dir: string): Promise<string> {
  const outfile = join(dir, name, 'index.mjs');
  await esbuild.build({
    entryPoints: [handlerEntry(name)],
    outfile,
    bundle: true,
    platform: LAMBDA_BUNDLE.platform,
    target: LAMBDA_BUNDLE.target,
    format: LAMBDA_BUNDLE.format,
    minify: LAMBDA_BUNDLE.minify,
    sourcemap: LAMBDA_BUNDLE.sourcemap,
    mainFields: [...LAMBDA_BUNDLE.mainFields],
    banner: { js: LAMBDA_BUNDLE.banner },
    external: [...LAMBDA_BUNDLE.external],
    logLevel: 'error',
  });
  return outfile;
}

/**
 * Milliseconds a fresh Node process spends importing the bundle (module load, parse and
 * top-level code: what Lambda's init phase runs before the first event). Node's own
 * start-up is excluded; it is the same for every function.
 */
export function coldInitMs(file: string): number {
  const script = `const t=performance.now();await import(${JSON.stringify(pathToFileURL(file).href)});process.stdout.write(String(performance.now()-t));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    env: { PATH: process.env.PATH, AWS_REGION: 'us-east-1' },
    encoding: 'utf8',
  });
  return Number(out);
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** Bundles and measures every Lambda. */
export async function measureBundles(runs = RUNS): Promise<BundleMeasurement[]> {
  const dir = mkdtempSync(join(tmpdir(), 'relaunch-bench-'));
  try {
    const results: BundleMeasurement[] = [];
    for (const name of LAMBDA_NAMES) {
      const started = performance.now();
      const file = await bundleLambda(name, dir);
      const buildMs = performance.now() - started;
      coldInitMs(file); // one discarded run warms the disk cache, as a deployed package is local
      const coldInitRunsMs = Array.from({ length: runs }, () => coldInitMs(file));
      results.push({ name, bytes: statSync(file).size, buildMs, coldInitMs: median(coldInitRunsMs), coldInitRunsMs });
    }
    return results;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const kb = (bytes: number) => `${(bytes / 1024).toFixed(0)} KiB`;

/** The benchmark module bench/run.ts runs. */
export const bundlesBenchmark: Benchmark = {
  name: `Lambda bundles (esbuild ${esbuild.version}, minified ESM, SDK clients bundled; cold init = median of ${RUNS} fresh processes)`,
  async run(): Promise<BenchResult> {
    const measured = await measureBundles();
    const lines = [
      '| function | bundle | cold init (median) | runs (ms) | build |',
      '|---|---:|---:|---|---:|',
      ...measured.map(
        (m) =>
          `| ${m.name} | ${kb(m.bytes)} | ${m.coldInitMs.toFixed(1)} ms | ${m.coldInitRunsMs.map((r) => r.toFixed(0)).join(' ')} | ${m.buildMs.toFixed(0)} ms |`,
      ),
    ];
    const checks: TargetCheck[] = measured.flatMap((m) => [
      { target: `${m.name} bundle < 1 MiB`, met: m.bytes < MAX_BUNDLE_BYTES, detail: kb(m.bytes) },
      { target: `${m.name} cold init < ${MAX_COLD_INIT_MS} ms`, met: m.coldInitMs < MAX_COLD_INIT_MS, detail: `${m.coldInitMs.toFixed(1)} ms` },
    ]);
    return { lines, checks };
  },
};
