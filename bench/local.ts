// Local runtime benchmark: what the controller and the agent cost around real bash jobs,
// measured on the real state machine with each node running the real agent script.
// (a) the gap from a job's exit to the next attempt's first line, step by step,
// (b) state transitions per attempt and while a job runs, (c) 200 concurrent jobs,
// (d) one idle running job: the RSS and CPU of its node's processes and of the runtime.
// (d) runs before (c): the garbage the 200 jobs leave would be collected during its windows.
//
// Times inside a job come from the job itself (`date +%s%N` printed at start and before
// exit, read back from the stored reports); the agent's steps from the files it writes in
// its node's folder (their mtimes); the controller's from its transitions and the stored
// report and decision times. All are wall-clock times of this machine, so a gap is what a
// user would see between one attempt's last line and the next attempt's first.
//
// `node --import tsx bench/local.ts` runs every part; name parts to run only those, e.g.
// `node --import tsx bench/local.ts b` for (b) alone (a few seconds: the 21 attempts of
// (a)'s job, whose transitions (b) counts, and one 2 s job). Only the named parts' rows and
// checks are printed. `npm run bench` always runs every part.

import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { AttemptRecord } from '../lib/model.ts';
import type { Phase } from '../lib/policy/types.ts';
import { StateName } from '../lib/workflow/contract.ts';
import { nodeDir } from '../local/paths.ts';
import { INSTANCE_MARK } from '../local/process-groups.ts';
import { localInstanceId } from '../local/process-compute.ts';
import { LocalRuntime, type LocalRuntimeOptions } from '../local/runtime.ts';
import type { BenchResult, Benchmark, TargetCheck } from './types.ts';
import { median } from './stats.ts';

/** The parts of this benchmark, as named on the command line. */
const PARTS = ['a', 'b', 'c', 'd'] as const;
type Part = (typeof PARTS)[number];

/** Targets (DESIGN.md section 7): a quick relaunch, a handful of transitions, none while running. */
export const MAX_MEDIAN_RELAUNCH_MS = 500;
export const MAX_TRANSITIONS_PER_ATTEMPT = 8;
export const MAX_TRANSITIONS_WHILE_RUNNING = 0;
/** Restarts measured in (a). */
const RESTARTS = 20;
/** Jobs in (c), and the attempt each succeeds on. */
const CONCURRENT_JOBS = 200;
const CONCURRENT_SUCCESS_ATTEMPT = 3;
/** How often (c) counts the nodes' processes (in a worker thread). */
const PROCESS_SAMPLE_MS = 1_000;
/** (d): the runtime's own CPU with no job at all, over this long, for comparison. */
const RUNTIME_BASELINE_MS = 10_000;
/** (d): heartbeats measured at each interval (null: the runtime's default, 30 s). */
const IDLE_CASES: readonly { readonly intervalMs: number | null; readonly beats: number }[] = [
  { intervalMs: null, beats: 2 },
  { intervalMs: 1_000, beats: 20 },
];
/** (d): a window starts and ends this long after a beat or the run's start, when no curl is in flight. */
const IDLE_SETTLE_MS = 300;
/** One python3 start (the agent's JSON escaping of an output tail), timed this many times for scale. */
const PYTHON_RUNS = 10;

