// The agent's test world: the real agent script, rendered for a local HTTP server standing
// in for the API, the instance metadata service and SSM (the local runtime's SSM, which
// checks the agent's SigV4 signature and that the parameter is tagged for this instance),
// and run as cloud-init runs user data: started by a parent that shares its process group
// and session, so whatever the agent lets reach that group reaches the parent too.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterEach, beforeEach } from 'vitest';
import { ReportBodySchema, type ReportBody } from '../../lib/agent/protocol.ts';
import { renderAgentScript, AGENT_LIBRARY, type AgentScriptParams } from '../../lib/agent/script.ts';
import { agentSecretName } from '../../lib/agent/secret-parameter.ts';
import type { Resources, TaskSpec } from '../../lib/task-file/types.ts';
import { credentialsDocument, LocalSecretParameters, newNodeCredentials } from '../../local/secret-parameters.ts';
import { verifySigV4 } from '../../local/sigv4.ts';
import { taskSpec } from './fixtures/specs.ts';
import { waitFor } from './fixtures/wait.ts';
import { firstInvalidUtf8Byte } from '../../lib/http/utf8.ts';

export const SECRET = '5ec2e7'.repeat(10) + 'abcd';
export const JOB_ID = 'job-7f3a';
export const INSTANCE_ID = 'i-0a9b8c7d6e5f40312';
export const INSTANCE_ARN = `arn:aws:ec2:us-east-1:123456789012:instance/${INSTANCE_ID}`;
export const SECRET_PATH = '/relaunch/agent-secrets';
export const ROLE = 'relaunch-instance-role';

export interface Received {
  /** When it arrived (ms since the epoch). */
  readonly at: number;
  readonly method: string;
  readonly path: string;
  readonly authorization: string | undefined;
  readonly body: string;
}

