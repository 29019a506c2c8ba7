// The agent script, run for real with bash as cloud-init runs it (test/support/agent-harness.ts),
// against local stand-ins for the API, the instance metadata service and SSM.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { HeartbeatBodySchema, OUTPUT_TAIL_MAX_BYTES } from '../../../../lib/agent/protocol.ts';
import type { AgentMount } from '../../../../lib/agent/mounts.ts';
import { renderAgentScript } from '../../../../lib/agent/script.ts';
import { agentSecretName, agentSecretValue } from '../../../../lib/agent/secret-parameter.ts';
import { PrecheckError } from '../../../../lib/errors.ts';
import { archiveName, uploadReference } from '../../../../lib/task-file/mounts.ts';
import { packSource } from '../../../../cli/sources.ts';
import { waitFor } from '../../../support/fixtures/wait.ts';
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
  runAgent,
  SECRET,
  SECRET_PATH,
  spec,
  startAgent,
  useAgentWorld,
} from '../../../support/agent-harness.ts';

useAgentWorld();
describe('the agent script', () => {
  it('runs setup then run, reports both as 0 with the secret, heartbeats, and shuts down', async () => {
    const result = await runAgent({ spec: spec({ run: `echo running; ${DUMP_ENV}` }), nodeRank: 0 });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports).toEqual([
      { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: 'setting up' },
      { nodeRank: 0, phase: 'run', exitCode: 0, outputTail: 'running' },
    ]);
    const callbacks = api.requests;
    expect(callbacks.every((request) => request.method === 'POST' && request.authorization === `Bearer ${SECRET}`)).toBe(true);
    expect(api.requests.filter((r) => r.path.endsWith('/report')).map((r) => r.path)).toEqual([
      `/jobs/${JOB_ID}/attempts/3/report`,
      `/jobs/${JOB_ID}/attempts/3/report`,
    ]);
    expect(api.heartbeats.length).toBeGreaterThanOrEqual(1);
    for (const beat of api.heartbeats) {
      expect(beat.path).toBe(`/jobs/${JOB_ID}/attempts/3/heartbeat`);
      expect(HeartbeatBodySchema.parse(JSON.parse(beat.body))).toEqual({ nodeRank: 0 });
    }
  });

  it('says in the setup report how long setup itself ran, in whole ms, and in no other report', async () => {
    await runAgent({ spec: spec({ setup: 'sleep 1; echo set up', run: 'echo running' }), nodeRank: 0 });

    expect(api.reports.map((report) => report.phase)).toEqual(['setup', 'run']);
    const [setupMs, runMs] = api.setupTimes;
    // At least the second setup slept; a busy machine only makes it longer.
    expect(Number.isInteger(setupMs)).toBe(true);
    expect(setupMs).toBeGreaterThanOrEqual(1000);
    expect(runMs).toBeUndefined();
  });

  it('says a failing setup ran too, and a task with no setup ran 0 ms or more', async () => {
    await runAgent({ spec: spec({ setup: 'exit 3' }), nodeRank: 0 });
    await runAgent({ spec: spec({ setup: null }), nodeRank: 0 });

    expect(api.reports.map((report) => [report.phase, report.exitCode])).toEqual([
      ['setup', 3],
      ['setup', 0],
      ['run', 0],
    ]);
    expect(api.setupTimes.slice(0, 2).map((ms) => typeof ms === 'number' && ms >= 0)).toEqual([true, true]);
  });

  it('gives the job its envs and the RELAUNCH_/SKYPILOT_ variables, never the secret', async () => {
    const envs = {
      PLAIN: 'value',
      QUOTED: `it's "quoted" $HOME \`date\` \\ end`,
      MULTILINE: 'line one\nline two\n',
      EMPTY: '',
      RELAUNCH_NODE_RANK: 'user value loses',
    };
    const result = await runAgent({
      spec: spec({ numNodes: 2, envs, run: DUMP_ENV }, { accelerators: [{ name: 'A100', count: 8 }] }),
      nodeRank: 1,
      nodeIps: ['10.0.0.1', '10.0.0.2'],
    });

    expect(result.exitCode).toBe(0);
    const env = jobEnv();
    expect(env).toMatchObject({
      ...envs,
      RELAUNCH_JOB_ID: JOB_ID,
      RELAUNCH_ATTEMPT: '3',
      RELAUNCH_NODE_RANK: '1',
      RELAUNCH_NUM_NODES: '2',
      RELAUNCH_NODE_IPS: '10.0.0.1\n10.0.0.2',
      SKYPILOT_TASK_ID: expect.stringContaining(JOB_ID),
      SKYPILOT_NODE_RANK: '1',
      SKYPILOT_NUM_NODES: '2',
      SKYPILOT_NODE_IPS: '10.0.0.1\n10.0.0.2',
      SKYPILOT_NUM_GPUS_PER_NODE: '8',
    });
    expect(Object.values(env).some((value) => value.includes(SECRET))).toBe(false);
    expect(api.reports.map((report) => report.nodeRank)).toEqual([1, 1]);
  });

  it('uses the launched type GPU count when given, and runs in ~/sky_workdir when the task has a workdir', async () => {
    await runAgent({ spec: spec({ workdir: '.', run: DUMP_ENV }), nodeRank: 0, gpusPerNode: 4 });

    expect(jobEnv().SKYPILOT_NUM_GPUS_PER_NODE).toBe('4');
    expect(readFileSync(join(dir, 'pwd'), 'utf8').trim()).toBe(join(dir, 'sky_workdir'));
  });

  it('starts each phase by an absolute bash, whatever PATH the envs give, and the job sees that PATH', async () => {
    // The job's PATH leads with a folder whose `bash` is not one: a phase started through
    // the job's PATH would run it and fail with 127.
    const custom = join(dir, 'custom', 'bin');
    mkdirSync(custom, { recursive: true });
    writeFileSync(join(custom, 'bash'), '#!/bin/sh\necho not the shell; exit 127\n', { mode: 0o755 });
    writeFileSync(join(custom, 'own-tool'), '#!/bin/sh\necho own tool\n', { mode: 0o755 });
    const path = `${custom}:/usr/bin:/bin`;
    const result = await runAgent({ spec: spec({ envs: { PATH: path }, setup: 'echo "setup PATH=$PATH"', run: 'own-tool' }), nodeRank: 0 });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports).toEqual([
      { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: `setup PATH=${path}` },
      { nodeRank: 0, phase: 'run', exitCode: 0, outputTail: 'own tool' },
    ]);
  });

  it('reports a run that exits 29 with its code and output', async () => {
    const result = await runAgent({ spec: spec({ run: 'echo about to fail >&2; exit 29' }), nodeRank: 0 });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports).toEqual([
      { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: 'setting up' },
      { nodeRank: 0, phase: 'run', exitCode: 29, outputTail: 'about to fail' },
    ]);
  });

  it('never runs or reports run when setup fails', async () => {
    const result = await runAgent({
      spec: spec({ setup: 'echo no disk; exit 3', run: `touch "$DUMP_DIR/run-started"` }),
      nodeRank: 0,
    });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports).toEqual([{ nodeRank: 0, phase: 'setup', exitCode: 3, outputTail: 'no disk' }]);
    expect(existsSync(join(dir, 'run-started'))).toBe(false);
  });

  it('reports setup as 0 when the task has no setup', async () => {
    await runAgent({ spec: spec({ setup: null }), nodeRank: 0 });

    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([
      ['setup', 0],
      ['run', 0],
    ]);
  });

  it('retries a report the API fails twice, then carries on', async () => {
    api.reportStatuses = [500, 500];

    const result = await runAgent({ spec: spec(), nodeRank: 0 });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    const setup = { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: 'setting up' };
    expect(api.reports).toEqual([setup, setup, setup, { nodeRank: 0, phase: 'run', exitCode: 0, outputTail: 'running' }]);
    expect(result.stderr).toContain('the setup report got HTTP 500; retrying');
  });

  it('retries a report when the connection drops without an answer', async () => {
    api.reportStatuses = [0];

    const result = await runAgent({ spec: spec(), nodeRank: 0 });

    expect(result.exitCode).toBe(0);
    expect(api.reports.map((report) => report.phase)).toEqual(['setup', 'setup', 'run']);
    expect(result.stderr).toContain('the setup report got HTTP 000; retrying');
  });

  it('stops at a 409: the attempt is stale, so run is skipped', async () => {
    api.reportStatuses = [409];

    const result = await runAgent({ spec: spec({ run: `touch "$DUMP_DIR/run-started"` }), nodeRank: 0 });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.map((report) => report.phase)).toEqual(['setup']);
    expect(existsSync(join(dir, 'run-started'))).toBe(false);
  });

  it('retries a report answered 408 or 429: the API asks it to come back', async () => {
    api.reportStatuses = [408, 429];

    const result = await runAgent({ spec: spec(), nodeRank: 0 });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.map((report) => report.phase)).toEqual(['setup', 'setup', 'setup', 'run']);
  });

  it('gives up at once on a 401 that would answer forever: no run, no more heartbeats, shut down', async () => {
    api.reportStatusAfter = 401;

    const result = await runAgent({ spec: spec({ run: `touch "$DUMP_DIR/run-started"` }), nodeRank: 0 });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.map((report) => report.phase)).toEqual(['setup']);
    expect(existsSync(join(dir, 'run-started'))).toBe(false);
    expect(result.stderr).toContain('the API refused the setup report for good (HTTP 401)');
    const heartbeatsAtExit = api.heartbeats.length;
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(api.heartbeats).toHaveLength(heartbeatsAtExit);
  });

  it("learns its rank from the launcher's tag and every node IP from instance metadata (IMDSv2), never from the launch index", async () => {
    // A fleet may number every instance 0: the launch index must not decide the rank.
    api.metadata = { 'ami-launch-index': '0', 'tags/instance/relaunch:node-rank': '1', 'tags/instance/relaunch:node-ips:0': '10.1.0.7 10.1.0.8' };

    const result = await runAgent({ spec: spec({ numNodes: 2, run: DUMP_ENV }) });

    expect(result.exitCode).toBe(0);
    expect(jobEnv()).toMatchObject({ RELAUNCH_NODE_RANK: '1', SKYPILOT_NODE_RANK: '1', RELAUNCH_NODE_IPS: '10.1.0.7\n10.1.0.8' });
    expect(api.reports.map((report) => report.nodeRank)).toEqual([1, 1]);
    expect(JSON.parse(api.heartbeats[0]?.body ?? '')).toEqual({ nodeRank: 1 });
    // One session token for the rank, the IPs, the instance id and the role's credentials.
    expect(api.imdsTokenRequests).toBe(1);
  });

  it('a single node is rank 0 with no tag, and takes its own IP from instance metadata', async () => {
    api.metadata = { 'local-ipv4': '172.31.5.9' };

    await runAgent({ spec: spec({ run: DUMP_ENV }) });

    expect(jobEnv()).toMatchObject({ RELAUNCH_NODE_RANK: '0', RELAUNCH_NODE_IPS: '172.31.5.9', SKYPILOT_NODE_IPS: '172.31.5.9' });
  });

  it('gives up without reporting when the rank tag of one of several nodes never appears', async () => {
    api.metadata = { 'ami-launch-index': '0', 'tags/instance/relaunch:node-ips:0': '10.1.0.7 10.1.0.8' };

    const result = await runAgent({ spec: spec({ numNodes: 2 }), discoveryTimeoutSeconds: 0 });

    expect(result).toMatchObject({ exitCode: 1, shutDown: true });
    expect(result.stderr).toContain('no node rank from instance metadata');
    expect(api.reports).toEqual([]);
  });

  it('gives up without reporting when the node IPs never appear', async () => {
    api.metadata = { 'tags/instance/relaunch:node-rank': '0' };

    const result = await runAgent({ spec: spec({ numNodes: 2 }), discoveryTimeoutSeconds: 0 });

    expect(result).toMatchObject({ exitCode: 1, shutDown: true });
    expect(result.stderr).toContain('no node IPs from instance metadata');
    expect(api.reports).toEqual([]);
  });
});

