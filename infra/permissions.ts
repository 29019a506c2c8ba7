// Least-privilege IAM for the Lambdas, one function per kind of access, each scoped as far
// as the service allows (EC2's tag and CreateAction conditions, the table and its indexes,
// the one state machine).

import { Aws } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import { TagKey, NODE_IPS_TAG_PREFIX } from '../lib/agent/tags.ts';

/** Table actions DynamoJobStore uses (TransactWriteItems is authorized as its Put/Update/ConditionCheck). */
const TABLE_READ = ['dynamodb:GetItem', 'dynamodb:Query'];
const TABLE_WRITE = ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:ConditionCheckItem'];

/** Reads the table and queries its indexes; `write` adds the conditional writes. */
export function grantTable(grantee: iam.IGrantable, table: dynamodb.ITable, access: 'read' | 'write'): void {
  iam.Grant.addToPrincipal({
    grantee,
    actions: access === 'write' ? [...TABLE_READ, ...TABLE_WRITE] : TABLE_READ,
    resourceArns: [table.tableArn],
  });
  iam.Grant.addToPrincipal({ grantee, actions: ['dynamodb:Query'], resourceArns: [`${table.tableArn}/index/*`] });
}

/** Starts executions of the controller, answers its task tokens, and stops its executions. */
export function grantWorkflow(grantee: iam.IGrantable, stateMachineArn: string, executionArns: string): void {
  iam.Grant.addToPrincipal({
    grantee,
    actions: ['states:StartExecution', 'states:SendTaskSuccess', 'states:SendTaskFailure', 'states:SendTaskHeartbeat'],
    resourceArns: [stateMachineArn],
  });
  iam.Grant.addToPrincipal({ grantee, actions: ['states:StopExecution'], resourceArns: [executionArns] });
}

/** Where and as what instances launch. */
export interface LaunchScope {
  /** Regions to launch in (tokens allowed, e.g. Aws.REGION). */
  readonly regions: readonly string[];
  readonly subnetIds: readonly string[];
  readonly securityGroupId: string;
  readonly instanceRoleArn: string;
  /** IAM StringLike patterns of allowed instance types; empty: any. */
  readonly allowedInstanceTypes: readonly string[];
}

const JOB_TAG_PRESENT = { [`aws:RequestTag/${TagKey.jobId}`]: '*' };
const TAGGED_JOB_RESOURCE = { [`aws:ResourceTag/${TagKey.jobId}`]: '*' };
const CREATE_ACTIONS = ['RunInstances', 'CreateFleet'];

function ec2Arns(scope: LaunchScope, resource: string, account: string = Aws.ACCOUNT_ID): string[] {
  return scope.regions.map((region) => `arn:${Aws.PARTITION}:ec2:${region}:${account}:${resource}`);
}

/**
 * EC2 access of a compute user: `release` terminates relaunch's instances; `launch` also
 * starts them (a launch that cannot record its instances gives them back at once).
 */
export function grantCompute(grantee: iam.IGrantable, scope: LaunchScope, access: 'launch' | 'release'): void {
  if (access === 'launch') grantLaunch(grantee, scope);
  grantRelease(grantee, scope.regions);
  grantDescribe(grantee);
}

/**
 * Launches instances: only tagged with `relaunch:job-id`, only of allowed types, only in the
 * given subnets and security group, only as the instance role; tags only at creation (and
 * the node-IPs tags on relaunch's own instances afterwards).
 */