/** A stand-in API (and IMDS): records every request and answers per test. */
export class FakeApi {
  readonly requests: Received[] = [];
  /** Statuses for the next report POSTs, in order (0: drop the connection); 200 once used up. */
  reportStatuses: number[] = [];
  /** The status of every report POST once reportStatuses is used up. */
  reportStatusAfter = 200;
  /** Statuses for the next heartbeat POSTs, in order (0: drop the connection); 204 once used up. */
  heartbeatStatuses: number[] = [];
  /** The status of every heartbeat POST once heartbeatStatuses is used up. */
  heartbeatStatusAfter = 204;
  /** How long a heartbeat's answer takes (ms). */
  heartbeatDelayMs = 0;
  /** Told the number of heartbeats received so far, as each arrives. */
  onHeartbeat: ((count: number) => void) | undefined;
  /** The body a 200 to a setup report carries (the API's word on what the node does next); `{}` when unset. */
  setupAnswer: Record<string, unknown> | undefined;
  /** Answers to the next hold POSTs, in order (a number: that status, no body); `holdAnswerAfter` once used up. */
  holdAnswers: (Record<string, unknown> | number)[] = [];
  /** The answer to every hold POST once holdAnswers is used up. */
  holdAnswerAfter: Record<string, unknown> | number = { run: 'hold', reason: 'the test holds it' };
  /** Answers to the next `next` POSTs, in order (a number: that status, no body); `nextAnswerAfter` once used up. */
  nextAnswers: (Record<string, unknown> | number)[] = [];
  /** The answer to every `next` POST once nextAnswers is used up. */
  nextAnswerAfter: Record<string, unknown> | number = { next: 'stop', reason: 'the test stops it' };
  /** Told of each `next` POST (how many so far) before it is answered, with the answer it gets. */
  onNext: ((count: number, answer: Record<string, unknown> | number) => void) | undefined;
  /** Statuses for the next data-credentials POSTs, in order (0: drop the connection); 200 once used up. */
  dataCredentialStatuses: number[] = [];
  /** Data-credentials POSTs answered 200 so far: the Nth gets AccessKeyId `AKIADATA<N>`, and file `data-issued-<N>` appears in `markerDir`. */
  dataCredentialsIssued = 0;
  /** Where the data-credentials markers go (the test's folder). */
  markerDir = '';
  /** For this long (ms) after the first credentials, every ask is answered 503: an API outage. */
  dataCredentialOutageMs = 0;
  /** The next this many 200 answers are cut off halfway, as a time limit would cut them. */
  dataCredentialCutOffs = 0;
  /** What a log-credentials POST is answered (200 with it); unset, 404, as an API that ships nothing. */
  logCredentials: Record<string, unknown> | undefined;
  /** The status the agent's library is answered with (`POST .../shipper`): 200 serves it. */
  libraryStatus = 200;
  /** The status each data-credentials POST got, in order (0: dropped). */
  readonly dataCredentialAnswers: number[] = [];
  /** Told of every data-credentials answer so far, as each is given. */
  onDataCredentialAnswer: ((answers: readonly number[]) => void) | undefined;
  private outageEndsAt = 0;
  /**
   * IMDS metadata paths (after `/latest/meta-data/`) and their values, besides the
   * instance id and role credentials every instance has; absent is 404.
   */
  metadata: Record<string, string> = {};
  /** SSM's parameters; the attempt's secret is there for this instance unless a test says otherwise. */
  readonly parameters = new LocalSecretParameters();
  /** The instance role's credentials, served by IMDS and checked by SSM. */
  readonly credentials = newNodeCredentials();
  /** Statuses for the next signed ECR GetAuthorizationToken calls, in order; 200 once used up. */
  ecrStatuses: number[] = [];
  /** The status each signed ECR call got, in order. */
  readonly ecrAnswers: number[] = [];
  /** Whether SSM's answers write every slash as \/, as a JSON encoder may. */
  ssmEscapesSlashes = false;
  /** Every SSM request: its body and headers. */
  readonly ssmRequests: { readonly body: string; readonly headers: IncomingMessage['headers'] }[] = [];
  /** How many IMDSv2 session tokens were asked for. */
  imdsTokenRequests = 0;
  /** Every metadata path read with a valid token (after `/latest/meta-data/`), in order. */
  readonly metadataReads: string[] = [];
  private readonly imdsToken = 'imds-token-1';
  private server: Server | undefined;

  async start(): Promise<string> {
    this.server = createServer((request, response) => void this.handle(request, response));
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }

  /** Every report's body as parsed, but for a setup's `setupMs` (a time the machine's load sets): read it from `setupTimes`. */
  get reports(): ReportBody[] {
    return this.parsedReports().map(({ setupMs: _measured, ...report }) => report);
  }

  /** Each report's `setupMs`, in order (undefined where a report has none). */
  get setupTimes(): (number | undefined)[] {
    return this.parsedReports().map((report) => report.setupMs);
  }

  private parsedReports(): ReportBody[] {
    return this.requests.filter((r) => r.path.endsWith('/report')).map((r) => ReportBodySchema.parse(JSON.parse(r.body)));
  }

