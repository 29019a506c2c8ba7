// Faults of a real node injected into the real agent, run as cloud-init runs user data
// (test/support/agent-harness.ts: a parent sharing the agent's process group and session):
// jobs that signal their own group or name the agent's variables, an agent killed alone,
// a Docker task whose mount fails, answers the agent must not retry forever, two caches
// of one bucket, and a job that saves a checkpoint when it is told to stop.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentSecretName, agentSecretValue } from '../../../lib/agent/secret-parameter.ts';
import { linesInOrder } from '../../support/fixtures/text.ts';
import { waitFor } from '../../support/fixtures/wait.ts';
import {
  agentProcesses,
  api,
  apiUrl,
  dir,
  dockerCalls,
  dockerStandIn,
  DUMP_ENV,
  MACHINE_PATH,
  INSTANCE_ARN,
  INSTANCE_ID,
  JOB_ID,
  jobEnv,
  pathWithout,
  processesWithEnv,
  runAgent,
  SECRET,
  SECRET_PATH,
  spec,
  startAgent,
  useAgentWorld,
} from '../../support/agent-harness.ts';

useAgentWorld();

/** Whether a process is alive (a zombie is dead). */
function alive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').charAt(0) !== 'Z';
  } catch {
    return false;
  }
}

/** Sends a signal to a process that may have ended meanwhile. */
function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // It ended between the look and the signal.
  }
}

/** A file the job writes once it runs, holding its shell's pid. */
const STARTED = 'echo $$ > "$DUMP_DIR/started"';

/** Waits for the job to have started; its shell's pid. */
async function jobStarted(): Promise<number> {
  const file = join(dir, 'started');
  return waitFor('the job to start', () => (existsSync(file) && readFileSync(file, 'utf8').endsWith('\n') ? Number(readFileSync(file, 'utf8')) : undefined));
}

/**
 * A job that saves a checkpoint when it is told to stop, as a spot user's job does: on
 * SIGTERM it prints, works one more second, writes the file and prints again.
 */
const CHECKPOINTING_JOB = [
  `trap 'echo "got SIGTERM, saving"; sleep 1; echo step-42 > "$DUMP_DIR/checkpoint"; echo saved; exit 0' TERM`,
  STARTED,
  'echo training',
  'while :; do sleep 0.1; done',
].join('\n');

/** What CHECKPOINTING_JOB prints when it is stopped, in order. */
const CHECKPOINT_LINES = ['training', 'got SIGTERM, saving', 'saved'];

describe('a job that signals its own process group', () => {
  it("reaches neither the agent nor cloud-init's group: both phases are reported and the node shuts down", async () => {
    const result = await runAgent({ spec: spec({ run: "trap 'kill 0' EXIT; echo trained" }), nodeRank: 0 });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true, parentSurvived: true });
    // The job's shell signals itself too, on its way out: SIGTERM's 143 is its own code.
    expect(api.reports.map(({ phase, exitCode, outputTail }) => [phase, exitCode, outputTail])).toEqual([
      ['setup', 0, 'setting up'],
      ['run', 143, 'trained'],
    ]);
  });
});

describe('a machine image without setsid', () => {
  it("is the agent's failure at install, never the job's: the job cannot be kept out of cloud-init's group", async () => {
    const result = await runAgent({ spec: spec({ setup: 'touch "$DUMP_DIR/setup-ran"' }), nodeRank: 0 }, pathWithout('setsid'));

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports).toEqual([
      {
        nodeRank: 0,
        phase: 'setup',
        agentFailure: { step: 'install', error: 'setsid (util-linux) is not on this machine image: the job needs a session of its own' },
        outputTail: expect.any(String),
      },
    ]);
    expect(existsSync(join(dir, 'setup-ran'))).toBe(false);
  });
});

