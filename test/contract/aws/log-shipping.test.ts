// The agent's shipper (lib/agent/agent.sh, section 5) against a second implementation of
// CloudWatch Logs: moto_server with its authentication on, which recomputes every SigV4
// signature the agent writes by hand and checks the session's role allows the call. The
// shipped agent runs as cloud-init starts it (test/support/agent-harness.ts); its log
// credentials are a real session of the stack's access role, issued by StsLogAccess with
// the node's session policy. Faults come from a small proxy in front of moto. Each test
// reads back what reached the stream (GetLogEvents) and compares it with the node's log.

import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { CloudWatchLogsClient, CreateLogGroupCommand, DescribeLogStreamsCommand, GetLogEventsCommand } from '@aws-sdk/client-cloudwatch-logs';
import { CreateAccessKeyCommand, CreateRoleCommand, CreateUserCommand, IAMClient, PutRolePolicyCommand, PutUserPolicyCommand } from '@aws-sdk/client-iam';
import { STSClient } from '@aws-sdk/client-sts';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LOG_SHIPPING_ACTIONS, StsLogAccess } from '../../../lib/adapters/sts-data-access.ts';
import type { JobLogShipping } from '../../../lib/agent/script.ts';
import type { JobRecord } from '../../../lib/model.ts';
import { jobLogGroupName, jobLogStreamName, type ShippedPhase } from '../../../lib/job-log-names.ts';
import type { JobLogsConfig } from '../../../lib/workflow/resources.ts';
import { api, dir, JOB_ID, runAgent, spec, startAgent, useAgentWorld } from '../../support/agent-harness.ts';
import { waitFor } from '../../support/fixtures/wait.ts';
import { MOTO_ACCOUNT, startMoto, type Moto } from './moto.ts';

const REGION = 'us-east-1';
const LOGS: JobLogsConfig = { group: jobLogGroupName('ship'), region: REGION, account: MOTO_ACCOUNT };
/** The harness's attempt. */
const ATTEMPT = 3;
const SETUP_KEY = { accessKeyId: 'AKIASETUPSETUPSETUP0', secretAccessKey: 'setup' };

let moto: Moto;
let proxy: FaultProxy;
let admin: { accessKeyId: string; secretAccessKey: string };
let reader: CloudWatchLogsClient;
let access: StsLogAccess;

/**
 * In front of moto: passes every request through unless `fault` says otherwise for a
 * CloudWatch Logs call (its X-Amz-Target's operation): an answer of its own, or `drop`
 * (the connection closed unanswered, as an unreachable endpoint looks to curl).
 */
class FaultProxy {
  fault: (operation: string) => 'pass' | 'drop' | { status: number; type: string } = () => 'pass';
  /** Each call's operation and what it got (pass, drop or the status given). */
  readonly calls: { operation: string; got: string }[] = [];
  private server: Server | undefined;
  url = '';

  constructor(private readonly target: string) {}

  async start(): Promise<void> {
    this.server = createServer((incoming, outgoing) => void this.handle(incoming, outgoing));
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }

  count(operation: string, got?: string): number {
    return this.calls.filter((call) => call.operation === operation && (got === undefined || call.got === got)).length;
  }

  private async handle(incoming: IncomingMessage, outgoing: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of incoming) chunks.push(chunk as Buffer);
    const operation = String(incoming.headers['x-amz-target'] ?? '').replace(/^Logs_20140328\./, '');
    const fault = this.fault(operation);
    this.calls.push({ operation, got: typeof fault === 'string' ? fault : String(fault.status) });
    if (fault === 'drop') {
      incoming.socket.destroy();
      return;
    }
    if (fault !== 'pass') {
      outgoing.writeHead(fault.status, { 'content-type': 'application/x-amz-json-1.1' }).end(JSON.stringify({ __type: fault.type, message: 'injected by the test' }));
      return;
    }
    const url = new URL(this.target);
    const forwarded = httpRequest({ host: url.hostname, port: url.port, path: incoming.url, method: incoming.method, headers: incoming.headers }, (answer) => {
      outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(outgoing);
    });
    forwarded.on('error', () => outgoing.destroy());
    forwarded.end(Buffer.concat(chunks));
  }
}

useAgentWorld();