  get heartbeats(): Received[] {
    return this.requests.filter((r) => r.path.endsWith('/heartbeat'));
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const path = request.url ?? '';
    if (path.startsWith('/latest/')) return this.imds(request, path, response);
    if (path === '/ssm/') return this.ssm(request, Buffer.concat(chunks).toString('utf8'), response);
    if (path === '/ecr/') return this.ecr(request, Buffer.concat(chunks).toString('utf8'), response);
    // As the API does (local/server.ts): a body that is not UTF-8 is refused, for good.
    if (firstInvalidUtf8Byte(Buffer.concat(chunks)) >= 0) {
      response.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"body: invalid UTF-8"}');
      return;
    }
    this.requests.push({
      at: Date.now(),
      method: request.method ?? '',
      path,
      authorization: request.headers.authorization,
      body: Buffer.concat(chunks).toString('utf8'),
    });
    if (path.endsWith('/heartbeat')) this.onHeartbeat?.(this.heartbeats.length);
    if (path.endsWith('/data-credentials')) return this.dataCredentials(request, response);
    if (path.endsWith('/shipper')) {
      if (this.libraryStatus !== 200) response.writeHead(this.libraryStatus).end();
      else response.writeHead(200, { 'content-type': 'text/x-shellscript' }).end(AGENT_LIBRARY.program);
      return;
    }
    if (path.endsWith('/log-credentials')) {
      if (this.logCredentials === undefined) response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"no log group"}');
      else response.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(this.logCredentials));
      return;
    }
    if (path.endsWith('/next')) {
      const answer = this.nextAnswers.shift() ?? this.nextAnswerAfter;
      this.onNext?.(this.nexts.length, answer);
      if (typeof answer === 'number') response.writeHead(answer).end();
      else response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
      return;
    }
    if (path.endsWith('/hold')) {
      const answer = this.holdAnswers.shift() ?? this.holdAnswerAfter;
      if (typeof answer === 'number') response.writeHead(answer).end();
      else response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
      return;
    }
    const status = path.endsWith('/report')
      ? (this.reportStatuses.shift() ?? this.reportStatusAfter)
      : (this.heartbeatStatuses.shift() ?? this.heartbeatStatusAfter);
    if (status === 0) {
      request.socket.destroy();
      return;
    }
    if (path.endsWith('/heartbeat') && this.heartbeatDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.heartbeatDelayMs));
    const setup = path.endsWith('/report') && status === 200 && this.setupAnswer !== undefined && (JSON.parse(this.requests.at(-1)?.body ?? '{}') as { phase?: string }).phase === 'setup';
    response.writeHead(status, { 'content-type': 'application/json' }).end(status === 204 ? undefined : setup ? JSON.stringify(this.setupAnswer) : '{}');
  }

  get nexts(): Received[] {
    return this.requests.filter((r) => r.path.endsWith('/next'));
  }

  get holds(): Received[] {
    return this.requests.filter((r) => r.path.endsWith('/hold'));
  }

  get dataCredentialRequests(): Received[] {
    return this.requests.filter((r) => r.path.endsWith('/data-credentials'));
  }

  private dataCredentials(request: IncomingMessage, response: ServerResponse): void {
    const status = Date.now() < this.outageEndsAt ? 503 : (this.dataCredentialStatuses.shift() ?? 200);
    this.dataCredentialAnswers.push(status);
    this.onDataCredentialAnswer?.(this.dataCredentialAnswers);
    if (status === 0) {
      request.socket.destroy();
      return;
    }
    if (status !== 200) {
      response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: `refused with ${status}` }));
      return;
    }
    if (this.dataCredentialCutOffs > 0) {
      this.dataCredentialCutOffs -= 1;
      const whole = JSON.stringify({ Version: 1, AccessKeyId: 'AKIACUT', SecretAccessKey: 'cut', SessionToken: 'cut', Expiration: new Date().toISOString() });
      response.writeHead(200, { 'content-type': 'application/json' }).end(whole.slice(0, whole.indexOf('"Expiration"')));
      return;
    }
    this.dataCredentialsIssued += 1;
    const n = this.dataCredentialsIssued;
    if (n === 1) this.outageEndsAt = Date.now() + this.dataCredentialOutageMs;
    const body = { Version: 1, AccessKeyId: `AKIADATA${n}`, SecretAccessKey: `data-secret-${n}`, SessionToken: `data-token-${n}`, Expiration: new Date(Date.now() + 3_600_000).toISOString() };
    response.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body));
    if (this.markerDir !== '') writeFileSync(join(this.markerDir, `data-issued-${n}`), '');
  }

  /** IMDSv2: a PUT for a token, then GETs that carry it. */
  private imds(request: IncomingMessage, path: string, response: ServerResponse): void {
    if (path === '/latest/api/token' && request.method === 'PUT') {
      this.imdsTokenRequests += 1;
      response.writeHead(200).end(this.imdsToken);
      return;
    }
    if (request.headers['x-aws-ec2-metadata-token'] !== this.imdsToken) {
      response.writeHead(401).end();
      return;
    }
    const metadata: Record<string, string> = {
      'instance-id': INSTANCE_ID,
      'iam/security-credentials/': ROLE,
      [`iam/security-credentials/${ROLE}`]: credentialsDocument(this.credentials, new Date(Date.now() + 3_600_000)),
      ...this.metadata,
    };
    this.metadataReads.push(path.replace('/latest/meta-data/', ''));
    const value = metadata[path.replace('/latest/meta-data/', '')];
    if (value === undefined) response.writeHead(404).end();
    else response.writeHead(200).end(value);
  }

  /** ECR's GetAuthorizationToken, signed with the instance role as ECR checks it. */
  private ecr(request: IncomingMessage, body: string, response: ServerResponse): void {
    const headers = Object.fromEntries(Object.entries(request.headers).map(([key, value]) => [key, Array.isArray(value) ? value.join(', ') : value]));
    const verified = verifySigV4({ method: request.method ?? '', path: request.url ?? '', headers, body }, 'ecr', () => this.credentials, new Date());
    if ('refused' in verified || headers['x-amz-target'] !== 'AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken' || verified.region !== 'us-west-2') {
      response.writeHead(403).end(JSON.stringify({ __type: 'AccessDeniedException' }));
      return;
    }
    const status = this.ecrStatuses.shift() ?? 200;
    this.ecrAnswers.push(status);
    if (status !== 200) {
      response.writeHead(status).end(JSON.stringify({ __type: status === 403 ? 'AccessDeniedException' : 'ServerException' }));
      return;
    }
    const token = Buffer.from('AWS:ecr-password').toString('base64');
    response.writeHead(200).end(JSON.stringify({ authorizationData: [{ authorizationToken: token, proxyEndpoint: 'https://x', expiresAt: 1 }] }));
  }

  private ssm(request: IncomingMessage, body: string, response: ServerResponse): void {
    this.ssmRequests.push({ body, headers: request.headers });
    const headers = Object.fromEntries(Object.entries(request.headers).map(([key, value]) => [key, Array.isArray(value) ? value.join(', ') : value]));
    const answer = this.parameters.answer(
      { method: request.method ?? '', path: request.url ?? '', headers, body },
      { instanceArn: INSTANCE_ARN, credentials: this.credentials },
      new Date(),
    );
    response.writeHead(answer.statusCode, answer.headers).end(this.ssmEscapesSlashes ? answer.body.replaceAll('/', '\\/') : answer.body);
  }
}