describe("a task env or secret named like one of the agent's own variables", () => {
  it('is the job\'s own value and changes nothing the agent does', async () => {
    const envs = { WORK_DIR: '/srv/work', ROOT_DIR: '/srv/root', CONTAINER: 'theirs', HOME_FLAG: '-e X', JOB_ID: 'their-job', REPORT_URL: 'http://127.0.0.1:9/x' };
    api.parameters.put(agentSecretName(SECRET_PATH, INSTANCE_ID), agentSecretValue(SECRET, { SECRET_ENV: 'theirs too', NODE_RANK: '7' }), INSTANCE_ARN);

    const result = await runAgent({ spec: spec({ envs, setup: 'echo setting up', run: DUMP_ENV }), nodeRank: 0 });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([
      ['setup', 0],
      ['run', 0],
    ]);
    expect(jobEnv()).toMatchObject({ ...envs, SECRET_ENV: 'theirs too', NODE_RANK: '7', RELAUNCH_NODE_RANK: '0' });
    expect(readFileSync(join(dir, 'pwd'), 'utf8').trim()).toBe(join(dir, 'agent'));
  });
});

describe('an agent killed alone (SIGKILL, the OOM killer)', () => {
  it('stops heartbeating within one beat, and its job and node go with it', async () => {
    const agent = await startAgent({ spec: spec({ run: `${STARTED}; sleep 60` }), nodeRank: 0, heartbeatSeconds: 0.3 }, undefined, 20_000);
    const job = await jobStarted();

    process.kill(agent.pid, 'SIGKILL');
    const beatsAtKill = api.heartbeats.length;
    await waitFor('every process of the agent to be gone', () => (agentProcesses().length === 0 ? true : undefined), 10_000);

    // One beat may have been on its way when the agent died; none after it.
    expect(api.heartbeats.length).toBeLessThanOrEqual(beatsAtKill + 1);
    await waitFor('the job to be killed', () => (alive(job) ? undefined : true), 5_000);
    expect(existsSync(join(dir, 'shut-down'))).toBe(true);
  });

  it("forgets the job's group once it is gone, and leaves alone a process that took its id", async () => {
    // Setup's report is taken, run's answered 503: the agent waits to retry, its phases over.
    api.reportStatuses = [200];
    api.reportStatusAfter = 503;
    const agent = await startAgent({ spec: spec({ run: STARTED }), nodeRank: 0, heartbeatSeconds: 0.3, reportRetrySeconds: 60 }, undefined, 20_000);
    await waitFor("run's report to be sent", () => (api.requests.filter((r) => r.path.endsWith('/report')).length >= 2 ? true : undefined));
    const groupFile = join(dir, 'agent', 'phase.group');
    expect(existsSync(groupFile)).toBe(false);

    // A group id reused since: a process leading its own group, not the one the agent started.
    const decoy = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' });
    try {
      writeFileSync(groupFile, `${decoy.pid} 1\n`);
      process.kill(agent.pid, 'SIGKILL');
      await waitFor('every process of the agent to be gone', () => (agentProcesses().length === 0 ? true : undefined), 10_000);
      expect(existsSync(join(dir, 'shut-down'))).toBe(true);
      expect(alive(decoy.pid as number)).toBe(true);
    } finally {
      decoy.kill('SIGKILL');
    }
  });
});

describe('a Docker task whose mount fails before the container starts', () => {
  it('still stops its heartbeat and shuts the node down', async () => {
    const result = await runAgent(
      { spec: spec({}, { containerImage: 'ubuntu:22.04' }), nodeRank: 0, sourcesUrl: join(dir, 'store'), mounts: [{ kind: 'upload', entry: 'dir', sha256: 'ab'.repeat(32), dest: '~/data' }] },
      dockerStandIn(),
    );

    expect(result.stderr).not.toContain('unbound variable');
    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(agentProcesses()).toEqual([]);
    expect(existsSync(join(dir, 'docker.log')) ? dockerCalls().filter((call) => call.startsWith('run ')) : []).toEqual([]);
  });
});

