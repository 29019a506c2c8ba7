// The agent's container path on a real Docker daemon (test/support/docker-daemon.ts: Debian's
// docker.io as root, images built here from Debian's packages, Debian's docker-registry on
// 127.0.0.1), the agent run as cloud-init runs it (test/support/agent-harness.ts): setup and
// run in the container with the task's envs, secrets, workdir and file mounts; a job's
// `kill 0` inside it; a checkpoint on SIGTERM with its grace; a cancel and a preemption that
// leave no container, there and through the local runtime (`relaunch run`); and pulls a
// registry refuses (auth, 429), which end AGENT_FAILED.
// Where no daemon can run (not root, packages missing), the suite is skipped, saying why.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSecretName, agentSecretValue } from '../../../lib/agent/secret-parameter.ts';
import { decideRecovery, initialCounters } from '../../../lib/policy/decide.ts';
import { recoveryPolicy } from '../../support/fixtures/specs.ts';
import { waitFor } from '../../support/fixtures/wait.ts';
import { parseStdout, runCli, startCli, tempDir, writeTask } from '../../support/cli.ts';
import type { JobView } from '../../../lib/views.ts';
import { api, dir, INSTANCE_ARN, INSTANCE_ID, MACHINE_PATH, runAgent, SECRET, SECRET_PATH, spec, startAgent, useAgentWorld } from '../../support/agent-harness.ts';
import { dockerUnavailable, importTestImage, startDockerDaemon, startRegistry, startThrottlingProxy, type DockerDaemon, type Registry } from '../../support/docker-daemon.ts';

const unavailable = dockerUnavailable();
const IMAGE = 'relaunch-test/base:1';
const CONTAINER = `relaunch-${INSTANCE_ID}`;

useAgentWorld();