function grantLaunch(grantee: iam.IGrantable, scope: LaunchScope): void {
  const principal = grantee.grantPrincipal;
  const typeCondition =
    scope.allowedInstanceTypes.length === 0 ? {} : { 'ec2:InstanceType': [...scope.allowedInstanceTypes] };
  const allow = (statement: iam.PolicyStatementProps) => principal.addToPrincipalPolicy(new iam.PolicyStatement(statement));

  allow({
    sid: 'LaunchTaggedInstances',
    actions: ['ec2:RunInstances'],
    resources: ec2Arns(scope, 'instance/*'),
    conditions: { StringLike: { ...JOB_TAG_PRESENT, ...typeCondition } },
  });
  allow({
    sid: 'LaunchTaggedVolumes',
    actions: ['ec2:RunInstances'],
    resources: ec2Arns(scope, 'volume/*'),
    conditions: { StringLike: JOB_TAG_PRESENT },
  });
  allow({
    sid: 'LaunchIntoGivenNetwork',
    actions: ['ec2:RunInstances'],
    resources: [
      ...scope.subnetIds.map((id) => `arn:${Aws.PARTITION}:ec2:${Aws.REGION}:${Aws.ACCOUNT_ID}:subnet/${id}`),
      `arn:${Aws.PARTITION}:ec2:${Aws.REGION}:${Aws.ACCOUNT_ID}:security-group/${scope.securityGroupId}`,
      // A network interface is created in those subnets only (the subnet statement above).
      ...ec2Arns(scope, 'network-interface/*'),
      // The spot request RunInstances creates for a spot launch; the instance itself is tag-gated.
      ...ec2Arns(scope, 'spot-instances-request/*'),
      // Public and own AMIs and their snapshots: images have no account in their ARN.
      ...ec2Arns(scope, 'image/*', ''),
      ...ec2Arns(scope, 'snapshot/*', ''),
    ],
  });
  allow({
    sid: 'TagOnlyAtLaunch',
    actions: ['ec2:CreateTags'],
    resources: [...ec2Arns(scope, 'instance/*'), ...ec2Arns(scope, 'volume/*'), ...ec2Arns(scope, 'spot-instances-request/*')],
    conditions: { StringEquals: { 'ec2:CreateAction': CREATE_ACTIONS } },
  });
  allow({
    sid: 'TagNodeIpsOnJobInstances',
    actions: ['ec2:CreateTags'],
    resources: ec2Arns(scope, 'instance/*'),
    conditions: {
      StringLike: TAGGED_JOB_RESOURCE,
      'ForAllValues:StringLike': { 'aws:TagKeys': [`${NODE_IPS_TAG_PREFIX}*`] },
    },
  });
  allow({
    sid: 'PassOnlyTheInstanceRole',
    actions: ['iam:PassRole'],
    resources: [scope.instanceRoleArn],
    conditions: { StringEquals: { 'iam:PassedToService': 'ec2.amazonaws.com' } },
  });
  allow({
    sid: 'PublicAmiParameters',
    actions: ['ssm:GetParameter', 'ssm:GetParameters'],
    resources: scope.regions.map((region) => `arn:${Aws.PARTITION}:ssm:${region}::parameter/aws/service/*`),
  });
}

/** Terminates instances, only those tagged as relaunch's. */
function grantRelease(grantee: iam.IGrantable, regions: readonly string[]): void {
  grantee.grantPrincipal.addToPrincipalPolicy(
    new iam.PolicyStatement({
      sid: 'TerminateOnlyJobInstances',
      actions: ['ec2:TerminateInstances'],
      resources: regions.map((region) => `arn:${Aws.PARTITION}:ec2:${region}:${Aws.ACCOUNT_ID}:instance/*`),
      conditions: { StringLike: TAGGED_JOB_RESOURCE },
    }),
  );
}

/** EC2's Describe calls support no resource-level permissions: `*` is the only resource they take. */
function grantDescribe(grantee: iam.IGrantable): void {
  grantee.grantPrincipal.addToPrincipalPolicy(
    new iam.PolicyStatement({
      sid: 'Ec2DescribeHasNoResourceScope',
      actions: [
        'ec2:DescribeInstances',
        'ec2:DescribeInstanceTypes',
        'ec2:DescribeInstanceTypeOfferings',
        'ec2:DescribeImages',
        'ec2:DescribeSubnets',
        'ec2:DescribeAvailabilityZones',
      ],
      resources: ['*'],
    }),
  );
}