/** The fixture task with phases bash can run here: each echoes what it is. */
export function spec(overrides: Partial<TaskSpec> = {}, resources: Partial<Resources> = {}): TaskSpec {
  return { ...taskSpec({ name: 'agent-test', setup: 'echo setting up', run: 'echo running', resources }), ...overrides };
}

/** A run script that saves the environment it saw (NUL-separated) and its directory. */
export const DUMP_ENV = 'env -0 > "$DUMP_DIR/env"; pwd > "$DUMP_DIR/pwd"';

/** This test's folder, stand-in API and its URL: set before each test by `useAgentWorld`. */
export let dir: string;
export let api: FakeApi;
export let apiUrl: string;

/**
 * Registers the hooks that give each test a fresh folder and stand-in API (with this
 * instance's secret in SSM), and remove them after it with every process its agent left.
 */
export function useAgentWorld(): void {
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relaunch-agent-'));
    api = new FakeApi();
    api.markerDir = dir;
    apiUrl = await api.start();
    api.parameters.put(agentSecretName(SECRET_PATH, INSTANCE_ID), SECRET, INSTANCE_ARN);
  });

  afterEach(async () => {
    killTestProcesses(dir);
    await api.stop();
    rmSync(dir, { recursive: true, force: true });
  });
}

/**
 * How long an agent may run before its group is killed: a safety net for a hang, not a wait.
 * A run takes 1-3 s on a quiet machine and was seen past 15 s on a busy one (CI, with the
 * whole suite beside it), so it sits below the 60 s test timeout, leaving the test time
 * to say what the agent wrote.
 */
