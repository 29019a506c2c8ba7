// cdk-nag's AWS Solutions and Serverless packs over the whole app (relaunch's stack and a
// forwarder): every finding is fixed or acknowledged with a reason next to its resource.

import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks, ServerlessChecks } from 'cdk-nag';
import { describe, expect, it } from 'vitest';
import { addRelaunchStacks } from '../../../infra/relaunch-stack.ts';
import { FEATURE_FLAGS } from '../../../infra/feature-flags.ts';

process.env.CDK_VALIDATION = 'false';

const OTHER = { region: 'us-west-2', subnetsByZone: { 'us-west-2a': 'subnet-0aaaaaaaaaaaaaaaa' }, securityGroupIds: ['sg-0bbbbbbbbbbbbbbbb'] };

/** The report of the packs' findings, or '' when synthesis raised none. */
function findings(
  props: { jobNotifications?: boolean; agentWafRateLimit?: number; jobPorts?: { from: number; to: number }[]; vpcCidr?: string; jobPortsCidr?: string; dataBuckets?: string[] } = {},
): string {
  const app = new App({ context: { ...FEATURE_FLAGS, 'aws:cdk:bundling-stacks': [] } });
  addRelaunchStacks(app, 'Relaunch', {
    vpcId: 'vpc-0123456789abcdef0',
    subnetsByZone: { 'us-east-1a': 'subnet-0123456789abcdef0' },
    otherRegions: [OTHER],
    ...props,
  });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  Validations.of(app).addPlugins(new ServerlessChecks(app));
  try {
    app.synth();
    return '';
  } catch (error) {
    return (error as Error).message;
  }
}

describe('cdk-nag', () => {
  it('finds nothing unacknowledged in the default deployment', () => {
    expect(findings()).toBe('');
  });

  it('finds nothing unacknowledged with job notifications, the agent routes\' WAF and data buckets on', () => {
    expect(findings({ jobNotifications: true, agentWafRateLimit: 1000, dataBuckets: ['team-data', 'ckpt-*'] })).toBe('');
  });

  it('finds nothing unacknowledged with job ports open to the VPC, or to a wider CIDR chosen on purpose', () => {
    expect(findings({ jobPorts: [{ from: 8080, to: 8090 }], vpcCidr: '10.0.0.0/16' })).toBe('');
    expect(findings({ jobPorts: [{ from: 8080, to: 8080 }], jobPortsCidr: '0.0.0.0/0' })).toBe('');
  });
});
