// Warm relaunch benchmark (launch_on_warning): a spot job whose setup takes 20 s is
// preempted with a 30 s warning, with and without the option, on the real local runtime
// (real agent, real bash jobs, the chaos file's `preempt`). For each job it measures:
// - the gap: from the old node's end (the warned attempt's end as stored: its instance
//   gone) to the first line the next attempt's `run` printed (`date +%s%N`);
// - from the warning to that first line: how long `run` was back after EC2's word;
// - the new attempt's launch to that first line (its instance's time before run);
// - the job's instance-seconds: each attempt's instance from its launch (the attempt's
//   start) to its end; the standby's extra cost is the difference of the two variants'
//   medians. Without the option the warned node stops its job at the notice and goes; with
//   it, that node works on until its grace period must start, beside the standby.
// - with the option, how long both nodes ran at once (the standby's launch to the old
//   node's end).
// The variants alternate, so a busy moment of the machine falls on both alike.
//
// `npm run bench -- warm-relaunch` (about eight minutes: 2 x 5 jobs of 40-50 s).

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { AttemptRecord } from '../lib/model.ts';
import type { ChaosPlan } from '../lib/chaos-file/types.ts';
import { LocalRuntime } from '../local/runtime.ts';
import type { BenchResult, Benchmark } from './types.ts';

/** Runs of each variant; the table gives their medians. */
export const WARM_RUNS = 5;
export const SETUP_SECONDS = 20;
export const WARNING_SECONDS = 30;
/** The warning comes this long after the old attempt's run started. */
const WARNED_AFTER_MS = 1_000;

/** One preempted job's figures, in ms. */
interface WarmRun {
  readonly gapMs: number;
  readonly fromWarningMs: number;
  /** The new attempt's launch to its run's first line: what its instance cost before run. */
  readonly beforeRunMs: number;
  readonly instanceMs: number;
  /** With the option: the standby's launch to the old node's end; null without. */
  readonly overlapMs: number | null;
  readonly recoveryCount: number;
}

function task(launchOnWarning: boolean): string {
  return [
    'resources:',
    '  use_spot: true',
    '  job_recovery:',
    `    launch_on_warning: ${launchOnWarning}`,
    `setup: sleep ${SETUP_SECONDS}`,
    'run: |',
    '  echo "start $(date +%s%N)"',
    '  if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then sleep 600; fi',
    '',
  ].join('\n');
}

const PREEMPTED: ChaosPlan = {
  faults: [{ kind: 'preempt', attempt: 1, node: 0, afterMs: WARNED_AFTER_MS, warningMs: WARNING_SECONDS * 1000 }],
};

/** The epoch time (ms) the attempt's run printed as `start <date +%s%N>`. */
function runStart(attempt: AttemptRecord): number {
  const output = attempt.reports.map((report) => report.outputTail).join('\n');
  const match = /^start (\d+)$/m.exec(output);
  if (match === null) throw new Error(`attempt ${attempt.attempt}: no "start" time in ${JSON.stringify(output)}`);
  return Number(BigInt(match[1] as string) / 1000n) / 1000;
}

function at(iso: string | null | undefined, what: string): number {
  const ms = Date.parse(iso ?? '');
  if (Number.isNaN(ms)) throw new Error(`no time for ${what}`);
  return ms;
}

