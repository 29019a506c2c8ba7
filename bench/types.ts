// What a benchmark module gives bench/run-benchmarks.ts: a name, and a run that measures and checks.

/** One target a benchmark checks (a size, a latency), met or not. */
export interface TargetCheck {
  readonly target: string;
  readonly met: boolean;
  readonly detail: string;
}

/** A benchmark's outcome: a printable table and its target checks. */
export interface BenchResult {
  readonly lines: readonly string[];
  readonly checks: readonly TargetCheck[];
}

/** A benchmark module. */
export interface Benchmark {
  readonly name: string;
  run(): Promise<BenchResult>;
}