/** A runtime in a scratch folder, with its transitions recorded; removed by `close`. */
async function scratchRuntime(options: Partial<LocalRuntimeOptions> = {}): Promise<{
  runtime: LocalRuntime;
  transitions: Transition[];
  errors: unknown[];
  /** Closes the runtime and removes its folder, unless `keep` (the nodes' folders, to read after a miss). */
  close: (keep?: boolean) => Promise<void>;
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
    close: async (keep = false) => {
      await runtime.close();
      if (!keep) rmSync(dataDir, { recursive: true, force: true });
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

/** When the API stored node 0's report of `phase`. */
function reported(attempt: AttemptRecord, phase: Phase): number {
  const report = attempt.reports.find((r) => r.phase === phase && r.nodeRank === 0);
  if (report === undefined) throw new Error(`attempt ${attempt.attempt}: no ${phase} report`);
  return Date.parse(report.reportedAt);
}

/** The last write to a file the agent keeps in its node's folder (epoch ms, the kernel's coarse clock). */
function written(file: string): number {
  return Number(statSync(file, { bigint: true }).mtimeNs / 1000n) / 1000;
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
    if (transition.state === StateName.LaunchAttempt) attempts.push([]);
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

/**
 * The moments of a restart, in the order they happen: each step of the table is the time
 * from the moment before it. Agent steps are file mtimes in the node's folder.
 */
const RESTART_MOMENTS = [
  'the job printed its last line and exited',
  'run report body written (phase shell ended, log writer drained in 10 ms sleeps; tail, tail, python3 JSON escape)',
  'run report stored by the API (curl, HTTP, report use case)',
  'EvaluateRecoveryPolicy entered (AwaitAttempt resumed)',
  'decision stored',
  'ReleaseInstances entered',
  'RelaunchOrFinish entered (release done: SIGTERM, the node group gone)',
  'LaunchAttempt entered',
  'AwaitOrEvaluate entered (launch done: attempt row, user data written, bash spawned)',
  'agent running (setup.sh written: bash start, settings, base64 -d x3)',
  'rank, first heartbeat and IPs known (env.sh appended: 2 IMDS token+GET pairs, 1 heartbeat, all curl)',
  'setup report body written (empty setup phase: mkfifo, writer, shell, drain; tail, tail, python3 JSON escape)',
  'setup report stored by the API (curl, HTTP, report use case)',
  'the next attempt printed its first line (curl returns, run phase starts, bash run.sh, date)',
] as const;

/** One restart: the epoch time (ms) of each of RESTART_MOMENTS. */
type RestartTimeline = readonly number[];

/** (a) and (b, per attempt): one job restarted RESTARTS times on a listed code. */
async function relaunchLoop(): Promise<{ timelines: RestartTimeline[]; perAttempt: number[]; total: number; attempts: number }> {
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
    const folder = (attempt: number, file: string) => path.join(nodeDir(scratch.runtime.dataDir, jobId, attempt, 0), file);
    const timelines = attempts.slice(0, -1).map((attempt, i): RestartTimeline => {
      const next = attempts[i + 1] as AttemptRecord;
      const these = segments[i];
      const following = segments[i + 1];
      return [
        printed(attempt, 'end'),
        written(folder(attempt.attempt, 'run.report.json')),
        reported(attempt, 'run'),
        entered(these, StateName.EvaluateRecoveryPolicy),
        Date.parse(attempt.decision?.decidedAt ?? ''),
        entered(these, StateName.ReleaseInstances),
        entered(these, StateName.NextStep),
        entered(following, StateName.LaunchAttempt),
        entered(following, StateName.AwaitOrEvaluate),
        written(folder(next.attempt, 'setup.sh')),
        written(folder(next.attempt, 'env.sh')),
        written(folder(next.attempt, 'setup.report.json')),
        reported(next, 'setup'),
        printed(next, 'start'),
      ];
    });
    return { timelines, perAttempt: segments.map((s) => s.length), total: result.transitions, attempts: attempts.length };
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
    const waiting = mine.find((t) => t.state === StateName.AwaitAttempt);
    const from = Math.max(start, waiting?.at ?? start);
    return { during: mine.filter((t) => t.at > from && t.at < end).map((t) => t.state), runMs: end - start };
  } finally {
    await scratch.close();
  }
}

/** One process of a local node, as /proc shows it. */
interface NodeProcess {
  readonly pid: number;
  readonly ppid: number;
  readonly instanceId: string;
  readonly command: string;
  /** VmRSS, in KiB: shared pages (bash's text, libc) are counted in every process. */
  readonly rssKb: number;
  /** Pss, in KiB: each shared page split between the processes that map it. */
  readonly pssKb: number;
  /** utime + stime + cutime + cstime, in clock ticks: its own CPU and that of the children it reaped. */
  readonly cpuTicks: number;
}

/**
 * Every live process carrying the node mark (RELAUNCH_INSTANCE_ID, which every process of
 * a node inherits) of an instance `mine` accepts. Zombies carry no environment: their CPU
 * reaches their parent's cutime once reaped.
 */
function nodeProcesses(mine: (instanceId: string) => boolean): NodeProcess[] {
  const found: NodeProcess[] = [];
  const mark = `${INSTANCE_MARK}=`;
  for (const entry of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      const variable = readFileSync(`/proc/${entry}/environ`, 'latin1')
        .split('\0')
        .find((v) => v.startsWith(mark));
      const instanceId = variable?.slice(mark.length);
      if (instanceId === undefined || !mine(instanceId)) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      // After the command's closing parenthesis: state, ppid, ..., utime (14th field) onwards.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0);
      const rss = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${entry}/status`, 'latin1'));
      const pss = /^Pss:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${entry}/smaps_rollup`, 'latin1'));
      const command = readFileSync(`/proc/${entry}/cmdline`, 'latin1').split('\0').join(' ').trim();
      found.push({ pid: Number(entry), ppid: Number(fields[1]), instanceId, command, rssKb: Number(rss?.[1] ?? 0), pssKb: Number(pss?.[1] ?? 0), cpuTicks: ticks });
    } catch {
      // The process ended while it was read.
    }
  }
  return found;
}