async function preemptedJob(launchOnWarning: boolean): Promise<WarmRun> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'relaunch-bench-warm-'));
  const errors: unknown[] = [];
  const runtime = await LocalRuntime.open({ dataDir, inMemory: true, onError: (error) => errors.push(error) });
  try {
    const { jobId } = await runtime.submit(task(launchOnWarning), { chaos: PREEMPTED });
    const result = await runtime.waitForJob(jobId);
    const job = await runtime.deps.store.getJob(jobId);
    const attempts = await runtime.deps.store.listAttempts(jobId);
    const [old, next] = attempts as [AttemptRecord, AttemptRecord];
    const shape = attempts.map((a) => `${a.attempt}:${a.outcome?.kind ?? 'none'}${a.standby ? ' (standby)' : ''}`).join(', ');
    if (result.status !== 'SUCCEEDED' || job.status !== 'SUCCEEDED' || attempts.length !== 2 || old.outcome?.kind !== 'PREEMPTED') {
      throw new Error(`launch_on_warning ${launchOnWarning}: the job ended ${job.status} with attempts ${shape}`);
    }
    if (launchOnWarning !== (next.standby !== null && next.standby !== undefined)) {
      throw new Error(`launch_on_warning ${launchOnWarning}: attempt 2 ${next.standby ? 'was' : 'was not'} a standby`);
    }
    if (errors.length > 0) throw new Error(`the runtime failed: ${String(errors[0])}`);
    const oldEnd = at(old.endedAt, 'the old attempt\'s end');
    const first = runStart(next);
    const launched = at(next.startedAt, 'the new attempt\'s launch');
    const lifetimes = attempts.map((a) => at(a.endedAt, `attempt ${a.attempt}'s end`) - at(a.startedAt, `attempt ${a.attempt}'s launch`));
    return {
      gapMs: first - oldEnd,
      fromWarningMs: first - at(old.interruptionNoticedAt, 'the warning'),
      beforeRunMs: first - launched,
      instanceMs: lifetimes.reduce((sum, ms) => sum + ms, 0),
      overlapMs: launchOnWarning ? oldEnd - launched : null,
      recoveryCount: job.counters.recoveryCount,
    };
  } finally {
    await runtime.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

const seconds = (ms: number) => (ms / 1000).toFixed(1);

async function run(): Promise<BenchResult> {
  const cold: WarmRun[] = [];
  const warm: WarmRun[] = [];
  for (let i = 0; i < WARM_RUNS; i += 1) {
    cold.push(await preemptedJob(false));
    warm.push(await preemptedJob(true));
  }
  const gapCold = median(cold.map((r) => r.gapMs));
  const gapWarm = median(warm.map((r) => r.gapMs));
  const instanceCold = median(cold.map((r) => r.instanceMs));
  const instanceWarm = median(warm.map((r) => r.instanceMs));
  const row = (option: string, runs: readonly WarmRun[]) =>
    `| ${option} | ${seconds(median(runs.map((r) => r.gapMs)))} | ${seconds(median(runs.map((r) => r.fromWarningMs)))} | ${seconds(median(runs.map((r) => r.beforeRunMs)))} | ${seconds(median(runs.map((r) => r.instanceMs)))} | ${seconds(median(runs.map((r) => r.overlapMs ?? 0)))} | ${runs.map((r) => seconds(r.gapMs)).join(', ')} |`;
  const lines = [
    `A spot job, setup \`sleep ${SETUP_SECONDS}\`, warned ${WARNED_AFTER_MS / 1000} s into its run and preempted ${WARNING_SECONDS} s later (chaos \`preempt\`); medians of ${WARM_RUNS} jobs each, real local runtime.`,
    '',
    '| launch_on_warning | gap: old node ends -> new run\'s first line (s) | warning -> new run\'s first line (s) | new attempt\'s launch -> its run (s) | instance-seconds, both attempts | both nodes up at once (s) | gaps of the 5 jobs (s) |',
    '|---|---|---|---|---|---|---|',
    row('false', cold),
    row('true', warm),
    '',
    `The standby's extra instance-seconds per preemption (median, true minus false): ${seconds(instanceWarm - instanceCold)} s.`,
  ];
  const sameCounters = [...cold, ...warm].every((r) => r.recoveryCount === 1);
  return {
    lines,
    checks: [
      { target: 'the standby shortens the gap', met: gapWarm < gapCold, detail: `median ${seconds(gapWarm)} s with the option, ${seconds(gapCold)} s without` },
      { target: 'the same counters either way (one recovery)', met: sameCounters, detail: `recovery counts ${[...cold, ...warm].map((r) => r.recoveryCount).join(', ')}` },
    ],
  };
}

export const warmRelaunchBenchmark: Benchmark = { name: 'warm-relaunch', run };
