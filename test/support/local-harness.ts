// The end-to-end tests' world: a real LocalRuntime per test (real ASL, real bash, dynalite)
// in a fresh folder, with what the tests watch recorded: transitions, launches, errors.

import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { waitFor } from './fixtures/wait.ts';
import { afterEach, vi } from 'vitest';
import type { ChaosPlan } from '../../lib/chaos-file/types.ts';
import type { AttemptRecord, JobEvent, JobRecord } from '../../lib/model.ts';
import type { LaunchRequest } from '../../lib/ports.ts';
import { getJob } from '../../lib/usecases/index.ts';
import type { JobView } from '../../lib/views.ts';
import type { LocalExecutionResult } from '../../local/local-workflow.ts';
import { LocalRuntime, type LocalRuntimeOptions, type LocalSubmitOptions } from '../../local/runtime.ts';

/** One StateEntered event, with when the test saw it. */
export interface Transition {
  readonly execution: string;
  readonly state: string;
  readonly at: number;
}

/** A runtime under test and what it has done so far. */
export interface TestRuntime {
  readonly runtime: LocalRuntime;
  readonly dataDir: string;
  readonly transitions: Transition[];
  /** Every launch request, in order: the callback secrets are only here. */
  readonly launches: LaunchRequest[];
  /** Errors the runtime reported that no caller was waiting for. */
  readonly errors: unknown[];
  /** What opening the folder repaired, as the runtime said it. */
  readonly notices: string[];
}

/** A finished job: the execution's result, the job as `relaunch run --json` shows it, and the table's rows. */
export interface FinishedJob extends StoredJob {
  readonly jobId: string;
  readonly result: LocalExecutionResult;
  readonly view: JobView;
}

/** The job's rows in the table. */
export interface StoredJob {
  readonly job: JobRecord;
  readonly attempts: AttemptRecord[];
  readonly events: JobEvent[];
}

type OpenOptions = Partial<Omit<LocalRuntimeOptions, 'onTransition' | 'onError' | 'onNotice'>>;

/**
 * Registers an afterEach that closes every runtime the test opened and removes its folder;
 * returns `open`. Call once per test file, at the top level.
 */
export function useLocalRuntimes(): (options?: OpenOptions) => Promise<TestRuntime> {
  const opened: TestRuntime[] = [];
  const folders: string[] = [];

  afterEach(async () => {
    for (const t of opened.splice(0)) await t.runtime.close();
    for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
  });

  return async (options = {}) => {
    const dataDir = options.dataDir ?? mkdtempSync(path.join(tmpdir(), 'relaunch-e2e-'));
    if (options.dataDir === undefined) folders.push(dataDir);
    const transitions: Transition[] = [];
    const errors: unknown[] = [];
    const notices: string[] = [];
    const runtime = await LocalRuntime.open({
      inMemory: true,
      ...options,
      dataDir,
      onTransition: (execution, state) => transitions.push({ execution, state, at: Date.now() }),
      onError: (error) => errors.push(error),
      onNotice: (notice) => notices.push(notice),
    });
    const launches: LaunchRequest[] = [];
    const { compute } = runtime.deps;
    const launch = compute.launch.bind(compute);
    vi.spyOn(compute, 'launch').mockImplementation(async (request) => {
      launches.push(request);
      return launch(request);
    });
    const t: TestRuntime = { runtime, dataDir, transitions, launches, errors, notices };
    opened.push(t);
    return t;
  };
}

/** Submits a task and waits for the job to end. */
export async function runToEnd(t: TestRuntime, task: string, options: LocalSubmitOptions = {}): Promise<FinishedJob> {
  const { jobId } = await t.runtime.submit(task, options);
  return finish(t, jobId);
}

/** Waits for a submitted job to end and reads everything about it. */
export async function finish(t: TestRuntime, jobId: string): Promise<FinishedJob> {
  const result = await t.runtime.waitForJob(jobId);
  const view = await getJob(jobId, t.runtime.deps);
  return { jobId, result, view, ...(await stored(t, jobId)) };
}

/** The job's rows as the table holds them now. */
export async function stored(t: TestRuntime, jobId: string): Promise<StoredJob> {
  const { store } = t.runtime.deps;
  return { job: await store.getJob(jobId), attempts: await store.listAttempts(jobId), events: await store.listEvents(jobId) };
}