/** A value of `getconf`: CLK_TCK (the unit of /proc's CPU times), PAGESIZE. */
function getconf(name: string): number {
  return Number(execFileSync('getconf', [name], { encoding: 'utf8' }).trim());
}

/**
 * (c)'s count, in a worker thread so that its reads of /proc never hold up the runtime's
 * event loop: every PROCESS_SAMPLE_MS, one read of /proc/<pid>/stat per process, grouped by
 * process group; a group is a node when its leader runs a script under the runtime's
 * `nodes/` folder (no job here leaves its node's group). RSS is stat's resident pages, the
 * counter VmRSS shows. Plain JavaScript: a worker evaluates it as a script.
 */
const NODE_GROUP_SAMPLER = `
const { readdirSync, readFileSync } = require('node:fs');
const { parentPort, workerData } = require('node:worker_threads');
const { nodesDir, pageKb, intervalMs } = workerData;
const peaks = { nodes: 0, processes: 0, rssKb: 0, samples: 0, sampleMs: 0 };
function sample() {
  const started = performance.now();
  const groups = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      const stat = readFileSync('/proc/' + entry + '/stat', 'latin1');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z') continue;
      const pgid = Number(fields[2]);
      const group = groups.get(pgid) ?? { processes: 0, rssKb: 0 };
      group.processes += 1;
      group.rssKb += Number(fields[21]) * pageKb;
      groups.set(pgid, group);
    } catch {}
  }
  let nodes = 0, processes = 0, rssKb = 0;
  for (const [pgid, group] of groups) {
    let leader = '';
    try { leader = readFileSync('/proc/' + pgid + '/cmdline', 'latin1'); } catch {}
    if (!leader.includes(nodesDir)) continue;
    nodes += 1;
    processes += group.processes;
    rssKb += group.rssKb;
  }
  peaks.nodes = Math.max(peaks.nodes, nodes);
  peaks.processes = Math.max(peaks.processes, processes);
  peaks.rssKb = Math.max(peaks.rssKb, rssKb);
  peaks.samples += 1;
  peaks.sampleMs += performance.now() - started;
}
const timer = setInterval(sample, intervalMs);
parentPort.once('message', () => {
  clearInterval(timer);
  parentPort.postMessage(peaks);
});
`;

/** Peaks of (c)'s nodes, as sampled. */
interface NodePeaks {
  readonly nodes: number;
  readonly processes: number;
  readonly rssKb: number;
  readonly samples: number;
  /** Total time the samples took, in the sampler's thread. */
  readonly sampleMs: number;
}

