// Lambda refuses a function whose environment passes 4 KB (keys, values and their JSON
// encoding): the deploy would fail. The stack keeps every function well inside it with many
// regions, and a deployment that would pass it fails at synth, naming the function.

import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import type { RelaunchConfig } from '../../../infra/config.ts';
import { LAMBDA_NAMES } from '../../../infra/lambda-catalog.ts';
import { environmentBound, LAMBDA_ENVIRONMENT_MAX_BYTES } from '../../../infra/lambda-environment.ts';
import { RelaunchStack } from '../../../infra/relaunch-stack.ts';
import { resolveCfn, type CfnValues, type Physical } from '../../support/cfn-intrinsics.ts';
import { FEATURE_FLAGS } from '../../../infra/feature-flags.ts';

process.env.CDK_VALIDATION = 'false';

/** A deployment in us-east-1 (3 zones) failing over to `count` more regions of 3 zones each, with 6 allowed types. */
function config(count: number): RelaunchConfig {
  const hex = (n: number) => n.toString(16).padStart(17, '0');
  const regions = ['us-west-2', 'eu-west-1', 'eu-central-1', 'ap-northeast-1', 'ap-southeast-2', 'ca-central-1', 'sa-east-1', 'eu-north-1', 'ap-south-1', 'us-east-2',
    'eu-west-2', 'eu-west-3', 'ap-northeast-2', 'ap-northeast-3', 'ap-southeast-1', 'us-west-1', 'eu-south-1', 'me-south-1', 'af-south-1', 'ap-east-1',
    'eu-central-2', 'eu-south-2', 'ap-south-2', 'ap-southeast-3', 'ap-southeast-4', 'il-central-1', 'me-central-1', 'ca-west-1'];
  return {
    vpcId: 'vpc-0123456789abcdef0',
    subnetsByZone: { 'us-east-1a': `subnet-${hex(1)}`, 'us-east-1b': `subnet-${hex(2)}`, 'us-east-1c': `subnet-${hex(3)}` },
    otherRegions: regions.slice(0, count).map((region, i) => ({
      region,
      subnetsByZone: Object.fromEntries(['a', 'b', 'c'].map((zone, j) => [`${region}${zone}`, `subnet-${hex(100 + i * 10 + j)}`])),
      securityGroupIds: [`sg-${hex(i)}`],
    })),
    allowedInstanceTypes: ['m6i.large', 'm6i.xlarge', 'c7i.large', 'g5.xlarge', 'p4d.24xlarge', 'p5.48xlarge'],
    dataBuckets: ['team-data-*', 'checkpoints-prod'],
    jobNotifications: true,
    namePrefix: 'relaunch-production',
  };
}

function synth(props: RelaunchConfig): Record<string, { Type: string; Properties: Record<string, unknown> }> {
  return synthStack(props).resources;
}

function synthStack(props: RelaunchConfig): { stack: RelaunchStack; resources: Record<string, { Type: string; Properties: Record<string, unknown> }> } {
  const app = new App({ context: { ...FEATURE_FLAGS, 'aws:cdk:bundling-stacks': [] } });
  const stack = new RelaunchStack(app, 'Relaunch', { relaunch: props });
  return { stack, resources: Template.fromStack(stack).toJSON().Resources as Record<string, { Type: string; Properties: Record<string, unknown> }> };
}

/**
 * Values as a real deployment gives them: a long region, and the names CloudFormation
 * makes (`<stack>-<logical id>-<13 characters>`), in each type's own form.
 */
function deployed(resources: ReturnType<typeof synth>): CfnValues {
  const region = 'ap-southeast-4';
  const account = '123456789012';
  return {
    pseudo: { 'AWS::Region': region, 'AWS::AccountId': account, 'AWS::Partition': 'aws', 'AWS::URLSuffix': 'amazonaws.com', 'AWS::StackName': 'Relaunch' },
    physical: (id): Physical => {
      const name = `Relaunch-${id}-ABCDEFGHIJKLM`;
      const type = resources[id]?.Type;
      const arn = (service: string, path: string, where = `${region}:${account}`) => `arn:aws:${service}:${where}:${path}`;
      switch (type) {
        case 'AWS::SQS::Queue':
          return { ref: `https://sqs.${region}.amazonaws.com/${account}/${name}`, attributes: { Arn: arn('sqs', name) } };
        case 'AWS::EC2::SecurityGroup':
          return { ref: 'sg-0123456789abcdef0', attributes: { GroupId: 'sg-0123456789abcdef0' } };
        case 'AWS::IAM::Role':
          return { ref: name, attributes: { Arn: arn('iam', `role/${name.slice(0, 64)}`, `:${account}`) } };
        case 'AWS::IAM::InstanceProfile':
          return { ref: name, attributes: { Arn: arn('iam', `instance-profile/${name}`, `:${account}`) } };
        case 'AWS::ApiGateway::RestApi':
          return { ref: 'a1b2c3d4e5', attributes: {} };
        case 'AWS::ApiGateway::Stage':
          return { ref: String(resources[id]?.Properties.StageName), attributes: {} };
        case 'AWS::SNS::Topic':
          return { ref: arn('sns', String(resources[id]?.Properties.TopicName ?? name)), attributes: {} };
        case 'AWS::S3::Bucket':
          return { ref: name.toLowerCase().slice(0, 63), attributes: { Arn: `arn:aws:s3:::${name.toLowerCase().slice(0, 63)}` } };
        default:
          return { ref: name, attributes: { Arn: arn('service', `resource/${name}`) } };
      }
    },
  };
}

/** Each function's environment, deployed, as JSON bytes. */
function sizes(resources: ReturnType<typeof synth>): Record<string, number> {
  return Object.fromEntries(
    Object.entries(resources)
      .filter(([, r]) => r.Type === 'AWS::Lambda::Function')
      .map(([id, r]) => {
        const variables = resolveCfn((r.Properties.Environment as { Variables?: unknown } | undefined)?.Variables ?? {}, deployed(resources));
        return [LAMBDA_NAMES.find((name) => id.startsWith(`RelaunchFunctions${name.replaceAll('-', '')}`)) ?? id, Buffer.byteLength(JSON.stringify(variables))];
      }),
  );
}

describe("each Lambda's environment", () => {
  it('leaves a quarter of the 4 KB free with 7 regions of 3 zones, 6 allowed types, data buckets and notifications', () => {
    const found = sizes(synth(config(6)));
    expect(Object.keys(found)).toHaveLength(LAMBDA_NAMES.length);
    for (const [name, bytes] of Object.entries(found)) expect(bytes, name).toBeLessThanOrEqual(LAMBDA_ENVIRONMENT_MAX_BYTES * 0.75);
  });

  it("is bounded at synth by no less than it takes deployed with CloudFormation's names", () => {
    const { stack, resources } = synthStack(config(6));
    const deployed = sizes(resources);
    for (const name of LAMBDA_NAMES) {
      const bound = environmentBound(stack.relaunch.functions.functions[name]).total;
      expect(bound, name).toBeGreaterThanOrEqual(deployed[name] as number);
      expect(bound, name).toBeLessThanOrEqual(LAMBDA_ENVIRONMENT_MAX_BYTES);
    }
  });

  it('fails the synth, naming the function and its size, when a deployment would pass 4 KB', () => {
    expect(() => synth(config(28))).toThrow(/launch-attempt.*environment.*\d[\d,]* bytes.*4,096/s);
  });
});