describe('report answers no retry can change', () => {
  it('takes a 302 as final: no retry, no run, the node shuts down', async () => {
    api.reportStatusAfter = 302;

    const result = await runAgent({ spec: spec({ run: 'touch "$DUMP_DIR/run-started"' }), nodeRank: 0 }, undefined, 8_000);

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.map((report) => report.phase)).toEqual(['setup']);
    expect(result.stderr).toContain('the API refused the setup report for good (HTTP 302)');
    expect(existsSync(join(dir, 'run-started'))).toBe(false);
  });

  it('retries 5xx answers for reportRetrySeconds, then shuts the node down for the controller to decide', async () => {
    api.reportStatusAfter = 503;

    const result = await runAgent({ spec: spec({ run: 'touch "$DUMP_DIR/run-started"' }), nodeRank: 0, reportRetrySeconds: 1 }, undefined, 8_000);

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.length).toBeGreaterThan(1);
    expect(new Set(api.reports.map((report) => report.phase))).toEqual(new Set(['setup']));
    expect(result.stderr).toContain('the setup report was not acknowledged in 1 s (last answer: HTTP 503); giving up');
    expect(existsSync(join(dir, 'run-started'))).toBe(false);
  });
});

describe('two cached mounts of one bucket', () => {
  it('get a mountpoint-s3 cache folder each', async () => {
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    writeFileSync(join(bin, 'mount-s3'), '#!/bin/bash\nprintf \'%s\\n\' "$*" >> "$DUMP_DIR/mount-s3.log"\n', { mode: 0o755 });

    const result = await runAgent(
      {
        spec: spec(),
        nodeRank: 0,
        mounts: [
          { kind: 's3-mount', bucket: 'team-data', prefix: 'train', cached: true, dest: '/data/train' },
          { kind: 's3-mount', bucket: 'team-data', prefix: 'eval', cached: true, dest: '/data/eval' },
        ],
        mountRoot: join(dir, 'root'),
      },
      [bin, MACHINE_PATH].join(delimiter),
    );

    expect(result.exitCode).toBe(0);
    const caches = readFileSync(join(dir, 'mount-s3.log'), 'utf8')
      .trim()
      .split('\n')
      .map((line) => /--cache (\S+)/.exec(line)?.[1]);
    expect(caches).toHaveLength(2);
    expect(caches.every((cache) => cache !== undefined)).toBe(true);
    expect(new Set(caches).size).toBe(2);
  });
});

describe("the agent's own steps failing before setup (the registry, the image)", () => {
  const ECR_IMAGE = '123456789012.dkr.ecr.us-west-2.amazonaws.com/team/model:1';

  it("retries ECR answering 503 with backoff, then logs in and runs the job", async () => {
    api.ecrStatuses = [503, 503];

    const result = await runAgent({ spec: spec({}, { containerImage: ECR_IMAGE }), nodeRank: 0, ecrEndpoint: `${apiUrl}/ecr`, pullRetrySeconds: 0.01 }, dockerStandIn());

    expect(result.exitCode).toBe(0);
    expect(api.ecrAnswers).toEqual([503, 503, 200]);
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([
      ['setup', 0],
      ['run', 0],
    ]);
  });

  it("reports ECR's refusal as the agent's failure at image-login, never as the job's setup code", async () => {
    api.ecrStatuses = [403, 403, 403];

    const result = await runAgent({ spec: spec({ setup: 'touch "$DUMP_DIR/setup-ran"' }, { containerImage: ECR_IMAGE }), nodeRank: 0, ecrEndpoint: `${apiUrl}/ecr`, pullRetrySeconds: 0.01 }, dockerStandIn());

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports).toEqual([
      {
        nodeRank: 0,
        phase: 'setup',
        agentFailure: { step: 'image-login', error: `no ECR authorization token for 123456789012.dkr.ecr.us-west-2.amazonaws.com: HTTP 403 AccessDeniedException` },
        outputTail: expect.stringContaining('relaunch: try 2 of 3 failed'),
      },
    ]);
    expect(existsSync(join(dir, 'setup-ran'))).toBe(false);
    expect(agentProcesses()).toEqual([]);
  });

  it("reports Docker Hub's 429 on every pull, after three tries, as the agent's failure at image-pull", async () => {
    const path = dockerStandIn();
    const docker = join(dir, 'docker-bin', 'docker');
    const rateLimited = 'pull) echo "toomanyrequests: You have reached your pull rate limit" >&2; exit 1 ;;';
    writeFileSync(docker, readFileSync(docker, 'utf8').replace(/^ {2}pull\).*$/m, `  ${rateLimited}`));

    const result = await runAgent({ spec: spec({}, { containerImage: 'ubuntu:22.04' }), nodeRank: 0, pullRetrySeconds: 0.01 }, path);

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(dockerCalls().filter((call) => call.startsWith('pull '))).toHaveLength(3);
    expect(api.reports).toEqual([
      {
        nodeRank: 0,
        phase: 'setup',
        agentFailure: { step: 'image-pull', error: 'could not pull ubuntu:22.04 in 3 tries: toomanyrequests: You have reached your pull rate limit' },
        outputTail: expect.stringContaining('relaunch: try 2 of 3 failed'),
      },
    ]);
  });
});