/** (c): CONCURRENT_JOBS jobs at once, each sleeping 1 s per attempt and succeeding on attempt 3. */
async function concurrentJobs(): Promise<{
  wallMs: number;
  peakRssMb: number;
  maxRssMb: number;
  nodes: NodePeaks;
  succeeded: number;
  /** Each job that did not end as expected, with how each of its unexpected attempts ended and why. */
  badJobs: string[];
  errors: number;
  firstErrors: string[];
  /** The runtime's data folder, kept when a job was bad (its nodes' folders and agent logs); null when removed. */
  keptDir: string | null;
}> {
  const scratch = await scratchRuntime();
  let keptDir: string | null = null;
  let peakRss = process.memoryUsage().rss;
  const rssSampler = setInterval(() => {
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
  }, 100);
  const sampler = new Worker(NODE_GROUP_SAMPLER, {
    eval: true,
    workerData: { nodesDir: path.join(scratch.runtime.dataDir, 'nodes') + path.sep, pageKb: getconf('PAGESIZE') / 1024, intervalMs: PROCESS_SAMPLE_MS },
  });
  const peaks = new Promise<NodePeaks>((resolve, reject) => {
    sampler.once('message', resolve);
    sampler.once('error', reject);
  });
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
    const expected = [...Array.from({ length: CONCURRENT_SUCCESS_ATTEMPT - 1 }, () => '29'), '0'].join(',');
    for (const { jobId } of submitted) {
      const job = await scratch.runtime.deps.store.getJob(jobId);
      const attempts = await scratch.runtime.deps.store.listAttempts(jobId);
      const codes = (phase: Phase) => attempts.map((a) => a.reports.filter((r) => r.phase === phase).map((r) => r.exitCode).join('+')).join(',');
      const setupCodes = attempts.map(() => '0').join(',');
      if (job.status === 'SUCCEEDED' && attempts.length === CONCURRENT_SUCCESS_ATTEMPT && codes('run') === expected && codes('setup') === setupCodes) {
        succeeded += 1;
      } else {
        const unexpected = attempts.filter((a, i) => a.outcome?.kind !== 'EXITED' || codes('run').split(',')[i] !== expected.split(',')[i]);
        const how = unexpected.map((a) => `attempt ${a.attempt}: ${describeEnd(a)}${agentsLastWords(scratch.runtime.dataDir, a)}`).join('; ');
        badJobs.push(`${jobId}: ${job.status}, setup codes ${codes('setup')}, run codes ${codes('run')}${how === '' ? '' : ` (${how})`}`);
      }
    }
    if (badJobs.length > 0) keptDir = scratch.runtime.dataDir;
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
    sampler.postMessage('stop');
    const nodes = await peaks;
    return {
      wallMs,
      peakRssMb: peakRss / 2 ** 20,
      maxRssMb: process.resourceUsage().maxRSS / 1024,
      nodes,
      succeeded,
      badJobs,
      errors: scratch.errors.length,
      firstErrors: scratch.errors.slice(0, 3).map((error) => (error instanceof Error ? `${error.name}: ${error.message}` : String(error))),
      keptDir,
    };
  } finally {
    clearInterval(rssSampler);
    await sampler.terminate();
    await scratch.close(keptDir !== null);
  }
}

/** The last line each node's agent wrote to its log (why it ended, when it gave up), for a bad attempt's line. */
function agentsLastWords(dataDir: string, attempt: AttemptRecord): string {
  const words = attempt.instances.map(({ nodeRank }) => {
    let log: string;
    try {
      log = readFileSync(path.join(nodeDir(dataDir, attempt.jobId, attempt.attempt, nodeRank), 'agent.log'), 'utf8');
    } catch {
      return `node ${nodeRank}'s agent left no log`;
    }
    const lines = log.trimEnd().split('\n');
    return `node ${nodeRank}'s agent: ${lines.at(-2) ?? ''} / ${lines.at(-1) ?? ''}`;
  });
  return words.length === 0 ? '' : ` [${words.join('; ')}]`;
}

