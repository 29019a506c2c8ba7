// A node that serves more than one attempt (restart in place): the real agent, run as
// cloud-init runs it (test/support/agent-harness.ts), against a stand-in API that answers
// `POST .../next` as each test says, and SSM, whose parameter a test rewrites for the next
// attempt as the launch does.

import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HeartbeatBodySchema, type NextAnswer } from '../../../../lib/agent/protocol.ts';
import { renderAgentScript } from '../../../../lib/agent/script.ts';
import { agentSecretName } from '../../../../lib/agent/secret-parameter.ts';
import { TagKey } from '../../../../lib/agent/tags.ts';
import { jobEnvironment } from '../../../../lib/job-env.ts';
import type { AgentScriptParams } from '../../../../lib/agent/script.ts';
import type { Resources, ReuseNodes, TaskSpec } from '../../../../lib/task-file/types.ts';
import { cgroup2Support, TestCgroup, withoutCgroup2 } from '../../../support/cgroup2.ts';
import { recoveryPolicy } from '../../../support/fixtures/specs.ts';
import { waitFor } from '../../../support/fixtures/wait.ts';
import {
  api,
  apiUrl,
  dir,
  dockerCalls,
  dockerStandIn,
  DUMP_ENV,
  INSTANCE_ARN,
  INSTANCE_ID,
  JOB_ID,
  jobEnv,
  MACHINE_PATH,
  processesWithEnv,
  runAgent,
  SECRET,
  SECRET_PATH,
  spec,
  startAgent,
  useAgentWorld,
} from '../../../support/agent-harness.ts';

useAgentWorld();

/** Attempt 4's callback secret, which the launch writes into the instance's parameter. */
const NEW_SECRET = 'a4b4c4d4'.repeat(8);

/** A two-node task whose relaunches reuse nodes, setup as `reuse` says. */
function reusing(overrides: Partial<TaskSpec> = {}, resources: Partial<Resources> = {}, reuse: ReuseNodes = { reuse: true, setup: 'skip' }): TaskSpec {
  return spec({ numNodes: 2, ...overrides }, { jobRecovery: recoveryPolicy({ reuseNodes: reuse }), ...resources });
}

/** The settings a reusing node is given here: quick looks and a one-second grace. */
function node(taskSpec: TaskSpec, more: Partial<AgentScriptParams> = {}): Partial<AgentScriptParams> & Pick<AgentScriptParams, 'spec'> {
  return { spec: taskSpec, nodeRank: 0, interruptionPollSeconds: 0.1, holdPollSeconds: 0.05, stopGraceSeconds: 1, proofSeconds: 10, ...more };
}

/** The API's word that this node is node 1 of attempt 4. */
function runNext(setup: 'skip' | 'rerun'): NextAnswer {
  return { next: 'run', reason: 'restart in place', attempt: 4, nodeRank: 1, numNodes: 2, nodeIps: ['10.0.1.1', '10.0.1.2'], setup };
}

/**
 * Rewrites the instance's parameter for attempt 4 once the API has answered `run`, a
 * moment after (the agent reads the old secret first, and must read again until it changes).
 * `onNext`, when given, is told of each `next` first.
 */
function rotateSecretOnRun(onNext?: () => void): void {
  api.onNext = (_count, answer) => {
    onNext?.();
    if (typeof answer === 'object' && answer.next === 'run') {
      setTimeout(() => api.parameters.put(agentSecretName(SECRET_PATH, INSTANCE_ID), NEW_SECRET, INSTANCE_ARN), 300);
    }
  };
}