/** Every file under `root`, read as bytes. */
function filesUnder(root: string): { readonly path: string; readonly content: Buffer }[] {
  const found: { path: string; content: Buffer }[] = [];
  for (const entry of readdirSync(root, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    found.push({ path, content: readFileSync(path) });
  }
  return found;
}

describe("the agent's callback secret", () => {
  it('is read from its own instance parameter with a SigV4-signed GetParameter, and is in no file the job can read', async () => {
    const result = await runAgent({ spec: spec({ run: DUMP_ENV }), nodeRank: 0 });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.requests.every((request) => request.authorization === `Bearer ${SECRET}`)).toBe(true);
    const [get] = api.ssmRequests;
    expect(JSON.parse(get?.body ?? '')).toEqual({ Name: `${SECRET_PATH}/${INSTANCE_ID}`, WithDecryption: true });
    expect(get?.headers).toMatchObject({
      'x-amz-target': 'AmazonSSM.GetParameter',
      'content-type': 'application/x-amz-json-1.1',
      'x-amz-security-token': api.credentials.sessionToken,
    });
    expect(get?.headers.authorization).toMatch(
      new RegExp(`^AWS4-HMAC-SHA256 Credential=${api.credentials.accessKeyId}/\\d{8}/us-east-1/ssm/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;x-amz-target, Signature=[0-9a-f]{64}$`),
    );
    // The node's folder (user data, scripts, env, logs, report bodies) and the job's env.
    const files = filesUnder(dir);
    expect(files.length).toBeGreaterThan(5);
    expect(files.filter((file) => file.content.includes(SECRET)).map((file) => file.path)).toEqual([]);
    expect(Object.values(jobEnv()).some((value) => value.includes(SECRET))).toBe(false);
  });

  it('is on no command line and in no environment of any process while the agent heartbeats, nor are its URLs', async () => {
    api.heartbeatDelayMs = 150;
    // Until a heartbeat's curl (its -w argument, alone on a line) was among the processes.
    const run = [
      'look() { cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null | tr "\\0" "\\n" >> "$DUMP_DIR/proc"; }',
      'until grep -qx "%{http_code[}]" "$DUMP_DIR/proc"; do look; sleep 0.02; done',
      'look',
    ].join('\n');

    const result = await runAgent({ spec: spec({ run }), nodeRank: 0, heartbeatSeconds: 0.05 });

    expect(result.exitCode).toBe(0);
    const seen = readFileSync(join(dir, 'proc'));
    expect(seen.includes('\ncurl\n')).toBe(true);
    // The URLs reach curl on its stdin: on a local node they carry its route credential.
    expect(seen.includes(`${JOB_ID}/attempts/3/heartbeat`)).toBe(false);
    expect(seen.includes(apiUrl)).toBe(false);
    expect(seen.includes(SECRET)).toBe(false);
    expect(seen.includes(api.credentials.secretAccessKey)).toBe(false);
  });

  it("exports the job's secrets into setup and run exactly as given, from memory: in no file, not in the agent's own environment", async () => {
    const secrets = { HF_TOKEN: 'hf_Planted-Value-42', TRICKY: `line one\n"quoted" 'single' $HOME \\ é 日本\n\n`, EMPTY: '' };
    api.parameters.put(agentSecretName(SECRET_PATH, INSTANCE_ID), agentSecretValue(SECRET, secrets), INSTANCE_ARN);

    const result = await runAgent({ spec: spec({ setup: 'test "${#HF_TOKEN}" = 19', run: DUMP_ENV }), nodeRank: 0 });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([
      ['setup', 0],
      ['run', 0],
    ]);
    expect(jobEnv()).toMatchObject(secrets);
    const files = filesUnder(dir).filter((file) => file.path !== join(dir, 'env'));
    expect(files.filter((file) => file.content.includes('Planted-Value') || file.content.includes(Buffer.from(secrets.HF_TOKEN).toString('base64'))).map((f) => f.path)).toEqual([]);
  });

  it('reads an SSM answer that writes every slash as \\/, under the rules of bash 4.2 too (Amazon Linux 2)', async () => {
    // '???' is Pz8/ in base64: the secret's word has a slash to escape.
    const secrets = { SLASHED: '???', PATH_LIKE: '/data/x' };
    api.parameters.put(agentSecretName(SECRET_PATH, INSTANCE_ID), agentSecretValue(SECRET, secrets), INSTANCE_ARN);
    api.ssmEscapesSlashes = true;
    // BASH_COMPAT=42: the bash here runs the agent as bash 4.2 would, where a quoted \/ in a
    // replacement keeps its backslash.
    const shims = mkdtempSync(join(dir, 'bash-4.2-'));
    writeFileSync(join(shims, 'bash'), `#!/bin/sh\nBASH_COMPAT=42 exec ${execFileSync('sh', ['-c', 'command -v bash'], { encoding: 'utf8' }).trim()} "$@"\n`, { mode: 0o755 });

    const result = await runAgent({ spec: spec({ run: DUMP_ENV }), nodeRank: 0, discoveryTimeoutSeconds: 0 }, `${shims}${delimiter}${MACHINE_PATH}`);

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(jobEnv()).toMatchObject(secrets);
  });

  it('refuses a parameter whose job secrets are not NAME=base64 words', async () => {
    api.parameters.put(agentSecretName(SECRET_PATH, INSTANCE_ID), `${SECRET} BAD-NAME=eA==`, INSTANCE_ARN);

    const result = await runAgent({ spec: spec(), nodeRank: 0, discoveryTimeoutSeconds: 0 });

    expect(result).toMatchObject({ exitCode: 1, shutDown: true });
    expect(api.requests).toEqual([]);
  });

  it('waits for a parameter the launcher writes after the instance boots: SSM refuses until then', async () => {
    const name = agentSecretName(SECRET_PATH, INSTANCE_ID);
    api.parameters.delete(name);

    // The launcher writes it once SSM has refused the agent's first read, however long the agent took to ask.
    const agent = await startAgent({ spec: spec(), nodeRank: 0 });
    await waitFor('the first read of the parameter', () => (api.ssmRequests.length > 0 ? true : undefined));
    api.parameters.put(name, SECRET, INSTANCE_ARN);
    const result = await agent.done;

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(result.stderr).toContain('the callback secret is not readable yet: HTTP 400 AccessDeniedException');
    expect(api.ssmRequests.length).toBeGreaterThanOrEqual(2);
    expect(api.reports.map((report) => report.phase)).toEqual(['setup', 'run']);
  });

  it("never reads another instance's parameter: with none of its own, it gives up without a heartbeat or a report", async () => {
    api.parameters.put(agentSecretName(SECRET_PATH, INSTANCE_ID), SECRET, 'arn:aws:ec2:us-east-1:123456789012:instance/i-someone-else');

    const result = await runAgent({ spec: spec(), nodeRank: 0, discoveryTimeoutSeconds: 0 });

    expect(result).toMatchObject({ exitCode: 1, shutDown: true });
    expect(result.stderr).toContain('no callback secret from SSM after 0 s (HTTP 400 AccessDeniedException); giving up');
    expect(api.requests).toEqual([]);
  });

  it('refuses a parameter that does not hold a secret', async () => {
    api.parameters.put(agentSecretName(SECRET_PATH, INSTANCE_ID), "'; touch /tmp/pwned; '", INSTANCE_ARN);

    const result = await runAgent({ spec: spec(), nodeRank: 0, discoveryTimeoutSeconds: 0 });

    expect(result).toMatchObject({ exitCode: 1, shutDown: true });
    expect(result.stderr).toContain(`parameter ${SECRET_PATH}/${INSTANCE_ID} does not hold a callback secret`);
    expect(api.requests).toEqual([]);
  });
});


