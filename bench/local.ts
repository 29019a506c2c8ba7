// Local runtime benchmark: what the controller costs around real bash jobs, measured on the
// real state machine. (a) the gap from a job's exit to the next attempt's process start,
// (b) state transitions per attempt and while a job runs, (c) 200 concurrent jobs.
//
// Times inside a job come from the job itself (`date +%s%N` printed at start and before
// exit, read back from the stored reports), so a gap is what a user would see between one
// attempt's last line and the next attempt's first, on one clock.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { AttemptRecord } from '../lib/model.ts';
import { LocalRuntime, type LocalRuntimeOptions } from '../local/runtime.ts';
import type { BenchResult, Benchmark, TargetCheck } from './types.ts';

/** Targets (DESIGN.md section 7): a quick relaunch, a handful of transitions, none while running. */
export const MAX_MEDIAN_RELAUNCH_MS = 500;
export const MAX_TRANSITIONS_PER_ATTEMPT = 8;
export const MAX_TRANSITIONS_WHILE_RUNNING = 0;
/** Restarts measured in (a). */
const RESTARTS = 20;
/** Jobs in (c), and the attempt each succeeds on. */
const CONCURRENT_JOBS = 200;
const CONCURRENT_SUCCESS_ATTEMPT = 3;

/** A runtime in a scratch folder, with its transitions recorded; removed by `close`. */
async function scratchRuntime(options: Partial<LocalRuntimeOptions> = {}): Promise<{
  runtime: LocalRuntime;
  transitions: Transition[];
  errors: unknown[];
  close: () => Promise<void>;
}> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'relaunch-bench-'));
  const transitions: Transition[] = [];
  const errors: unknown[] = [];
  const runtime = await LocalRuntime.open({
    dataDir,
    inMemory: true,
    ...options,
    onTransition: (execution, state) => transitions.push({ execution, state, at: Date.now() }),
    onError: (error) => errors.push(error),
  });
  return {
    runtime,
    transitions,
    errors,
    close: async () => {
      await runtime.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The epoch time (ms, fractional) a job printed as `<label> <date +%s%N>`. */
function printed(attempt: AttemptRecord, label: string): number {
  const output = attempt.reports.map((r) => r.outputTail).join('\n');
  const match = new RegExp(`^${label} (\\d+)$`, 'm').exec(output);
  if (match === null) throw new Error(`attempt ${attempt.attempt}: no "${label}" time in ${JSON.stringify(output)}`);
  return Number(BigInt(match[1] as string) / 1000n) / 1000;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

interface Transition {
  readonly execution: string;
  readonly state: string;
  readonly at: number;
}

/** Transitions split per attempt: each LaunchAttempt entry starts one. */
function perAttempt(transitions: readonly Transition[]): Transition[][] {
  const attempts: Transition[][] = [];
  for (const transition of transitions) {
    if (transition.state === 'LaunchAttempt') attempts.push([]);
    attempts.at(-1)?.push(transition);
  }
  return attempts;
}

/** When the attempt's controller entered `state`. */
function entered(attempt: readonly Transition[] | undefined, state: string): number {
  const found = attempt?.find((t) => t.state === state);
  if (found === undefined) throw new Error(`no ${state} in ${JSON.stringify(attempt?.map((t) => t.state))}`);
  return found.at;
}

/** Where a relaunch's time goes, each in ms: one entry per restart. */
interface RelaunchGap {
  /** From the job's exit to the process start of the next attempt: the whole gap. */
  readonly total: number;
  /** Exit to the policy's decision stored. */
  readonly toDecision: number;
  /** Exit to LaunchAttempt entered: report, evaluate, release, choice. */
  readonly toLaunch: number;
  /** LaunchAttempt's own work: status change, attempt row, compute.launch. */
  readonly launch: number;
  /** From LaunchAttempt done to the new process printing its first line: first heartbeat, spawn, bash. */
  readonly nodeStart: number;
}

/** (a) and (b, per attempt): one job restarted RESTARTS times on a listed code. */
async function relaunchLoop(): Promise<{ gaps: RelaunchGap[]; perAttempt: number[]; total: number; attempts: number }> {
  const scratch = await scratchRuntime();
  try {
    const { jobId } = await scratch.runtime.submit(
      [
        'resources:',
        '  job_recovery:',
        '    recover_on_exit_codes: [29]',
        'run: |',
        '  echo "start $(date +%s%N)"',
        `  if [ "$RELAUNCH_ATTEMPT" -le ${RESTARTS} ]; then echo "end $(date +%s%N)"; exit 29; fi`,
        '',
      ].join('\n'),
    );
    const result = await scratch.runtime.waitForJob(jobId);
    const attempts = await scratch.runtime.deps.store.listAttempts(jobId);
    if (result.status !== 'SUCCEEDED' || attempts.length !== RESTARTS + 1) {
      throw new Error(`the restart loop ended ${result.status} after ${attempts.length} attempts`);
    }
    const segments = perAttempt(scratch.transitions.filter((t) => t.execution === jobId));
    const gaps = attempts.slice(0, -1).map((attempt, i): RelaunchGap => {
      const exit = printed(attempt, 'end');
      const next = segments[i + 1];
      const launchStarted = entered(next, 'LaunchAttempt');
      const launchDone = entered(next, 'AwaitOrEvaluate');
      const start = printed(attempts[i + 1] as AttemptRecord, 'start');
      return {
        total: start - exit,
        toDecision: Date.parse(attempt.decision?.decidedAt ?? '') - exit,
        toLaunch: launchStarted - exit,
        launch: launchDone - launchStarted,
        nodeStart: start - launchDone,
      };
    });
    return { gaps, perAttempt: segments.map((s) => s.length), total: result.transitions, attempts: attempts.length };
  } finally {
    await scratch.close();
  }
}

/** (b, while running): transitions between the controller's wait and the job's exit, heartbeats every 200 ms. */
async function quietWhileRunning(): Promise<{ during: string[]; runMs: number }> {
  const scratch = await scratchRuntime({ heartbeatIntervalMs: 200 });
  try {
    const { jobId } = await scratch.runtime.submit('run: |\n  echo "start $(date +%s%N)"\n  sleep 2\n  echo "end $(date +%s%N)"\n');
    await scratch.runtime.waitForJob(jobId);
    const [attempt] = await scratch.runtime.deps.store.listAttempts(jobId);
    const start = printed(attempt as AttemptRecord, 'start');
    const end = printed(attempt as AttemptRecord, 'end');
    const mine = scratch.transitions.filter((t) => t.execution === jobId);
    const waiting = mine.find((t) => t.state === 'AwaitAttempt');
    const from = Math.max(start, waiting?.at ?? start);
    return { during: mine.filter((t) => t.at > from && t.at < end).map((t) => t.state), runMs: end - start };
  } finally {
    await scratch.close();
  }
}

/** (c): CONCURRENT_JOBS jobs at once, each sleeping 1 s per attempt and succeeding on attempt 3. */
async function concurrentJobs(): Promise<{ wallMs: number; peakRssMb: number; maxRssMb: number; succeeded: number; badJobs: string[]; errors: number }> {
  const scratch = await scratchRuntime();
  let peakRss = process.memoryUsage().rss;
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
  }, 100);
  try {
    const task = [
      'resources:',
      '  job_recovery:',
      '    recover_on_exit_codes: [29]',
      'run: |',
      '  sleep 1',
      `  if [ "$RELAUNCH_ATTEMPT" -lt ${CONCURRENT_SUCCESS_ATTEMPT} ]; then exit 29; fi`,
      '',
    ].join('\n');
    const started = performance.now();
    const submitted = await Promise.all(Array.from({ length: CONCURRENT_JOBS }, () => scratch.runtime.submit(task)));
    await Promise.all(submitted.map(({ jobId }) => scratch.runtime.waitForJob(jobId)));
    const wallMs = performance.now() - started;
    const badJobs: string[] = [];
    let succeeded = 0;
    for (const { jobId } of submitted) {
      const job = await scratch.runtime.deps.store.getJob(jobId);
      const attempts = await scratch.runtime.deps.store.listAttempts(jobId);
      const codes = attempts.map((a) => a.reports.map((r) => r.exitCode).join('+')).join(',');
      if (job.status === 'SUCCEEDED' && attempts.length === CONCURRENT_SUCCESS_ATTEMPT && codes === '29,29,0') succeeded += 1;
      else badJobs.push(`${jobId}: ${job.status}, codes ${codes}`);
    }
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
    return {
      wallMs,
      peakRssMb: peakRss / 2 ** 20,
      maxRssMb: process.resourceUsage().maxRSS / 1024,
      succeeded,
      badJobs,
      errors: scratch.errors.length,
    };
  } finally {
    clearInterval(sampler);
    await scratch.close();
  }
}

const ms = (value: number) => `${value.toFixed(0)} ms`;

async function run(): Promise<BenchResult> {
  // The SDK's notice about Node 20 is emitted when the runtime's client is built: noise here.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  const loop = await relaunchLoop();
  const quiet = await quietWhileRunning();
  const crowd = await concurrentJobs();

  const maxPerAttempt = Math.max(...loop.perAttempt);
  const totals = loop.gaps.map((g) => g.total);
  const part = (pick: (g: RelaunchGap) => number) => ms(median(loop.gaps.map(pick)));
  const checks: TargetCheck[] = [
    {
      target: `(a) exit -> next attempt's process start, median < ${MAX_MEDIAN_RELAUNCH_MS} ms`,
      met: median(totals) < MAX_MEDIAN_RELAUNCH_MS,
      detail: `median ${ms(median(totals))} over ${totals.length} restarts`,
    },
    {
      target: `(b) state transitions per attempt <= ${MAX_TRANSITIONS_PER_ATTEMPT}`,
      met: maxPerAttempt <= MAX_TRANSITIONS_PER_ATTEMPT,
      detail: `at most ${maxPerAttempt}, ${(loop.total / loop.attempts).toFixed(1)} on average`,
    },
    {
      target: `(b) state transitions while a job runs = ${MAX_TRANSITIONS_WHILE_RUNNING}`,
      met: quiet.during.length <= MAX_TRANSITIONS_WHILE_RUNNING,
      detail: `${quiet.during.length} during a ${ms(quiet.runMs)} run with heartbeats every 200 ms${quiet.during.length > 0 ? ` (${quiet.during.join(', ')})` : ''}`,
    },
    {
      target: `(c) ${CONCURRENT_JOBS} concurrent jobs all SUCCEEDED on attempt ${CONCURRENT_SUCCESS_ATTEMPT}`,
      met: crowd.succeeded === CONCURRENT_JOBS,
      detail: `${crowd.succeeded}/${CONCURRENT_JOBS}${crowd.badJobs.length > 0 ? `; first bad: ${crowd.badJobs[0]}` : ''}`,
    },
  ];
  const lines = [
    '| measure | value |',
    '|---|---|',
    `| (a) exit -> next process start, median / p90 / max (${totals.length} restarts) | ${ms(median(totals))} / ${ms(percentile(totals, 90))} / ${ms(Math.max(...totals))} |`,
    `| (a) of which, medians: exit -> LaunchAttempt entered / launch / node start | ${part((g) => g.toLaunch)} / ${part((g) => g.launch)} / ${part((g) => g.nodeStart)} |`,
    `| (a) exit -> decision recorded, median | ${part((g) => g.toDecision)} |`,
    `| (b) transitions per attempt, max / mean (${loop.attempts} attempts) | ${maxPerAttempt} / ${(loop.total / loop.attempts).toFixed(1)} |`,
    `| (b) transitions while a 2 s job runs | ${quiet.during.length} |`,
    `| (c) ${CONCURRENT_JOBS} jobs x ${CONCURRENT_SUCCESS_ATTEMPT} attempts of \`sleep 1\`: wall time | ${(crowd.wallMs / 1000).toFixed(1)} s (floor ${CONCURRENT_SUCCESS_ATTEMPT} s of sleeps) |`,
    `| (c) runtime RSS: peak sampled / process maxRSS | ${crowd.peakRssMb.toFixed(0)} MB / ${crowd.maxRssMb.toFixed(0)} MB |`,
    `| (c) jobs SUCCEEDED with codes 29, 29, 0 | ${crowd.succeeded}/${CONCURRENT_JOBS} |`,
    `| (c) errors reported by the runtime | ${crowd.errors} |`,
  ];
  return { lines, checks };
}

/** The local runtime's benchmark, for bench/run.ts. */
export const localRuntimeBenchmark: Benchmark = { name: 'Local runtime', run };

// `node --import tsx bench/local.ts` runs this benchmark alone.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const result = await run();
  for (const line of result.lines) console.log(line);
  for (const check of result.checks) console.log(`${check.met ? 'PASS' : 'MISS'}  ${check.target}: ${check.detail}`);
  process.exitCode = result.checks.every((check) => check.met) ? 0 : 1;
}
