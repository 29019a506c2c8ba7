// Bundle benchmark: each Lambda bundled exactly as the CDK construct bundles it (the same
// build, infra/bundle.ts), its size, and its cold init: a fresh `node` process importing
// the bundle, median of several runs.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as esbuild from 'esbuild';
import { bundle, bundleLambda } from '../infra/bundle.ts';
import { LAMBDA_NAMES, REPO_ROOT, type LambdaName } from '../infra/lambda-catalog.ts';
import { median } from './stats.ts';
import type { BenchResult, Benchmark, TargetCheck } from './types.ts';

/** Targets: a package under 1 MB (10^6 bytes, the stricter reading), and its import under 150 ms. */
export const MAX_PACKAGE_BYTES = 1_000_000;
export const MAX_COLD_INIT_MS = 150;
/** Fresh processes per bundle; the median is reported. */
const RUNS = 9;

/** One Lambda's numbers; cold init figures are medians over the runs. */
export interface BundleMeasurement {
  readonly name: LambdaName;
  /** The deployment package (entry and chunks). */
  readonly bytes: number;
  /** What a cold start reads: the entry and the chunks it imports statically. */
  readonly loadedBytes: number;
  readonly buildMs: number;
  readonly initCpuMs: number;
  readonly initWallMs: number;
  /** Cold init plus relaunch's code that loads on first use (the API's parser); null if none. */
  readonly lazyInitCpuMs: number | null;
  readonly runs: readonly InitSample[];
}

/** One import of a bundle in a fresh process: wall-clock and CPU milliseconds. */
export interface InitSample {
  readonly wallMs: number;
  readonly cpuMs: number;
}

/**
 * What a fresh Node process spends importing the bundle (module load, parse and top-level
 * code: what Lambda's init phase runs before the first event), as wall-clock time and as
 * CPU time (user + system, all threads). Node's own start-up is excluded; it is the same
 * for every function. On a shared machine the wall time mostly measures the scheduler, so
 * the target is checked on CPU time, and both are printed. Files after the first are
 * imported after it, in the same process: code that loads on first use.
 */