/** A stand-in nvidia-smi on PATH that lists the pids in the test's `gpu-pids` file (none without it), and logs its arguments. */
function nvidiaSmiStandIn(): string {
  const bin = join(dir, 'gpu-bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'nvidia-smi'), '#!/bin/bash\nprintf \'%s\\n\' "$*" >>"$DUMP_DIR/nvidia-smi.log"\ncat "$DUMP_DIR/gpu-pids" 2>/dev/null\nexit 0\n', { mode: 0o755 });
  return [bin, MACHINE_PATH].join(delimiter);
}

/** The live processes that carry attempt `attempt`'s phase mark. */
function marked(attempt: number): number[] {
  return processesWithEnv(`RELAUNCH_PHASE_MARK=${INSTANCE_ID}/${attempt}`);
}

const requestsOf = (attempt: number) => api.requests.filter((r) => r.path.startsWith(`/jobs/${JOB_ID}/attempts/${attempt}/`));

describe('a node the task reuses, once its job is over', () => {
  it('runs the next attempt in place: setup skipped, the new attempt\'s env, secret and URLs, the old logs kept', async () => {
    api.nextAnswers = [{ next: 'wait', reason: 'not decided yet' }, runNext('skip')];
    rotateSecretOnRun();
    const setup = 'echo setting up; echo ran >>"$DUMP_DIR/setup-runs"';
    const taskSpec = reusing({ setup, run: `echo "running attempt $RELAUNCH_ATTEMPT"; ${DUMP_ENV}` });
    const result = await runAgent(node(taskSpec), nvidiaSmiStandIn());

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports).toEqual([
      { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: 'setting up' },
      { nodeRank: 0, phase: 'run', exitCode: 0, outputTail: 'running attempt 3' },
      { nodeRank: 1, phase: 'setup', exitCode: 0, outputTail: 'relaunch: setup skipped: it ran on this node in attempt 3' },
      { nodeRank: 1, phase: 'run', exitCode: 0, outputTail: 'running attempt 4' },
    ]);
    // The skipped setup ran for 0 ms: the time before its report was the agent's.
    expect(api.setupTimes[2]).toBe(0);
    expect(typeof api.setupTimes[0]).toBe('number');
    expect(readFileSync(join(dir, 'setup-runs'), 'utf8')).toBe('ran\n');
    // Attempt 3's routes with its secret only, attempt 4's with the new one only: the old
    // secret is never sent on the new attempt's routes.
    expect(requestsOf(3).length).toBeGreaterThan(0);
    expect(requestsOf(3).every((r) => r.authorization === `Bearer ${SECRET}`)).toBe(true);
    expect(requestsOf(4).length).toBeGreaterThan(0);
    expect(requestsOf(4).every((r) => r.authorization === `Bearer ${NEW_SECRET}`)).toBe(true);
    expect(requestsOf(3).length + requestsOf(4).length).toBe(api.requests.length);
    // Asked on attempt 3's route until told to run, then on attempt 4's once that job was over.
    expect(api.nexts.map((r) => r.path)).toEqual([`/jobs/${JOB_ID}/attempts/3/next`, `/jobs/${JOB_ID}/attempts/3/next`, `/jobs/${JOB_ID}/attempts/4/next`]);
    expect(api.nexts.map((r) => JSON.parse(r.body) as unknown)).toEqual([{ nodeRank: 0 }, { nodeRank: 0 }, { nodeRank: 1 }]);
    const beats = api.heartbeats.filter((r) => r.path === `/jobs/${JOB_ID}/attempts/4/heartbeat`);
    expect(beats.length).toBeGreaterThanOrEqual(1);
    expect(HeartbeatBodySchema.parse(JSON.parse(beats[0]?.body ?? ''))).toEqual({ nodeRank: 1 });
    // Every variable as a node launched fresh for attempt 4 would have it (lib/job-env.ts).
    expect(jobEnv()).toMatchObject(jobEnvironment(taskSpec, { jobId: JOB_ID, attempt: 4, nodeRank: 1, nodeIps: ['10.0.1.1', '10.0.1.2'] }));
    expect(jobEnv()).toMatchObject({
      RELAUNCH_ATTEMPT: '4',
      SKYPILOT_TASK_ID: `${JOB_ID}-4`,
      RELAUNCH_NODE_RANK: '1',
      SKYPILOT_NODE_RANK: '1',
      RELAUNCH_NUM_NODES: '2',
      RELAUNCH_NODE_IPS: '10.0.1.1\n10.0.1.2',
      SKYPILOT_NODE_IPS: '10.0.1.1\n10.0.1.2',
      RELAUNCH_PHASE_MARK: `${INSTANCE_ID}/4`,
    });
    expect(readFileSync(join(dir, 'agent', 'run.attempt-3.log'), 'utf8')).toBe('running attempt 3\n');
    expect(readFileSync(join(dir, 'agent', 'run.log'), 'utf8')).toBe('running attempt 4\n');
    expect(readFileSync(join(dir, 'agent', 'setup.attempt-3.log'), 'utf8')).toBe('setting up\n');
    // nvidia-smi was asked for compute processes, and listed none.
    expect(readFileSync(join(dir, 'nvidia-smi.log'), 'utf8')).toContain('--query-compute-apps=pid --format=csv,noheader');
  });

  it('runs setup again when the answer says rerun, as attempt 4\'s node, its helpers and log streams attempt 4\'s', async () => {
    api.nextAnswers = [runNext('rerun')];
    api.logCredentials = { AccessKeyId: 'AKIALOGS', SecretAccessKey: 'logs-secret', SessionToken: 'logs-token' };
    rotateSecretOnRun();
    const logs = { group: '/relaunch/jobs', region: 'us-east-1', endpoint: `${apiUrl}/logs`, intervalSeconds: 0.05, drainSeconds: 0 };
    const setup = 'echo "setup of attempt $RELAUNCH_ATTEMPT as rank $RELAUNCH_NODE_RANK"; echo ran >>"$DUMP_DIR/setup-runs"';
    const result = await runAgent(node(reusing({ setup }), { dataCredentials: true, logs }));

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports).toEqual([
      { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: 'setup of attempt 3 as rank 0' },
      { nodeRank: 0, phase: 'run', exitCode: 0, outputTail: 'running' },
      { nodeRank: 1, phase: 'setup', exitCode: 0, outputTail: 'setup of attempt 4 as rank 1' },
      { nodeRank: 1, phase: 'run', exitCode: 0, outputTail: 'running' },
    ]);
    expect(readFileSync(join(dir, 'setup-runs'), 'utf8')).toBe('ran\nran\n');
    expect(requestsOf(4).every((r) => r.authorization === `Bearer ${NEW_SECRET}`)).toBe(true);
    expect(requestsOf(3).every((r) => r.authorization === `Bearer ${SECRET}`)).toBe(true);
    // The data credentials, the log credentials and the library asked again on attempt 4's routes.
    const asked = new Set(requestsOf(4).map((r) => r.path.replace(`/jobs/${JOB_ID}/attempts/4/`, '')));
    expect(asked).toContain('data-credentials');
    expect(asked).toContain('log-credentials');
    // Each phase's output to its own attempt's stream.
    const streams = new Set(api.requests.filter((r) => r.path === '/logs/').map((r) => (JSON.parse(r.body) as { logStreamName: string }).logStreamName));
    expect(streams).toEqual(new Set([`${JOB_ID}/attempt-3/node-0/setup`, `${JOB_ID}/attempt-3/node-0/run`, `${JOB_ID}/attempt-4/node-1/setup`, `${JOB_ID}/attempt-4/node-1/run`]));
  });

  it('kills a setsid daemon the job left, one that ignores SIGTERM, before it asks what next', async () => {
    const seen: number[][] = [];
    api.onNext = () => seen.push(marked(3));
    const daemon = `setsid bash -c 'trap "" TERM; while :; do sleep 0.1; done' >/dev/null 2>&1 </dev/null & echo $! >"$DUMP_DIR/daemon.pid"; echo left a daemon`;
    const result = await runAgent(node(reusing({ run: daemon })));

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.at(-1)).toEqual({ nodeRank: 0, phase: 'run', exitCode: 0, outputTail: 'left a daemon' });
    const pid = Number(readFileSync(join(dir, 'daemon.pid'), 'utf8'));
    expect(pid).toBeGreaterThan(0);
    // Gone when the API was first asked (the proof comes first), and gone still.
    expect(seen).toEqual([[]]);
    expect(marked(3)).toEqual([]);
    expect(result.stderr).toContain('asking what next');
    expect(result.stderr).toContain('told to shut down: the test stops it');
  });

  it('stops a run that ignores SIGTERM when the held tag names its attempt: SIGKILL after the grace, a stopped report (held), then next', async () => {
    const seen: number[][] = [];
    api.onNext = () => seen.push(marked(3));
    const run = 'trap "" TERM; echo working; touch "$DUMP_DIR/run-started"; while :; do sleep 0.1; done';
    const agent = await startAgent(node(reusing({ run })));
    await waitFor('run to start', () => (existsSync(join(dir, 'run-started')) ? true : undefined));
    // Another attempt's number first: not this one's, nothing happens.
    const tag = `tags/instance/${TagKey.heldAfter}`;
    api.metadata[tag] = '2';
    const looks = api.metadataReads.filter((path) => path === tag).length;
    await waitFor('the agent to look at the tag twice more', () => (api.metadataReads.filter((path) => path === tag).length >= looks + 2 ? true : undefined));
    expect(api.reports.map((r) => r.phase)).toEqual(['setup']);
    api.metadata[tag] = '3';
    const result = await agent.done;

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports).toEqual([
      { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: 'setting up' },
      { nodeRank: 0, phase: 'run', stopped: 'held', outputTail: 'working' },
    ]);
    expect(result.stderr).toContain('attempt 3 has ended: this node is kept for the next');
    expect(result.stderr).toContain('the job did not end in 1 s: SIGKILL');
    expect(seen).toEqual([[]]);
    expect(api.nexts).toHaveLength(1);
  });

  it("keeps every file of the ended attempt under its number (log, truncated mark, report, stopped report) and writes the attempt it serves, before the new attempt's", async () => {
    api.nextAnswers = [runNext('skip')];
    rotateSecretOnRun();
    const root = join(dir, 'agent');
    const run = `if [ "$RELAUNCH_ATTEMPT" = 3 ]; then trap "" TERM; echo working 3; : >"${root}/run.log.truncated"; touch "$DUMP_DIR/run-started"; while :; do sleep 0.1; done; fi; echo "running attempt $RELAUNCH_ATTEMPT"; cat "${root}/attempt"`;
    const agent = await startAgent(node(reusing({ run })));
    await waitFor('run to start', () => (existsSync(join(dir, 'run-started')) ? true : undefined));
    api.metadata[`tags/instance/${TagKey.heldAfter}`] = '3';
    const result = await agent.done;

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    const json = (name: string) => JSON.parse(readFileSync(join(root, name), 'utf8')) as unknown;
    expect(json('setup.attempt-3.report.json')).toEqual({ setupMs: expect.any(Number), nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: 'setting up' });
    expect(json('run.attempt-3.stopped.json')).toEqual({ nodeRank: 0, phase: 'run', stopped: 'held', outputTail: 'working 3' });
    expect(readFileSync(join(root, 'run.attempt-3.log'), 'utf8')).toBe('working 3\n');
    expect(existsSync(join(root, 'run.attempt-3.log.truncated'))).toBe(true);
    expect(existsSync(join(root, 'run.log.truncated'))).toBe(false);
    expect(existsSync(join(root, 'run.stopped.json'))).toBe(false);
    // Attempt 4's own, the mark written before its run started.
    expect(readFileSync(join(root, 'attempt'), 'utf8')).toBe('4\n');
    expect(readFileSync(join(root, 'run.log'), 'utf8')).toBe('running attempt 4\n4\n');
    expect(json('run.report.json')).toEqual({ nodeRank: 1, phase: 'run', exitCode: 0, outputTail: 'running attempt 4\n4' });
    expect(json('setup.report.json')).toMatchObject({ nodeRank: 1, phase: 'setup', exitCode: 0 });
  });

  it('stops setup too when the held tag names its attempt, reported stopped (held), and never runs run', async () => {
    const agent = await startAgent(node(reusing({ setup: 'echo preparing; touch "$DUMP_DIR/setup-started"; sleep 1000', run: 'touch "$DUMP_DIR/run-started"' })));
    await waitFor('setup to start', () => (existsSync(join(dir, 'setup-started')) ? true : undefined));
    api.metadata[`tags/instance/${TagKey.heldAfter}`] = '3';
    const result = await agent.done;

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports).toEqual([{ nodeRank: 0, phase: 'setup', stopped: 'held', outputTail: 'preparing' }]);
    expect(existsSync(join(dir, 'run-started'))).toBe(false);
    expect(api.nexts).toHaveLength(1);
  });

  it('never sends the old secret on the new attempt\'s routes: a parameter never rewritten shuts the node down', async () => {
    api.nextAnswers = [runNext('skip')];
    const result = await runAgent(node(reusing(), { discoveryTimeoutSeconds: 1 }));

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(requestsOf(4)).toEqual([]);
    expect(result.stderr).toContain("the callback secret is still attempt 3's after 1 s: shutting down");
  });

  it('reports the agent\'s failure at previous-attempt for the new attempt when a GPU process outlives the proof, naming it', async () => {
    const stray = spawn('sleep', ['1000'], { env: { PATH: MACHINE_PATH, DUMP_DIR: dir }, stdio: 'ignore', detached: true });
    stray.unref();
    writeFileSync(join(dir, 'gpu-pids'), `${stray.pid}\n`);
    api.nextAnswers = [runNext('skip')];
    rotateSecretOnRun();
    const result = await runAgent(node(reusing(), { proofSeconds: 1 }), nvidiaSmiStandIn());

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    const failure = api.reports.at(-1);
    expect(failure).toMatchObject({ nodeRank: 1, phase: 'setup', agentFailure: { step: 'previous-attempt' } });
    expect(failure?.agentFailure?.error).toContain(`attempt 3's processes are not all gone 1 s after its job ended: GPU compute process pid ${stray.pid} (sleep 1000)`);
    const last = api.requests.filter((r) => r.path.endsWith('/report')).at(-1);
    expect(last).toMatchObject({ path: `/jobs/${JOB_ID}/attempts/4/report`, authorization: `Bearer ${NEW_SECRET}` });
    // Run never ran again.
    expect(api.reports.filter((r) => r.phase === 'run')).toHaveLength(1);
  });

  it('shuts down at a refusal (409) and asks again after throttling, a 5xx or no answer', async () => {
    api.nextAnswers = [503, 429, { next: 'wait', reason: 'not decided yet' }, 409];
    const result = await runAgent(node(reusing()));

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.nexts).toHaveLength(4);
    expect(result.stderr).toContain('the API refused to say what next (HTTP 409): shutting down');
  });

  it('asks for NEXT_WAIT_SECONDS at most, then shuts down', async () => {
    api.nextAnswerAfter = { next: 'wait', reason: 'not decided yet' };
    const result = await runAgent(node(reusing(), { nextWaitSeconds: 1 }));

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    // Asked at least once, each time answered wait (how many times fit in the second is the machine's).
    expect(api.nexts.length).toBeGreaterThanOrEqual(1);
    expect(result.stderr).toContain('no next attempt for this node in 1 s: shutting down');
  });

  it('removes the container, proves it gone, and starts it again for the next attempt, where setup runs again', async () => {
    api.nextAnswers = [runNext('skip')];
    rotateSecretOnRun();
    const taskSpec = reusing({ setup: 'echo "setup in $IN_CONTAINER"; echo ran >>"$DUMP_DIR/setup-runs"' }, { containerImage: 'registry.example/team/model:1' });
    const result = await runAgent(node(taskSpec), dockerStandIn());

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    const container = `relaunch-${INSTANCE_ID}`;
    const calls = dockerCalls();
    const removed = calls.indexOf(`rm -f ${container}`, calls.findIndex((call) => call.startsWith('exec ') && call.includes('run')));
    expect(removed).toBeGreaterThan(0);
    expect(calls[removed + 1]).toBe(`ps -a -q --filter name=^/${container}$`);
    expect(calls.filter((call) => call.startsWith('run -d'))).toHaveLength(2);
    expect(readFileSync(join(dir, 'setup-runs'), 'utf8')).toBe('ran\nran\n');
    expect(api.reports.map((r) => [r.nodeRank, r.phase, r.exitCode])).toEqual([
      [0, 'setup', 0],
      [0, 'run', 0],
      [1, 'setup', 0],
      [1, 'run', 0],
    ]);
    expect(readFileSync(join(dir, 'agent', 'setup.log'), 'utf8')).toContain('relaunch: setup runs again: it ran on this node in attempt 3, but in a container that is new\nsetup in yes\n');
  });

  it('shuts down after its job, saying why, when the agent\'s library (which holds the next attempt\'s part) cannot be had', async () => {
    api.libraryStatus = 503;
    const result = await runAgent(node(reusing()));

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.map((r) => [r.phase, r.exitCode])).toEqual([
      ['setup', 0],
      ['run', 0],
    ]);
    expect(api.nexts).toEqual([]);
    expect(result.stderr).toContain('(last answer: HTTP 503): this node shuts down once its job has ended');
  });

  it('shuts down after its job, asking nothing, when the task does not reuse nodes (the EAGER_NEXT_REGION default)', async () => {
    const result = await runAgent(node(spec({ numNodes: 2 })));

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.nexts).toEqual([]);
    expect(api.requests.filter((r) => r.path.endsWith('/shipper'))).toEqual([]);
  });
});