describe('a job told to stop (the node shutting down, a spot interruption)', () => {
  it("gets SIGTERM and its grace period when systemd's shutdown signals every process of the node: its output still reaches the log", async () => {
    const agent = await startAgent({ spec: spec({ run: CHECKPOINTING_JOB }), nodeRank: 0, stopGraceSeconds: 10 }, undefined, 20_000);
    await jobStarted();

    // As systemd's final sweep does: SIGTERM to every process at once.
    for (const pid of processesWithEnv(`DUMP_DIR=${dir}`)) signal(pid, 'SIGTERM');
    const result = await agent.done;

    expect(readFileSync(join(dir, 'checkpoint'), 'utf8')).toBe('step-42\n');
    expect(linesInOrder(readFileSync(join(dir, 'agent', 'run.log'), 'utf8'), CHECKPOINT_LINES)).toEqual(CHECKPOINT_LINES);
    expect(result.shutDown).toBe(true);
    // Stopped by relaunch, not ended by itself: its code is no result of the job, so run is
    // reported stopped, with no code and its last lines, those of its grace period included.
    expect(api.reports.map(({ phase, exitCode, stopped }) => [phase, exitCode, stopped])).toEqual([['setup', 0, undefined], ['run', undefined, 'shutdown']]);
    expect(linesInOrder(api.reports[1]?.outputTail ?? '', CHECKPOINT_LINES)).toEqual(CHECKPOINT_LINES);
  });

  it('gets SIGTERM and its grace period when the agent alone is told to stop', async () => {
    const agent = await startAgent({ spec: spec({ run: CHECKPOINTING_JOB }), nodeRank: 0, stopGraceSeconds: 10 }, undefined, 20_000);
    await jobStarted();

    process.kill(agent.pid, 'SIGTERM');
    const result = await agent.done;

    expect(readFileSync(join(dir, 'checkpoint'), 'utf8')).toBe('step-42\n');
    expect(linesInOrder(readFileSync(join(dir, 'agent', 'run.log'), 'utf8'), CHECKPOINT_LINES)).toEqual(CHECKPOINT_LINES);
    expect(result).toMatchObject({ shutDown: true, parentSurvived: true });
    expect(agentProcesses()).toEqual([]);
  });

  it("still gets its grace period when the shutdown's sweep kills the agent's own ps", async () => {
    // A node's shutdown signals every process once; one that hits a `ps` the agent just
    // started (ps handles SIGTERM itself, whatever it inherited) ends it with 143. Here
    // every ps dies so: the agent must not take that for a job that has ended.
    const bin = join(dir, 'bin-ps-killed');
    mkdirSync(bin);
    writeFileSync(join(bin, 'ps'), '#!/bin/sh\nexit 143\n', { mode: 0o755 });
    const agent = await startAgent({ spec: spec({ run: CHECKPOINTING_JOB }), nodeRank: 0, stopGraceSeconds: 10 }, [bin, MACHINE_PATH].join(delimiter), 20_000);
    await jobStarted();

    process.kill(agent.pid, 'SIGTERM');
    const result = await agent.done;

    expect(readFileSync(join(dir, 'checkpoint'), 'utf8')).toBe('step-42\n');
    expect(linesInOrder(readFileSync(join(dir, 'agent', 'run.log'), 'utf8'), CHECKPOINT_LINES)).toEqual(CHECKPOINT_LINES);
    expect(result.shutDown).toBe(true);
  });

  it('is killed at the end of its grace period when it does not stop', async () => {
    const stubborn = `trap 'echo ignoring SIGTERM' TERM; ${STARTED}; while :; do sleep 0.1; done`;
    const agent = await startAgent({ spec: spec({ run: stubborn }), nodeRank: 0, stopGraceSeconds: 1 }, undefined, 20_000);
    const job = await jobStarted();

    process.kill(agent.pid, 'SIGTERM');
    const result = await agent.done;

    expect(alive(job)).toBe(false);
    expect(readFileSync(join(dir, 'agent', 'run.log'), 'utf8')).toContain('ignoring SIGTERM');
    expect(result.shutDown).toBe(true);
  });

  it('gets SIGTERM as soon as instance metadata announces a spot interruption, with no report of its code, only its last lines', async () => {
    const agent = await startAgent({ spec: spec({ run: CHECKPOINTING_JOB }), nodeRank: 0, stopGraceSeconds: 10, interruptionPollSeconds: 0.2 }, undefined, 20_000);
    await jobStarted();

    api.metadata['spot/instance-action'] = JSON.stringify({ action: 'terminate', time: new Date(Date.now() + 120_000).toISOString() });
    const result = await agent.done;

    expect(readFileSync(join(dir, 'checkpoint'), 'utf8')).toBe('step-42\n');
    expect(linesInOrder(readFileSync(join(dir, 'agent', 'run.log'), 'utf8'), CHECKPOINT_LINES)).toEqual(CHECKPOINT_LINES);
    expect(result.stderr).toContain('spot interruption');
    expect(api.reports.map(({ phase, exitCode, stopped }) => [phase, exitCode, stopped])).toEqual([['setup', 0, undefined], ['run', undefined, 'interruption']]);
    expect(linesInOrder(api.reports[1]?.outputTail ?? '', CHECKPOINT_LINES)).toEqual(CHECKPOINT_LINES);
    expect(result.shutDown).toBe(true);
  });
});

