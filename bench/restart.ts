// Restart benchmark: what keeping nodes saves when a job restarts, on the real local runtime
// (real agent, real bash jobs) with every new node's boot emulated (the chaos plan's boot).
// Two cases, each with fresh nodes (the EAGER_NEXT_REGION default) and with reuse:
// (a) in place: one node, whose run exits with a code in recover_on_exit_codes; reuse is
//     `reuse_nodes: {setup: skip}` (restart on the same node, setup not run again);
// (b) replace the lost node: four nodes, node 2 preempted (the chaos plan's `preempt`);
//     reuse is `strategy: FAILOVER` (SkyPilot's: keep the live nodes, rerun setup).
// For each job it reads, from the job's record alone (lib/accounting/timeline.ts), the gap
// from the end of attempt 1's run (the latest run end of its nodes when every node has
// one, else the attempt's end: a node released before it reported has none) to attempt
// 2's run start (every node's setup over with exit 0), that gap in parts (PARTS), and how
// many nodes attempt 2 launched (its instances without reusedFrom). Variants alternate, so a busy moment of the
// machine falls on both alike. One JSON line per case; the goals are checked on medians.
//
// `npm run bench -- restart` (about 20 minutes: 4 x 5 jobs of 30-65 s). For a try:
// RESTART_RUNS=1 runs each variant once, RESTART_VARIANTS=fresh (or reuse) only that one.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { attemptTimeline } from '../lib/accounting/timeline.ts';
import type { ChaosPlan } from '../lib/chaos-file/types.ts';
import type { AttemptRecord } from '../lib/model.ts';
import { errorMessage } from '../lib/usecases/deps.ts';
import { LocalRuntime } from '../local/runtime.ts';
import { median } from './stats.ts';
import type { BenchResult, Benchmark, TargetCheck } from './types.ts';

/** Every new node's emulated boot, and setup's length, in seconds. */
export const BOOT_SECONDS = 20;
export const SETUP_SECONDS = 10;
/** The exit code attempt 1's run ends with in case (a), listed in recover_on_exit_codes. */
const RECOVERED_CODE = 29;
/** Case (b): node 2 of 4 is warned this long into its run, and goes this long after. */
const PREEMPTED_NODE = 2;
const PREEMPT_AFTER_MS = 1_000;
const PREEMPT_WARNING_MS = 2_000;

const VARIANTS = ['fresh', 'reuse'] as const;
type Variant = (typeof VARIANTS)[number];

/** One case: its task per variant, its faults, and its goals. */
interface RestartCase {
  readonly name: string;
  readonly numNodes: number;
  readonly task: (variant: Variant) => string;
  readonly faults: ChaosPlan['faults'];
  /** The outcome attempt 1 must end with. */
  readonly firstOutcome: 'EXITED' | 'PREEMPTED';
}

/** One job's figures. */
interface RestartRun {
  readonly gapMs: number;
  /** Nodes attempt 2 launched (not kept from attempt 1). */
  readonly launched: number;
  /** The gap in parts, in ms, adding up to it (PARTS). */
  readonly parts: Readonly<Record<Part, number>>;
}

/**
 * Where the gap goes: attempt 1's run end to attempt 2's launch (the controller: decide,
 * release, hold), the launch to its last node running (the boot), to every node's first
 * heartbeat (the agents' start), to every node's setup over, to run's start (the go).
 */
const PARTS = ['controller', 'boot', 'agentStart', 'setup', 'go'] as const;
type Part = (typeof PARTS)[number];

/** Each variant's runs, or why one could not run. */
type VariantResult = { readonly runs: readonly RestartRun[] } | { readonly error: string };

const IN_PLACE: RestartCase = {
  name: 'in-place',
  numNodes: 1,
  firstOutcome: 'EXITED',
  faults: [],
  task: (variant) =>
    [
      'resources:',
      '  job_recovery:',
      `    recover_on_exit_codes: [${RECOVERED_CODE}]`,
      ...(variant === 'reuse' ? ['    reuse_nodes: {setup: skip}'] : []),
      `setup: sleep ${SETUP_SECONDS}`,
      'run: |',
      `  if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then exit ${RECOVERED_CODE}; fi`,
      '  echo done',
      '',
    ].join('\n'),
};