export const AGENT_DEADLINE_MS = 50_000;

/** This machine's PATH, the one a node's agent is given unless a test takes commands away. */
export const MACHINE_PATH = process.env.PATH ?? '';

/**
 * A PATH of one folder that holds every command of MACHINE_PATH but `names`: a machine image
 * without them.
 */
export function pathWithout(...names: string[]): string {
  const bin = join(dir, 'bin-without');
  mkdirSync(bin);
  const seen = new Set(names);
  for (const folder of MACHINE_PATH.split(delimiter)) {
    let entries: string[];
    try {
      entries = readdirSync(folder);
    } catch {
      continue;
    }
    for (const entry of entries) {
      if (seen.has(entry)) continue;
      seen.add(entry);
      symlinkSync(join(folder, entry), join(bin, entry));
    }
  }
  return bin;
}

/** How one run of the agent ended. */
export interface AgentRun {
  /** The agent's exit status as its parent saw it; null when the parent did not see it end. */
  readonly exitCode: number | null;
  readonly stderr: string;
  readonly shutDown: boolean;
  /**
   * Whether the agent's parent, standing in for cloud-init, outlived it: false when
   * something the agent started signalled the process group the agent was started in.
   */
  readonly parentSurvived: boolean;
}

/** An agent started by `startAgent`, while it runs. */
export interface StartedAgent {
  /** The agent's own process (its parent's child, in its parent's group); 0 when it ended before it was seen. */
  readonly pid: number;
  /** The parent's process: cloud-init's stand-in, leader of the group the agent runs in. */
  readonly parentPid: number;
  /** Resolves when the parent has ended and the agent's output is read. */
  readonly done: Promise<AgentRun>;
  /** What the agent wrote to stderr so far. */
  stderr(): string;
}

/**
 * cloud-init's part: runs the user data as a child in the foreground, in its own process
 * group and session (no setsid), and writes how it ended. A signal sent to the group kills
 * this parent before it can write that.
 */
const CLOUD_INIT_STAND_IN = 'bash "$1"; printf "%s\\n" "$?" >"$2/agent.exit"';

/**
 * Renders the script for this test's API and starts it as cloud-init would. A test that
 * gives the rank gets node IPs too, unless it says otherwise. The parent leads a process
 * group of its own, so a run that outlives `deadlineMs` is killed with that group, and
 * whatever left it is killed after the test (`useAgentWorld`): a hang fails the test
 * instead of leaking a process. A `launcher` (a command and its arguments, which end by
 * exec'ing the arguments after them) starts the cloud-init stand-in, in a mount namespace or
 * cgroup of the test's (test/support/cgroup2.ts); it keeps the stand-in's pid.
 */