beforeAll(async () => {
  // Three requests go unchecked: the administrator who makes the rest, its key and its policy.
  moto = await startMoto({ env: { INITIAL_NO_AUTH_ACTION_COUNT: '3' } });
  const setup = new IAMClient({ region: REGION, endpoint: moto.endpoint, credentials: SETUP_KEY });
  await setup.send(new CreateUserCommand({ UserName: 'admin' }));
  const key = await setup.send(new CreateAccessKeyCommand({ UserName: 'admin' }));
  admin = { accessKeyId: key.AccessKey?.AccessKeyId as string, secretAccessKey: key.AccessKey?.SecretAccessKey as string };
  await setup.send(new PutUserPolicyCommand({ UserName: 'admin', PolicyName: 'all', PolicyDocument: JSON.stringify({ Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: '*', Resource: '*' }] }) }));
  const config = { region: REGION, endpoint: moto.endpoint, credentials: admin };
  const iam = new IAMClient(config);
  // moto checks the trust policy names the caller itself (an account root it does not take).
  const trust = { Version: '2012-10-17', Statement: [{ Effect: 'Allow', Principal: { AWS: `arn:aws:iam::${MOTO_ACCOUNT}:user/admin` }, Action: 'sts:AssumeRole' }] };
  await iam.send(new CreateRoleCommand({ RoleName: 'access', AssumeRolePolicyDocument: JSON.stringify(trust) }));
  // The stack's ShipJobOutput statement on its access role (infra/relaunch.ts), on every
  // resource: moto authorizes a CloudWatch Logs call against the resource `*` only, so a
  // statement naming streams would refuse everything here. Which streams a node's session
  // reaches is proven by IAM's own evaluation (log-credentials-iam.test.ts); moto checks
  // the signature and that the session's role allows the actions.
  const policy = { Version: '2012-10-17', Statement: [{ Sid: 'ShipJobOutput', Effect: 'Allow', Action: [...LOG_SHIPPING_ACTIONS], Resource: '*' }] };
  await iam.send(new PutRolePolicyCommand({ RoleName: 'access', PolicyName: 'ship', PolicyDocument: JSON.stringify(policy) }));
  reader = new CloudWatchLogsClient(config);
  await reader.send(new CreateLogGroupCommand({ logGroupName: LOGS.group }));
  access = new StsLogAccess({ sts: new STSClient(config), roleArn: `arn:aws:iam::${MOTO_ACCOUNT}:role/access`, logs: LOGS });
  proxy = new FaultProxy(moto.endpoint);
  await proxy.start();
});

afterAll(async () => {
  await proxy?.stop();
  await moto?.stop();
});

/** Each test's own job id: its streams are its own. */
let jobId: string;
let tests = 0;

beforeEach(async () => {
  tests += 1;
  jobId = `${JOB_ID}-${tests}`;
  proxy.fault = () => 'pass';
  proxy.calls.length = 0;
  api.logCredentials = { ...(await access.credentialsFor({ jobId } as JobRecord, ATTEMPT, 0)) };
});

/** The shipper's settings for a test: through the proxy, looking every 0.2 s. */
function shipping(overrides: Partial<JobLogShipping> = {}): JobLogShipping {
  return { group: LOGS.group, region: REGION, endpoint: proxy.url, intervalSeconds: 0.2, ...overrides };
}

/** Every message of a stream, in order. */
async function messages(phase: ShippedPhase): Promise<string[]> {
  const found: string[] = [];
  let token: string | undefined;
  for (;;) {
    const page = await reader.send(
      new GetLogEventsCommand({ logGroupName: LOGS.group, logStreamName: jobLogStreamName({ jobId, attempt: ATTEMPT, nodeRank: 0, phase }), startFromHead: true, nextToken: token }),
    );
    found.push(...(page.events ?? []).map((event) => event.message ?? ''));
    if (page.nextForwardToken === undefined || page.nextForwardToken === token) return found;
    token = page.nextForwardToken;
  }
}

/** What a stream holds: its messages, end to end. */
async function streamText(phase: ShippedPhase): Promise<string> {
  return (await messages(phase)).join('');
}

/** The node's log of a phase as the stream must hold it: NUL and bytes that are not UTF-8 as U+FFFD. */
function logAsShipped(phase: ShippedPhase): string {
  return new TextDecoder('utf-8').decode(readFileSync(join(dir, 'agent', `${phase}.log`))).replaceAll('\0', '\uFFFD');
}

/** What the shippers said in the agent's folder. */
function shipLog(): string {
  return readFileSync(join(dir, 'agent', 'ship.log'), 'utf8');
}

