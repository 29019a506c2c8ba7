// `npm run bench`: runs every benchmark module, prints its table and its target checks.
// `npm run bench -- bundles` runs only those whose name contains a word given (any case).
// Add a benchmark by exporting a Benchmark (bench/types.ts) and listing it here.

import { availableParallelism, cpus, loadavg } from 'node:os';
import { bundlesBenchmark } from './bundles.ts';
import { cliStartBenchmark } from './cli-start.ts';
import { hostileYamlBenchmark } from './hostile-yaml.ts';
import { localRuntimeBenchmark } from './local.ts';
import { logsBenchmark } from './logs.ts';
import { logShipBenchmark } from './log-ship.ts';
import { restartBenchmark } from './restart.ts';
import { scaleBenchmark } from './scale.ts';
import { transactionsBenchmark } from './transactions.ts';
import { userDataBenchmark } from './user-data.ts';
import { warmRelaunchBenchmark } from './warm-relaunch.ts';
import type { Benchmark } from './types.ts';

const BENCHMARKS: readonly Benchmark[] = [bundlesBenchmark, cliStartBenchmark, userDataBenchmark, localRuntimeBenchmark, transactionsBenchmark, hostileYamlBenchmark, logsBenchmark, logShipBenchmark, scaleBenchmark, warmRelaunchBenchmark, restartBenchmark];
const words = process.argv.slice(2).map((word) => word.toLowerCase());
const chosen = words.length === 0 ? BENCHMARKS : BENCHMARKS.filter((b) => words.some((word) => b.name.toLowerCase().includes(word)));
if (chosen.length === 0) {
  console.error(`no benchmark matches ${words.join(' ')}; the benchmarks are: ${BENCHMARKS.map((b) => b.name).join('; ')}`);
  process.exit(2);
}

const load = () => loadavg().map((l) => l.toFixed(2)).join(' ');
console.log(`machine: ${availableParallelism()} CPUs (${cpus()[0]?.model ?? 'unknown'}), Node ${process.version}, ${process.platform}/${process.arch}`);
console.log(`load average at start: ${load()}`);
let missed = 0;
for (const benchmark of chosen) {
  console.log(`\n## ${benchmark.name}\n`);
  const result = await benchmark.run();
  for (const line of result.lines) console.log(line);
  console.log('');
  for (const check of result.checks) {
    console.log(`${check.met ? 'PASS' : 'MISS'}  ${check.target}: ${check.detail}`);
    if (!check.met) missed += 1;
  }
}
console.log(`load average at end: ${load()}`);
console.log(`\n${missed === 0 ? 'all targets met' : `${missed} target(s) missed`}`);
process.exitCode = missed === 0 ? 0 : 1;