describe('a standby node (launch_on_warning)', () => {
  const RUN = `echo "run started" > "$DUMP_DIR/ran"`;

  it('holds after its setup report while the API says hold, beating, and runs once it says go', async () => {
    api.setupAnswer = { status: 'accepted', run: 'hold', reason: 'attempt 3 is a standby: attempt 2 is still the live one' };
    const agent = await startAgent({ spec: spec({ run: RUN }), nodeRank: 0, holdPollSeconds: 0.05, heartbeatSeconds: 0.2 }, undefined, 20_000);
    // Held for a few asks and at least one heartbeat, with nothing run.
    await waitFor('three asks while holding', () => (api.holds.length >= 3 ? true : undefined));
    await waitFor('a heartbeat while holding', () => (api.heartbeats.filter((beat) => beat.at > (api.holds[0]?.at ?? Infinity)).length > 0 ? true : undefined));
    expect(existsSync(join(dir, 'ran'))).toBe(false);
    api.holdAnswerAfter = { run: 'go', reason: 'attempt 3 is the live attempt' };
    const result = await agent.done;

    expect(readFileSync(join(dir, 'ran'), 'utf8')).toBe('run started\n');
    expect(api.reports.map((report) => report.phase)).toEqual(['setup', 'run']);
    // Every ask names the node and carries the attempt's secret, as a heartbeat does.
    for (const hold of api.holds) {
      expect(hold).toMatchObject({ method: 'POST', path: `/jobs/${JOB_ID}/attempts/3/hold`, authorization: `Bearer ${SECRET}` });
      expect(JSON.parse(hold.body)).toEqual({ nodeRank: 0 });
    }
    expect(result.stderr).toContain('holding before run: attempt 3 is a standby: attempt 2 is still the live one');
    expect(result.stderr).toContain('told to go: attempt 3 is the live attempt');
    expect(result).toMatchObject({ shutDown: true, parentSurvived: true });
  });

  it.each<[string, (Record<string, unknown> | number)[]]>([
    ['told to stop (not needed)', [{ run: 'hold' }, 503, 429, { run: 'stop', reason: 'released: not needed: attempt 2 succeeded' }]],
    ['refused for good (a secret no longer good)', [{ run: 'hold' }, 401]],
  ])('never runs and shuts down when %s, asking again through throttling and 5xx', async (_name, answers) => {
    api.setupAnswer = { status: 'accepted', run: 'hold', reason: 'a standby' };
    api.holdAnswers = [...answers];
    const result = await runAgent({ spec: spec({ run: RUN }), nodeRank: 0, holdPollSeconds: 0.05 }, undefined, 20_000);

    expect(existsSync(join(dir, 'ran'))).toBe(false);
    expect(api.holds).toHaveLength(answers.length);
    expect(api.reports.map((report) => report.phase)).toEqual(['setup']);
    expect(result).toMatchObject({ shutDown: true, parentSurvived: true });
    expect(agentProcesses()).toEqual([]);
  });

  it('never runs when its setup report is answered stop (its attempt ended meanwhile)', async () => {
    api.setupAnswer = { status: 'accepted', run: 'stop', reason: 'attempt 3 has ended (EXITED)' };
    const result = await runAgent({ spec: spec({ run: RUN }), nodeRank: 0 });
    expect(existsSync(join(dir, 'ran'))).toBe(false);
    expect(api.holds).toEqual([]);
    expect(result.stderr).toContain('told not to run: attempt 3 has ended (EXITED)');
    expect(result.shutDown).toBe(true);
  });
});

