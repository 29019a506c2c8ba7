// LocalProcessCompute: an attempt is one process group per node, running the task's setup
// then run with bash; exit codes go back through the same use cases the agent's API reaches.

import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { constants } from 'node:os';
import path from 'node:path';
import { OUTPUT_TAIL_LINES, OUTPUT_TAIL_MAX_BYTES } from '../lib/agent/protocol.ts';
import { jobEnvironment } from '../lib/job-env.ts';
import type { InstanceRef } from '../lib/model.ts';
import type { Phase } from '../lib/policy/types.ts';
import type { Compute, LaunchRequest, LaunchResult } from '../lib/ports.ts';
import type { TaskSpec } from '../lib/spec/types.ts';
import { attemptLogPath, jobWorkDir } from './paths.ts';


/** Where a local node's news goes: the use cases an EC2 agent reaches through the API. */
export interface LocalAgentSink {
  heartbeat(call: { jobId: string; attempt: number; nodeRank: number; secret: string }): Promise<void>;
  report(call: {
    jobId: string;
    attempt: number;
    nodeRank: number;
    phase: Phase;
    exitCode: number;
    outputTail: string;
    secret: string;
  }): Promise<void>;
  /** What EventBridge would deliver for an EC2 instance. */
  instanceEvent(event: { instanceId: string; kind: 'SPOT_INTERRUPTION_WARNING' | 'STATE_CHANGE'; state?: string; time: string }): Promise<void>;
}

/** Options of the local compute. */
export interface LocalProcessComputeOptions {
  /** Folder for logs (`<jobId>/attempt-<n>.log`) and each job's working folder. */
  readonly dataDir: string;
  readonly sink: LocalAgentSink;
  /** Attempts to interrupt as a spot preemption would, per job. */
  readonly preemptions?: (jobId: string) => ReadonlySet<number>;
  /** How long after run starts a preemption strikes. @default 300 */
  readonly preemptAfterMs?: number;
  /** Heartbeat period while a node runs. @default 30000 */
  readonly heartbeatIntervalMs?: number;
  /** Reports a failure inside the compute itself (a sink call that threw). */
  readonly onError?: (error: unknown) => void;
}

interface RunningNode {
  readonly rank: number;
  child: ChildProcess | null;
  /** Set once the node must not report any more (released, or "preempted"). */
  silenced: boolean;
}

interface RunningAttempt {
  readonly nodes: RunningNode[];
  readonly log: WriteStream;
  readonly timers: Set<NodeJS.Timeout>;
}

/**
 * The exit code a shell would show for a process that ended this way: 128 + N for death
 * by signal N (Node gives the signal's name; the OS's table gives its number).
 */
export function shellExitCode(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  const number = signal === null ? undefined : constants.signals[signal];
  // Node reports either a code or a signal; a signal the OS does not name cannot happen.
  if (number === undefined) throw new Error(`process ended with neither an exit code nor a known signal (${String(signal)})`);
  return 128 + number;
}

/** How long after bash exits its last output may still arrive. */
const OUTPUT_SETTLE_MS = 200;

/** Local attempts as process groups; instance ids are `local-<job>-<attempt>-<rank>`. */
export class LocalProcessCompute implements Compute {
  private readonly attempts = new Map<string, RunningAttempt>();

  constructor(private readonly options: LocalProcessComputeOptions) {}

  async launch(request: LaunchRequest): Promise<LaunchResult> {
    const { jobId, attempt, spec } = request;
    const cwd = spec.workdir === null ? jobWorkDir(this.options.dataDir, jobId) : path.resolve(spec.workdir);
    mkdirSync(cwd, { recursive: true });
    mkdirSync(path.dirname(attemptLogPath(this.options.dataDir, jobId, attempt)), { recursive: true });
    const log = createWriteStream(attemptLogPath(this.options.dataDir, jobId, attempt), { flags: 'a' });
    const nodes: RunningNode[] = [];
    const running: RunningAttempt = { nodes, log, timers: new Set() };
    this.attempts.set(key(jobId, attempt), running);
    const nodeIps = Array.from({ length: spec.numNodes }, () => '127.0.0.1');
    const instances: InstanceRef[] = [];
    for (let rank = 0; rank < spec.numNodes; rank += 1) {
      const node: RunningNode = { rank, child: null, silenced: false };
      nodes.push(node);
      instances.push({ instanceId: instanceId(jobId, attempt, rank), nodeRank: rank, privateIp: '127.0.0.1' });
      const env = { ...process.env, ...jobEnvironment(spec, { jobId, attempt, nodeRank: rank, nodeIps }) };
      void this.runNode(request, running, node, cwd, env);
    }
    return { placement: { region: 'local', zone: null, instanceType: 'local-process' }, instances };
  }

