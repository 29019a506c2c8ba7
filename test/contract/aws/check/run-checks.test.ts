// relaunch check's use case against an account in moto_server: one account set up to pass
// every check, then, one piece at a time, the account that fails each; with a task, the
// verdict on its candidates. Every test asserts moto received nothing but reads. Service
// Quotas is mocked (moto has none of EC2's quotas); the API is a probe that records what
// it was asked (the CLI's HTTP probe is tested with the command).

import { GetAWSDefaultServiceQuotaCommand, GetServiceQuotaCommand, NoSuchResourceException, ServiceQuotasClient } from '@aws-sdk/client-service-quotas';
import { DeleteParameterCommand } from '@aws-sdk/client-ssm';
import { CreateAccessKeyCommand, CreateUserCommand, DeleteRoleCommand, IAMClient, PutUserPolicyCommand } from '@aws-sdk/client-iam';
import { CreateVpcEndpointCommand, DeleteRouteCommand } from '@aws-sdk/client-ec2';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AwsAccountReader } from '../../../../lib/check/aws-account-reader.ts';
import { RELAUNCH_VERSION, settingsOfRecord, type DeploymentRecord } from '../../../../lib/check/deployment.ts';
import type { ApiAnswer, ApiProbe } from '../../../../lib/check/account-reader-port.ts';
import type { CheckReport, CheckResult } from '../../../../lib/check/report.ts';
import { runChecks, type CheckInput, type LocalSettings } from '../../../../lib/check/run-checks.ts';
import { parseJobFile } from '../../../../lib/task-file/parse.ts';
import { isRead, startMoto, type Moto } from '../moto.ts';
import { DUMMY_CREDENTIALS, MotoAccount, motoClients, recordOf, type Credentials, type Deployment } from './world.ts';

const REGION = 'us-east-1';
const ZONES = ['us-east-1a', 'us-east-1b'];
const ACCOUNT = '123456789012';

/** Service Quotas as a mock answering `limits` by code (64 for any other). */
function quotasOf(limits: Record<string, number> = {}): { client: ServiceQuotasClient; asked: () => string[] } {
  const client = new ServiceQuotasClient({ region: REGION, credentials: DUMMY_CREDENTIALS });
  const mock = mockClient(client);
  mock.on(GetServiceQuotaCommand).callsFake((input: { QuotaCode: string }) => ({ Quota: { QuotaCode: input.QuotaCode, Value: limits[input.QuotaCode] ?? 64 } }));
  return { client, asked: () => mock.calls().map((call) => (call.args[0] as { constructor: { name: string } }).constructor.name) };
}

/** An API that answers `answer` and remembers the URLs it was asked. */
function apiAnswering(answer: ApiAnswer): ApiProbe & { urls: string[] } {
  const urls: string[] = [];
  return { urls, sources: async (url) => (urls.push(url), answer) };
}

function byId(report: CheckReport, id: string): CheckResult {
  const found = report.checks.find((check) => check.id === id);
  if (found === undefined) throw new Error(`no check ${id} in ${report.checks.map((check) => check.id).join(', ')}`);
  return found;
}

function taskOf(yaml: string): CheckInput['task'] {
  return { specs: parseJobFile(yaml).tasks.map((task) => task.spec), pipeline: false };
}

