// `relaunch check` as a command, against moto_server: the --json shape exactly, the human
// report, exit statuses (0 nothing fails, 1 a check fails, 2 bad input named like validate's),
// the signed API probe against a real HTTP server on 127.0.0.1, and the binary itself with
// AWS_ENDPOINT_URL pointing every client at moto. Each run is asserted read-only on what
// moto recorded.

import { createServer, type Server } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetServiceQuotaCommand, ServiceQuotasClient } from '@aws-sdk/client-service-quotas';
import { DeleteParameterCommand } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { httpApiProbe } from '../../../../cli/check-context.ts';
import { runCheck } from '../../../../cli/commands/check.ts';
import { runValidate } from '../../../../cli/commands/validate.ts';
import { ExitStatus, type Io } from '../../../../cli/exit.ts';
import { runCli } from '../../../support/cli.ts';
import { isRead, startMoto, type Moto } from '../moto.ts';
import { DUMMY_CREDENTIALS, MotoAccount, motoClients, recordOf, type Deployment } from './world.ts';

const REGION = 'us-east-1';
const ZONES = ['us-east-1a', 'us-east-1b'];

/** Captures what a command writes. */
function capture(): Io & { stdout: () => string; stderr: () => string } {
  const out: string[] = [];
  const err: string[] = [];
  return { out: (text) => out.push(text), err: (text) => err.push(text), stdout: () => out.join('\n'), stderr: () => err.join('\n') };
}

