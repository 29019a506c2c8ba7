// Deployment settings from CDK context: validated up front, every problem naming its key.

import { describe, expect, it } from 'vitest';
import { configFromContext, ContextKey } from '../../infra/config.ts';

const VPC = 'vpc-0123456789abcdef0';
const SUBNET = 'subnet-0123456789abcdef0';
const from = (context: Record<string, unknown>) => () => configFromContext((key) => context[key]);

describe('configFromContext', () => {
  it('reads lists from cdk.json arrays and from -c comma-separated strings alike', () => {
    const viaArray = from({ [ContextKey.vpcId]: VPC, [ContextKey.subnetIds]: [SUBNET, 'subnet-0123456789abcdef1'] })();
    const viaString = from({ [ContextKey.vpcId]: VPC, [ContextKey.subnetIds]: `${SUBNET}, subnet-0123456789abcdef1` })();
    expect(viaString).toEqual(viaArray);
    expect(viaArray).toMatchObject({ vpcId: VPC, subnetIds: [SUBNET, 'subnet-0123456789abcdef1'], namePrefix: undefined });
  });

  it('takes regions, instance-type patterns and a name prefix', () => {
    const config = from({
      [ContextKey.vpcId]: VPC,
      [ContextKey.subnetIds]: SUBNET,
      [ContextKey.regions]: 'us-east-1,eu-west-1',
      [ContextKey.allowedInstanceTypes]: ['g5.*', 'p4d.24xlarge'],
      [ContextKey.namePrefix]: 'team-a',
    })();
    expect(config).toMatchObject({ regions: ['us-east-1', 'eu-west-1'], allowedInstanceTypes: ['g5.*', 'p4d.24xlarge'], namePrefix: 'team-a' });
  });

  it('names each missing key and how to set it', () => {
    expect(from({})).toThrow(/context relaunch:vpcId: is not set\n\s+context relaunch:subnetIds: is not set\n.*-c relaunch:subnetIds=/);
  });

  it.each([
    [{ [ContextKey.vpcId]: 'vpc-xyz', [ContextKey.subnetIds]: SUBNET }, 'context relaunch:vpcId: expected a VPC id'],
    [{ [ContextKey.vpcId]: VPC, [ContextKey.subnetIds]: `${SUBNET},sn-1` }, 'context relaunch:subnetIds[1]: expected a subnet id'],
    [{ [ContextKey.vpcId]: VPC, [ContextKey.subnetIds]: [] }, 'context relaunch:subnetIds: expected at least 1'],
    [{ [ContextKey.vpcId]: VPC, [ContextKey.subnetIds]: SUBNET, [ContextKey.regions]: ['mars-1'] }, 'context relaunch:regions[0]: expected a region'],
    [{ [ContextKey.vpcId]: VPC, [ContextKey.subnetIds]: SUBNET, [ContextKey.namePrefix]: '9lives' }, 'context relaunch:namePrefix: expected 1-32'],
    [{ [ContextKey.vpcId]: VPC, [ContextKey.subnetIds]: SUBNET, [ContextKey.allowedInstanceTypes]: 'large' }, 'context relaunch:allowedInstanceTypes[0]: expected an instance type'],
  ])('refuses %j with a message naming the key', (context, message) => {
    expect(from(context)).toThrow(message);
  });
});