describe('runChecks on moto', () => {
  let moto: Moto;
  let account: MotoAccount;
  let net: Deployment;

  beforeAll(async () => {
    moto = await startMoto();
  });
  afterAll(async () => {
    await moto?.stop();
  });

  /** The account that passes: network through NAT, bootstrapped, spot's role, the stack at this version, a data bucket. */
  async function goodAccount(): Promise<void> {
    await moto.reset();
    account = new MotoAccount(moto.endpoint, REGION);
    net = await account.network(ZONES, 'nat');
    await account.bootstrap(28);
    await account.spotRole();
    await account.stack('Relaunch', recordOf(net));
    await account.bucket('team-data');
  }

  interface Run {
    readonly input?: Partial<CheckInput>;
    readonly limits?: Record<string, number>;
    readonly api?: ApiAnswer;
    readonly credentials?: Credentials;
  }

  /** Runs check as the CLI would, recording what moto receives; asserts it was only reads. */
  async function check(run: Run = {}): Promise<CheckReport & { apiUrls: string[]; quotaCalls: string[] }> {
    const quotas = quotasOf(run.limits);
    const api = apiAnswering(run.api ?? { status: 200, body: { bucket: 'relaunch-stack-data', prefix: 'sources', region: REGION, allowedBuckets: [] } });
    const reader = new AwsAccountReader(motoClients(moto.endpoint, REGION, { serviceQuotas: () => quotas.client, ...(run.credentials === undefined ? {} : { credentials: run.credentials }) }));
    const input: CheckInput = { region: REGION, regionSource: 'AWS_REGION', stackName: 'Relaunch', apiUrl: null, local: { kind: 'absent', source: 'cdk.json' }, task: null, ...run.input };
    await moto.record();
    const report = await runChecks(input, { reader, api });
    const writes = (await moto.recorded()).filter((call) => !isRead(call));
    expect(writes).toEqual([]);
    expect(quotas.asked().every((name) => /^Get/.test(name))).toBe(true);
    return { ...report, apiUrls: api.urls, quotaCalls: quotas.asked() };
  }

  describe('an account ready for relaunch', () => {
    beforeAll(goodAccount);

    it('passes every check, in order, and asks the API the stack records', async () => {
      const report = await check();
      expect(report.checks.filter((result) => result.status !== 'ok')).toEqual([]);
      expect(report.ok).toBe(true);
      expect(report.checks.map((result) => result.id)).toEqual([
        'region',
        'credentials',
        'stack',
        'version',
        'settings',
        `bootstrap:${REGION}`,
        'api',
        'spot-role',
        `quota:${REGION}:g-vt:on-demand`,
        `quota:${REGION}:g-vt:spot`,
        `quota:${REGION}:p:on-demand`,
        `quota:${REGION}:p:spot`,
        `quota:${REGION}:standard:on-demand`,
        `quota:${REGION}:standard:spot`,
        'vpc',
        'subnet:us-east-1a',
        'subnet:us-east-1b',
      ]);
      expect(byId(report, 'credentials').message).toContain(`in account ${ACCOUNT}`);
      expect(byId(report, 'version').message).toBe(`stack Relaunch and this CLI are both relaunch ${RELAUNCH_VERSION}`);
      expect(byId(report, 'subnet:us-east-1a').message).toContain(`reaches the API and CloudWatch Logs through 0.0.0.0/0 via ${net.natGatewayId}`);
      expect(report.apiUrls).toEqual([recordOf(net).apiUrl]);
      expect(report.verdict).toBeUndefined();
    });

    it('judges a task: its candidates launch where offered, within the quota, with an image that resolves', async () => {
      const report = await check({
        input: {
          task: taskOf(`
name: train
num_nodes: 2
resources:
  accelerators: A10G:1
  cpus: 4
  use_spot: true
  image_id: ${net.imageId}
file_mounts:
  /data: s3://team-data/sets
run: python train.py
`),
        },
        limits: { 'L-3819A6DF': 8 },
      });
      expect(byId(report, 'launch')).toMatchObject({ status: 'ok', message: 'would launch now: g5.xlarge spot in us-east-1 (us-east-1a, us-east-1b)' });
      expect(byId(report, 'bucket:team-data')).toMatchObject({ status: 'ok' });
      expect(report.verdict).toEqual({
        launchable: true,
        candidates: [
          { instanceType: 'g5.xlarge', market: 'spot', vcpus: 4, nodes: 2, launchable: true, places: [{ region: REGION, zones: ZONES }], reasons: [] },
        ],
      });
    });

    it('says when a task would not launch: quota too small for its nodes, a type not offered, no default image here', async () => {
      const report = await check({
        input: {
          task: taskOf(`
num_nodes: 4
resources:
  any_of:
    - instance_type: g5.xlarge
      use_spot: true
    - instance_type: p4de.24xlarge
      use_spot: true
      zone: us-east-1a
    - instance_type: m6i.large
run: echo
`),
        },
        limits: { 'L-3819A6DF': 8 },
      });
      const verdicts = Object.fromEntries((report.verdict?.candidates ?? []).map((candidate) => [candidate.instanceType, candidate]));
      expect(verdicts['g5.xlarge']?.reasons).toContain(`${REGION}: needs 16 G and VT spot vCPUs (4 x 4), 8 free (quota L-3819A6DF: 8, 0 in use)`);
      // moto's offerings are EC2's: p4de.24xlarge is offered in us-east-1b and 1c, not 1a.
      expect(verdicts['p4de.24xlarge']?.reasons[0]).toBe(`${REGION}: p4de.24xlarge is not offered in us-east-1a`);
      // moto holds no Canonical parameters: the default image of a CPU type cannot resolve.
      expect(verdicts['m6i.large']?.reasons.join('\n')).toContain('the default x86_64 image: the public parameter /aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id is not in us-east-1');
      expect(report.verdict?.launchable).toBe(false);
      expect(byId(report, 'launch')).toMatchObject({ status: 'fail', fix: expect.stringContaining('--quota-code L-3819A6DF --desired-value 16') });
      expect(report.ok).toBe(false);
    });

    it('counts the instances already running against the quota', async () => {
      await account.run('g5.xlarge', 1, 'spot', net.subnetsByZone['us-east-1a'] as string, net.imageId);
      const report = await check({ input: { task: taskOf(`resources:\n  instance_type: g5.xlarge\n  use_spot: true\n  image_id: ${net.imageId}\nrun: echo\n`) }, limits: { 'L-3819A6DF': 4 } });
      expect(byId(report, `quota:${REGION}:g-vt:spot`)).toMatchObject({ status: 'warn', message: expect.stringContaining('4 allowed, 4 in use') });
      expect(report.verdict?.candidates[0]?.reasons).toEqual([`${REGION}: needs 4 G and VT spot vCPUs (1 x 4), 0 free (quota L-3819A6DF: 4, 4 in use)`]);
    });

    it('judges each task of a pipeline apart, and launches it only when every task can', async () => {
      const yaml = `name: two-steps\n---\nname: prep\nresources:\n  instance_type: m6i.large\n  image_id: ${net.imageId}\nrun: echo\n---\nname: train\nresources:\n  instance_type: g5.xlarge\n  use_spot: true\n  image_id: ${net.imageId}\nrun: echo\n`;
      const job = parseJobFile(yaml);
      expect(job.pipeline).not.toBeNull();
      const report = await check({ input: { task: { specs: job.tasks.map((task) => task.spec), pipeline: true } }, limits: { 'L-3819A6DF': 0 } });
      expect(byId(report, 'launch:task-1').status).toBe('ok');
      expect(byId(report, 'launch:task-2').status).toBe('fail');
      expect(report.verdict?.candidates.map((candidate) => [candidate.task, candidate.instanceType, candidate.launchable])).toEqual([
        [0, 'm6i.large', true],
        [1, 'g5.xlarge', false],
      ]);
      expect(report.verdict?.launchable).toBe(false);
    });

    it("refuses a bucket the deployment does not allow, and one that does not exist", async () => {
      const report = await check({
        input: {
          task: taskOf(`
resources:
  instance_type: g5.xlarge
  image_id: ${net.imageId}
file_mounts:
  /a: s3://other-team/data
  /b: s3://ckpt-missing/x
  /c:
    name: ckpt-new
    mode: MOUNT
run: echo
`),
        },
      });
      expect(byId(report, 'bucket:other-team')).toMatchObject({ status: 'fail', fix: 'npx cdk deploy -c relaunch:dataBuckets=team-data,ckpt-*,other-team' });
      expect(byId(report, 'bucket:ckpt-missing')).toMatchObject({ status: 'fail', message: expect.stringContaining('no bucket ckpt-missing') });
      expect(byId(report, 'bucket:ckpt-new')).toMatchObject({ status: 'ok', message: expect.stringContaining('relaunch run creates it') });
      expect(report.verdict?.launchable).toBe(false);
    });

    it('warns when the API named is not the stack\'s, and fails when it does not answer', async () => {
      const other = await check({ input: { apiUrl: { url: 'https://zzz.execute-api.us-east-1.amazonaws.com/v1', source: '--api' } } });
      expect(byId(other, 'api')).toMatchObject({ status: 'warn', fix: `export RELAUNCH_API_URL=${recordOf(net).apiUrl}` });
      const down = await check({ api: { status: 0, body: null, failure: 'connect ECONNREFUSED' } });
      expect(byId(down, 'api')).toMatchObject({ status: 'fail', message: expect.stringContaining('does not answer: connect ECONNREFUSED') });
      const refused = await check({ api: { status: 403, body: { message: 'User is not authorized to perform: execute-api:Invoke' } } });
      expect(byId(refused, 'api')).toMatchObject({ status: 'warn', fix: expect.stringContaining('execute-api:Invoke') });
    });
  });

  describe('an account missing one thing', () => {
    beforeEach(goodAccount);

    it('fails an unbootstrapped region with the bootstrap command', async () => {
      await account.ssm.send(new DeleteParameterCommand({ Name: '/cdk-bootstrap/hnb659fds/version' }));
      const report = await check();
      expect(byId(report, `bootstrap:${REGION}`)).toEqual({ id: `bootstrap:${REGION}`, status: 'fail', message: `${REGION} is not bootstrapped for the CDK: cdk deploy would fail`, fix: `npx cdk bootstrap aws://${ACCOUNT}/${REGION}` });
      expect(report.ok).toBe(false);
    });

    it('fails a bootstrap older than the CDK deploys into', async () => {
      await account.bootstrap(5);
      expect(byId(await check(), `bootstrap:${REGION}`)).toMatchObject({ status: 'fail', message: `${REGION} is bootstrapped at version 5; deploying needs 6 or later` });
    });

    it("fails without spot's service-linked role, with the command that creates it", async () => {
      await account.iam.send(new DeleteRoleCommand({ RoleName: 'AWSServiceRoleForEC2Spot' }));
      expect(byId(await check(), 'spot-role')).toMatchObject({ status: 'fail', fix: 'aws iam create-service-linked-role --aws-service-name spot.amazonaws.com' });
    });

    it.each([
      ['older than the CLI', { version: '0.0.1' }, 'fail', 'npx cdk deploy, from this checkout'],
      ['newer than the CLI', { version: '999.0.0' }, 'warn', 'update this checkout (git pull && npm ci)'],
    ])('tells a stack %s', async (_name, change, status, fix) => {
      await account.deleteStack('Relaunch');
      await account.stack('Relaunch', recordOf(net, change as Partial<DeploymentRecord>));
      expect(byId(await check(), 'version')).toMatchObject({ status, fix });
    });

    it('fails a stack deployed before relaunch recorded its version', async () => {
      await account.deleteStack('Relaunch');
      await account.stack('Relaunch', null, { RelaunchApiUrl0A1B2C3D: 'https://x/v1/' });
      const report = await check({ input: { local: { kind: 'settings', source: 'cdk.json', settings: settingsOfRecord(recordOf(net), REGION), placeholder: false } } });
      expect(byId(report, 'version')).toMatchObject({ status: 'fail', message: expect.stringContaining('records no version') });
      // Settings then come from cdk.json, and the subnets are still checked.
      expect(byId(report, 'settings').message).toBe('read from cdk.json (no deployed stack yet)');
      expect(byId(report, 'subnet:us-east-1a').status).toBe('ok');
    });

    it("checks each failover region: its bootstrap, its EC2 event forwarder, its quotas and subnets", async () => {
      const away = new MotoAccount(moto.endpoint, 'us-west-2');
      const awayNet = await away.network(['us-west-2a'], 'nat');
      await away.bootstrap(28);
      await account.deleteStack('Relaunch');
      await account.stack('Relaunch', recordOf(net, { otherRegions: [{ region: 'us-west-2', subnetsByZone: awayNet.subnetsByZone }] }));
      const before = await check();
      expect(byId(before, 'bootstrap:us-west-2').status).toBe('ok');
      expect(byId(before, 'forwarder:us-west-2')).toMatchObject({ status: 'warn', fix: 'npx cdk deploy --all (with the same -c settings)' });
      expect(byId(before, 'subnet:us-west-2a').status).toBe('ok');
      expect(byId(before, 'quota:us-west-2:g-vt:spot').status).toBe('ok');
      await away.stack('Relaunch-events-us-west-2', null);
      expect(byId(await check(), 'forwarder:us-west-2')).toMatchObject({ status: 'ok', message: 'stack Relaunch-events-us-west-2 is CREATE_COMPLETE in us-west-2' });
    });

    it('fails a subnet with no route out, naming its route table', async () => {
      await account.ec2.send(new DeleteRouteCommand({ RouteTableId: net.routeTables['us-east-1b'], DestinationCidrBlock: '0.0.0.0/0' }));
      const report = await check();
      expect(byId(report, 'subnet:us-east-1a').status).toBe('ok');
      expect(byId(report, 'subnet:us-east-1b')).toMatchObject({ status: 'fail', fix: expect.stringContaining(`--route-table-id ${net.routeTables['us-east-1b']}`) });
    });

    it("fails every subnet routed through a NAT gateway whose own subnet has no internet gateway route, with a fix in that subnet's table", async () => {
      await account.ec2.send(new DeleteRouteCommand({ RouteTableId: net.natRouteTableId, DestinationCidrBlock: '0.0.0.0/0' }));
      const report = await check();
      for (const zone of ZONES) {
        expect(byId(report, `subnet:${zone}`)).toMatchObject({
          status: 'fail',
          message: expect.stringContaining(`but that NAT gateway's subnet ${net.natSubnetId} has no route to an internet gateway (${net.natRouteTableId}: no 0.0.0.0/0): instances reach neither relaunch's API nor CloudWatch Logs`),
          fix: expect.stringContaining(`create-route --region ${REGION} --route-table-id ${net.natRouteTableId} --destination-cidr-block 0.0.0.0/0 --gateway-id igw-`),
        });
      }
    });

    it('fails a subnet routed through a private NAT gateway, which never reaches the internet', async () => {
      const privateNet = await account.network(['us-east-1a'], 'nat', { natConnectivity: 'private' });
      await account.deleteStack('Relaunch');
      await account.stack('Relaunch', recordOf(privateNet));
      expect(byId(await check(), 'subnet:us-east-1a')).toMatchObject({
        status: 'fail',
        message: expect.stringContaining(`${privateNet.natGatewayId} is a private NAT gateway, which reaches other networks, never the internet`),
        fix: expect.stringContaining('to a public NAT gateway'),
      });
    });

    it('says a subnet with no way out still reaches CloudWatch Logs through a logs interface endpoint, but not the API', async () => {
      await account.ec2.send(new DeleteRouteCommand({ RouteTableId: net.routeTables['us-east-1b'], DestinationCidrBlock: '0.0.0.0/0' }));
      const before = byId(await check(), 'subnet:us-east-1b');
      expect(before).toMatchObject({ status: 'fail', message: expect.stringContaining(`instances reach neither relaunch's API nor CloudWatch Logs (no NAT gateway or internet gateway on the way out, no com.amazonaws.${REGION}.logs endpoint in ${net.vpcId})`) });
      const endpoint = await account.ec2.send(
        new CreateVpcEndpointCommand({ VpcId: net.vpcId, ServiceName: `com.amazonaws.${REGION}.logs`, VpcEndpointType: 'Interface', SubnetIds: [net.subnetsByZone['us-east-1b'] as string], PrivateDnsEnabled: true }),
      );
      const after = byId(await check(), 'subnet:us-east-1b');
      expect(after).toMatchObject({ status: 'fail', message: expect.stringContaining(`instances cannot reach relaunch's API (CloudWatch Logs only, through ${endpoint.VpcEndpoint?.VpcEndpointId})`) });
    });

    it('fails every subnet of a VPC whose execute-api endpoint has private DNS on', async () => {
      await account.ec2.send(
        new CreateVpcEndpointCommand({ VpcId: net.vpcId, ServiceName: `com.amazonaws.${REGION}.execute-api`, VpcEndpointType: 'Interface', SubnetIds: [net.subnetsByZone['us-east-1a'] as string], PrivateDnsEnabled: true }),
      );
      const report = await check();
      for (const zone of ZONES) expect(byId(report, `subnet:${zone}`)).toMatchObject({ status: 'fail', message: expect.stringContaining('reaches private APIs only') });
    });

    it("fails a VPC that no longer exists, with a fix that does not point at it", async () => {
      const gone = 'vpc-0123456789abcdef0';
      await account.deleteStack('Relaunch');
      await account.stack('Relaunch', recordOf(net, { vpcId: gone, subnetsByZone: { 'us-east-1a': 'subnet-0123456789abcdef0' } }));
      const report = await check();
      expect(byId(report, 'vpc')).toMatchObject({ status: 'fail', message: `the stack's VPC ${gone} no longer exists in ${REGION}: instances have nowhere to launch` });
      for (const result of [byId(report, 'vpc'), byId(report, 'subnet:us-east-1a')]) expect(result.fix).not.toContain(gone);
      expect(byId(report, 'subnet:us-east-1a')).toMatchObject({ status: 'fail', message: 'subnet-0123456789abcdef0 (us-east-1a): no such subnet in us-east-1' });
    });

    it('fails a region that does not exist, and stops there instead of blaming the network', async () => {
      const report = await check({ input: { region: 'us-east-9' } });
      expect(report.checks).toEqual([
        {
          id: 'region',
          status: 'fail',
          message: 'us-east-9 (from AWS_REGION): no AWS region of that name (us-east: us-east-1, us-east-2)',
          fix: "name a region that exists (aws ec2 describe-regions --all-regions --query 'Regions[].RegionName') with --region or AWS_REGION",
        },
      ]);
    });

    it('fails a configured subnet that does not exist', async () => {
      await account.deleteStack('Relaunch');
      await account.stack('Relaunch', recordOf(net, { subnetsByZone: { ...net.subnetsByZone, 'us-east-1c': 'subnet-0123456789abcdef0' } }));
      expect(byId(await check(), 'subnet:us-east-1c')).toMatchObject({ status: 'fail', message: 'subnet-0123456789abcdef0 (us-east-1c): no such subnet in us-east-1' });
    });

    it('fails a zero GPU quota for allowed GPU types, and only warns for the catalog', async () => {
      const limits = { 'L-3819A6DF': 0, 'L-DB2E81BA': 0 };
      expect(byId(await check({ limits }), `quota:${REGION}:g-vt:spot`)).toMatchObject({ status: 'warn' });
      await account.deleteStack('Relaunch');
      await account.stack('Relaunch', recordOf(net, { allowedInstanceTypes: ['g5.xlarge', 'g5.12xlarge', 'm6i.large'] }));
      const report = await check({ limits });
      expect(byId(report, `quota:${REGION}:g-vt:spot`)).toMatchObject({
        status: 'fail',
        message: `G and VT spot vCPUs in ${REGION} (L-3819A6DF, for g5): 0 allowed, 0 in use: no spot instance of these families can launch`,
        fix: `aws service-quotas request-service-quota-increase --region ${REGION} --service-code ec2 --quota-code L-3819A6DF --desired-value 48`,
      });
      expect(byId(report, `quota:${REGION}:standard:spot`).status).toBe('ok');
      expect(report.checks.some((result) => result.id.includes(':p:'))).toBe(false);
    });

    it("falls back to AWS's default quota when none was applied", async () => {
      const client = new ServiceQuotasClient({ region: REGION, credentials: DUMMY_CREDENTIALS });
      const mock = mockClient(client);
      mock.on(GetServiceQuotaCommand).rejects(new NoSuchResourceException({ message: 'none applied', $metadata: {} }));
      mock.on(GetAWSDefaultServiceQuotaCommand).resolves({ Quota: { Value: 0 } });
      const report = await runChecks(
        { region: REGION, regionSource: 'AWS_REGION', stackName: 'Relaunch', apiUrl: null, local: { kind: 'absent', source: 'cdk.json' }, task: null },
        { reader: new AwsAccountReader(motoClients(moto.endpoint, REGION, { serviceQuotas: () => client })), api: apiAnswering({ status: 200, body: {} }) },
      );
      expect(byId(report, `quota:${REGION}:p:spot`).message).toContain('0 allowed');
    });
  });

  describe('before the first deploy', () => {
    beforeEach(async () => {
      await moto.reset();
      account = new MotoAccount(moto.endpoint, REGION);
      net = await account.network(ZONES, 'igw');
      await account.bootstrap(28);
      await account.spotRole();
    });
    const local = (placeholder = false): LocalSettings => ({ kind: 'settings', source: 'cdk.json', settings: settingsOfRecord(recordOf(net), REGION), placeholder });

    it('warns that the stack is not deployed yet, and checks the account with cdk.json', async () => {
      const report = await check({ input: { local: local() } });
      expect(byId(report, 'stack')).toEqual({ id: 'stack', status: 'warn', message: `stack Relaunch is not deployed in ${REGION} yet`, fix: 'npx cdk deploy (with your -c relaunch:... settings), from the relaunch checkout' });
      expect(byId(report, 'settings').status).toBe('ok');
      expect(report.checks.some((result) => result.id === 'version' || result.id === 'api')).toBe(false);
      // An internet gateway, and the subnets give no public IP: instances could not reach the API.
      expect(byId(report, 'subnet:us-east-1a')).toMatchObject({ status: 'fail', message: expect.stringContaining('gives instances no public IP') });
      expect(report.apiUrls).toEqual([]);
    });

    it("fails cdk.json's example ids and skips the subnets they name", async () => {
      const report = await check({ input: { local: local(true) } });
      expect(byId(report, 'settings')).toMatchObject({ status: 'fail', message: 'cdk.json still holds the example ids: a deploy would fail' });
      expect(report.checks.some((result) => result.id.startsWith('subnet:'))).toBe(false);
    });

    it('fails subnets of another region than the one the stack would deploy to', async () => {
      const report = await check({ input: { local: local(), region: 'eu-west-1', regionSource: 'AWS_REGION' } });
      expect(byId(report, 'settings')).toMatchObject({ status: 'fail', fix: `deploy and check with the region of the subnets: AWS_REGION=${REGION} (or --region ${REGION})` });
    });

    it('says so when there are neither a stack nor cdk.json, and still checks quotas', async () => {
      const report = await check();
      expect(byId(report, 'settings').status).toBe('warn');
      expect(report.checks.some((result) => result.id.startsWith('quota:'))).toBe(true);
    });
  });

  describe('with credentials allowed almost nothing (moto enforcing IAM)', () => {
    let strict: Moto;
    let narrow: Credentials;

    beforeAll(async () => {
      strict = await startMoto({ env: { INITIAL_NO_AUTH_ACTION_COUNT: '3' } });
      const iam = new IAMClient({ region: REGION, endpoint: strict.endpoint, credentials: DUMMY_CREDENTIALS });
      await iam.send(new CreateUserCommand({ UserName: 'reader' }));
      await iam.send(new PutUserPolicyCommand({ UserName: 'reader', PolicyName: 'only', PolicyDocument: JSON.stringify({ Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: ['ec2:DescribeInstances'], Resource: '*' }] }) }));
      const key = await iam.send(new CreateAccessKeyCommand({ UserName: 'reader' }));
      narrow = { accessKeyId: key.AccessKey?.AccessKeyId as string, secretAccessKey: key.AccessKey?.SecretAccessKey as string };
    });
    afterAll(async () => {
      await strict?.stop();
    });

    it('warns, naming each permission it lacked, and never fails for them', async () => {
      const quotas = quotasOf();
      const reader = new AwsAccountReader(motoClients(strict.endpoint, REGION, { credentials: narrow, serviceQuotas: () => quotas.client }));
      const report = await runChecks(
        { region: REGION, regionSource: 'AWS_REGION', stackName: 'Relaunch', apiUrl: null, local: { kind: 'settings', source: 'cdk.json', settings: { namePrefix: 'relaunch', vpcId: 'vpc-1', regions: [{ region: REGION, subnetsByZone: { 'us-east-1a': 'subnet-1' } }], allowedInstanceTypes: null, dataBuckets: [], dataBucket: null }, placeholder: false }, task: null },
        { reader, api: apiAnswering({ status: 200, body: {} }) },
      );
      const caller = 'arn:aws:iam::123456789012:user/reader';
      expect(byId(report, 'stack')).toEqual({ id: 'stack', status: 'warn', message: `stack Relaunch in ${REGION}: not checked: these credentials may not call cloudformation:DescribeStacks`, fix: `allow cloudformation:DescribeStacks to ${caller} (read-only)` });
      expect(byId(report, `bootstrap:${REGION}`).fix).toBe(`allow ssm:GetParameter to ${caller} (read-only)`);
      expect(byId(report, 'spot-role').fix).toBe(`allow iam:GetRole to ${caller} (read-only)`);
      expect(byId(report, 'subnet:us-east-1a').fix).toBe(`allow ec2:DescribeSubnets to ${caller} (read-only)`);
      expect(report.checks.filter((result) => result.status === 'fail')).toEqual([]);
    });

    it('fails with credentials AWS does not know, then says only what needs no AWS', async () => {
      const reader = new AwsAccountReader(motoClients(strict.endpoint, REGION, { credentials: { accessKeyId: 'AKIANOTAKEY000000000', secretAccessKey: 'nope' } }));
      const report = await runChecks(
        { region: REGION, regionSource: '--region', stackName: 'Relaunch', apiUrl: null, local: { kind: 'absent', source: 'cdk.json' }, task: null },
        { reader, api: apiAnswering({ status: 200, body: {} }) },
      );
      expect(report.checks.map((result) => [result.id, result.status])).toEqual([
        ['region', 'ok'],
        ['credentials', 'fail'],
        ['settings', 'warn'],
        ['offline', 'warn'],
      ]);
      expect(report.ok).toBe(false);
    });
  });
});
