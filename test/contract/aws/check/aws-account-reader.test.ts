// AwsAccountReader against moto_server: what each read returns for what the account holds,
// that a refused permission (moto enforcing IAM) is a PermissionDeniedError naming the
// action, and that nothing but reads reaches moto. Service Quotas is the exception: moto
// has none of EC2's quotas, so that client is mocked (aws-sdk-client-mock), asserting what
// was sent and how each answer maps.

import { CreateAccessKeyCommand, CreateUserCommand, PutUserPolicyCommand, IAMClient } from '@aws-sdk/client-iam';
import { CreateStackCommand } from '@aws-sdk/client-cloudformation';
import { GetAWSDefaultServiceQuotaCommand, GetServiceQuotaCommand, NoSuchResourceException, ServiceQuotasClient } from '@aws-sdk/client-service-quotas';
import { HeadBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AwsAccountReader } from '../../../../lib/check/aws-account-reader.ts';
import { PermissionDeniedError } from '../../../../lib/check/account-reader-port.ts';
import { isRead, startMoto, type Moto } from '../moto.ts';
import { DUMMY_CREDENTIALS, MotoAccount, motoClients, type Deployment } from './world.ts';

const REGION = 'us-west-2';

describe('AwsAccountReader on moto', () => {
  let moto: Moto;
  let account: MotoAccount;
  let reader: AwsAccountReader;

  beforeAll(async () => {
    moto = await startMoto();
  });
  afterAll(async () => {
    await moto?.stop();
  });
  beforeEach(async () => {
    await moto.reset();
    account = new MotoAccount(moto.endpoint, REGION);
    reader = new AwsAccountReader(motoClients(moto.endpoint, REGION));
  });

  it('reads who the caller is', async () => {
    await expect(reader.identity()).resolves.toEqual({ account: '123456789012', arn: expect.stringMatching(/^arn:aws:(iam|sts)::123456789012:/) });
  });

  it('reads the bootstrap version, and null for a region never bootstrapped', async () => {
    await expect(reader.bootstrapVersion(REGION)).resolves.toBeNull();
    await account.bootstrap(28);
    await expect(reader.bootstrapVersion(REGION)).resolves.toBe(28);
  });

  it('reads a stack with its outputs, and null for one that does not exist', async () => {
    await expect(reader.stack(REGION, 'Relaunch')).resolves.toBeNull();
    await account.stack('Relaunch', null, { RelaunchApiUrl0A1B2C3D: 'https://x.example/v1/' });
    await expect(reader.stack(REGION, 'Relaunch')).resolves.toEqual({
      name: 'Relaunch',
      status: 'CREATE_COMPLETE',
      statusReason: null,
      outputs: [{ key: 'RelaunchApiUrl0A1B2C3D', value: 'https://x.example/v1/' }],
    });
  });

  it("reads whether a region exists (asked in the partition's first region), the VPCs that exist, and the NAT gateways with their subnet and kind", async () => {
    await expect(reader.regionStatus(REGION)).resolves.toEqual({ kind: 'enabled' });
    const none = await reader.regionStatus('us-east-9');
    expect(none.kind).toBe('none');
    expect(none.kind === 'none' ? none.regions : []).toEqual(expect.arrayContaining(['us-east-1', 'us-west-2']));
    const net = await account.network(['us-west-2a'], 'nat', { natConnectivity: 'private' });
    await expect(reader.vpcs(REGION, [net.vpcId, 'vpc-0123456789abcdef0'])).resolves.toEqual([net.vpcId]);
    await expect(reader.natGateways(REGION, [net.vpcId])).resolves.toEqual([
      { natGatewayId: net.natGatewayId, subnetId: net.natSubnetId, vpcId: net.vpcId, connectivity: 'private', state: 'available' },
    ]);
  });

  it('tells whether a role exists', async () => {
    await expect(reader.roleExists('AWSServiceRoleForEC2Spot')).resolves.toBe(false);
    await account.spotRole();
    await expect(reader.roleExists('AWSServiceRoleForEC2Spot')).resolves.toBe(true);
  });

  describe('with a network', () => {
    let net: Deployment;
    beforeEach(async () => {
      net = await account.network(['us-west-2a', 'us-west-2b']);
    });

    it('reads the subnets that exist and leaves out an id that does not', async () => {
      const subnets = await reader.subnets(REGION, [net.subnetsByZone['us-west-2a'] as string, 'subnet-0123456789abcdef0']);
      expect(subnets).toEqual([
        { subnetId: net.subnetsByZone['us-west-2a'], vpcId: net.vpcId, zone: 'us-west-2a', state: 'available', mapPublicIpOnLaunch: false, availableIps: expect.any(Number) },
      ]);
    });

    it('reads route tables with their associations and where each route goes', async () => {
      const tables = await reader.routeTables(REGION, [net.vpcId]);
      const own = tables.find((table) => table.routeTableId === net.routeTables['us-west-2a']);
      expect(own).toMatchObject({ vpcId: net.vpcId, main: false, subnetIds: [net.subnetsByZone['us-west-2a']] });
      expect(own?.routes).toContainEqual({ destination: '0.0.0.0/0', targetKind: 'nat-gateway', targetId: net.natGatewayId, state: 'active' });
      expect(tables.some((table) => table.main)).toBe(true);
    });

    it('reads which configured zones offer a type, by type', async () => {
      const offered = await reader.offerings(REGION, ['p4de.24xlarge', 'm6i.large', 'zz9.huge'], ['us-west-2a', 'us-west-2d']);
      expect(offered.get('m6i.large')).toEqual(expect.arrayContaining(['us-west-2a', 'us-west-2d']));
      // moto's offering data, as EC2's: p4de.24xlarge is in 2a, 2b and 2c, not 2d.
      expect(offered.get('p4de.24xlarge')).toEqual(['us-west-2a']);
      expect(offered.has('zz9.huge')).toBe(false);
    });

    it('reads every zone of the region that offers a type when no zones are named', async () => {
      const offered = await reader.offerings(REGION, ['p4de.24xlarge'], []);
      expect([...(offered.get('p4de.24xlarge') ?? [])].sort()).toEqual(['us-west-2a', 'us-west-2b', 'us-west-2c']);
    });

    it('reads an image, and null for an AMI the account cannot see', async () => {
      // moto's RegisterImage keeps no architecture (EC2's would): null is "EC2 does not say".
      await expect(reader.image(REGION, net.imageId)).resolves.toEqual({ imageId: net.imageId, state: 'available', architecture: null });
      await expect(reader.image(REGION, 'ami-0123456789abcdef0')).resolves.toBeNull();
    });

    it('counts instances in use by market, with vCPUs from the catalog or EC2', async () => {
      await account.run('g5.xlarge', 2, 'spot', net.subnetsByZone['us-west-2a'] as string, net.imageId);
      await account.run('t3.micro', 1, 'on-demand', net.subnetsByZone['us-west-2a'] as string, net.imageId);
      const used = await reader.instancesInUse(REGION);
      expect(used).toEqual(
        expect.arrayContaining([
          { instanceType: 'g5.xlarge', market: 'spot', vcpus: 4 },
          { instanceType: 't3.micro', market: 'on-demand', vcpus: 2 },
        ]),
      );
      expect(used).toHaveLength(3);
    });
  });

  it('reads the vCPUs of types EC2 knows and leaves out one it does not', async () => {
    const vcpus = await reader.vcpusOf(REGION, ['t3.micro', 'zz9.huge']);
    expect([...vcpus]).toEqual([['t3.micro', 2]]);
  });

  it('reads a parameter, and null for one that does not exist', async () => {
    await expect(reader.parameter(REGION, '/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id')).resolves.toBeNull();
    await expect(reader.parameter(REGION, '/aws/service/ami-amazon-linux-latest/amzn2-ami-hvm-x86_64-gp2')).resolves.toMatch(/^ami-/);
  });

  it('heads a bucket: reachable with its region, or missing', async () => {
    await account.bucket('team-data');
    await account.bucket('far-data', 'eu-west-1');
    await expect(reader.bucket('team-data')).resolves.toEqual({ kind: 'reachable', region: REGION });
    await expect(reader.bucket('far-data')).resolves.toEqual({ kind: 'reachable', region: 'eu-west-1' });
    await expect(reader.bucket('no-such-bucket-here')).resolves.toEqual({ kind: 'missing' });
  });

  it('sends moto nothing but reads', async () => {
    const net = await account.network(['us-west-2a']);
    await account.bucket('team-data');
    await moto.record();
    await reader.identity();
    await reader.bootstrapVersion(REGION);
    await reader.stack(REGION, 'Relaunch');
    await reader.roleExists('AWSServiceRoleForEC2Spot');
    await reader.instancesInUse(REGION);
    await reader.vcpusOf(REGION, ['t3.micro']);
    await reader.subnets(REGION, Object.values(net.subnetsByZone));
    await reader.routeTables(REGION, [net.vpcId]);
    await reader.vpcEndpoints(REGION, [net.vpcId]);
    await reader.vpcs(REGION, [net.vpcId]);
    await reader.natGateways(REGION, [net.vpcId]);
    await reader.regionStatus(REGION);
    await reader.offerings(REGION, ['m6i.large'], ['us-west-2a']);
    await reader.parameter(REGION, '/cdk-bootstrap/hnb659fds/version');
    await reader.image(REGION, net.imageId);
    await reader.bucket('team-data');
    const calls = await moto.recorded();
    expect(calls.length).toBeGreaterThanOrEqual(13);
    expect(calls.filter((call) => !isRead(call))).toEqual([]);
  });

  it('would see a write: the recording names it', async () => {
    await moto.record();
    await account.bucket('written-by-the-test');
    await account.bootstrap(30);
    const writes = (await moto.recorded()).filter((call) => !isRead(call));
    expect(writes).toEqual([
      { service: 's3', operation: 'PUT /written-by-the-test/', method: 'PUT' },
      { service: 'ssm', operation: 'PutParameter', method: 'POST' },
    ]);
  });
});