/** A sleep no other test runs: the escaped daemon's command line is this run's own. */
const DAEMON = `sleep ${randomInt(100_000, 999_999)}`;

/**
 * A task whose attempt 3 run leaves a daemon out of everything that marks it as the job's
 * (`env -i`: no mark; `setsid`: a session and group of its own) that ignores SIGTERM, and
 * exits 29. The run writes the daemon's pid, its cgroup, environment, group and session, and
 * its own; attempt 4's setup writes whether the daemon is alive then, and its own cgroup.
 */
function leavingADaemon(): TaskSpec {
  const setup = `if [ "$RELAUNCH_ATTEMPT" = 4 ]; then
  state=$(ps -o stat= -p "$(cat "$DUMP_DIR/daemon.pid")")
  case $state in ''|Z*) echo dead ;; *) echo "alive ($state)" ;; esac >"$DUMP_DIR/daemon-at-4"
  cat /proc/self/cgroup >"$DUMP_DIR/setup-4.cgroup"
fi
echo setting up`;
  const run = `if [ "$RELAUNCH_ATTEMPT" = 3 ]; then
  env -i setsid sh -c 'trap "" TERM; exec ${DAEMON}' </dev/null >/dev/null 2>&1 &
  daemon=$!
  echo "$daemon" >"$DUMP_DIR/daemon.pid"
  until [ "$(tr '\\0' ' ' </proc/$daemon/cmdline)" = '${DAEMON} ' ]; do sleep 0.05; done
  cat /proc/$daemon/cgroup >"$DUMP_DIR/daemon.cgroup"
  tr '\\0' '\\n' </proc/$daemon/environ >"$DUMP_DIR/daemon.env"
  ps -o pgid= -o sid= -p "$daemon" -p $$ >"$DUMP_DIR/groups"
  cat /proc/self/cgroup >"$DUMP_DIR/run.cgroup"
  echo left a daemon
  exit 29
fi
echo "running attempt $RELAUNCH_ATTEMPT"`;
  return reusing({ setup, run }, {}, { reuse: true, setup: 'rerun' });
}