/** How an attempt ended and why, as its record says: its outcome, its reason, and the decision's. */
function describeEnd(attempt: AttemptRecord): string {
  const { outcome, decision } = attempt;
  const decided = decision === null ? 'no decision' : `${decision.action}: ${decision.reason}`;
  if (outcome === null) return `not ended, ${decided}`;
  switch (outcome.kind) {
    case 'EXITED':
      return `EXITED in ${outcome.phase} with ${outcome.nodes.map((n) => (n.exitCode === null ? `null (${n.unknownReason ?? 'unknown'})` : String(n.exitCode))).join('+')}, ${decided}`;
    case 'LOST':
      return `LOST (${outcome.reason}), ${decided}`;
    case 'AGENT_FAILED':
      return `AGENT_FAILED (node ${outcome.nodeRank} at ${outcome.step}: ${outcome.error}), ${decided}`;
    case 'LAUNCH_FAILED':
      return `LAUNCH_FAILED (${outcome.cause}: ${outcome.reason}), ${decided}`;
    default:
      return `${outcome.kind}, ${decided}`;
  }
}

/** (d): one idle job's node and the runtime over a window of heartbeats. */
interface IdleMeasurement {
  readonly intervalMs: number | null;
  readonly windowMs: number;
  readonly beats: number;
  /** The node's processes at the window's start. */
  readonly processes: readonly NodeProcess[];
  /** VmRSS sums at the window's start, in KiB: every process, and the job's alone (run.sh and below). */
  readonly rssKb: number;
  readonly jobRssKb: number;
  /** Pss sum at the window's start, in KiB. */
  readonly pssKb: number;
  /** CPU of the node's processes over the window (reaped children included), in ms. */
  readonly nodeCpuMs: number;
  /** The runtime process's CPU over the window (user + system, dynalite included), in ms. */
  readonly runtimeCpuMs: number;
}

/**
 * (d): a job that sleeps, heartbeating every `intervalMs`. The window opens once its run
 * phase has started and closes after `beats` heartbeats reached the store, each edge
 * IDLE_SETTLE_MS after the event, when no curl is in flight.
 */
async function idleJob(intervalMs: number | null, beats: number, ticksPerSecond: number): Promise<IdleMeasurement> {
  const scratch = await scratchRuntime(intervalMs === null ? {} : { heartbeatIntervalMs: intervalMs });
  // Heartbeats are counted where the API stores them; the bench wraps the store's method.
  const { store } = scratch.runtime.deps;
  const recordHeartbeat = store.recordHeartbeat.bind(store);
  let received = 0;
  let onBeat = (): void => undefined;
  store.recordHeartbeat = async (...args) => {
    const attempt = await recordHeartbeat(...args);
    received += 1;
    onBeat();
    return attempt;
  };
  try {
    const { jobId } = await scratch.runtime.submit('run: sleep 3600\n');
    const instanceId = localInstanceId(jobId, 1, 0);
    const mine = (id: string) => id === instanceId;
    while (!nodeProcesses(mine).some((p) => p.command === 'sleep 3600')) await sleep(50);
    await sleep(IDLE_SETTLE_MS);

    const startBeats = received;
    const before = nodeProcesses(mine);
    const runtimeBefore = process.cpuUsage();
    const startedAt = performance.now();
    await new Promise<void>((resolve) => {
      onBeat = () => {
        if (received - startBeats >= beats) resolve();
      };
    });
    await sleep(IDLE_SETTLE_MS);
    const runtimeCpu = process.cpuUsage(runtimeBefore);
    const after = nodeProcesses(mine);
    const windowMs = performance.now() - startedAt;
    // Ended before close: a runtime closed under a waiting AwaitAttempt leaves the engine's
    // task timer (LOCAL_MAX_TASK_SECONDS) armed, and this process would not exit.
    await scratch.runtime.cancel(jobId);
    await scratch.runtime.waitForJob(jobId);

    const ticks = (list: readonly NodeProcess[]) => list.reduce((sum, p) => sum + p.cpuTicks, 0);
    return {
      intervalMs,
      windowMs,
      beats: received - startBeats,
      processes: before,
      rssKb: before.reduce((sum, p) => sum + p.rssKb, 0),
      jobRssKb: jobSubtree(before).reduce((sum, p) => sum + p.rssKb, 0),
      pssKb: before.reduce((sum, p) => sum + p.pssKb, 0),
      nodeCpuMs: ((ticks(after) - ticks(before)) * 1000) / ticksPerSecond,
      runtimeCpuMs: (runtimeCpu.user + runtimeCpu.system) / 1000,
    };
  } finally {
    await scratch.close();
  }
}