describe('the agent with a Docker image', () => {
  const CONTAINER = `relaunch-${INSTANCE_ID}`;
  /** What the container runs first, and what a phase runs (agent.sh's CONTAINER_INIT and PHASE_PROGRAM). */
  const CONTAINER_INIT = `trap 'kill -TERM -1 2>/dev/null; while kill -0 -1 2>/dev/null; do sleep 0.2; done; exit 0' TERM; while :; do sleep 3600 & wait $!; done`;
  const PHASE_PROGRAM = 'set -- "$1" "$2" "$3" "$BASH" && . /dev/stdin && exec </dev/null && . "$1/env.sh" && cd "$2" && exec "$4" "$1/$3.sh"';

  it('pulls it, starts one container on the host network, runs setup and run inside with the env and secrets, then removes it', async () => {
    api.parameters.put(agentSecretName(SECRET_PATH, INSTANCE_ID), agentSecretValue(SECRET, { TOKEN: 'tok-planted' }), INSTANCE_ARN);
    const task = spec({ setup: 'test "$IN_CONTAINER" = yes', run: DUMP_ENV }, { containerImage: 'ubuntu:22.04' });

    const result = await runAgent({ spec: task, nodeRank: 0 }, dockerStandIn());

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([
      ['setup', 0],
      ['run', 0],
    ]);
    expect(jobEnv()).toMatchObject({ IN_CONTAINER: 'yes', TOKEN: 'tok-planted', RELAUNCH_JOB_ID: JOB_ID, RELAUNCH_NODE_RANK: '0' });
    const calls = dockerCalls();
    const root = join(dir, 'agent');
    expect(calls.slice(0, 2)).toEqual(['image inspect ubuntu:22.04', 'pull ubuntu:22.04']);
    expect(calls).toContain(`run -d --name ${CONTAINER} --network host --ipc host --ulimit memlock=-1 --stop-timeout 90 -v ${root}:${root} --entrypoint bash ubuntu:22.04 -c ${CONTAINER_INIT}`);
    expect(calls.filter((call) => call.startsWith('exec '))).toEqual(
      ['setup', 'run'].map((phase) => `exec -i -w ${root} -e HOME ${CONTAINER} bash -c ${PHASE_PROGRAM} relaunch-phase ${root} ${root} ${phase}`),
    );
    expect(calls.at(-1)).toBe(`rm -f ${CONTAINER}`);
    expect(calls.join('\n')).not.toContain('tok-planted');
  });

  it('does not pull an image the daemon has already (built or pulled on that machine), as docker run does not', async () => {
    const path = dockerStandIn();
    writeFileSync(join(dir, 'docker-images'), 'team/trainer:dev\n');

    const result = await runAgent({ spec: spec({}, { containerImage: 'team/trainer:dev' }), nodeRank: 0 }, path);

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([['setup', 0], ['run', 0]]);
    expect(dockerCalls().filter((call) => call.startsWith('pull '))).toEqual([]);
  });

  it("says why a container could not start, in docker's words, past the id docker printed first", async () => {
    await runAgent({ spec: spec({ run: 'touch "$DUMP_DIR/run-started"' }, { containerImage: 'registry.example/no-bash:1' }), nodeRank: 0 }, dockerStandIn());

    expect(api.reports[0]?.agentFailure).toEqual({
      step: 'container',
      error: 'docker could not start the container from registry.example/no-bash:1: Error response from daemon: failed to create shim task: OCI runtime create failed: exec: "bash": executable file not found in $PATH: unknown.',
    });
    expect(existsSync(join(dir, 'run-started'))).toBe(false);
  });

  it("starts the container with the host's locked-memory limit where the host may not lift it, and says so", async () => {
    const path = dockerStandIn();
    writeFileSync(join(dir, 'no-memlock'), '');

    const result = await runAgent({ spec: spec({}, { containerImage: 'ubuntu:22.04' }), nodeRank: 0 }, path);

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([['setup', 0], ['run', 0]]);
    const runs = dockerCalls().filter((call) => call.startsWith('run '));
    expect(runs).toHaveLength(2);
    expect(runs[0]).toContain('--ulimit memlock=-1');
    expect(runs[1]).not.toContain('--ulimit');
    expect(api.reports[0]?.outputTail).toContain("relaunch: this host may not lift the container's locked-memory limit: starting it with the host's");
  });

  it('gives the container the GPUs of a GPU node', async () => {
    await runAgent({ spec: spec({}, { containerImage: 'nvcr.io/nvidia/pytorch:24.07-py3' }), nodeRank: 0, gpusPerNode: 8 }, dockerStandIn());

    expect(dockerCalls().find((call) => call.startsWith('run '))).toContain('--ulimit memlock=-1 --stop-timeout 90 --gpus all -v');
  });

  it("logs in to the account's ECR with the instance role before pulling from it", async () => {
    const image = '123456789012.dkr.ecr.us-west-2.amazonaws.com/team/model:1';

    const result = await runAgent({ spec: spec({}, { containerImage: image }), nodeRank: 0, ecrEndpoint: `${apiUrl}/ecr` }, dockerStandIn());

    expect(result.exitCode).toBe(0);
    expect(api.reports[0]).toMatchObject({ phase: 'setup', exitCode: 0 });
    // The password reached docker on its stdin, never its command line.
    expect(readFileSync(join(dir, 'docker-login-password'), 'utf8')).toBe('ecr-password\n');
    const calls = dockerCalls();
    expect(calls.indexOf('login --username AWS --password-stdin 123456789012.dkr.ecr.us-west-2.amazonaws.com')).toBeLessThan(calls.indexOf(`pull ${image}`));
  });

  it("refuses to start a GPU node's container on a docker without the NVIDIA runtime: the agent's failure at container, saying why", async () => {
    const path = dockerStandIn();
    writeFileSync(join(dir, 'docker-bin', 'docker'), readFileSync(join(dir, 'docker-bin', 'docker'), 'utf8').replace(`{"nvidia":{},"runc":{}}`, `{"runc":{}}`));

    await runAgent({ spec: spec({}, { containerImage: 'ubuntu:22.04' }), nodeRank: 0, gpusPerNode: 1 }, path);

    expect(api.reports).toEqual([
      {
        nodeRank: 0,
        phase: 'setup',
        agentFailure: { step: 'container', error: expect.stringContaining('this node has GPUs but its docker has no NVIDIA runtime') },
        outputTail: expect.stringContaining('no NVIDIA runtime'),
      },
    ]);
  });

  it("reports the agent's failure at image-pull with why when the image cannot be pulled in three tries, and never runs", async () => {
    const result = await runAgent({ spec: spec({ run: 'touch "$DUMP_DIR/run-started"' }, { containerImage: 'registry.example/missing:1' }), nodeRank: 0, pullRetrySeconds: 0 }, dockerStandIn());

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports).toEqual([
      {
        nodeRank: 0,
        phase: 'setup',
        agentFailure: { step: 'image-pull', error: 'could not pull registry.example/missing:1 in 3 tries: manifest unknown: registry.example/missing:1' },
        outputTail: expect.stringContaining('relaunch: try 2 of 3 failed; trying again in'),
      },
    ]);
    expect(dockerCalls().filter((call) => call.startsWith('pull '))).toHaveLength(3);
    expect(existsSync(join(dir, 'run-started'))).toBe(false);
  });
});