/** The cgroup v2 path in a copy of /proc/<pid>/cgroup the job wrote to `file` (its `0::` line). */
function unifiedCgroup(file: string): string | undefined {
  const line = readFileSync(join(dir, file), 'utf8').split('\n').find((entry) => entry.startsWith('0::'));
  return line?.slice('0::'.length);
}

/** The daemon's pid, as its run wrote it. */
const daemonPid = () => Number(readFileSync(join(dir, 'daemon.pid'), 'utf8'));

/** Whether process `pid` is alive (a zombie is dead). */
function alive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').charAt(0) !== 'Z';
  } catch {
    return false;
  }
}

/** The daemon killed, if this test's run left it alive: `env -i` took away the DUMP_DIR by which the world finds a test's processes. */
function killDaemon(): void {
  const file = join(dir, 'daemon.pid');
  if (!existsSync(file)) return;
  const pid = Number(readFileSync(file, 'utf8'));
  try {
    if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim() === DAEMON) process.kill(pid, 'SIGKILL');
  } catch {
    // Gone already.
  }
}

/** What the daemon's run wrote: its environment, and its group and session beside the run's. */
function daemonEscaped(): { environment: string[]; groups: string[][] } {
  const groups = readFileSync(join(dir, 'groups'), 'utf8').trim().split('\n').map((line) => line.trim().split(/\s+/));
  return { environment: readFileSync(join(dir, 'daemon.env'), 'utf8').split('\n').filter((line) => line !== ''), groups };
}