export function coldInit(...files: readonly string[]): InitSample {
  const imports = files.map((file) => `await import(${JSON.stringify(pathToFileURL(file).href)});`).join('');
  const script =
    `const c=process.cpuUsage(),t=performance.now();${imports}` +
    `const w=performance.now()-t,u=process.cpuUsage(c);process.stdout.write(JSON.stringify({wallMs:w,cpuMs:(u.user+u.system)/1000}));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    env: { PATH: process.env.PATH, AWS_REGION: 'us-east-1' },
    encoding: 'utf8',
  });
  return JSON.parse(out) as InitSample;
}

/**
 * Bundles every Lambda, then imports each in fresh processes, round-robin over the
 * functions (one round: each function once), so a burst of load on a shared machine
 * touches every function alike rather than whichever was being measured.
 */
export async function measureBundles(runs = RUNS): Promise<BundleMeasurement[]> {
  const dir = mkdtempSync(join(tmpdir(), 'relaunch-bench-'));
  try {
    const built = [];
    for (const name of LAMBDA_NAMES) {
      const started = performance.now();
      const output = await bundleLambda(name, join(dir, name));
      built.push({ name, output, buildMs: performance.now() - started, samples: [] as InitSample[], lazySamples: [] as InitSample[] });
    }
    // One discarded round warms the disk cache, as a deployed package is local.
    for (const { output } of built) coldInit(output.entry, ...output.lazyChunks);
    for (let round = 0; round < runs; round += 1) {
      for (const { output, samples, lazySamples } of built) {
        samples.push(coldInit(output.entry));
        if (output.lazyChunks.length > 0) lazySamples.push(coldInit(output.entry, ...output.lazyChunks));
      }
    }
    return built.map(({ name, output, buildMs, samples, lazySamples }) => ({
      name,
      bytes: output.bytes,
      loadedBytes: output.loadedBytes,
      buildMs,
      initCpuMs: median(samples.map((sample) => sample.cpuMs)),
      initWallMs: median(samples.map((sample) => sample.wallMs)),
      lazyInitCpuMs: lazySamples.length > 0 ? median(lazySamples.map((sample) => sample.cpuMs)) : null,
      runs: samples,
    }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * What each dependency costs alone, bundled the same way: where a handler's size and init
 * time come from. Each entry keeps the import alive so nothing is shaken out.
 */
const DEPENDENCIES: Readonly<Record<string, string>> = {
  'nothing (Node ESM baseline)': 'globalThis.kept = 1;',
  'zod (classic API)': "import { z } from 'zod'; globalThis.kept = z.object({ a: z.string() });",
  'zod/mini, English messages (lib/zod.ts)': "import * as z from './lib/zod.ts'; globalThis.kept = z.object({ a: z.string() });",
  yaml: "import { parseDocument, LineCounter } from 'yaml'; globalThis.kept = [parseDocument, LineCounter];",
  '@aws-lambda-powertools/logger': "import { Logger } from '@aws-lambda-powertools/logger'; globalThis.kept = Logger;",
  '@aws-lambda-powertools/metrics': "import { Metrics } from '@aws-lambda-powertools/metrics'; globalThis.kept = Metrics;",
  '@aws-lambda-powertools/tracer (aws-xray-sdk-core)': "import { Tracer } from '@aws-lambda-powertools/tracer'; globalThis.kept = Tracer;",
  '@aws-sdk/client-dynamodb': "import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb'; globalThis.kept = [DynamoDBClient, GetItemCommand];",
  '@aws-sdk/client-sfn': "import { SFNClient, SendTaskSuccessCommand } from '@aws-sdk/client-sfn'; globalThis.kept = [SFNClient, SendTaskSuccessCommand];",
  '@aws-sdk/client-ec2': "import { EC2Client, RunInstancesCommand } from '@aws-sdk/client-ec2'; globalThis.kept = [EC2Client, RunInstancesCommand];",
  '@aws-sdk/client-ssm': "import { SSMClient, GetParameterCommand } from '@aws-sdk/client-ssm'; globalThis.kept = [SSMClient, GetParameterCommand];",
  '@aws-sdk/client-sns': "import { SNSClient, PublishCommand } from '@aws-sdk/client-sns'; globalThis.kept = [SNSClient, PublishCommand];",
};

/** Size and CPU init of each dependency alone. */
export async function measureDependencies(runs = RUNS): Promise<{ name: string; loadedBytes: number; initCpuMs: number }[]> {
  const dir = mkdtempSync(join(tmpdir(), 'relaunch-bench-'));
  try {
    const results = [];
    for (const [index, [name, contents]] of Object.entries(DEPENDENCIES).entries()) {
      // Source text resolved from the repository, so its node_modules are found.
      const built = await bundle({ stdin: { contents, resolveDir: REPO_ROOT, loader: 'ts' } }, join(dir, `dep${index}`));
      coldInit(built.entry);
      const samples = Array.from({ length: runs }, () => coldInit(built.entry));
      results.push({ name, loadedBytes: built.loadedBytes, initCpuMs: median(samples.map((sample) => sample.cpuMs)) });
    }
    return results;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const kb = (bytes: number) => `${(bytes / 1024).toFixed(0)} KiB`;

/** The benchmark module bench/run-benchmarks.ts runs. */
export const bundlesBenchmark: Benchmark = {
  name: `Lambda bundles (esbuild ${esbuild.version}, minified ESM, SDK clients bundled; cold init: median of ${RUNS} fresh processes)`,
  async run(): Promise<BenchResult> {
    const measured = await measureBundles();
    const dependencies = await measureDependencies();
    const lines = [
      '| function | package | read at init | cold init CPU (median) | cold init wall (median) | with code loaded on first use, CPU | CPU per run (ms) | build |',
      '|---|---:|---:|---:|---:|---:|---|---:|',
      ...measured.map(
        (m) =>
          `| ${m.name} | ${kb(m.bytes)} | ${kb(m.loadedBytes)} | ${m.initCpuMs.toFixed(0)} ms | ${m.initWallMs.toFixed(0)} ms | ` +
          `${m.lazyInitCpuMs === null ? '-' : `${m.lazyInitCpuMs.toFixed(0)} ms`} | ` +
          `${m.runs.map((r) => r.cpuMs.toFixed(0)).join(' ')} | ${m.buildMs.toFixed(0)} ms |`,
      ),
      '',
      'Where it comes from: each dependency alone, bundled the same way.',
      '',
      '| dependency | read at init | cold init CPU (median) |',
      '|---|---:|---:|',
      ...dependencies.map((d) => `| ${d.name} | ${kb(d.loadedBytes)} | ${d.initCpuMs.toFixed(0)} ms |`),
    ];
    const checks: TargetCheck[] = measured.flatMap((m) => [
      { target: `${m.name} package < 1 MB`, met: m.bytes < MAX_PACKAGE_BYTES, detail: kb(m.bytes) },
      {
        target: `${m.name} cold init < ${MAX_COLD_INIT_MS} ms (CPU)`,
        met: m.initCpuMs < MAX_COLD_INIT_MS,
        detail: `${m.initCpuMs.toFixed(0)} ms CPU, ${m.initWallMs.toFixed(0)} ms wall`,
      },
    ]);
    return { lines, checks };
  },
};