/** The statuses the job went through, oldest first, from its EVENT rows. */
export function statusTrail(events: readonly JobEvent[]): string[] {
  return events.map((event) => event.to);
}

/** Each attempt's reports as `phase:code` per node, in arrival order. */
export function reportCodes(attempts: readonly AttemptRecord[]): string[][] {
  return attempts.map((attempt) => attempt.reports.map((r) => `${r.phase}:${r.stopped === undefined ? r.exitCode : `stopped(${r.stopped})`}@${r.nodeRank}`));
}


/** Waits until the job's latest attempt is `attempt`, its process runs and the controller waits on it. */
export async function waitUntilAwaiting(t: TestRuntime, jobId: string, attempt: number): Promise<AttemptRecord> {
  const { store } = t.runtime.deps;
  return waitFor(`attempt ${attempt} of ${jobId} to be awaited while running`, async () => {
    const job = await store.getJob(jobId);
    if (job.attemptCount !== attempt || job.status !== 'RUNNING') return undefined;
    const record = await store.getAttempt(jobId, attempt);
    return record.taskToken !== null && record.outcome === null ? record : undefined;
  });
}

/**
 * The live processes of a process group (Linux /proc). Zombies are dead and left out: a
 * container's PID 1 may take its time reaping an orphan, and `kill(-pgid, 0)` still
 * answers for one.
 */
export function liveInGroup(pgid: number): number[] {
  const members: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // gone while we looked
    }
    // After "pid (comm) ": state, ppid, pgrp, ...; comm may hold spaces and parentheses.
    const [state, , group] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(group) === pgid && state !== 'Z') members.push(Number(entry));
  }
  return members;
}

/** Whether a process exists (a zombie counts until it is reaped). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
}

/** Task YAML written indented in a test, with the indentation of its first line removed. */
export function yaml(strings: TemplateStringsArray, ...values: unknown[]): string {
  const joined = strings.reduce((text, part, i) => text + part + (i < values.length ? String(values[i]) : ''), '');
  const text = joined.replace(/^\n/, '');
  const indent = /^ */.exec(text)?.[0].length ?? 0;
  return text
    .split('\n')
    .map((line) => line.slice(Math.min(indent, line.length - line.trimStart().length)))
    .join('\n');
}

export { waitFor };

/**
 * A FAILOVER job of `numNodes` spot nodes whose `node` is preempted in attempt 1 (warned 1 s
 * into its run, gone `warningSeconds` later), its other nodes working on until they are
 * stopped, and whose attempt 2 prints each node's setup and run. With launch_on_warning,
 * the warned node's run, once stopped, ends only when attempt 2's node of its rank has set
 * up (or its instance goes), so the standby is launched before attempt 1 ends whatever the
 * machine's load.
 */
export function preemptedNodeJob(options: { readonly numNodes: number; readonly node: number; readonly warningSeconds: number; readonly launchOnWarning: boolean }): {
  readonly task: string;
  readonly chaos: ChaosPlan;
} {
  const task = yaml`
    num_nodes: ${options.numNodes}
    resources:
      use_spot: true
      job_recovery:
        strategy: FAILOVER
        launch_on_warning: ${options.launchOnWarning}
    setup: |
      echo "setup of attempt $RELAUNCH_ATTEMPT on node $RELAUNCH_NODE_RANK"
      if [ "$RELAUNCH_ATTEMPT" -eq 2 ] && [ "$RELAUNCH_NODE_RANK" -eq ${options.node} ]; then touch replacement-ready; fi
    run: |
      if [ "$RELAUNCH_ATTEMPT" -eq 1 ] && [ "$RELAUNCH_NODE_RANK" -eq ${options.node} ] && ${options.launchOnWarning}; then
        trap 'while [ ! -f replacement-ready ]; do sleep 0.05; done; exit 0' TERM
        while :; do sleep 0.05; done
      fi
      if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then exec sleep 600; fi
      echo "node $RELAUNCH_NODE_RANK of $RELAUNCH_NUM_NODES in attempt $RELAUNCH_ATTEMPT"
  `;
  return { task, chaos: { faults: [{ kind: 'preempt', attempt: 1, node: options.node, afterMs: 1000, warningMs: options.warningSeconds * 1000 }] } };
}