const cgroup2 = cgroup2Support();

describe.skipIf(!cgroup2.available)(`a reused node whose agent runs on cgroup v2${cgroup2.available ? '' : ` (skipped: ${cgroup2.reason})`}`, () => {
  let cgroup: TestCgroup;

  beforeEach(() => {
    cgroup = new TestCgroup();
    cgroup.create();
  });

  afterEach(() => {
    killDaemon();
    // Whatever happened, no cgroup of this test is left: each is removed, and seen gone.
    cgroup.remove();
    expect(cgroup.list()).toEqual([]);
  });

  it('kills an env -i setsid daemon that ignores SIGTERM, found only by its phase cgroup, before the next attempt; the phase cgroups go with it', async () => {
    const atNext: { daemon: boolean; cgroups: string[] }[] = [];
    api.nextAnswers = [runNext('rerun')];
    rotateSecretOnRun(() => atNext.push({ daemon: alive(daemonPid()), cgroups: cgroup.list() }));
    const result = await runAgent(node(leavingADaemon()), undefined, undefined, cgroup.launcher);

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    const phases = `/${cgroup.name}/relaunch-phases`;
    // The daemon escaped the mark and the run's group and session: only the cgroup holds it.
    const escaped = daemonEscaped();
    expect(escaped.environment.filter((entry) => entry.startsWith('RELAUNCH_'))).toEqual([]);
    expect(escaped.groups[0]).not.toEqual(escaped.groups[1]);
    expect(unifiedCgroup('daemon.cgroup')).toBe(`${phases}/attempt-3-run`);
    expect(unifiedCgroup('run.cgroup')).toBe(`${phases}/attempt-3-run`);
    // Dead when the API was first asked (the proof comes first), attempt 3's cgroups and
    // their folder removed.
    expect(atNext[0]).toEqual({ daemon: false, cgroups: [`/${cgroup.name}`] });
    expect(readFileSync(join(dir, 'daemon-at-4'), 'utf8')).toBe('dead\n');
    expect(unifiedCgroup('setup-4.cgroup')).toBe(`${phases}/attempt-4-setup`);
    expect(api.reports).toEqual([
      { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: 'setting up' },
      { nodeRank: 0, phase: 'run', exitCode: 29, outputTail: 'left a daemon' },
      { nodeRank: 1, phase: 'setup', exitCode: 0, outputTail: 'setting up' },
      { nodeRank: 1, phase: 'run', exitCode: 0, outputTail: 'running attempt 4' },
    ]);
    // Attempt 4's removed at its own proof: at the node's end, only the test's is left.
    expect(atNext[1]).toEqual({ daemon: false, cgroups: [`/${cgroup.name}`] });
    expect(cgroup.list()).toEqual([`/${cgroup.name}`]);
  });

  it('leaves no cgroup of its own when it is shut down (SIGTERM) while a phase runs', async () => {
    const run = 'cat /proc/self/cgroup >"$DUMP_DIR/run.cgroup"; touch "$DUMP_DIR/run-started"; while :; do sleep 0.1; done';
    const agent = await startAgent(node(reusing({ run })), undefined, undefined, cgroup.launcher);
    await waitFor('run to start', () => (existsSync(join(dir, 'run-started')) ? true : undefined));
    expect(unifiedCgroup('run.cgroup')).toBe(`/${cgroup.name}/relaunch-phases/attempt-3-run`);
    process.kill(agent.pid, 'SIGTERM');
    const result = await agent.done;

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.at(-1)).toEqual({ nodeRank: 0, phase: 'run', stopped: 'shutdown', outputTail: '' });
    expect(cgroup.list()).toEqual([`/${cgroup.name}`]);
  });
});

