// runChecks' decisions on what no emulator produces on demand (a stack in each of
// CloudFormation's statuses, cdk.json drifting from what is deployed), over an in-memory
// AccountReader. The reads themselves are tested against moto_server (test/contract/aws/check/).

import { describe, expect, it } from 'vitest';
import { deploymentRecord, type DeploymentSettings } from '../../../../lib/check/deployment.ts';
import type { AccountReader, StackFacts } from '../../../../lib/check/account-reader-port.ts';
import type { CheckReport } from '../../../../lib/check/report.ts';
import { runChecks, type CheckInput } from '../../../../lib/check/run-checks.ts';

const SUBNETS = { 'us-east-1a': 'subnet-a' };
const RECORD = deploymentRecord({ namePrefix: 'relaunch', vpcId: 'vpc-1', subnetsByZone: SUBNETS, apiUrl: 'https://api.example/v1/', dataBucket: 'stack-bucket', dataBuckets: ['team-data'] });

/** An account where every read finds what relaunch needs; `stack` is what DescribeStacks finds. */
function account(stack: StackFacts | null): AccountReader {
  return {
    regionStatus: async () => ({ kind: 'enabled' }),
    vpcs: async () => ['vpc-1'],
    natGateways: async () => [],
    identity: async () => ({ account: '111122223333', arn: 'arn:aws:iam::111122223333:user/dev' }),
    bootstrapVersion: async () => 28,
    stack: async () => stack,
    roleExists: async () => true,
    quota: async () => 64,
    instancesInUse: async () => [],
    vcpusOf: async () => new Map(),
    subnets: async () => [{ subnetId: 'subnet-a', vpcId: 'vpc-1', zone: 'us-east-1a', state: 'available', mapPublicIpOnLaunch: false, availableIps: 100 }],
    routeTables: async () => [{ routeTableId: 'rtb-1', vpcId: 'vpc-1', main: true, subnetIds: [], routes: [{ destination: '0.0.0.0/0', targetKind: 'nat-gateway', targetId: 'nat-1', state: 'active' }] }],
    vpcEndpoints: async () => [],
    offerings: async () => new Map(),
    parameter: async () => null,
    image: async () => null,
    bucket: async () => ({ kind: 'reachable', region: 'us-east-1' }),
  };
}

function stackIn(status: string, reason: string | null = null): StackFacts {
  return { name: 'Relaunch', status, statusReason: reason, outputs: [{ key: 'RelaunchDeployment0A1B2C3D', value: JSON.stringify(RECORD) }] };
}

const INPUT: CheckInput = { region: 'us-east-1', regionSource: '--region', stackName: 'Relaunch', apiUrl: null, local: { kind: 'absent', source: 'cdk.json' }, task: null };
const API = { sources: async () => ({ status: 200, body: {} }) };

function check(report: CheckReport, id: string) {
  return report.checks.find((entry) => entry.id === id);
}

describe('the stack check', () => {
  it.each([
    ['CREATE_COMPLETE', 'ok', undefined],
    ['UPDATE_COMPLETE', 'ok', undefined],
    ['UPDATE_IN_PROGRESS', 'warn', 'check again once it ends'],
    ['UPDATE_ROLLBACK_COMPLETE', 'warn', 'aws cloudformation describe-stack-events --region us-east-1 --stack-name Relaunch'],
    ['ROLLBACK_COMPLETE', 'fail', 'aws cloudformation delete-stack --region us-east-1 --stack-name Relaunch'],
    ['UPDATE_ROLLBACK_FAILED', 'fail', 'describe-stack-events'],
    ['CREATE_FAILED', 'fail', 'describe-stack-events'],
  ])('%s is %s', async (status, expected, fix) => {
    const report = await runChecks(INPUT, { reader: account(stackIn(status, 'The following resource(s) failed')), api: API });
    expect(check(report, 'stack')).toMatchObject({ status: expected });
    if (fix === undefined) expect(check(report, 'stack')?.fix).toBeUndefined();
    else expect(check(report, 'stack')?.fix).toContain(fix);
  });
});