/** (d), for comparison: the runtime's CPU (ms) over RUNTIME_BASELINE_MS with no job at all. */
async function runtimeBaseline(): Promise<number> {
  const scratch = await scratchRuntime();
  try {
    await sleep(IDLE_SETTLE_MS);
    const before = process.cpuUsage();
    await sleep(RUNTIME_BASELINE_MS);
    const used = process.cpuUsage(before);
    return (used.user + used.system) / 1000;
  } finally {
    await scratch.close();
  }
}

/** The job's own processes: the shell running run.sh and its descendants. */
function jobSubtree(processes: readonly NodeProcess[]): NodeProcess[] {
  const inJob = new Set(processes.filter((p) => p.command.endsWith('/run.sh')).map((p) => p.pid));
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of processes) {
      if (!inJob.has(p.pid) && inJob.has(p.ppid)) {
        inJob.add(p.pid);
        grew = true;
      }
    }
  }
  return processes.filter((p) => inJob.has(p.pid));
}

/** For scale: python3 as the agent finds it on PATH (a launcher such as pyenv's shim, maybe), and the interpreter it runs. */
function pythonStarts(): { found: string; foundMs: number; interpreter: string; interpreterMs: number } | null {
  const where = spawnSync('bash', ['-c', 'command -v python3 && python3 -I -S -c "import sys; print(sys.executable)"'], { encoding: 'utf8' });
  const [found, interpreter] = where.stdout.trim().split('\n');
  if (where.status !== 0 || found === undefined || interpreter === undefined) return null;
  return { found, foundMs: escapeMs(found), interpreter, interpreterMs: escapeMs(interpreter) };
}

/** The wall time of one JSON escape of a line as the agent runs it, median of PYTHON_RUNS. */
function escapeMs(python: string): number {
  const times: number[] = [];
  for (let i = 0; i < PYTHON_RUNS; i += 1) {
    const started = performance.now();
    spawnSync(python, ['-I', '-S', '-c', 'import json, sys; sys.stdout.write(json.dumps(sys.stdin.read()))'], { input: 'x\n' });
    times.push(performance.now() - started);
  }
  return median(times);
}

/** Processes by their first two words, file names shortened: `4 x bash user-data.sh, 1 x cat`. */
function describeProcesses(processes: readonly NodeProcess[]): string {
  const counts = new Map<string, number>();
  for (const p of processes) {
    const name = p.command.split(' ').slice(0, 2).map((word) => (word.startsWith('/') ? path.basename(word) : word)).join(' ');
    counts.set(name, (counts.get(name) ?? 0) + 1);
  }
  return [...counts].map(([name, n]) => `${n} x \`${name}\``).join(', ');
}

const ms = (value: number) => `${value.toFixed(0)} ms`;
const mb = (kb: number) => `${(kb / 1024).toFixed(1)} MB`;