describe('the agent under throttling', () => {
  /** A long interval: the first, synchronous round is the only one a short job sees. */
  const ONE_ROUND = { heartbeatSeconds: 30, nodeRank: 0 } as const;

  it('retries a heartbeat answered 429 twice, then 200, and goes on with setup and run', async () => {
    api.heartbeatStatuses = [429, 429, 200];

    const result = await runAgent({ spec: spec(), ...ONE_ROUND });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.heartbeats).toHaveLength(3);
    const firstReport = api.requests.find((r) => r.path.endsWith('/report'));
    expect(api.heartbeats.every((beat) => beat.at <= (firstReport?.at ?? 0))).toBe(true);
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([
      ['setup', 0],
      ['run', 0],
    ]);
    expect(result.stderr.match(/a heartbeat got HTTP 429; retrying in/g)).toHaveLength(2);
  });

  it('retries a heartbeat answered with a 5xx or not answered at all', async () => {
    api.heartbeatStatuses = [503, 0, 500];

    const result = await runAgent({ spec: spec(), ...ONE_ROUND });

    expect(result.exitCode).toBe(0);
    expect(api.heartbeats).toHaveLength(4);
    expect(result.stderr).toContain('a heartbeat got HTTP 000; retrying');
  });

  it('does not retry a heartbeat the API refuses for good (401), and goes on', async () => {
    api.heartbeatStatuses = [401];

    const result = await runAgent({ spec: spec(), ...ONE_ROUND });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.heartbeats).toHaveLength(1);
    expect(result.stderr).toContain('the API refused a heartbeat (HTTP 401)');
    expect(api.reports).toHaveLength(2);
  });

  it('ends a round of heartbeat retries before the next beat is due, however long the API throttles', async () => {
    api.heartbeatStatusAfter = 429;

    const result = await runAgent({ spec: spec(), nodeRank: 0, heartbeatSeconds: 1, reportBackoff: { initialMs: 100, maxMs: 400 } });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    // The first round runs before setup (later rounds run in the background and log to the
    // same stderr, after setup has started). It gave up by the agent's own clock: waits of
    // 50-100, 100-200, 200-400 and 400 ms leave room for at most four retries within the
    // 1 s interval (fewer when the machine is slow to run them). Without the deadline a
    // throttling API would hold the agent before setup for good.
    const firstRound = result.stderr.slice(0, result.stderr.indexOf(': setup\n'));
    expect((firstRound.match(/a heartbeat got HTTP 429; retrying in/g) ?? []).length).toBeLessThanOrEqual(4);
    expect(firstRound.match(/the next one is due before a retry could finish/g)).toHaveLength(1);
  });

  it('writes the refusals of its background heartbeats (401, 403, 409) to its own log, and goes on', async () => {
    // The first beat (before setup) is taken; the next three are refused, each for good.
    api.heartbeatStatuses = [204, 401, 403, 409];
    api.onHeartbeat = (count) => {
      if (count === 4) writeFileSync(join(dir, 'refused'), '');
    };

    const result = await runAgent({ spec: spec({ run: 'until [ -e "$DUMP_DIR/refused" ]; do sleep 0.05; done' }), nodeRank: 0, heartbeatSeconds: 0.2 });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    const afterSetup = result.stderr.slice(result.stderr.indexOf(': setup\n'));
    for (const status of [401, 403, 409]) expect(afterSetup).toContain(`the API refused a heartbeat (HTTP ${status})`);
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([['setup', 0], ['run', 0]]);
  });

  it('beats on a steady cadence in the background while the job runs, throttled or not', async () => {
    api.heartbeatStatuses = [204, 429, 204, 429, 429];
    const BEATS = 8;
    const HEARTBEAT_MS = 250;
    // The job runs until the API has had its beats, however slow the machine.
    api.onHeartbeat = (count) => {
      if (count === BEATS) writeFileSync(join(dir, 'beats-in'), '');
    };
    const startedAt = Date.now();

    await runAgent({ spec: spec({ run: 'until [ -e "$DUMP_DIR/beats-in" ]; do sleep 0.05; done' }), nodeRank: 0, heartbeatSeconds: HEARTBEAT_MS / 1000 });

    const times = api.heartbeats.map((beat) => beat.at);
    expect(times.length).toBeGreaterThanOrEqual(BEATS);
    // Rounds are due a quarter second apart from the agent's start (a late one moves the
    // cadence on, never closer): no more beats than the rounds that fit before the last
    // one arrived, plus a retry for each of the three 429s. A second loop, or retries
    // beyond the 429s, would exceed it.
    const rounds = Math.floor(((times.at(-1) as number) - startedAt) / HEARTBEAT_MS) + 1;
    expect(times.length).toBeLessThanOrEqual(rounds + 3);
  });

  it("carries the job's progress, the step its progress file holds and the file's age, on the heartbeats after it is written", async () => {
    const HEARTBEAT_MS = 250;
    // The job writes its step, then runs until a beat has carried it, however slow the machine.
    api.onHeartbeat = () => {
      const last = api.heartbeats.at(-1);
      if (last !== undefined && last.body.includes('progress')) writeFileSync(join(dir, 'progress-seen'), '');
    };
    const run = 'echo junk > "$RELAUNCH_PROGRESS_FILE.tmp"; printf "1200\\n" > "$RELAUNCH_PROGRESS_FILE"; until [ -e "$DUMP_DIR/progress-seen" ]; do sleep 0.05; done';

    const result = await runAgent({ spec: spec({ run }), nodeRank: 0, heartbeatSeconds: HEARTBEAT_MS / 1000 });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    const bodies = api.heartbeats.map((beat) => HeartbeatBodySchema.parse(JSON.parse(beat.body)));
    // The first beat comes before the job runs: no progress yet.
    expect(bodies[0]).toEqual({ nodeRank: 0 });
    const carried = bodies.filter((body) => body.progress !== undefined);
    expect(carried.length).toBeGreaterThanOrEqual(1);
    expect(carried[0]).toEqual({ nodeRank: 0, progress: { step: 1200, ageSeconds: expect.any(Number) } });
    expect(carried[0]?.progress?.ageSeconds).toBeLessThan(60);
  });

  it('waits between report retries for half the backoff delay plus a random part of the other half', async () => {
    api.reportStatuses = [500, 500, 500, 500, 500, 500];

    const result = await runAgent({ spec: spec(), ...ONE_ROUND, reportBackoff: { initialMs: 40, maxMs: 80 } });

    expect(result.exitCode).toBe(0);
    const waits = [...result.stderr.matchAll(/the setup report got HTTP 500; retrying in ([0-9.]+) s/g)].map((m) => Math.round(Number(m[1]) * 1000));
    const delays = [40, 80, 80, 80, 80, 80];
    expect(waits).toHaveLength(delays.length);
    waits.forEach((wait, index) => {
      const delay = delays[index] as number;
      expect(wait).toBeGreaterThanOrEqual(delay / 2);
      expect(wait).toBeLessThanOrEqual(delay);
    });
    // Six draws that all land on the full delay would mean no jitter at all.
    expect(waits).not.toEqual(delays);
  });
});