const hidden = withoutCgroup2();

describe.skipIf('reason' in hidden)(`a reused node whose agent finds no cgroup v2${'reason' in hidden ? ` (skipped: ${hidden.reason})` : ''}`, () => {
  afterEach(killDaemon);

  it('cannot see an env -i setsid daemon: the proof passes with it alive, and it outlives the node', async () => {
    const atNext: boolean[] = [];
    api.nextAnswers = [runNext('rerun')];
    rotateSecretOnRun(() => atNext.push(alive(daemonPid())));
    const result = await runAgent(node(leavingADaemon()), undefined, undefined, 'launcher' in hidden ? hidden.launcher : []);

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    const escaped = daemonEscaped();
    expect(escaped.environment.filter((entry) => entry.startsWith('RELAUNCH_'))).toEqual([]);
    expect(escaped.groups[0]).not.toEqual(escaped.groups[1]);
    expect(atNext).toEqual([true, true]);
    expect(readFileSync(join(dir, 'daemon-at-4'), 'utf8')).toMatch(/^alive /);
    expect(api.reports).toEqual([
      { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: 'setting up' },
      { nodeRank: 0, phase: 'run', exitCode: 29, outputTail: 'left a daemon' },
      { nodeRank: 1, phase: 'setup', exitCode: 0, outputTail: 'setting up' },
      { nodeRank: 1, phase: 'run', exitCode: 0, outputTail: 'running attempt 4' },
    ]);
    expect(alive(daemonPid())).toBe(true);
  });
});