export async function startAgent(
  params: Partial<AgentScriptParams> & Pick<AgentScriptParams, 'spec'>,
  pathEnv?: string,
  deadlineMs = AGENT_DEADLINE_MS,
  launcher: readonly string[] = [],
): Promise<StartedAgent> {
  const nodeIps = params.nodeRank === undefined ? undefined : Array.from({ length: params.spec.numNodes }, (_, rank) => `10.0.0.${rank + 1}`);
  const script = renderAgentScript({
    nodeIps,
    apiUrl: `${apiUrl}/`,
    jobId: JOB_ID,
    attempt: 3,
    secretSource: { path: SECRET_PATH, region: 'us-east-1', endpoint: `${apiUrl}/ssm` },
    heartbeatSeconds: 1,
    rootDir: join(dir, 'agent'),
    imdsUrl: apiUrl,
    reportBackoff: { initialMs: 10, maxMs: 40 },
    shutdownCommand: `touch '${join(dir, 'shut-down')}'`,
    ...params,
  });
  const file = join(dir, 'agent.sh');
  writeFileSync(file, script);
  const [command = 'bash', ...args] = [...launcher, 'bash', '-c', CLOUD_INIT_STAND_IN, 'cloud-init', file, dir];
  const parent = spawn(command, args, {
    cwd: dir,
    env: { PATH: pathEnv ?? MACHINE_PATH, HOME: dir, DUMP_DIR: dir },
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  const killGroup = () => {
    try {
      process.kill(-(parent.pid ?? 0), 'SIGKILL');
    } catch {
      // The group is gone already.
    }
  };
  let stderr = '';
  parent.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const deadline = setTimeout(() => {
    // What the agent said is all there is to tell a hang from a slow machine: it goes with the failure.
    console.error(`the agent outlived its ${deadlineMs} ms and was killed; what it wrote on stderr:\n${stderr}`);
    killGroup();
  }, deadlineMs);
  const done = new Promise<AgentRun>((resolve) => {
    parent.on('close', () => {
      clearTimeout(deadline);
      const exit = join(dir, 'agent.exit');
      const exitCode = existsSync(exit) ? Number(readFileSync(exit, 'utf8').trim()) : null;
      resolve({ exitCode, stderr, shutDown: existsSync(join(dir, 'shut-down')), parentSurvived: parent.exitCode === 0 && exitCode !== null });
    });
  });
  const parentPid = parent.pid ?? 0;
  let parentEnded = false;
  parent.once('exit', () => (parentEnded = true));
  // The parent's child that runs `bash <script>` is the agent (0: it has ended already, and
  // its parent with it); a launcher's own children (a mount) come before it.
  const pid = await waitFor('the agent to start', () => {
    if (parentEnded) return 0;
    try {
      const children = readFileSync(`/proc/${parentPid}/task/${parentPid}/children`, 'utf8').trim().split(' ').filter((child) => child !== '');
      return children.map(Number).find((child) => readFileSync(`/proc/${child}/cmdline`, 'utf8') === `bash\0${file}\0`);
    } catch {
      return undefined;
    }
  });
  return { pid, parentPid, done, stderr: () => stderr };
}

/** Starts the agent as `startAgent` does and waits until its parent has ended. */
export async function runAgent(
  params: Partial<AgentScriptParams> & Pick<AgentScriptParams, 'spec'>,
  pathEnv?: string,
  deadlineMs = AGENT_DEADLINE_MS,
  launcher: readonly string[] = [],
): Promise<AgentRun> {
  return (await startAgent(params, pathEnv, deadlineMs, launcher)).done;
}

/** Every live process a test's agent left (its environment names the test's folder), killed. */
function killTestProcesses(folder: string): void {
  for (const pid of processesWithEnv(`DUMP_DIR=${folder}`)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // It ended meanwhile.
    }
  }
}

/** The live processes (zombies left out) whose environment holds `variable` (NAME=value). */
export function processesWithEnv(variable: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/stat`, 'utf8').replace(/^.*\) /, '').charAt(0) === 'Z') continue;
      if (readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0').includes(variable)) found.push(Number(entry));
    } catch {
      // Gone while we looked.
    }
  }
  return found;
}
/** The live processes still running this test's agent script (a zombie is dead and left out). */
export function agentProcesses(): string[] {
  const script = join(dir, 'agent.sh');
  const found: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      const command = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      const state = readFileSync(`/proc/${entry}/stat`, 'utf8').replace(/^.*\) /, '').charAt(0);
      if (command.includes(script) && state !== 'Z') found.push(`${entry}: ${command}`);
    } catch {
      // Gone while we looked.
    }
  }
  return found;
}

/** The environment the run script saved. */
export function jobEnv(): Record<string, string> {
  const entries = readFileSync(join(dir, 'env'), 'utf8').split('\0').filter((entry) => entry !== '');
  return Object.fromEntries(entries.map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]));
}

/**
 * A stand-in for the docker CLI on PATH: it records every call (one line of arguments) in
 * `docker.log`, holds no image (`image inspect` fails, so the agent pulls, as a fresh
 * instance's daemon does) unless `docker-images` in the test's folder names it, fails to
 * pull `registry.example/missing:1`, and runs `docker exec`'s command on this machine with
 * only the variables `-e` names (and IN_CONTAINER=yes), as a container would see them: HOME
 * is the image user's (/root) unless `-e HOME` passes the node's, as a real daemon does
 * (test/system/faults/containers.test.ts runs the same path on one).
 */
export function dockerStandIn(): string {
  const bin = join(dir, 'docker-bin');
  mkdirSync(bin);
  writeFileSync(
    join(bin, 'docker'),
    `#!/bin/bash
printf '%s\\n' "$*" >> "$DUMP_DIR/docker.log"
case "$1" in
  info) echo '{"nvidia":{},"runc":{}}' ;;
  image) [ "$2" = inspect ] && grep -qxF "$3" "$DUMP_DIR/docker-images" 2>/dev/null ;;
  pull) if [ "$2" = registry.example/missing:1 ]; then echo "manifest unknown: $2" >&2; exit 1; fi; echo "pulled $2" ;;
  login) cat > "$DUMP_DIR/docker-login-password" ;;
  run)
    # As a real daemon does with an image that has no bash: the container is made (its id
    # printed), then cannot start.
    for arg in "$@"; do if [ "$arg" = registry.example/no-bash:1 ]; then
      echo 4f1c2a9e8d7b6c5a4f1c2a9e8d7b6c5a4f1c2a9e8d7b6c5a4f1c2a9e8d7b6c5a
      echo 'docker: Error response from daemon: failed to create shim task: OCI runtime create failed: exec: "bash": executable file not found in $PATH: unknown.' >&2
      exit 127
    fi; done
    # As a daemon on a host whose root may not raise the locked-memory limit does (a test
    # says so with the file no-memlock): the container is made, then cannot start.
    if [ -e "$DUMP_DIR/no-memlock" ]; then for arg in "$@"; do if [ "$arg" = memlock=-1 ]; then
      echo 'docker: Error response from daemon: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error setting rlimits for ready process: error setting rlimit type 8: operation not permitted: unknown.' >&2
      exit 126
    fi; done; fi
    # As docker does: two mounts at one destination are refused.
    dests=$(for arg in "$@"; do case $prev in -v) dest=\${arg#*:}; printf '%s\\n' "\${dest%%:*}" ;; esac; prev=$arg; done | sort | uniq -d | head -n 1)
    if [ -n "$dests" ]; then echo "docker: Error response from daemon: Duplicate mount point: $dests" >&2; exit 125; fi ;;
  exec)
    shift; workdir=''; keep=()
    while [ "$#" -gt 0 ]; do
      case "$1" in
        -i) shift ;;
        -w) workdir=$2; shift 2 ;;
        -e) keep+=("$2=$(printenv "$2")"); shift 2 ;;
        *) break ;;
      esac
    done
    shift
    cd "$workdir" && exec env -i PATH="$PATH" HOME=/root DUMP_DIR="$DUMP_DIR" IN_CONTAINER=yes "\${keep[@]}" "$@" ;;
esac
`,
    { mode: 0o755 },
  );
  return [bin, MACHINE_PATH].join(delimiter);
}

export const dockerCalls = () => readFileSync(join(dir, 'docker.log'), 'utf8').trimEnd().split('\n');