  async release(jobId: string, attempt: number, _instances: readonly InstanceRef[]): Promise<void> {
    const running = this.attempts.get(key(jobId, attempt));
    if (running === undefined) return;
    for (const node of running.nodes) node.silenced = true;
    await Promise.all(running.nodes.map((node) => killGroup(node.child)));
    this.forget(jobId, attempt);
  }

  /** Kills every process group this compute started (Ctrl-C, shutdown). */
  async releaseAll(): Promise<void> {
    await Promise.all(
      [...this.attempts.values()].flatMap((running) =>
        running.nodes.map((node) => {
          node.silenced = true;
          return killGroup(node.child);
        }),
      ),
    );
    for (const k of [...this.attempts.keys()]) {
      const [jobId, attempt] = splitKey(k);
      this.forget(jobId, attempt);
    }
  }

  /** Attempts with live processes, for tests and shutdown. */
  liveProcessIds(): number[] {
    return [...this.attempts.values()].flatMap((r) =>
      r.nodes.flatMap((n) => (n.child?.pid !== undefined && n.child.exitCode === null && n.child.signalCode === null ? [n.child.pid] : [])),
    );
  }

  private forget(jobId: string, attempt: number): void {
    const running = this.attempts.get(key(jobId, attempt));
    if (running === undefined) return;
    for (const timer of running.timers) clearTimeout(timer);
    running.log.end();
    this.attempts.delete(key(jobId, attempt));
  }

  private async runNode(
    request: LaunchRequest,
    running: RunningAttempt,
    node: RunningNode,
    cwd: string,
    env: NodeJS.ProcessEnv,
  ): Promise<void> {
    const { jobId, attempt, spec, callbackSecret: secret } = request;
    const sink = this.options.sink;
    const call = { jobId, attempt, nodeRank: node.rank, secret };
    try {
      await sink.heartbeat(call);
      // Released while its first heartbeat was on the way (a cancel, a shutdown): the attempt
      // is forgotten, so a process or timer started now would have no one to stop it.
      if (node.silenced) return;
      const beat = setInterval(() => {
        if (!node.silenced) sink.heartbeat(call).catch((error: unknown) => this.options.onError?.(error));
      }, this.options.heartbeatIntervalMs ?? 30_000);
      running.timers.add(beat as unknown as NodeJS.Timeout);
      for (const phase of phases(spec)) {
        if (node.silenced) return;
        const script = phase === 'setup' ? spec.setup : spec.run;
        const preempt = phase === 'run' && (this.options.preemptions?.(jobId).has(attempt) ?? false);
        if (preempt) this.schedulePreemption(request, running, node);
        const { exitCode, tail } = await this.runPhase(running, node, script ?? '', cwd, env, spec.numNodes);
        if (node.silenced) return;
        await sink.report({ ...call, phase, exitCode, outputTail: tail });
        if (exitCode !== 0) return;
      }
    } catch (error) {
      this.options.onError?.(error);
    }
  }