describe.skipIf(unavailable !== null)(`containers on a real Docker daemon${unavailable === null ? '' : ` (skipped: ${unavailable})`}`, () => {
  let daemon: DockerDaemon;
  let registry: Registry;
  let pushed: string;

  beforeAll(async () => {
    daemon = await startDockerDaemon();
    importTestImage(daemon, IMAGE);
    registry = await startRegistry('alice', 'pull-secret');
    // The image in the registry, pushed with credentials of the test's own (the agent's docker has none).
    const config = mkdtempSync(join(tmpdir(), 'relaunch-docker-config-'));
    pushed = `${registry.address}/team/job:1`;
    // Untagged here once pushed: the agent must pull it, as a fresh instance would.
    execFileSync('sh', ['-c', `printf pull-secret | "$0" login -u alice --password-stdin "$1" && "$0" tag "$2" "$3" && "$0" push "$3" && "$0" rmi "$3"`, join(daemon.bin, 'docker'), registry.address, IMAGE, pushed], {
      env: { ...process.env, DOCKER_CONFIG: config },
      stdio: 'ignore',
    });
    rmSync(config, { recursive: true, force: true });
  }, 120_000);

  afterAll(async () => {
    await registry?.stop();
    await daemon?.stop();
  }, 60_000);

  /** The agent's PATH: the daemon's client first. */
  const path = () => [daemon.bin, MACHINE_PATH].join(delimiter);
  /** The node's containers, running or not. */
  const containers = () => daemon.docker('ps', '-a', '--filter', `name=${CONTAINER}`, '--format', '{{.Names}}').trim();
  /** A file the job wrote in the agent's folder (the work folder without a workdir, mounted at the same path). */
  const written = (name: string) => readFileSync(join(dir, 'agent', name), 'utf8');

  it('restarts in place on the same node: the container of the ended attempt and what it left running are removed and proved gone, a new one runs setup again and the next attempt', async () => {
    const next = 'a4b4c4d4'.repeat(8);
    api.nextAnswers = [{ next: 'run', reason: 'restart in place', attempt: 4, nodeRank: 1, numNodes: 2, nodeIps: ['10.0.1.1', '10.0.1.2'], setup: 'skip' }];
    api.onNext = (_count, answer) => {
      if (typeof answer === 'object' && answer.next === 'run') setTimeout(() => api.parameters.put(agentSecretName(SECRET_PATH, INSTANCE_ID), next, INSTANCE_ARN), 300);
    };
    const task = spec(
      {
        numNodes: 2,
        setup: 'test -e /.dockerenv && echo "setup of attempt $RELAUNCH_ATTEMPT" >> setups',
        // Attempt 3 leaves a daemon behind in its container, out of its session.
        run: 'if [ "$RELAUNCH_ATTEMPT" -eq 3 ]; then setsid sleep 1733 >/dev/null 2>&1 < /dev/null & fi; echo "run of attempt $RELAUNCH_ATTEMPT as node $RELAUNCH_NODE_RANK" >> runs',
      },
      { containerImage: IMAGE, jobRecovery: recoveryPolicy({ reuseNodes: { reuse: true, setup: 'skip' } }) },
    );

    const result = await runAgent({ spec: task, nodeRank: 0, interruptionPollSeconds: 0.1, holdPollSeconds: 0.05, stopGraceSeconds: 1, proofSeconds: 20 }, path());

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.map((r) => [r.nodeRank, r.phase, r.exitCode])).toEqual([
      [0, 'setup', 0],
      [0, 'run', 0],
      [1, 'setup', 0],
      [1, 'run', 0],
    ]);
    // Setup ran again in the new container (whatever it installed went with the old one).
    expect(written('setups')).toBe('setup of attempt 3\nsetup of attempt 4\n');
    expect(written('runs')).toBe('run of attempt 3 as node 0\nrun of attempt 4 as node 1\n');
    // No container is left, and neither is attempt 3's daemon.
    expect(containers()).toBe('');
    expect(execFileSync('sh', ['-c', 'pgrep -f "^sleep 1733$" || true'], { encoding: 'utf8' }).trim()).toBe('');
  });

  it('runs setup and run in the container with the envs, the secrets, the work folder and the file mounts, then removes it', async () => {
    api.parameters.put(agentSecretName(SECRET_PATH, INSTANCE_ID), agentSecretValue(SECRET, { HF_TOKEN: 'hf_planted' }), INSTANCE_ARN);
    const data = join(dir, 'data-bucket');
    mkdirSync(data);
    writeFileSync(join(data, 'train.csv'), 'a,b\n');
    // As on EC2, no home folder of the node's own: ~ is the agent's HOME (the harness gives it
    // the test's folder), there and in the container, where the ~ mounts are.
    const home = dir;
    const task = spec(
      {
        envs: { MODEL: 'small' },
        setup: 'test -e /.dockerenv && echo "setup in $(cat /etc/hostname 2>/dev/null || hostname)"',
        run: 'test -e /.dockerenv; echo "in=$? model=$MODEL token=$HF_TOKEN rank=$RELAUNCH_NODE_RANK home=$HOME pwd=$(pwd)" > seen; cat ~/data/train.csv >> seen',
      },
      { containerImage: IMAGE },
    );

    const result = await runAgent({ spec: task, nodeRank: 0, mounts: [{ kind: 'copy-dir', dir: data, dest: '~/data' }] }, path());

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([['setup', 0], ['run', 0]]);
    expect(written('seen')).toBe(`in=0 model=small token=hf_planted rank=0 home=${home} pwd=${join(dir, 'agent')}\na,b\n`);
    expect(containers()).toBe('');
  });

  it("keeps a job's `kill 0` inside the container to the job: both phases are reported and cloud-init's group survives", async () => {
    const result = await runAgent({ spec: spec({ run: "trap 'kill 0' EXIT; echo trained" }, { containerImage: IMAGE }), nodeRank: 0 }, path());

    expect(result).toMatchObject({ exitCode: 0, shutDown: true, parentSurvived: true });
    // Setup's tail starts with what the agent said as it started the container.
    expect(api.reports.map(({ phase, exitCode, outputTail }) => [phase, exitCode, outputTail])).toEqual([
      ['setup', 0, expect.stringMatching(/\nsetting up$/)],
      ['run', 143, 'trained'],
    ]);
    expect(containers()).toBe('');
  });

  /** A job that saves a checkpoint on SIGTERM, in its grace period; it says when it has started. */
  const CHECKPOINTING = [
    `trap 'echo "got SIGTERM, saving"; sleep 1; echo step-42 > checkpoint; echo saved; exit 0' TERM`,
    'echo training; touch started',
    'while :; do sleep 0.1; done',
  ].join('\n');

  it('gives a job in the container SIGTERM and its grace period on a cancel: its checkpoint is saved, and no container is left', async () => {
    const agent = await startAgent({ spec: spec({ run: CHECKPOINTING }, { containerImage: IMAGE }), nodeRank: 0, stopGraceSeconds: 10 }, path());
    await waitFor('the job to start in its container', () => (existsSync(join(dir, 'agent', 'started')) ? true : undefined));

    // A cancel: the node's shutdown tells the agent to stop.
    process.kill(agent.pid, 'SIGTERM');
    const result = await agent.done;

    expect(written('checkpoint')).toBe('step-42\n');
    expect(written('run.log')).toMatch(/training\n(.|\n)*got SIGTERM, saving\n(.|\n)*saved\n/);
    expect(result).toMatchObject({ shutDown: true, parentSurvived: true });
    expect(api.reports.map(({ phase, stopped }) => [phase, stopped])).toEqual([['setup', undefined], ['run', 'shutdown']]);
    expect(containers()).toBe('');
  });

  it('stops the job in the container on a spot interruption notice, with its checkpoint, and leaves no container', async () => {
    const agent = await startAgent({ spec: spec({ run: CHECKPOINTING }, { containerImage: IMAGE }), nodeRank: 0, stopGraceSeconds: 10, interruptionPollSeconds: 0.2 }, path());
    await waitFor('the job to start in its container', () => (existsSync(join(dir, 'agent', 'started')) ? true : undefined));

    api.metadata['spot/instance-action'] = JSON.stringify({ action: 'terminate', time: new Date(Date.now() + 120_000).toISOString() });
    await agent.done;

    expect(written('checkpoint')).toBe('step-42\n');
    expect(api.reports.map(({ phase, stopped }) => [phase, stopped])).toEqual([['setup', undefined], ['run', 'interruption']]);
    expect(containers()).toBe('');
  });

  it("ends AGENT_FAILED at image-pull when the registry refuses the pull (no credentials), after three tries, and the attempt is recovered, not charged", async () => {
    await runAgent({ spec: spec({ run: 'touch run-started' }, { containerImage: pushed }), nodeRank: 0, pullRetrySeconds: 0 }, path());

    const [report] = api.reports;
    expect(api.reports).toHaveLength(1);
    expect(report?.agentFailure).toEqual({ step: 'image-pull', error: expect.stringMatching(new RegExp(`^could not pull ${pushed} in 3 tries: .*(no basic auth credentials|unauthorized)`)) });
    expect(existsSync(join(dir, 'agent', 'run-started'))).toBe(false);
    expect(containers()).toBe('');
    // What the controller makes of that report: recovered, the error budget untouched (docs/agent.md).
    const failure = report?.agentFailure;
    if (failure === undefined) throw new Error('no agent failure reported');
    const decision = decideRecovery({ policy: spec().resources.jobRecovery, counters: initialCounters(false), outcome: { kind: 'AGENT_FAILED', nodeRank: 0, ...failure }, random: () => 0 });
    expect(decision).toMatchObject({ action: 'RECOVER', counters: { restartsOnErrors: 0 } });
  });

  /** The local runtime's containers (relaunch-local-<job>-<attempt>-<node>), running or not. */
  const localContainers = () => daemon.docker('ps', '-a', '--filter', 'name=relaunch-local-', '--format', '{{.Names}}').trim();
  /** The `relaunch` binary with this daemon's docker first on PATH. */
  const cliEnv = () => ({ PATH: [daemon.bin, process.env.PATH ?? ''].join(delimiter) });

  it('runs a task through the local runtime in a real container, and a cancel (Ctrl-C) leaves no container behind', async () => {
    const work = await tempDir('containers-cancel');
    const task = await writeTask(work, 'task.yaml', `resources:\n  image_id: docker:${IMAGE}\nrun: |\n  test -e /.dockerenv && touch in-container\n  while :; do sleep 0.1; done\n`);
    const data = join(work, 'data');
    const cli = startCli(['run', task, '--data-dir', data], { cwd: work, env: cliEnv() });
    const found = (folder: string): boolean => readdirSync(folder, { withFileTypes: true }).some((entry) => (entry.isDirectory() ? found(join(folder, entry.name)) : entry.name === 'in-container'));
    await waitFor('the job to run in its container', () => (existsSync(data) && found(data) ? true : undefined));
    expect(localContainers()).toMatch(/^relaunch-local-j-/);

    cli.child.kill('SIGINT');
    const result = await cli.finished;

    // 130: stopped by Ctrl-C, after cancelling the job (docs/cli.md, exit statuses).
    expect(result.code, result.stderr).toBe(130);
    expect(result.stdout.trimEnd().split('\n').at(-1)).toMatch(/ CANCELLED after 1 attempt; /);
    await waitFor('the container to be removed', () => (localContainers() === '' ? true : undefined));
  });

  it('relaunches a task preempted in its container through the local runtime, and leaves no container behind', async () => {
    const work = await tempDir('containers-preempt');
    const task = await writeTask(work, 'task.yaml', `resources:\n  image_id: docker:${IMAGE}\nrun: |\n  echo "attempt $RELAUNCH_ATTEMPT"\n  sleep 2\n`);

    const result = await runCli(['run', task, '--json', '--preempt-attempts', '1', '--data-dir', join(work, 'data')], { cwd: work, env: cliEnv() });

    expect(result.code, result.stderr).toBe(0);
    expect(parseStdout<JobView>(result)).toMatchObject({ status: 'SUCCEEDED', attempts: [{ attempt: 1, outcome: 'PREEMPTED' }, { attempt: 2, outcome: 'EXITED' }] });
    // The data folder's runtime runs in the background: it releases the last node as the command ends.
    await waitFor('the containers to be removed', () => (localContainers() === '' ? true : undefined));
  });

  it("ends AGENT_FAILED at image-pull when the registry answers 429 (a pull limit), with the registry's words", async () => {
    const proxy = await startThrottlingProxy(registry);
    try {
      const image = `${proxy.address}/team/job:1`;
      await runAgent({ spec: spec({}, { containerImage: image }), nodeRank: 0, pullRetrySeconds: 0 }, path());

      expect(api.reports[0]?.agentFailure).toEqual({ step: 'image-pull', error: expect.stringMatching(new RegExp(`^could not pull ${image} in 3 tries: .*toomanyrequests`, 'i')) });
      expect(proxy.refused()).toBeGreaterThanOrEqual(3);
      expect(containers()).toBe('');
    } finally {
      await proxy.stop();
    }
  });
});