describe('AwsAccountReader on moto enforcing IAM', () => {
  let moto: Moto;
  let reader: AwsAccountReader;
  let admin: MotoAccount;

  beforeAll(async () => {
    // The first four requests go unchecked: the admin user, its key and policy are made with them.
    moto = await startMoto({ env: { INITIAL_NO_AUTH_ACTION_COUNT: '4' } });
    const iam = new IAMClient({ region: REGION, endpoint: moto.endpoint, credentials: DUMMY_CREDENTIALS });
    const keyOf = async (user: string, actions: string[]) => {
      await iam.send(new CreateUserCommand({ UserName: user }));
      await iam.send(new PutUserPolicyCommand({ UserName: user, PolicyName: 'only', PolicyDocument: JSON.stringify({ Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: actions, Resource: '*' }] }) }));
      const key = await iam.send(new CreateAccessKeyCommand({ UserName: user }));
      return { accessKeyId: key.AccessKey?.AccessKeyId as string, secretAccessKey: key.AccessKey?.SecretAccessKey as string };
    };
    const adminKey = await keyOf('admin', ['*']);
    const adminIam = new IAMClient({ region: REGION, endpoint: moto.endpoint, credentials: adminKey });
    await adminIam.send(new CreateUserCommand({ UserName: 'narrow' }));
    await adminIam.send(
      new PutUserPolicyCommand({ UserName: 'narrow', PolicyName: 'only', PolicyDocument: JSON.stringify({ Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: ['ec2:DescribeSubnets'], Resource: '*' }] }) }),
    );
    const narrow = await adminIam.send(new CreateAccessKeyCommand({ UserName: 'narrow' }));
    admin = new MotoAccount(moto.endpoint, REGION, adminKey);
    await admin.cloudFormation.send(new CreateStackCommand({ StackName: 'Relaunch', TemplateBody: JSON.stringify({ Resources: { M: { Type: 'AWS::CloudFormation::WaitConditionHandle' } } }) }));
    await admin.bucket('team-data');
    reader = new AwsAccountReader(
      motoClients(moto.endpoint, REGION, { credentials: { accessKeyId: narrow.AccessKey?.AccessKeyId as string, secretAccessKey: narrow.AccessKey?.SecretAccessKey as string } }),
    );
  });
  afterAll(async () => {
    await moto?.stop();
  });

  it('lets through what the policy allows', async () => {
    await expect(reader.subnets(REGION, ['subnet-0123456789abcdef0'])).resolves.toEqual([]);
  });

  it.each([
    ['ec2:DescribeRouteTables', () => reader.routeTables(REGION, ['vpc-1'])],
    ['ec2:DescribeInstanceTypeOfferings', () => reader.offerings(REGION, ['m6i.large'], ['us-west-2a'])],
    ['ec2:DescribeInstances', () => reader.instancesInUse(REGION)],
    ['ec2:DescribeImages', () => reader.image(REGION, 'ami-12c6146b')],
    ['iam:GetRole', () => reader.roleExists('AWSServiceRoleForEC2Spot')],
    ['cloudformation:DescribeStacks', () => reader.stack(REGION, 'Relaunch')],
    // moto answers SSM's refusal in XML the JSON client cannot read: a 403 all the same.
    ['ssm:GetParameter', () => reader.bootstrapVersion(REGION)],
  ])('refuses %s as a PermissionDeniedError naming it', async (action, call) => {
    const error = await call().then(
      () => null,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(PermissionDeniedError);
    expect((error as PermissionDeniedError).action).toBe(action);
  });

  it('says a bucket these credentials may not head is forbidden', async () => {
    await expect(reader.bucket('team-data')).resolves.toEqual({ kind: 'forbidden' });
  });

  it('still reads who the caller is: GetCallerIdentity needs no permission', async () => {
    await expect(reader.identity()).resolves.toMatchObject({ arn: 'arn:aws:iam::123456789012:user/narrow' });
  });
});

