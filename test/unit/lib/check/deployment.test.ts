// The deployment record a stack outputs for `relaunch check`: written at synth from the
// configuration, found among the stack's outputs and read back; and versions compared.

import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import {
  compareVersions,
  deploymentRecord,
  findDeploymentOutput,
  parseDeploymentRecord,
  RELAUNCH_VERSION,
  settingsOfRecord,
} from '../../../../lib/check/deployment.ts';
import { RelaunchStack } from '../../../../infra/relaunch-stack.ts';
import { FEATURE_FLAGS } from '../../../../infra/feature-flags.ts';

process.env.CDK_VALIDATION = 'false';

const SUBNETS = { 'us-east-1a': 'subnet-0123456789abcdef0', 'us-east-1b': 'subnet-0123456789abcdef1' };

/** A CloudFormation value with every Ref and GetAtt replaced by a readable stand-in, joins joined. */
function render(value: unknown): string {
  if (typeof value === 'string') return value;
  const node = value as Record<string, unknown>;
  if ('Fn::Join' in node) {
    const [separator, parts] = node['Fn::Join'] as [string, unknown[]];
    return parts.map(render).join(separator);
  }
  if ('Ref' in node) return `ref-${String(node.Ref)}`;
  if ('Fn::GetAtt' in node) return `att-${(node['Fn::GetAtt'] as string[]).join('.')}`;
  throw new Error(`cannot render ${JSON.stringify(value)}`);
}

describe('the stack output', () => {
  it('holds the version and the settings check reads, under a key findDeploymentOutput finds', () => {
    const app = new App({ context: { ...FEATURE_FLAGS, 'aws:cdk:bundling-stacks': [] } });
    const stack = new RelaunchStack(app, 'Test', {
      relaunch: {
        vpcId: 'vpc-0123456789abcdef0',
        subnetsByZone: SUBNETS,
        otherRegions: [{ region: 'us-west-2', subnetsByZone: { 'us-west-2a': 'subnet-0123456789abcdef2' }, securityGroupIds: ['sg-0123456789abcdef0'] }],
        allowedInstanceTypes: ['g5.xlarge', 'm6i.large'],
        dataBuckets: ['team-data', 'ckpt-*'],
        namePrefix: 'rl',
      },
    });
    const outputs = Template.fromStack(stack).toJSON().Outputs as Record<string, { Value: unknown }>;
    const value = findDeploymentOutput(Object.entries(outputs).map(([key, output]) => ({ key, value: render(output.Value) })));
    expect(value).not.toBeNull();
    const record = parseDeploymentRecord(value as string);
    expect(record).toMatchObject({
      version: RELAUNCH_VERSION,
      namePrefix: 'rl',
      vpcId: 'vpc-0123456789abcdef0',
      subnetsByZone: SUBNETS,
      otherRegions: [{ region: 'us-west-2', subnetsByZone: { 'us-west-2a': 'subnet-0123456789abcdef2' } }],
      allowedInstanceTypes: ['g5.xlarge', 'm6i.large'],
      dataBuckets: ['team-data', 'ckpt-*'],
    });
    expect(record.apiUrl).toMatch(/^https:\/\/ref-/);
    expect(record.dataBucket).toMatch(/^ref-/);
    // Security groups are not what check reads.
    expect(JSON.stringify(record.otherRegions)).not.toContain('sg-');
  });
});

describe('parseDeploymentRecord', () => {
  const good = deploymentRecord({ namePrefix: 'relaunch', vpcId: 'vpc-1', subnetsByZone: SUBNETS, apiUrl: 'https://x', dataBucket: 'b' });

  it('reads back what deploymentRecord writes, with defaults for what the configuration left out', () => {
    expect(parseDeploymentRecord(JSON.stringify(good))).toEqual({ ...good, otherRegions: [], allowedInstanceTypes: null, dataBuckets: [] });
  });

  it.each([
    ['not JSON', 'v1;subnets', 'expected a JSON object'],
    ['a missing field', JSON.stringify({ ...good, version: undefined }), 'the record.version'],
    ['a field of the wrong type', JSON.stringify({ ...good, otherRegions: 'us-west-2' }), 'the record.otherRegions'],
  ])('refuses %s, naming it', (_name, value, message) => {
    expect(() => parseDeploymentRecord(value)).toThrow(message);
  });

  it('makes settings with the stack region first', () => {
    const settings = settingsOfRecord({ ...good, otherRegions: [{ region: 'eu-west-1', subnetsByZone: { 'eu-west-1a': 'subnet-2' } }] }, 'us-east-1');
    expect(settings.regions.map(({ region }) => region)).toEqual(['us-east-1', 'eu-west-1']);
  });
});

describe('findDeploymentOutput', () => {
  it('finds the output by its construct id and hash, and nothing else', () => {
    expect(findDeploymentOutput([{ key: 'RelaunchApiUrl5B2D3C10', value: 'x' }, { key: 'RelaunchDeployment0A1B2C3D', value: 'y' }])).toBe('y');
    expect(findDeploymentOutput([{ key: 'MyDeployment', value: 'x' }])).toBeNull();
  });
});

describe('compareVersions', () => {
  it.each([
    ['0.1.0', '0.1.0', 0],
    ['0.1.0', '0.2.0', -1],
    ['0.10.0', '0.9.2', 1],
    ['1.0', '1.0.0', 0],
    ['1.0.0-rc1', '1.0.0-rc2', -1],
  ])('%s against %s is %i', (a, b, expected) => {
    expect(compareVersions(a, b)).toBe(expected);
  });
});