describe('the region check', () => {
  const named = (status: Awaited<ReturnType<AccountReader['regionStatus']>> | Error): AccountReader => ({
    ...account(stackIn('UPDATE_COMPLETE')),
    regionStatus: async () => {
      if (status instanceof Error) throw status;
      return status;
    },
    identity: async () => {
      throw new Error('identity must not be asked in a region that does not exist');
    },
  });

  it('fails a region that does not exist, naming its neighbours, and checks nothing else (each would fail as the network)', async () => {
    const report = await runChecks({ ...INPUT, region: 'us-east-9' }, { reader: named({ kind: 'none', regions: ['eu-west-1', 'us-east-1', 'us-east-2', 'us-west-2'] }), api: API });
    expect(report.checks).toEqual([
      {
        id: 'region',
        status: 'fail',
        message: 'us-east-9 (from --region): no AWS region of that name (us-east: us-east-1, us-east-2)',
        fix: "name a region that exists (aws ec2 describe-regions --all-regions --query 'Regions[].RegionName') with --region or AWS_REGION",
      },
    ]);
  });

  it('fails a region the account has not enabled, with the command that enables it', async () => {
    const report = await runChecks({ ...INPUT, region: 'ap-east-1' }, { reader: named({ kind: 'not-enabled' }), api: API });
    expect(report.checks).toEqual([
      {
        id: 'region',
        status: 'fail',
        message: 'ap-east-1 (from --region): this account has not enabled the region (an opt-in region)',
        fix: 'aws account enable-region --region-name ap-east-1, or name another region with --region or AWS_REGION',
      },
    ]);
  });

  it('fails a failover region the account has not enabled, with the command that enables it or the setting to change', async () => {
    const record = deploymentRecord({ namePrefix: 'relaunch', vpcId: 'vpc-1', subnetsByZone: SUBNETS, otherRegions: [{ region: 'ap-east-1', subnetsByZone: { 'ap-east-1a': 'subnet-a' } }], apiUrl: 'https://api.example/v1/', dataBucket: 'stack-bucket' });
    const stack: StackFacts = { name: 'Relaunch', status: 'UPDATE_COMPLETE', statusReason: null, outputs: [{ key: 'RelaunchDeployment0A1B2C3D', value: JSON.stringify(record) }] };
    const reader: AccountReader = { ...account(stack), regionStatus: async (region) => (region === 'ap-east-1' ? { kind: 'not-enabled' } : { kind: 'enabled' }) };

    const report = await runChecks(INPUT, { reader, api: API });

    expect(check(report, 'region')).toEqual({ id: 'region', status: 'ok', message: 'us-east-1 (from --region)' });
    expect(check(report, 'region:ap-east-1')).toEqual({
      id: 'region:ap-east-1',
      status: 'fail',
      message: 'ap-east-1, a failover region (relaunch:otherRegions): this account has not enabled the region (an opt-in region)',
      fix: 'aws account enable-region --region-name ap-east-1, or remove it from relaunch:otherRegions and redeploy',
    });
    expect(report.checks.map(({ id }) => id).filter((id) => id.includes('ap-east-1'))).toEqual(['region:ap-east-1']);
  });

  it('fails a failover region that does not exist, and checks nothing else there (no bootstrap, quota or subnet)', async () => {
    const record = deploymentRecord({ namePrefix: 'relaunch', vpcId: 'vpc-1', subnetsByZone: SUBNETS, otherRegions: [{ region: 'us-west-9', subnetsByZone: { 'us-west-9a': 'subnet-w' } }], apiUrl: 'https://api.example/v1/', dataBucket: 'stack-bucket' });
    const stack: StackFacts = { name: 'Relaunch', status: 'UPDATE_COMPLETE', statusReason: null, outputs: [{ key: 'RelaunchDeployment0A1B2C3D', value: JSON.stringify(record) }] };
    const reader: AccountReader = { ...account(stack), regionStatus: async (region) => (region === 'us-west-9' ? { kind: 'none', regions: ['us-east-1', 'us-west-1', 'us-west-2'] } : { kind: 'enabled' }) };

    const report = await runChecks(INPUT, { reader, api: API });

    expect(check(report, 'region:us-west-9')).toEqual({
      id: 'region:us-west-9',
      status: 'fail',
      message: 'us-west-9, a failover region (relaunch:otherRegions): no AWS region of that name (us-west: us-west-1, us-west-2)',
      fix: "remove it from relaunch:otherRegions or name a region that exists (aws ec2 describe-regions --all-regions --query 'Regions[].RegionName'), and redeploy (npx cdk deploy)",
    });
    expect(report.checks.map(({ id }) => id).filter((id) => id.includes('us-west-9'))).toEqual(['region:us-west-9']);
  });

  it('takes a region it could not ask about as given: the credentials check says why', async () => {
    const reader = { ...account(stackIn('UPDATE_COMPLETE')), regionStatus: async () => Promise.reject(new Error('getaddrinfo ENOTFOUND ec2.us-east-1.amazonaws.com')) };
    const report = await runChecks(INPUT, { reader, api: API });
    expect(check(report, 'region')).toEqual({ id: 'region', status: 'ok', message: 'us-east-1 (from --region)' });
    expect(check(report, 'credentials')?.status).toBe('ok');
  });
});

describe('the settings check', () => {
  const deployed: DeploymentSettings = { namePrefix: 'relaunch', vpcId: 'vpc-1', regions: [{ region: 'us-east-1', subnetsByZone: SUBNETS }], allowedInstanceTypes: null, dataBuckets: ['team-data'], dataBucket: null };

  it('is ok when cdk.json says what is deployed', async () => {
    const report = await runChecks({ ...INPUT, local: { kind: 'settings', source: 'cdk.json', settings: deployed, placeholder: false } }, { reader: account(stackIn('UPDATE_COMPLETE')), api: API });
    expect(check(report, 'settings')).toEqual({ id: 'settings', status: 'ok', message: 'read from stack Relaunch' });
  });

  it.each([
    ['an allowed type', { allowedInstanceTypes: ['g5.xlarge'] }],
    ['a bucket', { dataBuckets: ['team-data', 'more-data'] }],
    ['a subnet', { regions: [{ region: 'us-east-1', subnetsByZone: { ...SUBNETS, 'us-east-1b': 'subnet-b' } }] }],
  ])('warns that cdk.json is not deployed yet when it adds %s', async (_name, change) => {
    const report = await runChecks({ ...INPUT, local: { kind: 'settings', source: 'cdk.json', settings: { ...deployed, ...change }, placeholder: false } }, { reader: account(stackIn('UPDATE_COMPLETE')), api: API });
    expect(check(report, 'settings')).toMatchObject({ status: 'warn', fix: 'npx cdk deploy, to deploy what cdk.json says' });
  });

  it("fails cdk.json's context that is not a configuration, with its reason", async () => {
    const report = await runChecks({ ...INPUT, local: { kind: 'invalid', source: 'cdk.json', message: 'relaunch configuration is not valid: context relaunch:vpcId: is not set' } }, { reader: account(null), api: API });
    expect(check(report, 'settings')).toMatchObject({ status: 'fail', message: 'cdk.json: relaunch configuration is not valid: context relaunch:vpcId: is not set' });
  });
});