describe('a spot interruption notice with launch_on_warning', () => {
  it('lets the job work on until its grace period and the margin before the instance goes, then stops it', async () => {
    const ticking = `${STARTED}; trap 'echo "got SIGTERM at $(date +%s%3N)"; exit 0' TERM; while :; do sleep 0.05; done`;
    const warm = spec({ run: ticking }, { useSpot: true, jobRecovery: { ...spec().resources.jobRecovery, launchOnWarning: true } });
    const agent = await startAgent({ spec: warm, nodeRank: 0, stopGraceSeconds: 1, warningStopMarginSeconds: 1, interruptionPollSeconds: 0.1 }, undefined, 20_000);
    await jobStarted();

    const reclaim = Date.now() + 4_000;
    api.metadata['spot/instance-action'] = JSON.stringify({ action: 'terminate', time: new Date(reclaim).toISOString() });
    const result = await agent.done;

    const stoppedAt = Number(/got SIGTERM at (\d+)/.exec(readFileSync(join(dir, 'agent', 'run.log'), 'utf8'))?.[1]);
    // Not before the instance goes, less its grace period (1 s) and the margin (1 s).
    expect(stoppedAt).toBeGreaterThanOrEqual(reclaim - 2_000);
    expect(result.stderr).toMatch(/spot interruption notice: the job runs on for \d+\.\d{3} s, then gets its 1 s before the instance goes \(launch_on_warning\)/);
    expect(api.reports.map(({ phase, stopped }) => [phase, stopped])).toEqual([['setup', undefined], ['run', 'interruption']]);
    expect(result.shutDown).toBe(true);
  });
});