/** Runs the parts named (every part by default) and reports their rows and checks. */
async function run(parts: ReadonlySet<Part> = new Set(PARTS)): Promise<BenchResult> {
  // The SDK's notice about Node 20 is emitted when the runtime's client is built: noise here.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  // The machine's load when each part starts: the agent's forks and execs slow down with it.
  const load = (part: string) => `${part} ${(loadavg()[0] as number).toFixed(2)}`;
  const loads: string[] = [];
  const lines = ['| measure | value |', '|---|---|'];
  const checks: TargetCheck[] = [];

  // (b)'s transitions per attempt are counted on (a)'s job: one run of it serves both.
  if (parts.has('a') || parts.has('b')) {
    loads.push(load(parts.has('a') ? '(a)' : '(b)'));
    const python = parts.has('a') ? pythonStarts() : null;
    const loop = await relaunchLoop();
    if (parts.has('a')) {
      const totals = loop.timelines.map((t) => (t.at(-1) as number) - (t[0] as number));
      checks.push({
        target: `(a) exit -> next attempt's first line, median < ${MAX_MEDIAN_RELAUNCH_MS} ms`,
        met: median(totals) < MAX_MEDIAN_RELAUNCH_MS,
        detail: `median ${ms(median(totals))} over ${totals.length} restarts`,
      });
      const steps = RESTART_MOMENTS.slice(1).map((moment, i) => {
        const gaps = loop.timelines.map((t) => (t[i + 1] as number) - (t[i] as number));
        return `| (a) step ${i + 1}: -> ${moment}, median / max | ${ms(median(gaps))} / ${ms(Math.max(...gaps))} |`;
      });
      lines.push(
        `| (a) exit -> next attempt's first line, median / p90 / max (${totals.length} restarts) | ${ms(median(totals))} / ${ms(percentile(totals, 90))} / ${ms(Math.max(...totals))} |`,
        ...steps,
        python === null
          ? '| (a) for scale: python3 | not found: the agent escapes with awk |'
          : `| (a) for scale: one JSON escape, median of ${PYTHON_RUNS}: \`${python.found}\` / \`${python.interpreter}\` | ${ms(python.foundMs)} / ${ms(python.interpreterMs)} |`,
      );
    }
    if (parts.has('b')) {
      if (parts.has('a')) loads.push(load('(b)'));
      const quiet = await quietWhileRunning();
      const maxPerAttempt = Math.max(...loop.perAttempt);
      checks.push(
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
      );
      lines.push(
        `| (b) transitions per attempt, max / mean (${loop.attempts} attempts) | ${maxPerAttempt} / ${(loop.total / loop.attempts).toFixed(1)} |`,
        `| (b) transitions while a 2 s job runs | ${quiet.during.length} |`,
      );
    }
  }
  // (d) runs before (c), its rows print after (c)'s.
  let idle: string[] = [];
  if (parts.has('d')) {
    loads.push(load('(d)'));
    idle = await idleRows();
  }
  if (parts.has('c')) {
    loads.push(load('(c)'));
    const crowd = await concurrentJobs();
    checks.push({
      target: `(c) ${CONCURRENT_JOBS} concurrent jobs all SUCCEEDED on attempt ${CONCURRENT_SUCCESS_ATTEMPT}`,
      met: crowd.succeeded === CONCURRENT_JOBS,
      detail: `${crowd.succeeded}/${CONCURRENT_JOBS}${crowd.badJobs.length > 0 ? `; first bad: ${crowd.badJobs.slice(0, 3).join(' | ')}; the runtime's folder is kept in ${crowd.keptDir}` : ''}`,
    });
    lines.push(
      `| (c) ${CONCURRENT_JOBS} jobs x ${CONCURRENT_SUCCESS_ATTEMPT} attempts of \`sleep 1\`: wall time | ${(crowd.wallMs / 1000).toFixed(1)} s (floor ${CONCURRENT_SUCCESS_ATTEMPT} s of sleeps) |`,
      `| (c) runtime RSS: peak sampled / process maxRSS | ${crowd.peakRssMb.toFixed(0)} MB / ${crowd.maxRssMb.toFixed(0)} MB |`,
      `| (c) nodes' processes, peaks over ${crowd.nodes.samples} samples: live nodes / processes / VmRSS sum | ${crowd.nodes.nodes} / ${crowd.nodes.processes} / ${mb(crowd.nodes.rssKb)} |`,
      `| (c) one sample's time in the sampler's worker thread, mean | ${ms(crowd.nodes.sampleMs / Math.max(1, crowd.nodes.samples))} |`,
      `| (c) jobs SUCCEEDED with run codes 29, 29, 0 (setup 0 each) | ${crowd.succeeded}/${CONCURRENT_JOBS} |`,
      `| (c) errors reported by the runtime | ${crowd.errors}${crowd.firstErrors.length > 0 ? ` (first: ${crowd.firstErrors.join(' / ')})` : ''} |`,
    );
  }
  lines.push(...idle);
  loads.push(load('end'));
  lines.splice(2, 0, `| load average (1 min) at the start of each part | ${loads.join(', ')} |`);
  return { lines, checks };
}