/** Output that JSON must escape: quotes, backslashes, control characters, and non-ASCII text. */
const NASTY = 'say "hi" \\ back\\slash\ttab\rcarriage \u0001 bell\u0007 esc\u001b[0m é 日本語 🚀 \u007f end';

/** A PATH holding only what the agent and the test job need, without python3. */
function pathWithoutPython(): string {
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  const tools = ['bash', 'curl', 'base64', 'tail', 'tr', 'awk', 'sleep', 'mkdir', 'printenv', 'touch', 'env', 'printf', 'cat', 'setsid', 'ps', 'mkfifo', 'rm'];
  for (const tool of [...tools, 'openssl', 'sha256sum', 'cut', 'sed', 'od', 'head', 'date']) {
    const found = (process.env.PATH ?? '')
      .split(delimiter)
      .map((folder) => join(folder, tool))
      .find((candidate) => existsSync(candidate) && !candidate.includes('pyenv'));
    if (found === undefined) throw new Error(`${tool} is not on PATH`);
    symlinkSync(found, join(bin, tool));
  }
  return bin;
}

describe.each([
  ['on this machine', () => undefined],
  ['on an image without python3', pathWithoutPython],
])('the output tail, %s', (_name, makePath) => {
  it('arrives exactly as printed, whatever the characters', async () => {
    writeFileSync(join(dir, 'nasty.txt'), `${NASTY}\nsecond line\n`);

    await runAgent({ spec: spec({ setup: 'cat "$DUMP_DIR/nasty.txt"' }), nodeRank: 0 }, makePath());

    expect(api.reports[0]?.outputTail).toBe(`${NASTY}\nsecond line`);
  });

  it('turns bytes that are not UTF-8 into U+FFFD, one for each ill-formed sequence, so the API takes the report', async () => {
    // A lone 0xff, an overlong "/", a surrogate, a character cut short, then a valid one.
    const setup = String.raw`printf 'ok \377 \300\257 \355\240\200 \343\201 end \343\201\202\n'; exit 3`;

    await runAgent({ spec: spec({ setup }), nodeRank: 0 }, makePath());

    expect(api.reports).toMatchObject([{ phase: 'setup', exitCode: 3, outputTail: 'ok \ufffd \ufffd\ufffd \ufffd\ufffd\ufffd \ufffd end \u3042' }]);
  });

  it('drops NUL bytes, keeps empty lines, and sends an empty tail for no output', async () => {
    await runAgent({ spec: spec({ setup: `printf 'a\\0b\\n\\n\\nc\\n'`, run: 'true' }), nodeRank: 0 }, makePath());

    expect(api.reports.map((report) => report.outputTail)).toEqual(['ab\n\n\nc', '']);
  });

  it('keeps the last 50 lines, at most 8192 bytes, never half a character', async () => {
    const setup = 'for i in {1..60}; do echo "line $i"; done';
    const run = "for i in {1..10000}; do printf 'é'; done; echo";

    await runAgent({ spec: spec({ setup, run }), nodeRank: 0 }, makePath());

    const [setupReport, runReport] = api.reports;
    expect(setupReport?.outputTail.split('\n')).toEqual(Array.from({ length: 50 }, (_, index) => `line ${index + 11}`));
    // 'é' is 2 bytes: the last 8192 bytes are a newline and 8191 bytes, whose first is half an 'é'.
    expect(runReport?.outputTail).toBe('é'.repeat(4095));
    expect(Buffer.byteLength(runReport?.outputTail ?? '')).toBeLessThanOrEqual(OUTPUT_TAIL_MAX_BYTES);
  });
});