/** A stand-in for the deployed API on 127.0.0.1: `GET /v1/sources` answers `status`. */
async function fakeApi(): Promise<{ url: string; status: number; message: string; asked: string[]; close(): Promise<void> } & { server: Server }> {
  const state = { status: 200, asked: [] as string[], message: 'User is not authorized to perform: execute-api:Invoke' };
  const server = createServer((request, response) => {
    state.asked.push(`${request.method} ${request.url}`);
    const ok = request.method === 'GET' && request.url === '/v1/sources';
    response.writeHead(ok ? state.status : 404, { 'content-type': 'application/json' });
    response.end(JSON.stringify(ok && state.status === 200 ? { bucket: 'relaunch-stack-data', prefix: 'sources', region: REGION, allowedBuckets: ['team-data'] } : { message: state.message }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  return Object.assign(state, {
    server,
    url: `http://127.0.0.1:${address.port}/v1/`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}

describe('relaunch check', () => {
  let moto: Moto;
  let api: Awaited<ReturnType<typeof fakeApi>>;
  let account: MotoAccount;
  let net: Deployment;
  let folder: string;

  beforeAll(async () => {
    moto = await startMoto();
    api = await fakeApi();
    folder = await mkdtemp(join(tmpdir(), 'relaunch-check-'));
  });
  afterAll(async () => {
    await moto?.stop();
    await api?.close();
    await rm(folder, { recursive: true, force: true });
  });
  beforeEach(async () => {
    await moto.reset();
    api.status = 200;
    api.message = 'User is not authorized to perform: execute-api:Invoke';
    api.asked.length = 0;
    account = new MotoAccount(moto.endpoint, REGION);
    net = await account.network(ZONES, 'nat');
    await account.bootstrap(28);
    await account.spotRole();
    await account.stack('Relaunch', recordOf(net, { apiUrl: api.url }));
    await account.bucket('team-data');
  });

  /** Quotas of 64 vCPUs everywhere (moto has none of EC2's). */
  function quotas(): ServiceQuotasClient {
    const client = new ServiceQuotasClient({ region: REGION, credentials: DUMMY_CREDENTIALS });
    mockClient(client).on(GetServiceQuotaCommand).resolves({ Quota: { Value: 64 } });
    return client;
  }

  /** Runs the command in process, as `relaunch check ...args` would, and asserts moto received only reads. */
  async function check(file: string | undefined, options: Parameters<typeof runCheck>[1] = {}): Promise<{ status: number; stdout: string; stderr: string }> {
    const io = capture();
    const sq = quotas();
    await moto.record();
    const status = await runCheck(file, { region: REGION, ...options }, io, { clients: (home) => motoClients(moto.endpoint, home, { serviceQuotas: () => sq }), api: httpApiProbe, folder });
    expect((await moto.recorded()).filter((call) => !isRead(call))).toEqual([]);
    return { status, stdout: io.stdout(), stderr: io.stderr() };
  }

  async function taskFile(name: string, yaml: string): Promise<string> {
    const path = join(folder, name);
    await writeFile(path, yaml);
    return path;
  }

  it('prints {ok, checks, verdict} with --json, exactly, and exits 0 when nothing fails', async () => {
    const file = await taskFile('ok.yaml', `resources:\n  accelerators: A10G:1\n  cpus: 4\n  use_spot: true\n  image_id: ${net.imageId}\nfile_mounts:\n  /data: s3://team-data/sets\nrun: echo\n`);
    const { status, stdout } = await check(file, { json: true });
    const report = JSON.parse(stdout) as Record<string, unknown> & { checks: Record<string, unknown>[]; verdict: Record<string, unknown> & { candidates: Record<string, unknown>[] } };
    expect(status).toBe(ExitStatus.OK);
    expect(Object.keys(report)).toEqual(['ok', 'checks', 'verdict']);
    expect(report.ok).toBe(true);
    for (const entry of report.checks) {
      expect(Object.keys(entry).filter((key) => !['id', 'status', 'message', 'fix'].includes(key))).toEqual([]);
      expect(['ok', 'warn', 'fail']).toContain(entry.status);
      expect(typeof entry.message).toBe('string');
    }
    expect(report.checks.map((entry) => entry.status)).not.toContain('fail');
    expect(report.checks.find((entry) => entry.id === 'api')).toEqual({ id: 'api', status: 'ok', message: `the stack's API ${api.url} answers` });
    expect(api.asked).toEqual(['GET /v1/sources']);
    expect(report.verdict).toEqual({
      launchable: true,
      candidates: [{ instanceType: 'g5.xlarge', market: 'spot', vcpus: 4, nodes: 1, launchable: true, places: [{ region: REGION, zones: ZONES }], reasons: [] }],
    });
  });

  it('prints a line per check, the fix under each failure, the verdict, and exits 1 when a check fails', async () => {
    await account.ssm.send(new DeleteParameterCommand({ Name: '/cdk-bootstrap/hnb659fds/version' }));
    const file = await taskFile('quota.yaml', `num_nodes: 2\nresources:\n  instance_type: g5.xlarge\n  image_id: ${net.imageId}\nrun: echo\n`);
    const { status, stdout } = await check(file);
    expect(status).toBe(ExitStatus.JOB_FAILED);
    const lines = stdout.split('\n');
    expect(lines[0]).toBe(`relaunch check: ${REGION}, stack Relaunch`);
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}ok {4}credentials +arn:aws:\w+::123456789012:\S+ in account 123456789012$/));
    const failure = lines.findIndex((line) => /^ {2}fail {2}bootstrap:us-east-1 /.test(line));
    expect(lines[failure + 1]).toMatch(/^ +fix: npx cdk bootstrap aws:\/\/123456789012\/us-east-1$/);
    expect(stdout).toContain(`${file}: would launch now`);
    expect(stdout).toContain(`  yes   g5.xlarge on-demand x2: ${REGION} (us-east-1a, us-east-1b)`);
    expect(lines.at(-1)).toMatch(/^1 check failed/);
  });

  it('warns when the API refuses the caller, and fails when nothing answers', async () => {
    api.status = 403;
    const refused = JSON.parse((await check(undefined, { json: true })).stdout) as { checks: { id: string; status: string; fix?: string }[] };
    expect(refused.checks.find((entry) => entry.id === 'api')).toMatchObject({ status: 'warn', fix: expect.stringContaining('execute-api:Invoke') });
    const closed = await check(undefined, { json: true, api: 'http://127.0.0.1:9/v1/' });
    const report = JSON.parse(closed.stdout) as { checks: { id: string; status: string; message: string }[] };
    // The URL named is not the stack's: said first, before the probe.
    expect(report.checks.find((entry) => entry.id === 'api')).toMatchObject({ status: 'warn', message: expect.stringContaining("is not stack Relaunch's API") });
    await account.deleteStack('Relaunch');
    const down = JSON.parse((await check(undefined, { json: true, api: 'http://127.0.0.1:9/v1/' })).stdout) as { checks: { id: string; status: string; message: string }[] };
    expect(down.checks.find((entry) => entry.id === 'api')).toMatchObject({ status: 'fail', message: expect.stringContaining('does not answer') });
  });

  it("shows an API's hostile answer with its control characters made visible, and cut short", async () => {
    api.status = 500;
    api.message = `\u001b[2J\u001b]0;owned\u0007${'x'.repeat(500)}`;
    const { status, stdout } = await check(undefined);
    expect(status).toBe(ExitStatus.JOB_FAILED);
    expect([...stdout].filter((char) => char !== '\n' && char.charCodeAt(0) < 0x20)).toEqual([]);
    const line = stdout.split('\n').find((text) => text.includes('answered 500')) ?? '';
    expect(line).toContain('?[2J?]0;owned?');
    expect(line).toContain(`${'x'.repeat(185)}…)`);
    expect(line).not.toContain('x'.repeat(201));
  });

  it('fails the credentials check, saying the network, when STS cannot be reached', async () => {
    const io = capture();
    const status = await runCheck(undefined, { region: REGION, json: true }, io, { clients: (home) => motoClients('http://127.0.0.1:9', home), api: httpApiProbe, folder });
    const report = JSON.parse(io.stdout()) as { ok: boolean; checks: { id: string; status: string; message: string; fix?: string }[] };
    expect(status).toBe(ExitStatus.JOB_FAILED);
    // STS out of reach, the account is not read: cdk.json (none here) and the offline line only.
    expect(report.checks.map((entry) => entry.id)).toEqual(['region', 'credentials', 'settings', 'offline']);
    expect(report.checks[1]).toMatchObject({ status: 'fail', message: expect.stringMatching(/^AWS STS could not be reached: .*ECONNREFUSED/), fix: expect.stringContaining('check the network') });
  });

  it('refuses a bad task file with the errors validate gives, and exit status 2', async () => {
    const file = await taskFile('bad.yaml', 'resources:\n  cloud: gcp\n  job_recovery:\n    max_restarts_on_errors: -1\nrun: echo\n');
    const checked = await check(file);
    const validated = capture();
    const validateStatus = await runValidate(file, {}, validated);
    expect(checked.status).toBe(ExitStatus.USAGE);
    expect(validateStatus).toBe(ExitStatus.USAGE);
    expect(checked.stderr).toBe(validated.stderr());
    expect(checked.stderr).toContain('resources.cloud');
    const asJson = await check(file, { json: true });
    const validatedJson = capture();
    await runValidate(file, { json: true }, validatedJson);
    expect(JSON.parse(asJson.stdout)).toEqual(JSON.parse(validatedJson.stdout()));
  });

  it.each([
    ['--api', { api: 'ftp://example.com' }, 'error: --api: expected an http(s) URL, got "ftp://example.com"'],
    ['--region', { region: 'mars-1' }, 'error: --region: expected a region like us-east-1, got "mars-1"'],
    ['--stack', { stack: '1; drop' }, 'error: --stack: expected a CloudFormation stack name'],
  ])('refuses a bad %s, naming it, with exit status 2', async (_flag, options, message) => {
    const { status, stderr, stdout } = await check(undefined, options);
    expect(status).toBe(ExitStatus.USAGE);
    expect(stderr).toContain(message);
    expect(stdout).toBe('');
  });

  it('runs as the relaunch binary with no credentials at all, and says so', async () => {
    const cwd = await mkdtemp(join(folder, 'bare-'));
    const env: NodeJS.ProcessEnv = {
      AWS_ENDPOINT_URL: moto.endpoint,
      AWS_REGION: REGION,
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_CONFIG_FILE: join(cwd, 'no-config'),
      AWS_SHARED_CREDENTIALS_FILE: join(cwd, 'no-credentials'),
    };
    for (const name of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE', 'AWS_WEB_IDENTITY_TOKEN_FILE', 'AWS_CONTAINER_CREDENTIALS_FULL_URI', 'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI']) {
      if (process.env[name] !== undefined) env[name] = '';
    }
    const finished = await runCli(['check'], { cwd, env });
    expect(finished.code).toBe(1);
    expect(finished.stdout).toMatch(/^ {2}fail {2}credentials +no AWS credentials found: /m);
  });

  it('runs as the relaunch binary, every client pointed at moto by AWS_ENDPOINT_URL, with cdk.json before the first deploy', async () => {
    await account.deleteStack('Relaunch');
    const cwd = await mkdtemp(join(folder, 'checkout-'));
    await writeFile(join(cwd, 'cdk.json'), JSON.stringify({ app: 'x', context: { 'relaunch:vpcId': net.vpcId, 'relaunch:subnets': net.subnetsByZone, 'relaunch:dataBuckets': ['team-data'] } }));
    await writeFile(join(cwd, 'task.yaml'), `resources:\n  instance_type: m6i.large\n  image_id: ${net.imageId}\nfile_mounts:\n  /out:\n    name: team-data\n    mode: MOUNT\nrun: echo\n`);
    await moto.record();
    const finished = await runCli(['check', 'task.yaml', '--json'], {
      cwd,
      env: {
        AWS_ENDPOINT_URL: moto.endpoint,
        AWS_ACCESS_KEY_ID: DUMMY_CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: DUMMY_CREDENTIALS.secretAccessKey,
        AWS_REGION: REGION,
        AWS_EC2_METADATA_DISABLED: 'true',
        AWS_CONFIG_FILE: join(cwd, 'no-config'),
        AWS_SHARED_CREDENTIALS_FILE: join(cwd, 'no-credentials'),
        AWS_PROFILE: '',
      },
    });
    const calls = await moto.recorded();
    expect(calls.filter((call) => !isRead(call))).toEqual([]);
    expect(new Set(calls.map((call) => call.service))).toEqual(new Set(['sts', 'cloudformation', 'ssm', 'iam', 'ec2', 'servicequotas', 's3']));
    const report = JSON.parse(finished.stdout) as { ok: boolean; checks: { id: string; status: string; message: string }[] };
    const status = (id: string) => report.checks.find((entry) => entry.id === id)?.status;
    expect(status('region')).toBe('ok');
    expect(status('stack')).toBe('warn');
    expect(report.checks.find((entry) => entry.id === 'settings')?.message).toBe('read from cdk.json (no deployed stack yet)');
    expect(status('subnet:us-east-1a')).toBe('ok');
    expect(status('bucket:team-data')).toBe('ok');
    // moto's Service Quotas has no EC2 quotas: not checked, a warning, and the verdict unknown.
    expect(status(`quota:${REGION}:standard:spot`)).toBe('warn');
    expect(status('launch')).toBe('warn');
    expect(report.checks.filter((entry) => entry.status === 'fail')).toEqual([]);
    expect(finished.code).toBe(0);
  });
});
