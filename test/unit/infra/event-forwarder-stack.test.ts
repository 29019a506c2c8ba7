// A deployment with failover regions: relaunch's stack, and in each other region a stack
// whose rules forward EC2's interruption, rebalance and state-change events to relaunch's region.

import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { ConfigurationError } from '../../../lib/errors.ts';
import { EC2_EVENT_PATTERNS } from '../../../infra/constructs/instance-events.ts';
import { Ec2EventForwarderStack } from '../../../infra/event-forwarder-stack.ts';
import { addRelaunchStacks } from '../../../infra/relaunch-stack.ts';
import { FEATURE_FLAGS } from '../../../infra/feature-flags.ts';

const NETWORK = { vpcId: 'vpc-0123456789abcdef0', subnetsByZone: { 'us-east-1a': 'subnet-0123456789abcdef0' } };
const other = (region: string) => ({ region, subnetsByZone: { [`${region}a`]: 'subnet-0aaaaaaaaaaaaaaaa' }, securityGroupIds: ['sg-0bbbbbbbbbbbbbbbb'] });
const app = () => new App({ context: { ...FEATURE_FLAGS, 'aws:cdk:bundling-stacks': [] } });

describe('addRelaunchStacks', () => {
  it('adds no forwarder when jobs run in one region', () => {
    const { relaunch, forwarders } = addRelaunchStacks(app(), 'Relaunch', NETWORK);
    expect(relaunch.stackName).toBe('Relaunch');
    expect(forwarders).toEqual([]);
  });

  it("adds a forwarder in each failover region, to the subnets' region", () => {
    const { forwarders } = addRelaunchStacks(app(), 'Relaunch', { ...NETWORK, otherRegions: [other('us-west-2'), other('eu-west-1')] });
    expect(forwarders.map((stack) => [stack.stackName, stack.region])).toEqual([
      ['Relaunch-events-us-west-2', 'us-west-2'],
      ['Relaunch-events-eu-west-1', 'eu-west-1'],
    ]);
    expect(forwarders.map((stack) => stack.templateOptions.description)).toEqual([
      'relaunch: EC2 events of us-west-2, forwarded to us-east-1',
      'relaunch: EC2 events of eu-west-1, forwarded to us-east-1',
    ]);
  });
});

describe('Ec2EventForwarderStack', () => {
  it("sends the events relaunch's rules match to its region's default bus", () => {
    const template = Template.fromStack(new Ec2EventForwarderStack(app(), 'Forward', { homeRegion: 'us-east-1', region: 'us-west-2' }));
    // The stack has a region, so its partition is written out (@aws-cdk/core:enablePartitionLiterals).
    const homeBus = { 'Fn::Join': ['', ['arn:aws:events:us-east-1:', { Ref: 'AWS::AccountId' }, ':event-bus/default']] };
    for (const { eventPattern } of Object.values(EC2_EVENT_PATTERNS)) {
      template.hasResourceProperties('AWS::Events::Rule', {
        EventPattern: { source: eventPattern.source, 'detail-type': eventPattern.detailType, ...('detail' in eventPattern ? { detail: eventPattern.detail } : {}) },
        Targets: [{ Arn: homeBus, RoleArn: {}, DeadLetterConfig: { Arn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^Undelivered'), 'Arn'] } }, Id: Match.anyValue() }],
      });
    }
    // What cannot be forwarded waits 14 days in a queue named for the home region's janitor.
    template.hasResourceProperties('AWS::SQS::Queue', {
      QueueName: 'relaunch-forwarded-ec2-events-undelivered',
      MessageRetentionPeriod: 1_209_600,
      SqsManagedSseEnabled: true,
    });
    template.resourceCountIs('AWS::Events::Rule', 3);
    // One role, EventBridge's, which may put events on that one bus and do nothing else.
    template.resourceCountIs('AWS::IAM::Role', 1);
    template.hasResourceProperties('AWS::IAM::Role', {
      AssumeRolePolicyDocument: { Statement: [{ Action: 'sts:AssumeRole', Effect: 'Allow', Principal: { Service: 'events.amazonaws.com' } }] },
    });
    template.resourceCountIs('AWS::IAM::Policy', 1);
    template.hasResourceProperties('AWS::IAM::Policy', {
      PolicyDocument: { Statement: [{ Action: 'events:PutEvents', Effect: 'Allow', Resource: homeBus }] },
    });
  });

  it.each<Record<string, string>>([{}, { 'us-east-1': 'subnet-0123456789abcdef0' }, { 'us-east-1a': 'subnet-0123456789abcdef0', 'eu-west-1a': 'subnet-0123456789abcdef1' }])(
    'refuses subnets %j, which name no one home region',
    (subnetsByZone) => {
      expect(() => addRelaunchStacks(app(), 'Relaunch', { ...NETWORK, subnetsByZone })).toThrow(/subnetsByZone: expected availability zones of one region/);
    },
  );

  it("refuses to forward relaunch's own region to itself", () => {
    expect(() => new Ec2EventForwarderStack(app(), 'Loop', { homeRegion: 'us-east-1', region: 'us-east-1' })).toThrow(ConfigurationError);
  });
});