describe('renderAgentScript', () => {
  const SOURCE = { path: SECRET_PATH, region: 'us-east-1', endpoint: 'https://ssm.us-east-1.amazonaws.com' };

  it('refuses an env name bash cannot export, naming it', () => {
    const render = () =>
      renderAgentScript({ apiUrl, jobId: JOB_ID, attempt: 1, secretSource: SOURCE, heartbeatSeconds: 60, spec: spec({ envs: { 'MY-VAR': 'x' } }) });
    expect(render).toThrow(PrecheckError);
    expect(render).toThrow(/envs\.MY-VAR: expected an environment variable name/);
  });

  it("ships no comment line but its header and shellcheck's directives (the tests here run what is shipped), and bash parses it", () => {
    const script = renderAgentScript({ apiUrl, jobId: JOB_ID, attempt: 1, secretSource: SOURCE, heartbeatSeconds: 60, spec: spec() });
    const lines = script.split('\n');
    expect(lines.slice(0, 3)).toEqual([
      '#!/bin/bash',
      `# relaunch agent for job ${JOB_ID}, attempt 1: rendered by lib/agent/script.ts from agent.sh.`,
      '# shellcheck disable=SC1003,SC2016,SC2088',
    ]);
    expect(lines.slice(3).filter((line) => /^\s*#/.test(line) && !/^\s*# shellcheck disable=SC\d+$/.test(line))).toEqual([]);
    // bash -n parses without running: a syntax error fails it (execFileSync throws on a non-zero exit).
    execFileSync('bash', ['-n', '-c', script]);
  });

  it('refuses a NUL, which no quoting can carry to bash', () => {
    const render = () => renderAgentScript({ apiUrl, jobId: JOB_ID, attempt: 1, secretSource: SOURCE, heartbeatSeconds: 60, spec: spec({ run: 'echo a\0b' }) });
    expect(render).toThrow(RangeError);
  });
});

describe("the task's own text in the agent", () => {
  /** Quotes, expansions, an end of heredoc, a backslash before a quote, wide characters. */
  const HOSTILE = "'; touch \"$DUMP_DIR/pwned\"; '\nEOF\n$(touch \"$DUMP_DIR/pwned2\") `touch pwned3` it\\'s \\\\ ~/x ${HOME} é 日本\ttab\n";

  it('is quoted, never base64: setup, run and envs reach the node exactly as written, and none of it runs as agent code', async () => {
    const setup = `true\n: <<'X'\n${HOSTILE}X\n`;
    const run = `printf '%s' "$TEXT" > "$DUMP_DIR/text"\n: <<'X'\n${HOSTILE}X\n`;

    const result = await runAgent({ spec: spec({ setup, run, envs: { TEXT: HOSTILE } }), nodeRank: 0 });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(readFileSync(join(dir, 'agent', 'setup.sh'), 'utf8')).toBe(setup);
    expect(readFileSync(join(dir, 'agent', 'run.sh'), 'utf8')).toBe(run);
    expect(readFileSync(join(dir, 'text'), 'utf8')).toBe(HOSTILE);
    for (const name of ['pwned', 'pwned2', 'pwned3']) expect(existsSync(join(dir, name))).toBe(false);
    const script = readFileSync(join(dir, 'agent.sh'), 'utf8');
    expect(script).not.toContain(Buffer.from(run).toString('base64'));
    expect(script).toContain(`declare +x RUN_SCRIPT='printf '\\''%s'\\'' "$TEXT"`);
  });
});

describe('the agent preparing the workdir and file mounts', () => {
  /** Packs `files` (path → content) as `run` does and puts the archive in a store folder; returns its SHA-256. */
  async function stored(store: string, files: Record<string, string>, entry: 'dir' | 'file' = 'dir'): Promise<string> {
    const source = mkdtempSync(join(dir, 'source-'));
    for (const [name, content] of Object.entries(files)) {
      mkdirSync(dirname(join(source, name)), { recursive: true });
      writeFileSync(join(source, name), content);
    }
    const packed = await packSource(entry === 'dir' ? source : join(source, Object.keys(files)[0] as string), mkdtempSync(join(dir, 'pack-')));
    mkdirSync(store, { recursive: true });
    writeFileSync(join(store, archiveName(packed.sha256)), readFileSync(packed.archive));
    return packed.sha256;
  }

  /**
   * Bash that records, in \$DUMP_DIR/<$1>, the profile a call runs with and the AccessKeyId
   * its config's credential_process prints: what the real CLI and mountpoint-s3 would sign with.
   */
  const RECORD_CREDENTIALS = [
    'if [ -n "$AWS_CONFIG_FILE" ]; then',
    '  process=$(sed -n "/^\\[profile $AWS_PROFILE\\]/,/^\\[/s/^credential_process = //p" "$AWS_CONFIG_FILE")',
    '  key=$(bash -c "$process" | python3 -c \'import json, sys; print(json.load(sys.stdin)["AccessKeyId"])\')',
    '  printf \'%s %s\\n\' "$AWS_PROFILE" "$key" >> "$DUMP_DIR/$1"',
    'fi',
  ].join('\n');

  /**
   * Stand-ins for the AWS CLI and mountpoint-s3: each records its arguments and the
   * credentials it would use (RECORD_CREDENTIALS); `aws s3 cp` serves a folder standing in for S3.
   */
  function awsStandIns(s3: string): string {
    const bin = join(dir, 'aws-bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'record-credentials'), `#!/bin/bash\n${RECORD_CREDENTIALS}\n`, { mode: 0o755 });
    writeFileSync(
      join(bin, 'aws'),
      `#!/bin/bash
printf '%s\\n' "$*" >> "$DUMP_DIR/aws.log"
record-credentials aws-credentials.log
if [ "$1" = s3api ] && [ "$2" = head-object ]; then [ -f "${s3}/$4/$6" ]; exit; fi
[ "$1" = s3 ] || exit 2
from=$(printf '%s' "$4" | sed 's|^s3://||'); to=$5
# As the real CLI says it, on stderr, for a bucket that is not there.
if [ ! -d "${s3}/\${from%%/*}" ]; then
  echo 'warning: Skipping file /nothing. File does not exist.' >&2
  echo "fatal error: An error occurred (NoSuchBucket) when calling the ListObjectsV2 operation: The specified bucket does not exist" >&2
  exit 1
fi
case "$2" in
  cp) [ -f "${s3}/$from" ] && cp "${s3}/$from" "$to" ;;
  # As the real CLI does, a prefix with nothing under it syncs nothing, successfully.
  sync) mkdir -p "$to" && if [ -d "${s3}/$from" ]; then cp -r "${s3}/$from/." "$to/"; fi ;;
  *) exit 2 ;;
esac
`,
      { mode: 0o755 },
    );
    writeFileSync(
      join(bin, 'mount-s3'),
      `#!/bin/bash
printf '%s\\n' "$*" >> "$DUMP_DIR/mount-s3.log"
record-credentials mount-s3-credentials.log
if [ "$1" = locked ]; then
  printf '%s\\n' 'Error: Failed to create S3 client' '' 'Caused by:' '    0: initial ListObjectsV2 failed for bucket locked in region us-east-1' '    1: Client error' '    2: Forbidden: Access Denied' >&2
  exit 1
fi
mkdir -p "${s3}/$1" && rmdir "$2" && ln -s "${s3}/$1" "$2"
`,
      { mode: 0o755 },
    );
    return bin;
  }

  const called = (name: string): string[] => (existsSync(join(dir, name)) ? readFileSync(join(dir, name), 'utf8').trimEnd().split('\n') : []);

  it('unpacks uploads into the job home and the mapped root, runs in ~/sky_workdir, and says where each path is', async () => {
    const store = join(dir, 'store');
    const code = await stored(store, { 'train.py': 'print(1)\n', 'lib/util.py': 'x = 2\n' });
    const config = await stored(store, { 'config.json': '{"lr": 0.1}\n' }, 'file');
    const home = join(dir, 'home');
    const root = join(dir, 'root');
    const task = spec({ workdir: uploadReference('dir', code), setup: 'ls lib', run: `cat train.py /data/config.json "$RELAUNCH_MOUNT_ROOT/data/config.json" > "$DUMP_DIR/seen" 2>&1; ${DUMP_ENV}` });

    const result = await runAgent({
      spec: task,
      nodeRank: 0,
      sourcesUrl: store,
      jobHome: home,
      mountRoot: root,
      mounts: [
        { kind: 'upload', entry: 'dir', sha256: code, dest: '~/sky_workdir' },
        { kind: 'upload', entry: 'file', sha256: config, dest: '/data/config.json' },
      ],
    });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([['setup', 0], ['run', 0]]);
    expect(readFileSync(join(dir, 'pwd'), 'utf8').trim()).toBe(join(home, 'sky_workdir'));
    // /data/config.json itself is not there here: the job reaches it under RELAUNCH_MOUNT_ROOT.
    expect(readFileSync(join(dir, 'seen'), 'utf8')).toContain('print(1)\n');
    expect(readFileSync(join(dir, 'seen'), 'utf8')).toContain('{"lr": 0.1}\n');
    expect(readFileSync(join(root, 'data', 'config.json'), 'utf8')).toBe('{"lr": 0.1}\n');
    expect(jobEnv()).toMatchObject({ HOME: home, RELAUNCH_MOUNT_ROOT: root });
    const setupLog = readFileSync(join(dir, 'agent', 'setup.log'), 'utf8');
    expect(setupLog).toContain(`relaunch: /data/config.json is ${root}/data/config.json on this machine`);
    expect(setupLog).toContain('util.py');
  });

  it("refuses an archive whose bytes are not the ones its name says: the agent's failure at mounts, with why; run never runs", async () => {
    const store = join(dir, 'store');
    const sha = await stored(store, { 'a.txt': 'genuine\n' });
    writeFileSync(join(store, archiveName(sha)), 'tampered');

    const result = await runAgent({
      spec: spec({ run: 'touch "$DUMP_DIR/run-started"' }),
      nodeRank: 0,
      sourcesUrl: store,
      jobHome: join(dir, 'home'),
      mounts: [{ kind: 'upload', entry: 'dir', sha256: sha, dest: '~/data' }],
    });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports).toEqual([
      {
        nodeRank: 0,
        phase: 'setup',
        agentFailure: { step: 'mounts', error: expect.stringMatching(/^could not prepare ~\/data \(upload\): .* has SHA-256 [0-9a-f]{64}, not the one its name says$/) },
        outputTail: expect.stringContaining('not the one its name says'),
      },
    ]);
    expect(existsSync(join(dir, 'run-started'))).toBe(false);
  });

  it('on EC2: fetches uploads with aws s3 cp, copies an S3 prefix, mounts buckets with mount-s3, and gives the container every path', async () => {
    const s3 = join(dir, 's3');
    const sha = await stored(join(s3, 'stack-bucket', 'sources'), { 'train.py': 'print(1)\n' });
    mkdirSync(join(s3, 'datasets', 'imagenet', 'train'), { recursive: true });
    writeFileSync(join(s3, 'datasets', 'imagenet', 'train', 'img0.jpg'), 'jpeg');
    const bin = awsStandIns(s3);
    const docker = dockerStandIn();
    const task = spec(
      { workdir: uploadReference('dir', sha), run: `ls /tmp >/dev/null; echo saved > "$HOME/ckpt/step-1"; ${DUMP_ENV}` },
      { containerImage: 'ubuntu:22.04' },
    );

    const result = await runAgent(
      {
        spec: task,
        nodeRank: 0,
        sourcesUrl: 's3://stack-bucket/sources',
        mounts: [
          { kind: 'upload', entry: 'dir', sha256: sha, dest: '~/sky_workdir' },
          { kind: 's3-copy', bucket: 'datasets', key: 'imagenet', dest: '~/imagenet' },
          { kind: 's3-mount', bucket: 'team-ckpts', prefix: 'run-7', cached: false, dest: '~/ckpt' },
          { kind: 's3-mount', bucket: 'stack-bucket', prefix: 'mounts/j-1/cache', cached: true, dest: '~/cache' },
        ],
      },
      [bin, docker].join(delimiter),
    );

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([['setup', 0], ['run', 0]]);
    expect(called('aws.log')).toEqual([
      `s3 cp --only-show-errors s3://stack-bucket/sources/${sha}.tar.gz ${join(dir, 'agent', 'sources', `${sha}.tar.gz.part`)}`,
      's3api head-object --bucket datasets --key imagenet',
      `s3 sync --only-show-errors s3://datasets/imagenet ${join(dir, 'imagenet')}`,
    ]);
    expect(readFileSync(join(dir, 'imagenet', 'train', 'img0.jpg'), 'utf8')).toBe('jpeg');
    expect(called('mount-s3.log')).toEqual([
      `team-ckpts ${join(dir, 'ckpt')} --allow-delete --allow-overwrite --prefix run-7/`,
      `stack-bucket ${join(dir, 'cache')} --allow-delete --allow-overwrite --prefix mounts/j-1/cache/ --cache ${join(dir, 'agent', 'mount-cache', '3')}`,
    ]);
    // What the job wrote under the mount is in the bucket, for the next attempt.
    expect(readFileSync(join(s3, 'team-ckpts', 'step-1'), 'utf8')).toBe('saved\n');
    const run = dockerCalls().find((call) => call.startsWith('run ')) as string;
    for (const path of ['sky_workdir', 'imagenet', 'ckpt', 'cache']) expect(run).toContain(`-v ${join(dir, path)}:${join(dir, path)}`);
    // Set, and empty: `"$RELAUNCH_MOUNT_ROOT/checkpoint"` is /checkpoint here, even under set -u.
    expect(jobEnv().RELAUNCH_MOUNT_ROOT).toBe('');
  });

  /** One upload, one copied prefix and one mounted bucket, all in the stand-in S3 under `dir/s3`, and the stand-ins' PATH. */
  async function s3Task(): Promise<{ sha: string; path: string; mounts: AgentMount[] }> {
    const s3 = join(dir, 's3');
    const sha = await stored(join(s3, 'stack-bucket', 'sources'), { 'train.py': 'print(1)\n' });
    mkdirSync(join(s3, 'datasets', 'imagenet'), { recursive: true });
    writeFileSync(join(s3, 'datasets', 'imagenet', 'img0.jpg'), 'jpeg');
    return {
      sha,
      path: [awsStandIns(s3), MACHINE_PATH].join(delimiter),
      mounts: [
        { kind: 'upload', entry: 'dir', sha256: sha, dest: '~/sky_workdir' },
        { kind: 's3-copy', bucket: 'datasets', key: 'imagenet', dest: '~/imagenet' },
        { kind: 's3-mount', bucket: 'team-ckpts', prefix: 'run-7', cached: false, dest: '~/ckpt' },
      ],
    };
  }

  it("on EC2: runs every S3 step with the job's data credentials, asked of the API with the callback secret, and asks again while the job runs", async () => {
    const { sha, path, mounts } = await s3Task();
    // The job runs until refreshed credentials (any but the first) are where the profile reads
    // them, however busy the machine: a slow setup may see several refreshes before it.
    const waitForRefresh = `for i in $(seq 260); do grep -qs '"AKIADATA1"' '${join(dir, 'agent', 'aws', 'credentials.json')}' || break; sleep 0.05; done; ${DUMP_ENV}`;

    const result = await runAgent(
      { spec: spec({ workdir: uploadReference('dir', sha), run: waitForRefresh }), nodeRank: 0, sourcesUrl: 's3://stack-bucket/sources', mounts, dataCredentials: true, dataCredentialsRefreshSeconds: 1 },
      path,
    );

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([['setup', 0], ['run', 0]]);
    const asks = api.dataCredentialRequests;
    expect(asks.length).toBeGreaterThanOrEqual(2);
    for (const ask of asks) {
      expect(ask).toMatchObject({ method: 'POST', path: `/jobs/${JOB_ID}/attempts/3/data-credentials`, authorization: `Bearer ${SECRET}` });
      expect(HeartbeatBodySchema.parse(JSON.parse(ask.body))).toEqual({ nodeRank: 0 });
    }
    // Each aws call and the mount signed, through the profile, with the API's credentials:
    // the first ones, or a refresh when setup ran slower than a refresh interval.
    expect(called('aws.log')).toHaveLength(3);
    const signed = [...called('aws-credentials.log'), ...called('mount-s3-credentials.log')];
    expect(signed).toHaveLength(4);
    for (const line of signed) expect(line).toMatch(/^relaunch-data AKIADATA\d+$/);
    // The refresh replaced them where the profile reads them; only the agent's user may read the folder.
    const folder = join(dir, 'agent', 'aws');
    expect(JSON.parse(readFileSync(join(folder, 'credentials.json'), 'utf8')).AccessKeyId).toMatch(/^AKIADATA([2-9]|[1-9][0-9]+)$/);
    expect(statSync(folder).mode & 0o777).toBe(0o700);
    for (const name of readdirSync(folder)) expect(readFileSync(join(folder, name), 'utf8')).not.toContain(SECRET);
    // The job's own AWS calls are its own business: no profile is set for it.
    expect(jobEnv()).not.toHaveProperty('AWS_PROFILE');
    expect(jobEnv()).not.toHaveProperty('AWS_CONFIG_FILE');
    // The refresher (and the heartbeat) ended with the agent.
    expect(agentProcesses()).toEqual([]);
  });

  it('retries an ask for data credentials that is throttled, fails, goes unanswered or is cut off, then goes on', async () => {
    const { sha, path, mounts } = await s3Task();
    api.dataCredentialStatuses = [429, 503, 0];
    api.dataCredentialCutOffs = 1;

    const result = await runAgent({ spec: spec({ workdir: uploadReference('dir', sha) }), nodeRank: 0, sourcesUrl: 's3://stack-bucket/sources', mounts, dataCredentials: true }, path);

    expect(result.exitCode).toBe(0);
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([['setup', 0], ['run', 0]]);
    expect(api.dataCredentialRequests).toHaveLength(5);
    expect(called('aws-credentials.log')).toEqual(['relaunch-data AKIADATA1', 'relaunch-data AKIADATA1', 'relaunch-data AKIADATA1']);
  });

  it.each([403, 409])("reports the agent's failure when the API refuses the data credentials (%i), saying so, before any S3 step; run never runs", async (status) => {
    const { sha, path, mounts } = await s3Task();
    api.dataCredentialStatuses = [status];

    const result = await runAgent({ spec: spec({ workdir: uploadReference('dir', sha), run: 'touch "$DUMP_DIR/run-started"' }), nodeRank: 0, sourcesUrl: 's3://stack-bucket/sources', mounts, dataCredentials: true }, path);

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports).toEqual([
      {
        nodeRank: 0,
        phase: 'setup',
        agentFailure: { step: 'data-credentials', error: `the API refused this node's data credentials (HTTP ${status}): refused with ${status}` },
        outputTail: expect.stringContaining(`relaunch: the API refused this node's data credentials (HTTP ${status}): refused with ${status}`),
      },
    ]);
    expect(api.dataCredentialRequests).toHaveLength(1);
    expect(called('aws.log')).toEqual([]);
    expect(called('mount-s3.log')).toEqual([]);
    expect(existsSync(join(dir, 'run-started'))).toBe(false);
  });

  it('keeps refreshing through an API outage longer than a refresh interval, and asks no more once the attempt is over (409)', async () => {
    const { sha, path, mounts } = await s3Task();
    // After the first credentials the API fails for 2.5 s: longer than a round of retries
    // (a refresh interval, 1 s) and the pause after it. Then a refresh, then the end.
    api.dataCredentialOutageMs = 2500;
    api.dataCredentialStatuses = [200, 200, 409];
    const refreshed = `for i in $(seq 400); do grep -qs AKIADATA2 '${join(dir, 'agent', 'aws', 'credentials.json')}' && break; sleep 0.05; done`;
    const ended = 'for i in $(seq 400); do grep -qs 409 "$DUMP_DIR/answers" && break; sleep 0.05; done';
    api.onDataCredentialAnswer = (answers) => writeFileSync(join(dir, 'answers'), answers.join('\n'));

    const result = await runAgent(
      {
        // Past the 409, the job runs two more refresh intervals: no ask may come.
        spec: spec({ workdir: uploadReference('dir', sha), run: `${refreshed}; ${ended}; sleep 2` }),
        nodeRank: 0,
        sourcesUrl: 's3://stack-bucket/sources',
        mounts,
        dataCredentials: true,
        dataCredentialsRefreshSeconds: 1,
      },
      path,
    );

    expect(result.exitCode).toBe(0);
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([['setup', 0], ['run', 0]]);
    const answers = api.dataCredentialAnswers;
    expect(answers[0]).toBe(200);
    expect(answers.filter((status) => status === 503).length).toBeGreaterThan(0);
    // The refresh came after the outage outlasted a round; the 409 was the last ask.
    expect(answers.slice(-2)).toEqual([200, 409]);
    expect(answers.filter((status) => status === 409)).toHaveLength(1);
  });

  it("asks for no data credentials where the S3 steps use the machine's own credentials (the local runtime)", async () => {
    const { sha, path, mounts } = await s3Task();
    const result = await runAgent({ spec: spec({ workdir: uploadReference('dir', sha) }), nodeRank: 0, sourcesUrl: 's3://stack-bucket/sources', mounts }, path);

    expect(result.exitCode).toBe(0);
    expect(api.dataCredentialRequests).toEqual([]);
    expect(called('aws.log')).toHaveLength(3);
    expect(called('aws-credentials.log')).toEqual([]);
  });

  it("copies an S3 object as a file and a bucket with mode COPY as files; a prefix with nothing under it is the agent's failure at mounts", async () => {
    const s3 = join(dir, 's3');
    mkdirSync(join(s3, 'datasets', 'labels'), { recursive: true });
    writeFileSync(join(s3, 'datasets', 'labels', 'train.csv'), 'a,b\n');
    mkdirSync(join(s3, 'team-ckpt'), { recursive: true });
    writeFileSync(join(s3, 'team-ckpt', 'step'), '7\n');
    const bin = awsStandIns(s3);
    const ok = await runAgent(
      {
        spec: spec({ run: 'cat /dev/null' }),
        nodeRank: 0,
        mounts: [
          { kind: 's3-copy', bucket: 'datasets', key: 'labels/train.csv', dest: '~/train.csv' },
          { kind: 's3-copy', bucket: 'team-ckpt', key: '', dest: '~/ckpt' },
        ],
      },
      [bin, MACHINE_PATH].join(delimiter),
    );
    expect(ok.exitCode).toBe(0);
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([['setup', 0], ['run', 0]]);
    expect(readFileSync(join(dir, 'train.csv'), 'utf8')).toBe('a,b\n');
    expect(readFileSync(join(dir, 'ckpt', 'step'), 'utf8')).toBe('7\n');
    // Copied, not mounted: nothing the job does there reaches the bucket.
    expect(called('mount-s3.log')).toEqual([]);

    api.requests.length = 0;
    rmSync(join(dir, 'shut-down'));
    await runAgent({ spec: spec(), nodeRank: 0, mounts: [{ kind: 's3-copy', bucket: 'datasets', key: 'typo/', dest: '~/typo' }] }, [bin, MACHINE_PATH].join(delimiter));
    expect(api.reports).toEqual([
      {
        nodeRank: 0,
        phase: 'setup',
        agentFailure: { step: 'mounts', error: 'could not prepare ~/typo (s3-copy): nothing at s3://datasets/typo/' },
        outputTail: expect.stringContaining('relaunch: nothing at s3://datasets/typo/'),
      },
    ]);
    // A key ending in / is a prefix: no head-object could take a console's empty "folder" object for it.
    expect(called('aws.log').filter((line) => line.includes('typo/'))).toEqual([`s3 sync --only-show-errors s3://datasets/typo/ ${join(dir, 'typo')}`]);
  });

  it("puts the copy's or the mount's own error in the agent's failure, not only the step: NoSuchBucket, AccessDenied", async () => {
    const s3 = join(dir, 's3');
    mkdirSync(join(s3, 'locked'), { recursive: true });
    const bin = awsStandIns(s3);
    const path = [bin, MACHINE_PATH].join(delimiter);

    await runAgent({ spec: spec(), nodeRank: 0, mounts: [{ kind: 's3-copy', bucket: 'no-such-bucket', key: 'train/', dest: '~/train' }] }, path);
    expect(api.reports).toEqual([
      {
        nodeRank: 0,
        phase: 'setup',
        agentFailure: {
          step: 'mounts',
          error:
            'could not prepare ~/train (s3-copy): warning: Skipping file /nothing. File does not exist. / fatal error: An error occurred (NoSuchBucket) when calling the ListObjectsV2 operation: The specified bucket does not exist',
        },
        outputTail: expect.stringContaining('(NoSuchBucket)'),
      },
    ]);

    api.requests.length = 0;
    rmSync(join(dir, 'shut-down'));
    await runAgent({ spec: spec(), nodeRank: 0, mounts: [{ kind: 's3-mount', bucket: 'locked', prefix: '', cached: false, dest: '~/ckpt' }] }, path);
    const [failure] = api.reports;
    // The last lines only, and bounded: the cause is at the end of mount-s3's chain.
    expect(failure?.agentFailure).toEqual({
      step: 'mounts',
      error: 'could not prepare ~/ckpt (s3-mount): 0: initial ListObjectsV2 failed for bucket locked in region us-east-1 / 1: Client error / 2: Forbidden: Access Denied',
    });
  });

  it('unpacks an uploaded dot file under the name the task gives it, and copies a folder standing in for a COPY bucket', async () => {
    const store = join(dir, 'store');
    const sha = await stored(store, { '.env': 'A=1\n' }, 'file');
    const bucket = join(dir, 'buckets', 'ckpt');
    mkdirSync(bucket, { recursive: true });
    writeFileSync(join(bucket, 'step'), '3\n');

    const result = await runAgent({
      spec: spec({ run: 'echo 9 > ~/copied/step' }),
      nodeRank: 0,
      sourcesUrl: store,
      mounts: [
        { kind: 'upload', entry: 'file', sha256: sha, dest: '~/settings.env' },
        { kind: 'copy-dir', dir: bucket, dest: '~/copied' },
      ],
    });

    expect(result.exitCode).toBe(0);
    expect(readFileSync(join(dir, 'settings.env'), 'utf8')).toBe('A=1\n');
    expect(readFileSync(join(dir, 'copied', 'step'), 'utf8')).toBe('9\n');
    expect(readFileSync(join(bucket, 'step'), 'utf8')).toBe('3\n');
  });

  it('clones a git workdir at its ref, and links a folder standing in for a bucket', async () => {
    const repo = join(dir, 'repo');
    const git = (...args: string[]) => execFileSync('git', ['-C', repo, ...args], { env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@e', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@e' } });
    mkdirSync(repo);
    git('init', '-q');
    writeFileSync(join(repo, 'version'), 'one\n');
    git('add', 'version');
    git('commit', '-qm', 'one');
    git('tag', 'v1');
    writeFileSync(join(repo, 'version'), 'two\n');
    git('commit', '-qam', 'two');
    const bucket = join(dir, 'buckets', 'ckpt');
    const home = join(dir, 'home');

    const result = await runAgent({
      spec: spec({ gitWorkdir: { url: repo, ref: 'v1' }, run: `cat version > "$DUMP_DIR/version"; echo 3 > ~/ckpt/step; ${DUMP_ENV}` }),
      nodeRank: 0,
      jobHome: home,
      mounts: [
        { kind: 'git', url: repo, ref: 'v1', dest: '~/sky_workdir' },
        { kind: 'link', dir: bucket, dest: '~/ckpt' },
      ],
    });

    expect(result.exitCode).toBe(0);
    expect(readFileSync(join(dir, 'version'), 'utf8')).toBe('one\n');
    expect(readFileSync(join(dir, 'pwd'), 'utf8').trim()).toBe(join(home, 'sky_workdir'));
    expect(readFileSync(join(bucket, 'step'), 'utf8')).toBe('3\n');
  });

  it('takes a hostile path literally: no field of a mount is ever run as code', async () => {
    const store = join(dir, 'store');
    const sha = await stored(store, { 'x.txt': 'x\n' }, 'file');
    const hostile = '~/$(touch pwned)`touch pwned2`;touch pwned3 \'"';

    const result = await runAgent({ spec: spec(), nodeRank: 0, sourcesUrl: store, mounts: [{ kind: 'upload', entry: 'file', sha256: sha, dest: hostile }] });

    expect(result.exitCode).toBe(0);
    expect(readFileSync(join(dir, hostile.slice(2)), 'utf8')).toBe('x\n');
    for (const name of ['pwned', 'pwned2', 'pwned3']) {
      expect(existsSync(join(dir, name))).toBe(false);
      expect(existsSync(join(dir, 'agent', name))).toBe(false);
    }
  });

  it('refuses at render a mount field bash could not read back: a tab, a line break, or a lone -', () => {
    const render = (mount: AgentMount) => () => renderAgentScript({ apiUrl, jobId: JOB_ID, attempt: 1, secretSource: { path: SECRET_PATH, region: 'us-east-1', endpoint: apiUrl }, spec: spec(), heartbeatSeconds: 1, mounts: [mount] });
    expect(render({ kind: 'link', dir: '/a', dest: '~/x\ty' })).toThrow(PrecheckError);
    expect(render({ kind: 'link', dir: '/a\nb', dest: '~/x' })).toThrow(PrecheckError);
    expect(render({ kind: 's3-copy', bucket: 'b', key: '-', dest: '~/x' })).toThrow(PrecheckError);
  });
});