describe("the agent's shipper on moto, authentication on", () => {
  it("ships setup and run byte for byte into the node's own streams; NUL and invalid UTF-8 show as U+FFFD; a 300 KiB line is split and whole again", async () => {
    const run = [
      'echo "step 1 loss=0.5"',
      'echo',
      "printf 'tab\\there \"quoted\" back\\\\slash caf\\303\\251 \\342\\234\\223 \\033[1mbold\\033[0m\\r\\n'",
      "printf 'nul\\000byte and bad \\377\\300\\200 \\342\\202 cut\\n'",
      "head -c 307200 /dev/zero | tr '\\0' a; echo",
      "printf 'no newline at the end'",
    ].join('\n');

    const result = await runAgent({ spec: spec({ setup: 'echo setting up', run }), nodeRank: 0, logs: shipping(), jobId });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(await streamText('setup')).toBe(logAsShipped('setup'));
    const shipped = await streamText('run');
    expect(shipped).toBe(logAsShipped('run'));
    expect(shipped).toContain('nul\uFFFDbyte and bad \uFFFD\uFFFD\uFFFD \uFFFD cut\n');
    expect(shipped.endsWith('no newline at the end')).toBe(true);
    // No event over CloudWatch's 256 KiB (26 bytes of each count toward it).
    const sizes = (await messages('run')).map((message) => Buffer.byteLength(message) + 26);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(256 * 1024);
    expect(sizes.length).toBeGreaterThan(2);
    const streams = await reader.send(new DescribeLogStreamsCommand({ logGroupName: LOGS.group, logStreamNamePrefix: `${jobId}/` }));
    expect((streams.logStreams ?? []).map((stream) => stream.logStreamName).sort()).toEqual([
      `${jobId}/attempt-3/node-0/run`,
      `${jobId}/attempt-3/node-0/setup`,
    ]);
  });

  it('ships late, never loses, what CloudWatch throttled (400 ThrottlingException) or failed (5xx)', async () => {
    const answers: ({ status: number; type: string } | 'pass')[] = [
      { status: 400, type: 'ThrottlingException' },
      { status: 400, type: 'ThrottlingException' },
      { status: 503, type: 'ServiceUnavailableException' },
      { status: 500, type: 'InternalFailure' },
    ];
    proxy.fault = (operation) => (operation === 'PutLogEvents' ? (answers.shift() ?? 'pass') : 'pass');

    const result = await runAgent({ spec: spec({ run: 'for i in $(seq 1 200); do echo "step $i"; done' }), nodeRank: 0, logs: shipping(), jobId });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(await streamText('run'), shipLog()).toBe(logAsShipped('run'));
    expect(answers).toEqual([]);
    expect(shipLog()).toMatch(/throttled: ThrottlingException/);
    expect(shipLog()).toMatch(/CloudWatch Logs answered HTTP 503/);
  });

  it('ships what was printed while CloudWatch was unreachable for 30 s, once it is back', async () => {
    let outageEnds = 0;
    proxy.fault = (operation) => {
      if (operation !== 'PutLogEvents') return 'pass';
      if (outageEnds === 0) outageEnds = Date.now() + 30_000;
      return Date.now() < outageEnds ? 'drop' : 'pass';
    };
    // The job prints until the outage is over and a line more, then ends.
    const over = join(dir, 'outage-over');
    const run = `i=0; while [ ! -e '${over}' ]; do i=$((i + 1)); echo "line $i"; sleep 0.5; done; echo "after the outage"`;
    const agent = await startAgent({ spec: spec({ run }), nodeRank: 0, logs: shipping({ drainSeconds: 30 }), jobId }, undefined, 150_000);
    await waitFor('the outage to begin', () => (outageEnds > 0 ? true : undefined), 60_000);
    await waitFor('the outage to end', () => (Date.now() >= outageEnds ? true : undefined), 60_000);
    await waitFor('a call to pass after the outage', () => (proxy.count('PutLogEvents', 'pass') > 0 ? true : undefined), 60_000);
    writeMarker(over);

    expect(await agent.done).toMatchObject({ exitCode: 0, shutDown: true });
    expect(proxy.count('PutLogEvents', 'drop')).toBeGreaterThan(1);
    const shipped = await streamText('run');
    expect(shipped).toBe(logAsShipped('run'));
    // Everything printed during the outage is in it: the lines, then the last one.
    expect(shipped.endsWith('after the outage\n')).toBe(true);
    expect(shipLog()).toMatch(/CloudWatch Logs unreachable/);
  }, 180_000);

  it('skips ahead once it falls its bound behind, and says in the stream how many bytes and why', async () => {
    let throttled = true;
    proxy.fault = (operation) => (operation === 'PutLogEvents' && throttled ? { status: 400, type: 'ThrottlingException' } : 'pass');
    const refused = join(dir, 'refused');
    const skipped = join(dir, 'skipped');
    // A line CloudWatch throttles; then 300 KB, past the 100,000 bytes bound; then a line once CloudWatch is back.
    const run = [
      'echo "before the throttling"',
      `while [ ! -e '${refused}' ]; do sleep 0.1; done`,
      // Made apart and printed in one write: the shipper finds all of it at its next look.
      `for i in $(seq 1 3000); do printf 'throttled line %085d\\n' "$i"; done > '${join(dir, 'flood')}'`,
      `cat '${join(dir, 'flood')}'`,
      `while [ ! -e '${skipped}' ]; do sleep 0.1; done`,
      "echo 'after the skip'",
    ].join('\n');
    const agent = await startAgent({ spec: spec({ run }), nodeRank: 0, logs: shipping({ backlogBytes: 100_000 }), jobId });
    await waitFor("a throttled call of the run's shipper", () => (/the run log's shipping to CloudWatch Logs failed \(throttled/.test(safeShipLog()) ? true : undefined));
    writeMarker(refused);
    await waitFor('the shipper to skip', () => (/skipped to the end of the run log/.test(safeShipLog()) ? true : undefined));
    throttled = false;
    writeMarker(skipped);

    expect(await agent.done).toMatchObject({ exitCode: 0, shutDown: true });
    const log = logAsShipped('run');
    const shipped = await streamText('run');
    const note = /relaunch: (\d+) bytes of this output were not shipped to CloudWatch Logs \(throttled: ThrottlingException\)\n/.exec(shipped);
    expect(note, shipped.slice(0, 300)).not.toBeNull();
    const before = shipped.slice(0, note!.index);
    const count = Number(note![1]);
    expect(count).toBeGreaterThanOrEqual(300_000);
    // What came before the note, the bytes it counts, and what came after are the log.
    expect(log.startsWith(before)).toBe(true);
    expect(shipped.slice(note!.index + note![0].length)).toBe(log.slice(before.length + count));
    expect(shipped.endsWith('after the skip\n')).toBe(true);
  });

  it('ships 10 MB printed as fast as bash can, byte for byte', async () => {
    // 64 KiB blocks of lines of every length from 1 to 200 bytes, printed by bash's own printf.
    const run = [
      'block=""; n=0',
      'while [ "${#block}" -lt 65536 ]; do n=$((n + 1)); block+="$(printf "%0$((n % 200))d" "$n")"$\'\\n\'; done',
      'for i in $(seq 1 160); do printf "%s" "$block"; done',
    ].join('\n');

    const result = await runAgent({ spec: spec({ run }), nodeRank: 0, logs: shipping(), jobId }, undefined, 110_000);

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    const log = logAsShipped('run');
    expect(log.length).toBeGreaterThan(10_000_000);
    const shipped = await streamText('run');
    expect(shipped.length).toBe(log.length);
    expect(shipped === log).toBe(true);
  }, 120_000);

  it('ships the 1 MB still unsent at a spot preemption, and the lines of the grace period, before the node goes', async () => {
    let held = true;
    proxy.fault = (operation) => (operation === 'PutLogEvents' && held ? { status: 503, type: 'ServiceUnavailableException' } : 'pass');
    const stopping = join(dir, 'stopping');
    const run = [
      `trap 'touch "${stopping}"; echo "saving a checkpoint"; sleep 0.5; echo "checkpoint saved"; exit 0' TERM`,
      "for i in $(seq 1 10000); do printf 'before the notice %0090d\\n' \"$i\"; done",
      'while :; do sleep 0.1; done',
    ].join('\n');
    const agent = await startAgent({ spec: spec({ run }), nodeRank: 0, logs: shipping(), interruptionPollSeconds: 0.2, stopGraceSeconds: 20, jobId });
    await waitFor('1 MB printed and refused', () => (proxy.count('PutLogEvents', '503') > 0 && logSize() >= 1_000_000 ? true : undefined), 50_000);
    api.metadata['spot/instance-action'] = JSON.stringify({ action: 'terminate', time: new Date(Date.now() + 120_000).toISOString() });
    // CloudWatch comes back only once the job has its SIGTERM: all of the 1 MB goes in the drain.
    await waitFor('the job to be stopped', () => (safeExists(stopping) ? true : undefined), 50_000);
    held = false;

    expect(await agent.done).toMatchObject({ exitCode: 0, shutDown: true });
    const shipped = await streamText('run');
    expect(shipped).toBe(logAsShipped('run'));
    expect(shipped.endsWith('saving a checkpoint\ncheckpoint saved\n')).toBe(true);
    expect(Buffer.byteLength(shipped)).toBeGreaterThan(1_000_000);
    expect(api.reports.map((report) => [report.phase, report.stopped])).toEqual([
      ['setup', undefined],
      ['run', 'interruption'],
    ]);
  });
});

function writeMarker(file: string): void {
  writeFileSync(file, '');
}

function safeShipLog(): string {
  try {
    return shipLog();
  } catch {
    return '';
  }
}

function safeExists(file: string): boolean {
  return existsSync(file);
}

function logSize(): number {
  try {
    return statSync(join(dir, 'agent', 'run.log')).size;
  } catch {
    return 0;
  }
}
