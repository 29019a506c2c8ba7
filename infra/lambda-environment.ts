// Lambda refuses a function whose environment passes 4 KB (keys and values, as JSON), and
// refuses it at deploy time, half way through a stack update. So the bound is checked at
// synth: every value the template gives a variable, with each CloudFormation reference
// replaced by the longest text it can resolve to (a region, an account, a name
// CloudFormation makes: `<stack>-<logical id>-<13 characters>`), must fit.

import { CfnResource, Stack } from 'aws-cdk-lib';
import * as apigateway from 'aws-cdk-lib/aws-apigateway';
import type * as lambda from 'aws-cdk-lib/aws-lambda';

/** Lambda's limit on a function's environment variables, in bytes. */
export const LAMBDA_ENVIRONMENT_MAX_BYTES = 4096;

/** The longest a region (`ap-southeast-4`, with room), an account, a partition (`aws-us-gov`) and a URL suffix (`amazonaws.com.cn`) are. */
const REGION_MAX = 16;
const ACCOUNT_LENGTH = 12;
const PARTITION_MAX = 10;
const URL_SUFFIX_MAX = 16;

const PSEUDO_MAX: Readonly<Record<string, number>> = {
  'AWS::Region': REGION_MAX,
  'AWS::AccountId': ACCOUNT_LENGTH,
  'AWS::Partition': PARTITION_MAX,
  'AWS::URLSuffix': URL_SUFFIX_MAX,
};

/** The random part CloudFormation adds to the names it makes. */
const NAME_SUFFIX_LENGTH = 13;

/** The longest an ARN's prefix is before its resource part: `arn:PARTITION:SERVICE:REGION:ACCOUNT:`. */
const arnPrefix = (service: string, regional = true) => 'arn::'.length + PARTITION_MAX + service.length + 2 + (regional ? REGION_MAX : 0) + ACCOUNT_LENGTH;

/**
 * The longest `Ref` or `Fn::GetAtt` of a resource of each type the functions' variables
 * name; `name` is the longest name CloudFormation makes for it (capped at the type's own
 * limit). A type not here makes the check fail: its bound has to be written down first.
 */
const REFERENCE_MAX: Readonly<Record<string, (attribute: string, name: (limit: number) => number) => number | undefined>> = {
  'AWS::DynamoDB::Table': (attribute, name) => (attribute === 'Ref' ? name(255) : attribute === 'Arn' ? arnPrefix('dynamodb') + 'table/'.length + name(255) : undefined),
  'AWS::EC2::SecurityGroup': (attribute) => (attribute === 'GroupId' || attribute === 'Ref' ? 'sg-'.length + 17 : undefined),
  'AWS::IAM::InstanceProfile': (attribute, name) => (attribute === 'Arn' ? arnPrefix('iam', false) + 'instance-profile/'.length + name(128) : attribute === 'Ref' ? name(128) : undefined),
  'AWS::IAM::Role': (attribute, name) => (attribute === 'Arn' ? arnPrefix('iam', false) + 'role/'.length + name(64) : attribute === 'Ref' ? name(64) : undefined),
  'AWS::S3::Bucket': (attribute, name) => (attribute === 'Ref' ? name(63) : attribute === 'Arn' ? 'arn::s3:::'.length + PARTITION_MAX + name(63) : undefined),
  'AWS::SQS::Queue': (attribute, name) =>
    attribute === 'Ref' || attribute === 'QueueUrl'
      ? 'https://sqs..//'.length + REGION_MAX + URL_SUFFIX_MAX + ACCOUNT_LENGTH + name(80)
      : attribute === 'Arn'
        ? arnPrefix('sqs') + name(80)
        : undefined,
  'AWS::SNS::Topic': (attribute, name) => (attribute === 'Ref' || attribute === 'TopicArn' ? arnPrefix('sns') + name(256) : undefined),
  'AWS::ApiGateway::RestApi': (attribute) => (attribute === 'Ref' ? 10 : undefined),
  'AWS::Logs::LogGroup': (attribute, name) => (attribute === 'Ref' ? name(512) : undefined),
};

