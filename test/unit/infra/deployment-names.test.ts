// The shipped app's stacks, named from relaunch:namePrefix: two deployments in one account
// and region are two stacks, the default one keeps the name it always had, and a second
// stack of a prefix already deployed fails on its first resource, before it makes anything.

import { App } from 'aws-cdk-lib';
import { describe, expect, it } from 'vitest';
import { addDeployment } from '../../../infra/relaunch-stack.ts';
import { FEATURE_FLAGS } from '../../../infra/feature-flags.ts';

process.env.CDK_VALIDATION = 'false';

const NETWORK = { vpcId: 'vpc-0123456789abcdef0', subnetsByZone: { 'us-east-1a': 'subnet-0123456789abcdef0' } };
const away = (region: string) => ({ region, subnetsByZone: { [`${region}a`]: 'subnet-0aaaaaaaaaaaaaaaa' }, securityGroupIds: ['sg-0bbbbbbbbbbbbbbbb'] });
const app = () => new App({ context: { ...FEATURE_FLAGS, 'aws:cdk:bundling-stacks': [] } });

type Template = { Resources: Record<string, { Type: string; Properties?: Record<string, unknown>; DependsOn?: string | string[] }> };

function names(namePrefix?: string): string[] {
  const { relaunch, forwarders } = addDeployment(app(), { ...NETWORK, namePrefix, otherRegions: [away('us-west-2')] });
  return [relaunch.stackName, ...forwarders.map((stack) => stack.stackName)];
}

describe("the shipped app's stack names", () => {
  it.each([
    ['no prefix', undefined, ['Relaunch', 'Relaunch-events-us-west-2']],
    ['the default prefix', 'relaunch', ['Relaunch', 'Relaunch-events-us-west-2']],
    ['prod', 'prod', ['prod-relaunch', 'prod-relaunch-events-us-west-2']],
    ['staging', 'staging', ['staging-relaunch', 'staging-relaunch-events-us-west-2']],
  ])('follow the prefix: %s', (_, prefix, expected) => {
    expect(names(prefix)).toEqual(expected);
  });

  it("never give one prefix another's stack, even a prefix that looks like a forwarder's", () => {
    const all = ['relaunch', 'prod', 'Relaunch', 'events-us-west-2', 'Relaunch-events-us-west-2', 'prod-relaunch'].flatMap((prefix) => names(prefix));
    expect(new Set(all).size).toBe(all.length);
  });
});

describe("a deployment's claim on its prefix", () => {
  it('makes every other resource of the stack wait for the log group named from the prefix alone', () => {
    const { relaunch } = addDeployment(app(), { ...NETWORK, namePrefix: 'prod' });
    const template = (relaunch.node.root as App).synth().getStackByName(relaunch.stackName).template as Template;
    const claims = Object.entries(template.Resources).filter(
      ([, r]) => r.Type === 'AWS::Logs::LogGroup' && r.Properties?.LogGroupName === '/aws/vendedlogs/states/prod-controller',
    );
    expect(claims).toHaveLength(1);
    const [claimId] = claims[0]!;
    const waiting = Object.entries(template.Resources).filter(([id]) => id !== claimId);
    const notWaiting = waiting.filter(([, r]) => ![r.DependsOn ?? []].flat().includes(claimId)).map(([id, r]) => `${id} (${r.Type})`);
    expect(waiting.length).toBeGreaterThan(100);
    expect(notWaiting).toEqual([]);
  });
});