const REPLACE_LOST: RestartCase = {
  name: 'replace-lost-node',
  numNodes: 4,
  firstOutcome: 'PREEMPTED',
  faults: [{ kind: 'preempt', attempt: 1, node: PREEMPTED_NODE, afterMs: PREEMPT_AFTER_MS, warningMs: PREEMPT_WARNING_MS }],
  task: (variant) =>
    [
      'num_nodes: 4',
      'resources:',
      '  use_spot: true',
      ...(variant === 'reuse' ? ['  job_recovery:', '    strategy: FAILOVER'] : []),
      `setup: sleep ${SETUP_SECONDS}`,
      'run: |',
      '  if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then sleep 600; fi',
      '  echo done',
      '',
    ].join('\n'),
};

/**
 * The end of the attempt's run: when the attempt ended (a node's code, or its instance gone),
 * which is when the job stopped making progress; its nodes' latest run end only when the
 * attempt's end was not noted. Not the survivors' own stops: on kept nodes those come a
 * moment after the end (each sees the hold), and counting from them would shorten the gap.
 */
function runEndOf(attempt: AttemptRecord): number {
  const timeline = attemptTimeline(attempt);
  if (timeline.endedAt !== null) return timeline.endedAt;
  const ends = timeline.nodes.map((node) => node.runEndAt);
  if (ends.length > 0 && ends.every((end) => end !== null)) return Math.max(...(ends as number[]));
  throw new Error(`attempt ${attempt.attempt} has no end`);
}

