// Deployment settings from CDK context: validated up front, every problem naming its key.

import { describe, expect, it } from 'vitest';
import { configFromContext, ContextKey } from '../../../infra/config.ts';
import { nodeTrafficProblems } from '../../../lib/adapters/ec2-network.ts';
import { EnvVar, parseNodeToNodeTraffic } from '../../../lib/workflow/env.ts';

const VPC = 'vpc-0123456789abcdef0';
const A = 'subnet-0123456789abcdef0';
const B = 'subnet-0123456789abcdef1';
const from = (context: Record<string, unknown>) => () => configFromContext((key) => context[key]);
const minimal = { [ContextKey.vpcId]: VPC, [ContextKey.subnets]: { 'us-east-1a': A } };

describe('configFromContext', () => {
  it('reads subnets from a cdk.json object and from a -c zone=subnet list alike', () => {
    const viaObject = from({ ...minimal, [ContextKey.subnets]: { 'us-east-1a': A, 'us-east-1b': B } })();
    const viaString = from({ ...minimal, [ContextKey.subnets]: `us-east-1a=${A}, us-east-1b=${B}` })();
    expect(viaString).toEqual(viaObject);
    expect(viaObject).toMatchObject({ vpcId: VPC, subnetsByZone: { 'us-east-1a': A, 'us-east-1b': B }, namePrefix: undefined });
  });

  it('takes other regions (JSON from -c), exact instance types and a name prefix', () => {
    const other = { region: 'eu-west-1', subnetsByZone: { 'eu-west-1a': A }, securityGroupIds: ['sg-0123456789abcdef0'] };
    const config = from({
      ...minimal,
      [ContextKey.otherRegions]: JSON.stringify([other]),
      [ContextKey.allowedInstanceTypes]: 'g5.xlarge,p4d.24xlarge',
      [ContextKey.dataBuckets]: 'team-data, ckpt-*',
      [ContextKey.namePrefix]: 'team-a',
    })();
    expect(config).toMatchObject({ otherRegions: [other], allowedInstanceTypes: ['g5.xlarge', 'p4d.24xlarge'], namePrefix: 'team-a', dataBuckets: ['team-data', 'ckpt-*'] });
  });

  it('takes ECR repositories (names or name prefixes ending in *) and whether to set the account\'s API Gateway log role, from -c or cdk.json', () => {
    const viaString = from({ ...minimal, [ContextKey.ecrRepositories]: 'team/trainer, base-*', [ContextKey.apiGatewayAccountRole]: 'false' })();
    const viaJson = from({ ...minimal, [ContextKey.ecrRepositories]: ['team/trainer', 'base-*'], [ContextKey.apiGatewayAccountRole]: false })();
    expect(viaString).toEqual(viaJson);
    expect(viaJson).toMatchObject({ ecrRepositories: ['team/trainer', 'base-*'], apiGatewayAccountRole: false });
    expect(from(minimal)()).toMatchObject({ ecrRepositories: undefined, apiGatewayAccountRole: undefined });
    expect(from({ ...minimal, [ContextKey.ecrRepositories]: 'Team Images' })).toThrow(/relaunch:ecrRepositories\[0\]: expected an ECR repository name/);
  });

  it('takes a launch pace as BURST/PERSECOND from -c or an object from cdk.json', () => {
    expect(from({ ...minimal, [ContextKey.launchPace]: ' 500 / 1.5 ' })().launchPace).toEqual({ burst: 500, perSecond: 1.5 });
    expect(from({ ...minimal, [ContextKey.launchPace]: { burst: 500, perSecond: 1.5 } })().launchPace).toEqual({ burst: 500, perSecond: 1.5 });
    expect(from(minimal)().launchPace).toBeUndefined();
  });

  it.each([
    ['true', true],
    [true, true],
    ['false', false],
  ])('takes node-to-node traffic as %j', (value, expected) => {
    expect(from({ ...minimal, [ContextKey.nodeToNodeTraffic]: value })()).toMatchObject({ nodeToNodeTraffic: expected });
  });

  it('takes job ports from a -c list and from cdk.json alike, with the VPC CIDR or a wider one', () => {
    const expected = [{ from: 8080, to: 8090 }, { from: 30000, to: 30000 }];
    expect(from({ ...minimal, [ContextKey.jobPorts]: '8080-8090, 30000', [ContextKey.vpcCidr]: '10.0.0.0/16' })()).toMatchObject({ jobPorts: expected, vpcCidr: '10.0.0.0/16' });
    expect(from({ ...minimal, [ContextKey.jobPorts]: ['8080-8090', 30000], [ContextKey.jobPortsCidr]: '0.0.0.0/0' })()).toMatchObject({
      jobPorts: expected,
      jobPortsCidr: '0.0.0.0/0',
    });
  });

  it('names each missing key and how to set it', () => {
    expect(from({})).toThrow(/context relaunch:vpcId: is not set\n\s+context relaunch:subnets: is not set\n.*-c relaunch:subnets=/);
  });

  it.each([
    [{ ...minimal, [ContextKey.vpcId]: 'vpc-xyz' }, 'context relaunch:vpcId: expected a VPC id'],
    [{ ...minimal, [ContextKey.subnets]: `us-east-1a=sn-1` }, 'context relaunch:subnets.us-east-1a: expected a subnet id'],
    [{ ...minimal, [ContextKey.subnets]: { 'us-east-1': A } }, 'context relaunch:subnets.us-east-1: expected an availability zone'],
    [{ ...minimal, [ContextKey.subnets]: { 'us-east-1a': A, 'eu-west-1a': B } }, 'context relaunch:subnets: expected zones of one region'],
    [{ ...minimal, [ContextKey.subnets]: {} }, 'context relaunch:subnets: expected at least one zone'],
    [{ ...minimal, [ContextKey.otherRegions]: [{ region: 'mars-1', subnetsByZone: {}, securityGroupIds: [] }] }, 'context relaunch:otherRegions[0].region: expected a region'],
    [
      { ...minimal, [ContextKey.otherRegions]: [{ region: 'us-east-1', subnetsByZone: { 'us-east-1b': B }, securityGroupIds: ['sg-0123456789abcdef0'] }] },
      "context relaunch:otherRegions[0].region: expected a region other than us-east-1 (the stack's own",
    ],
    [
      {
        ...minimal,
        [ContextKey.otherRegions]: ['eu-west-1', 'eu-west-1'].map((region) => ({ region, subnetsByZone: { [`${region}a`]: B }, securityGroupIds: ['sg-0123456789abcdef0'] })),
      },
      'context relaunch:otherRegions[1].region: expected a region other than us-east-1, eu-west-1',
    ],
    [
      { ...minimal, [ContextKey.otherRegions]: [{ region: 'eu-west-1', subnetsByZone: { 'us-west-2a': B }, securityGroupIds: ['sg-0123456789abcdef0'] }] },
      'context relaunch:otherRegions[0].subnetsByZone.us-west-2a: expected a zone of eu-west-1',
    ],
    [{ ...minimal, [ContextKey.namePrefix]: '9lives' }, 'context relaunch:namePrefix: expected 1-32'],
    [{ ...minimal, [ContextKey.allowedInstanceTypes]: 'g5.*' }, 'context relaunch:allowedInstanceTypes[0]: expected an instance type'],
    [{ ...minimal, [ContextKey.dataBuckets]: 'ok-bucket,Bad_Bucket' }, 'context relaunch:dataBuckets[1]: expected an S3 bucket name, or a prefix of names ending in *'],
    [{ ...minimal, [ContextKey.nodeToNodeTraffic]: 'yes' }, 'context relaunch:nodeToNodeTraffic: expected true or false'],
    [{ ...minimal, [ContextKey.launchPace]: '1000' }, 'context relaunch:launchPace: expected BURST/PERSECOND like 1000/2, or { "burst": 1000, "perSecond": 2 }'],
    [{ ...minimal, [ContextKey.launchPace]: '0/2' }, 'context relaunch:launchPace.burst: Too small'],
    [{ ...minimal, [ContextKey.launchPace]: { burst: 10, perSecond: 0 } }, 'context relaunch:launchPace.perSecond: Too small'],
    [{ ...minimal, [ContextKey.launchPace]: { burst: 10, perSecond: 1, rate: 2 } }, 'context relaunch:launchPace: expected BURST/PERSECOND like 1000/2, or { "burst": 1000, "perSecond": 2 }'],
    [{ ...minimal, [ContextKey.jobPorts]: '8080' }, "context relaunch:vpcCidr: is not set: relaunch:jobPorts are opened to the VPC's CIDR"],
    [{ ...minimal, [ContextKey.jobPorts]: '9000-8000', [ContextKey.vpcCidr]: '10.0.0.0/16' }, 'context relaunch:jobPorts[0]: expected a port 1-65535'],
    [{ ...minimal, [ContextKey.jobPorts]: '8080', [ContextKey.vpcCidr]: '10.0.0.0' }, 'context relaunch:vpcCidr: expected an IPv4 CIDR like 10.0.0.0/16'],
    [{ ...minimal, [ContextKey.jobPorts]: '8080', [ContextKey.jobPortsCidr]: '300.0.0.0/8' }, 'context relaunch:jobPortsCidr: expected an IPv4 CIDR'],
  ])('refuses %j with a message naming the key', (context, message) => {
    expect(from(context)).toThrow(message);
  });
});

describe('node-to-node traffic, as the API and the launcher read it', () => {
  it('refuses a multi-node task naming the context key that turns it on, and takes one node', () => {
    const [problem] = nodeTrafficProblems({ numNodes: 4 }, false);
    expect(problem).toMatchObject({ path: 'num_nodes', message: expect.stringContaining(`${ContextKey.nodeToNodeTraffic} true`) });
    expect(nodeTrafficProblems({ numNodes: 1 }, false)).toEqual([]);
    expect(nodeTrafficProblems({ numNodes: 64 }, true)).toEqual([]);
  });

  it('reads NODE_TO_NODE_TRAFFIC: unset or true is on, false off, anything else names the variable', () => {
    expect(parseNodeToNodeTraffic({})).toBe(true);
    expect(parseNodeToNodeTraffic({ [EnvVar.nodeToNodeTraffic]: 'true' })).toBe(true);
    expect(parseNodeToNodeTraffic({ [EnvVar.nodeToNodeTraffic]: 'false' })).toBe(false);
    expect(() => parseNodeToNodeTraffic({ [EnvVar.nodeToNodeTraffic]: 'no' })).toThrow('environment variable NODE_TO_NODE_TRAFFIC: expected true or false, got "no"');
  });
});