/** The most bytes `value` (a resolved CloudFormation value) can take once deployed. */
function boundOf(value: unknown, stack: Stack, types: ReadonlyMap<string, string>, stageNames: ReadonlyMap<string, string>): number {
  if (typeof value === 'string') return Buffer.byteLength(JSON.stringify(value)) - 2;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value).length;
  if (Array.isArray(value)) throw new Error(`a list where a string was expected: ${JSON.stringify(value)}`);
  const record = value as Record<string, unknown>;
  if ('Fn::Join' in record) {
    const [separator, parts] = record['Fn::Join'] as [string, unknown[]];
    return parts.reduce<number>((sum, part) => sum + boundOf(part, stack, types, stageNames), 0) + separator.length * Math.max(0, parts.length - 1);
  }
  const reference: readonly [string, string] | undefined =
    'Ref' in record ? [String(record.Ref), 'Ref'] : 'Fn::GetAtt' in record ? (record['Fn::GetAtt'] as [string, string]) : undefined;
  if (reference === undefined) throw new Error(`no bound for ${JSON.stringify(value)}`);
  const [target, attribute] = reference;
  const pseudo = PSEUDO_MAX[target];
  if (pseudo !== undefined) return pseudo;
  if (target === 'AWS::StackName') return stack.stackName.length;
  const stage = stageNames.get(target);
  if (stage !== undefined && attribute === 'Ref') return stage.length;
  const type = types.get(target);
  const name = (limit: number) => Math.min(limit, stack.stackName.length + 1 + target.length + 1 + NAME_SUFFIX_LENGTH);
  const bound = type === undefined ? undefined : REFERENCE_MAX[type]?.(attribute, name);
  if (bound === undefined) throw new Error(`no bound for ${attribute} of ${target} (${type ?? 'not in the stack'})`);
  return bound;
}

/**
 * The most bytes the function's environment can take deployed (its variables as JSON),
 * and each variable's share. Throws for a value it cannot bound.
 */
export function environmentBound(fn: lambda.Function): { readonly total: number; readonly variables: Readonly<Record<string, number>> } {
  const stack = Stack.of(fn);
  const cfn = fn.node.defaultChild as lambda.CfnFunction;
  const resolved = stack.resolve(cfn.environment) as { variables?: Record<string, unknown> } | undefined;
  const variables = resolved?.variables ?? {};
  const types = new Map<string, string>();
  const stageNames = new Map<string, string>();
  for (const construct of stack.node.findAll()) {
    if (!CfnResource.isCfnResource(construct)) continue;
    const logicalId = stack.resolve(construct.logicalId) as string;
    types.set(logicalId, construct.cfnResourceType);
    if (construct instanceof apigateway.CfnStage && typeof construct.stageName === 'string') stageNames.set(logicalId, construct.stageName);
  }
  const shares = Object.fromEntries(
    Object.entries(variables).map(([key, value]) => [key, Buffer.byteLength(JSON.stringify(key)) + 1 + 2 + boundOf(value, stack, types, stageNames)]),
  );
  // `{}` and a comma between each pair.
  const total = 2 + Object.values(shares).reduce((sum, share) => sum + share, 0) + Math.max(0, Object.keys(shares).length - 1);
  return { total, variables: shares };
}

/** Fails the synth when the function's environment could pass Lambda's 4 KB, naming it and its largest variables. */
export function checkEnvironmentSize(fn: lambda.Function, name: string): void {
  fn.node.addValidation({
    validate: () => {
      const { total, variables } = environmentBound(fn);
      if (total <= LAMBDA_ENVIRONMENT_MAX_BYTES) return [];
      const largest = Object.entries(variables)
        .sort(([, a], [, b]) => b - a)
        .slice(0, 3)
        .map(([key, bytes]) => `${key} ${bytes.toLocaleString('en-US')}`);
      return [
        `the ${name} function's environment may reach ${total.toLocaleString('en-US')} bytes once deployed, over Lambda's ${LAMBDA_ENVIRONMENT_MAX_BYTES.toLocaleString('en-US')}` +
          ` (largest: ${largest.join(', ')}): deploy fewer regions (relaunch:otherRegions), zones or allowed instance types`,
      ];
    },
  });
}