async function restartedJob(restartCase: RestartCase, variant: Variant): Promise<RestartRun> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'relaunch-bench-restart-'));
  const errors: unknown[] = [];
  const runtime = await LocalRuntime.open({ dataDir, inMemory: true, onError: (error) => errors.push(error) });
  try {
    const { jobId } = await runtime.submit(restartCase.task(variant), { chaos: { faults: restartCase.faults, bootMs: BOOT_SECONDS * 1000 } });
    const result = await runtime.waitForJob(jobId);
    const job = await runtime.deps.store.getJob(jobId);
    const attempts = await runtime.deps.store.listAttempts(jobId);
    const shape = attempts.map((a) => `${a.attempt}:${a.outcome?.kind ?? 'none'}`).join(', ');
    const [first, second] = attempts;
    if (result.status !== 'SUCCEEDED' || attempts.length !== 2 || first?.outcome?.kind !== restartCase.firstOutcome || second === undefined) {
      throw new Error(`the job ended ${job.status} with attempts ${shape}`);
    }
    if (errors.length > 0) throw new Error(`the runtime failed: ${errorMessage(errors[0])}`);
    const next = attemptTimeline(second);
    if (next.runStartAt === null || next.upAt === null || next.setupEndAt === null) throw new Error("attempt 2's run never started");
    const runEnd = runEndOf(first);
    const running = Math.max(next.launchRequestedAt, ...next.nodes.map((node) => node.runningAt));
    const marks = [runEnd, next.launchRequestedAt, running, next.upAt, next.setupEndAt, next.runStartAt];
    const parts = Object.fromEntries(PARTS.map((part, i) => [part, (marks[i + 1] as number) - (marks[i] as number)])) as Record<Part, number>;
    return { gapMs: next.runStartAt - runEnd, launched: second.instances.filter((node) => node.reusedFrom === undefined).length, parts };
  } finally {
    await runtime.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Runs each chosen variant `runs` times, alternating; a variant's first failure stops it. */
async function measure(restartCase: RestartCase, variants: readonly Variant[], runs: number): Promise<Record<Variant, VariantResult | null>> {
  const found: Record<Variant, RestartRun[]> = { fresh: [], reuse: [] };
  const failed: Partial<Record<Variant, string>> = {};
  for (let i = 0; i < runs; i += 1) {
    for (const variant of variants) {
      if (failed[variant] !== undefined) continue;
      try {
        found[variant].push(await restartedJob(restartCase, variant));
      } catch (error) {
        failed[variant] = errorMessage(error);
      }
    }
  }
  const resultOf = (variant: Variant): VariantResult | null => {
    if (!variants.includes(variant)) return null;
    const error = failed[variant];
    return error === undefined ? { runs: found[variant] } : { error };
  };
  return { fresh: resultOf('fresh'), reuse: resultOf('reuse') };
}

const seconds = (ms: number): number => Math.round(ms / 100) / 10;

/** A variant as its JSON line shows it. */
function summary(result: VariantResult | null): unknown {
  if (result === null) return 'not run';
  if ('error' in result) return { error: result.error };
  return {
    medianGapSeconds: seconds(median(result.runs.map((run) => run.gapMs))),
    gapsSeconds: result.runs.map((run) => seconds(run.gapMs)),
    medianPartsSeconds: Object.fromEntries(PARTS.map((part) => [part, seconds(median(result.runs.map((run) => run.parts[part])))])),
    nodesLaunched: result.runs.map((run) => run.launched),
  };
}

/** The variant's median gap in ms, or why there is none. */
function medianGap(result: VariantResult | null): number | string {
  if (result === null) return 'not run (RESTART_VARIANTS)';
  if ('error' in result) return `failed: ${result.error}`;
  return median(result.runs.map((run) => run.gapMs));
}

function inPlaceChecks(results: Record<Variant, VariantResult | null>): TargetCheck[] {
  const fresh = medianGap(results.fresh);
  const reuse = medianGap(results.reuse);
  const both = typeof fresh === 'number' && typeof reuse === 'number';
  return [
    {
      target: '(a) in place, setup skipped: gap under 2 s',
      met: typeof reuse === 'number' && reuse < 2_000,
      detail: typeof reuse === 'number' ? `median ${seconds(reuse)} s` : reuse,
    },
    {
      target: '(a) in place: gap at least 10 times shorter than with fresh nodes',
      met: both && fresh >= 10 * reuse,
      detail: both ? `median ${seconds(reuse)} s with reuse, ${seconds(fresh)} s fresh (${(fresh / Math.max(reuse, 1)).toFixed(1)}x)` : `fresh: ${typeof fresh === 'number' ? `${seconds(fresh)} s` : fresh}; reuse: ${typeof reuse === 'number' ? `${seconds(reuse)} s` : reuse}`,
    },
  ];
}

function replaceLostChecks(results: Record<Variant, VariantResult | null>): TargetCheck[] {
  const reuse = results.reuse;
  const gap = medianGap(reuse);
  const bound = (BOOT_SECONDS + SETUP_SECONDS + 2) * 1000;
  const launched = reuse !== null && 'runs' in reuse ? reuse.runs.map((run) => run.launched) : [];
  return [
    {
      target: '(b) node 2 of 4 preempted, with reuse: only one node launched',
      met: launched.length > 0 && launched.every((count) => count === 1),
      detail: launched.length > 0 ? `nodes launched per job: ${launched.join(', ')}` : String(gap),
    },
    {
      target: `(b) with reuse: gap at most boot + setup + 2 s (${bound / 1000} s)`,
      met: typeof gap === 'number' && gap <= bound,
      detail: typeof gap === 'number' ? `median ${seconds(gap)} s` : gap,
    },
  ];
}

/** RESTART_VARIANTS: `fresh`, `reuse`, or both (unset). */
function chosenVariants(environment: NodeJS.ProcessEnv): readonly Variant[] {
  const given = environment.RESTART_VARIANTS;
  if (given === undefined || given === '') return VARIANTS;
  const names = given.split(',').map((name) => name.trim());
  const wrong = names.find((name) => !(VARIANTS as readonly string[]).includes(name));
  if (wrong !== undefined) throw new Error(`RESTART_VARIANTS: expected fresh, reuse or fresh,reuse, got ${JSON.stringify(given)}`);
  return names as Variant[];
}

/** RESTART_RUNS: jobs per variant and case. @default 5 */
function chosenRuns(environment: NodeJS.ProcessEnv): number {
  const given = environment.RESTART_RUNS;
  if (given === undefined || given === '') return 5;
  if (!/^[1-9][0-9]?$/.test(given)) throw new Error(`RESTART_RUNS: expected a number of jobs from 1 to 99, got ${JSON.stringify(given)}`);
  return Number(given);
}

async function run(): Promise<BenchResult> {
  const variants = chosenVariants(process.env);
  const runs = chosenRuns(process.env);
  const lines = [
    `Every new node boots ${BOOT_SECONDS} s (chaos boot), setup \`sleep ${SETUP_SECONDS}\`; ${runs} job(s) per variant, real local runtime. Gap: attempt 1's run end -> attempt 2's run start, from the job's record.`,
    '',
  ];
  const checks: TargetCheck[] = [];
  const inPlace = await measure(IN_PLACE, variants, runs);
  lines.push(JSON.stringify({ case: IN_PLACE.name, nodes: 1, runs, fresh: summary(inPlace.fresh), reuse: summary(inPlace.reuse) }));
  checks.push(...inPlaceChecks(inPlace));
  const replaced = await measure(REPLACE_LOST, variants, runs);
  lines.push(JSON.stringify({ case: REPLACE_LOST.name, nodes: 4, runs, fresh: summary(replaced.fresh), reuse: summary(replaced.reuse) }));
  checks.push(...replaceLostChecks(replaced));
  return { lines, checks };
}

export const restartBenchmark: Benchmark = { name: 'restart', run };