describe('the settings of a node that may serve the next attempt', () => {
  const base = { apiUrl: 'https://api.example/v1', jobId: 'j-1', attempt: 7, secretSource: { path: '/p', region: 'us-east-1', endpoint: 'https://ssm.example' }, heartbeatSeconds: 30 };

  it('are set under FAILOVER (SkyPilot reuses its nodes there) and empty under EAGER_NEXT_REGION', () => {
    const failover = renderAgentScript({ ...base, spec: spec({}, { jobRecovery: recoveryPolicy({ strategy: 'FAILOVER' }) }), stopGraceSeconds: 20 });
    expect(failover).toContain("declare +x REUSE_NODE='1'");
    expect(failover).toContain(`declare +x HELD_TAG='${TagKey.heldAfter}'`);
    expect(failover).toContain("declare +x NEXT_URL='https://api.example/v1/jobs/j-1/attempts/7/next'");
    expect(failover).toContain("declare +x NEXT_WAIT_SECONDS='900'");
    expect(failover).toContain("declare +x PROOF_SECONDS='50'");
    const eager = renderAgentScript({ ...base, spec: spec() });
    expect(eager).toContain("declare +x REUSE_NODE=''");
    expect(eager).toContain("declare +x HELD_TAG=''");
  });

  it('refuse a bound that is not a whole number of seconds, naming it', () => {
    expect(() => renderAgentScript({ ...base, spec: spec(), nextWaitSeconds: 0.5 })).toThrow('nextWaitSeconds: expected a whole number of seconds >= 1, got 0.5');
    expect(() => renderAgentScript({ ...base, spec: spec(), proofSeconds: 0 })).toThrow('proofSeconds: expected a whole number of seconds >= 1, got 0');
  });
});