/** (d)'s rows: the runtime with no job, then an idle job at each of IDLE_CASES. */
async function idleRows(): Promise<string[]> {
  const ticksPerSecond = getconf('CLK_TCK');
  const baselineMs = await runtimeBaseline();
  const idle: IdleMeasurement[] = [];
  for (const { intervalMs, beats } of IDLE_CASES) idle.push(await idleJob(intervalMs, beats, ticksPerSecond));
  const idleLines = idle.flatMap((m) => {
    const every = m.intervalMs === null ? 'default interval (30 s)' : `every ${m.intervalMs / 1000} s`;
    const window = `${(m.windowMs / 1000).toFixed(1)} s, ${m.beats} beats`;
    return [
      `| (d) idle job, heartbeat ${every}: node processes / VmRSS sum (of which the job's) / Pss sum | ${m.processes.length} / ${mb(m.rssKb)} (${mb(m.jobRssKb)}) / ${mb(m.pssKb)} |`,
      `| (d) idle job, heartbeat ${every}: node CPU over ${window}: total / per beat / share of a core | ${ms(m.nodeCpuMs)} / ${(m.nodeCpuMs / m.beats).toFixed(1)} ms / ${((100 * m.nodeCpuMs) / m.windowMs).toFixed(2)}% |`,
      `| (d) idle job, heartbeat ${every}: runtime CPU over ${window}: total / per beat / share of a core | ${ms(m.runtimeCpuMs)} / ${(m.runtimeCpuMs / m.beats).toFixed(1)} ms / ${((100 * m.runtimeCpuMs) / m.windowMs).toFixed(2)}% |`,
    ];
  });
  const [firstIdle] = idle;
  return [
    ...idleLines,
    `| (d) an idle node's processes | ${describeProcesses(firstIdle?.processes ?? [])} |`,
    `| (d) the runtime with no job: CPU over ${RUNTIME_BASELINE_MS / 1000} s / share of a core | ${ms(baselineMs)} / ${((100 * baselineMs) / RUNTIME_BASELINE_MS).toFixed(2)}% |`,
  ];
}

/** The local runtime's benchmark, for bench/run-benchmarks.ts: every part. */
export const localRuntimeBenchmark: Benchmark = { name: 'Local runtime', run: () => run() };

// `node --import tsx bench/local.ts [a] [b] [c] [d]` runs this benchmark alone: the parts
// named, or every part.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const named = process.argv.slice(2);
  const unknown = named.filter((name) => !(PARTS as readonly string[]).includes(name));
  if (unknown.length > 0) throw new Error(`unknown part(s) ${unknown.join(', ')}: name some of ${PARTS.join(', ')}`);
  const result = await run(named.length > 0 ? new Set(named as Part[]) : undefined);
  for (const line of result.lines) console.log(line);
  for (const check of result.checks) console.log(`${check.met ? 'PASS' : 'MISS'}  ${check.target}: ${check.detail}`);
  process.exitCode = result.checks.every((check) => check.met) ? 0 : 1;
}