  private runPhase(
    running: RunningAttempt,
    node: RunningNode,
    script: string,
    cwd: string,
    env: NodeJS.ProcessEnv,
    numNodes: number,
  ): Promise<{ exitCode: number; tail: string }> {
    return new Promise((resolve) => {
      const child = spawn('bash', ['-c', script], { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
      node.child = child;
      const tail = new LineTail(OUTPUT_TAIL_LINES, OUTPUT_TAIL_MAX_BYTES);
      const prefix = numNodes > 1 ? `(node ${node.rank}) ` : '';
      const onData = (chunk: Buffer): void => {
        const text = chunk.toString('utf8');
        tail.push(text);
        running.log.write(prefix === '' ? text : prefixLines(text, prefix));
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      child.on('error', (error) => {
        running.log.write(`${prefix}relaunch: could not start bash: ${error.message}\n`);
        resolve({ exitCode: 127, tail: error.message });
      });
      // The phase ends when bash exits; its output is complete at 'close', which a
      // background child still holding the pipe can put off indefinitely, so the tail
      // waits for 'close' only briefly.
      child.on('exit', (code, signal) => {
        const finish = (): void => resolve({ exitCode: shellExitCode(code, signal), tail: tail.text() });
        const late = setTimeout(finish, OUTPUT_SETTLE_MS);
        child.once('close', () => {
          clearTimeout(late);
          finish();
        });
      });
    });
  }

  /** Does what EC2 does to a reclaimed spot instance: warn, then the instance is gone. */
  private schedulePreemption(request: LaunchRequest, running: RunningAttempt, node: RunningNode): void {
    const timer = setTimeout(() => {
      running.timers.delete(timer);
      const id = instanceId(request.jobId, request.attempt, node.rank);
      const sink = this.options.sink;
      void (async () => {
        await sink.instanceEvent({ instanceId: id, kind: 'SPOT_INTERRUPTION_WARNING', time: new Date().toISOString() });
        node.silenced = true;
        running.log.write(`relaunch: node ${node.rank} preempted (simulated spot interruption)\n`);
        await killGroup(node.child);
        await sink.instanceEvent({ instanceId: id, kind: 'STATE_CHANGE', state: 'terminated', time: new Date().toISOString() });
      })().catch((error: unknown) => this.options.onError?.(error));
    }, this.options.preemptAfterMs ?? 300);
    running.timers.add(timer);
  }
}

function phases(spec: TaskSpec): Phase[] {
  return spec.setup === null ? ['run'] : ['setup', 'run'];
}

function instanceId(jobId: string, attempt: number, rank: number): string {
  return `local-${jobId}-${attempt}-${rank}`;
}

function key(jobId: string, attempt: number): string {
  return `${jobId}#${attempt}`;
}

function splitKey(k: string): [string, number] {
  const at = k.lastIndexOf('#');
  return [k.slice(0, at), Number(k.slice(at + 1))];
}

function prefixLines(text: string, prefix: string): string {
  return text.replace(/^(?=.)/gm, prefix);
}

/** SIGTERM to the whole group, SIGKILL after a grace period; resolves when it is gone. */
async function killGroup(child: ChildProcess | null, graceMs = 2_000): Promise<void> {
  if (child?.pid === undefined) return;
  const pid = child.pid;
  if (child.exitCode === null && child.signalCode === null) {
    const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    signalGroup(pid, 'SIGTERM');
    const timer = setTimeout(() => signalGroup(pid, 'SIGKILL'), graceMs);
    await gone;
    clearTimeout(timer);
  }
  // Whatever the job left in its group (background children) goes too, even when the
  // leader had already exited.
  signalGroup(pid, 'SIGKILL');
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // The group is already gone: nothing to kill.
  }
}

/** Keeps the last N lines of a stream of text, and at most M bytes of them. */
class LineTail {
  private lines: string[] = [];
  private partial = '';

  constructor(
    private readonly maxLines: number,
    private readonly maxBytes: number,
  ) {}

  push(text: string): void {
    const parts = (this.partial + text).split('\n');
    // A line with no end (a progress bar redrawn with \r) must not grow without bound.
    this.partial = lastBytes(parts.pop() ?? '', this.maxBytes);
    this.lines.push(...parts);
    if (this.lines.length > this.maxLines) this.lines = this.lines.slice(-this.maxLines);
  }

  text(): string {
    const all = this.partial === '' ? this.lines : [...this.lines, this.partial];
    return lastBytes(all.slice(-this.maxLines).join('\n'), this.maxBytes);
  }
}

/** The end of a string, at most `max` bytes of UTF-8 (never a broken character). */
function lastBytes(text: string, max: number): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= max) return text;
  return bytes.subarray(bytes.length - max).toString('utf8').replace(/^\uFFFD+/, '');
}