describe('AwsAccountReader quotas (Service Quotas mocked: moto has none of EC2)', () => {
  const client = new ServiceQuotasClient({ region: REGION, credentials: DUMMY_CREDENTIALS });
  const quotas = mockClient(client);
  const reader = new AwsAccountReader({ ...motoClients('http://127.0.0.1:9', REGION), serviceQuotas: () => client });
  const noSuch = () => new NoSuchResourceException({ message: 'no applied value', $metadata: {} });
  beforeEach(() => quotas.reset());

  it('reads the applied value of the quota asked for', async () => {
    quotas.on(GetServiceQuotaCommand).resolves({ Quota: { Value: 64 } });
    await expect(reader.quota(REGION, 'L-3819A6DF')).resolves.toBe(64);
    expect(quotas).toHaveReceivedCommandWith(GetServiceQuotaCommand, { ServiceCode: 'ec2', QuotaCode: 'L-3819A6DF' });
    expect(quotas).not.toHaveReceivedCommand(GetAWSDefaultServiceQuotaCommand);
  });

  it("falls back to AWS's default when no value was applied", async () => {
    quotas.on(GetServiceQuotaCommand).rejects(noSuch());
    quotas.on(GetAWSDefaultServiceQuotaCommand).resolves({ Quota: { Value: 0 } });
    await expect(reader.quota(REGION, 'L-DB2E81BA')).resolves.toBe(0);
    expect(quotas).toHaveReceivedCommandWith(GetAWSDefaultServiceQuotaCommand, { ServiceCode: 'ec2', QuotaCode: 'L-DB2E81BA' });
  });

  it('is null when the region has no such quota at all', async () => {
    quotas.on(GetServiceQuotaCommand).rejects(noSuch());
    quotas.on(GetAWSDefaultServiceQuotaCommand).rejects(noSuch());
    await expect(reader.quota(REGION, 'L-417A185B')).resolves.toBeNull();
  });

  it('names the permission refused', async () => {
    const denied = Object.assign(new Error('not authorized'), { name: 'AccessDeniedException', $metadata: { httpStatusCode: 400 } });
    quotas.on(GetServiceQuotaCommand).rejects(denied);
    await expect(reader.quota(REGION, 'L-1216C47A')).rejects.toMatchObject({ name: 'PermissionDeniedError', action: 'servicequotas:GetServiceQuota' });
  });
});

describe('AwsAccountReader bucket in another region (S3 mocked: moto answers 200 where S3 answers 301)', () => {
  it("reads the bucket's region from the redirect", async () => {
    const s3 = new S3Client({ region: REGION, credentials: DUMMY_CREDENTIALS });
    const mocked = mockClient(s3);
    const redirect = Object.assign(new Error('PermanentRedirect'), { name: 'PermanentRedirect', $metadata: { httpStatusCode: 301 }, $response: { headers: { 'x-amz-bucket-region': 'eu-west-1' } } });
    mocked.on(HeadBucketCommand).rejects(redirect);
    const reader = new AwsAccountReader({ ...motoClients('http://127.0.0.1:9', REGION), s3 });
    await expect(reader.bucket('far-data')).resolves.toEqual({ kind: 'reachable', region: 'eu-west-1' });
  });
});
