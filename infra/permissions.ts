// Least-privilege IAM for the Lambdas, one function per kind of access, each scoped as far
// as the service allows (EC2's tag and CreateAction conditions, the table and its indexes,
// the one state machine).

import { Aws } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import { TagKey, NODE_IPS_TAG_PREFIX } from '../lib/agent/tags.ts';
import { DEPLOYMENT_TAG_KEY, SPOT_SERVICE_LINKED_ROLE } from '../lib/workflow/resources.ts';
import type { JobSecretsCall, WorkflowCall } from './lambda-catalog.ts';

/** Table actions the stores use (a TransactWriteItems is authorized as its Puts and Updates; a list reads jobs with BatchGetItem; a cancel deletes its launch slot's item). */
const TABLE_READ = ['dynamodb:GetItem', 'dynamodb:Query', 'dynamodb:BatchGetItem'];
const TABLE_WRITE = ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'];
/** A standby's start and retirement check the job's live attempt in their transaction (its ConditionCheck). */
const TABLE_STANDBY_CHECK = ['dynamodb:ConditionCheckItem'];

/**
 * Reads the table and queries its indexes; `write` adds the conditional writes, and
 * `standbys` the condition check that writing standbys takes (launch_on_warning).
 */
export function grantTable(grantee: iam.IGrantable, table: dynamodb.ITable, access: 'read' | 'write', standbys = false): void {
  iam.Grant.addToPrincipal({
    grantee,
    actions: access === 'write' ? [...TABLE_READ, ...TABLE_WRITE, ...(standbys ? TABLE_STANDBY_CHECK : [])] : TABLE_READ,
    resourceArns: [table.tableArn],
  });
  iam.Grant.addToPrincipal({ grantee, actions: ['dynamodb:Query'], resourceArns: [`${table.tableArn}/index/*`] });
}

/**
 * The Step Functions actions behind each call of the Workflow port (SfnWorkflow), and what
 * they act on: the state machine (starting one), its executions (reading one's history and
 * stopping it), or a task token, which IAM cannot name: AWS's Service Authorization
 * Reference lists no resource type for SendTaskSuccess, SendTaskFailure and
 * SendTaskHeartbeat, so only `*` grants them (a grant on the state machine's ARN allows
 * nothing). The token itself, unguessable and held by the one waiting task, is the scope.
 */
export const WORKFLOW_ACTIONS: Readonly<Record<WorkflowCall, { readonly actions: readonly string[]; readonly on: 'machine' | 'executions' | 'task-token' }>> = {
  start: { actions: ['states:StartExecution'], on: 'machine' },
  resume: { actions: ['states:SendTaskSuccess'], on: 'task-token' },
  fail: { actions: ['states:SendTaskFailure'], on: 'task-token' },
  heartbeat: { actions: ['states:SendTaskHeartbeat'], on: 'task-token' },
  stopBetweenSteps: { actions: ['states:GetExecutionHistory', 'states:StopExecution'], on: 'executions' },
};

/** The controller as IAM names it: the state machine, and every execution of it. */
export interface ControllerArns {
  readonly stateMachineArn: string;
  /** `arn:…:execution:<machine name>:*`. */
  readonly executionsArn: string;
}

/** The Step Functions actions of exactly the Workflow calls given, on the controller wherever IAM can name it. */
export function grantWorkflow(grantee: iam.IGrantable, controller: ControllerArns, calls: readonly WorkflowCall[]): void {
  const resources = { machine: controller.stateMachineArn, executions: controller.executionsArn, 'task-token': '*' } as const;
  for (const on of ['machine', 'executions', 'task-token'] as const) {
    const actions = calls.flatMap((call) => (WORKFLOW_ACTIONS[call].on === on ? WORKFLOW_ACTIONS[call].actions : []));
    if (actions.length === 0) continue;
    iam.Grant.addToPrincipal({ grantee, actions, resourceArns: [resources[on]] });
  }
}

/** One region's network, as far as IAM needs it (tokens allowed, e.g. Aws.REGION). */
export interface LaunchRegion {
  readonly region: string;
  readonly subnetIds: readonly string[];
  readonly securityGroupIds: readonly string[];
}

/** Where and as what instances launch. */
export interface LaunchScope {
  readonly regions: readonly LaunchRegion[];
  readonly instanceRoleArn: string;
  /** Exact instance types RunInstances may start; empty: any. */
  readonly allowedInstanceTypes: readonly string[];
  /** The folder of the agents' secret parameters (agentSecretPath). */
  readonly agentSecretPath: string;
  /**
   * The deployment's name prefix, the value of DEPLOYMENT_TAG_KEY on everything it
   * launches: its functions create only resources so tagged and touch no others, so two
   * deployments in one account and region cannot reach each other's instances.
   */
  readonly deployment: string;
}

const JOB_TAG_PRESENT = { [`aws:RequestTag/${TagKey.jobId}`]: '*' };
const TAGGED_JOB_RESOURCE = { [`aws:ResourceTag/${TagKey.jobId}`]: '*' };

/** What a create must carry: the job tag, and this deployment's tag. */
function createdByThisDeployment(scope: LaunchScope, extra: Readonly<Record<string, string | string[]>> = {}): Record<string, Record<string, string | string[]>> {
  return { StringLike: { ...JOB_TAG_PRESENT, ...extra }, StringEquals: { [`aws:RequestTag/${DEPLOYMENT_TAG_KEY}`]: scope.deployment } };
}

/** What an existing resource must carry to be touched: the job tag, and this deployment's tag. */
function ownedByThisDeployment(scope: LaunchScope): Record<string, Record<string, string>> {
  return { StringLike: TAGGED_JOB_RESOURCE, StringEquals: { [`aws:ResourceTag/${DEPLOYMENT_TAG_KEY}`]: scope.deployment } };
}
/**
 * Tags the launcher adds after CreateFleet (a node's rank and every node's IP), and the
 * attempt a node kept from the attempt before moves to.
 */
const TAGS_AFTER_LAUNCH = [TagKey.nodeRank, `${NODE_IPS_TAG_PREFIX}*`, TagKey.attempt];

/** `arn:…:ec2:<region>:<account>:<resource>` in every region; images and snapshots have no account. */
function ec2Arns(scope: LaunchScope, resource: string, account: string = Aws.ACCOUNT_ID): string[] {
  return scope.regions.map(({ region }) => ec2Arn(region, resource, account));
}

function ec2Arn(region: string, resource: string, account: string = Aws.ACCOUNT_ID): string {
  return `arn:${Aws.PARTITION}:ec2:${region}:${account}:${resource}`;
}

/** Deletes this deployment's own launch templates (tagged with a job and its name) and nothing else. */
function grantDeleteLaunchTemplates(grantee: iam.IGrantable, scope: LaunchScope): void {
  allow(grantee, {
    sid: 'DeleteOwnLaunchTemplates',
    actions: ['ec2:DeleteLaunchTemplate'],
    resources: ec2Arns(scope, 'launch-template/*'),
    conditions: ownedByThisDeployment(scope),
  });
}

/**
 * The janitor's sweep of launch templates a launch left behind: it lists them (a Describe,
 * which takes no resource but `*`) and deletes relaunch's own.
 */
export function grantSweepLaunchTemplates(grantee: iam.IGrantable, scope: LaunchScope): void {
  grantDeleteLaunchTemplates(grantee, scope);
  allow(grantee, { sid: 'ListLaunchTemplates', actions: ['ec2:DescribeLaunchTemplates'], resources: ['*'] });
}

/**
 * EC2 access of a compute user: `release` terminates relaunch's instances; `launch` also
 * starts them (a launch that cannot record its instances gives them back at once).
 */
export function grantCompute(grantee: iam.IGrantable, scope: LaunchScope, access: 'launch' | 'release'): void {
  if (access === 'launch') {
    grantLaunch(grantee, scope);
    grantDeleteLaunchTemplates(grantee, scope);
  }
  allow(grantee, {
    sid: 'TerminateOnlyJobInstances',
    actions: ['ec2:TerminateInstances'],
    resources: ec2Arns(scope, 'instance/*'),
    conditions: ownedByThisDeployment(scope),
  });
  // A release holds the nodes a relaunch keeps (Compute.hold). Only that one tag, only on
  // this deployment's instances; it is never removed (it names the attempt that ended).
  allow(grantee, {
    sid: 'MarkHeldNodes',
    actions: ['ec2:CreateTags'],
    resources: ec2Arns(scope, 'instance/*'),
    conditions: { ...ownedByThisDeployment(scope), 'ForAllValues:StringEquals': { 'aws:TagKeys': [TagKey.heldAfter] } },
  });
  allow(grantee, {
    sid: 'DeleteAgentSecrets',
    actions: ['ssm:DeleteParameters', 'ssm:DeleteParameter'],
    resources: agentSecretArns(scope),
  });
  // DescribeInstances, DescribeImages and DescribeSpotPriceHistory (the price at launch)
  // support no resource-level permissions: `*` is all they take.
  allow(grantee, {
    sid: 'Ec2DescribeHasNoResourceScope',
    actions: ['ec2:DescribeInstances', 'ec2:DescribeImages', 'ec2:DescribeSpotPriceHistory'],
    resources: ['*'],
  });
}

/**
 * Launches instances (Ec2Compute's launch templates and instant CreateFleet, which EC2
 * authorizes as CreateFleet and RunInstances on every resource it creates or uses): the
 * templates, fleets, instances and volumes only tagged with `relaunch:job-id` and this
 * deployment's DEPLOYMENT_TAG_KEY, only of allowed types, only in the configured subnets
 * and security groups, only from this deployment's own (tagged) templates, only as the
 * instance role; tags only at creation, plus the rank and node-IP tags on this
 * deployment's own instances afterwards; the public SSM parameters naming default AMIs;
 * and the spot service-linked role where it is missing.
 */
function grantLaunch(grantee: iam.IGrantable, scope: LaunchScope): void {
  const typeCondition: Record<string, string[]> = scope.allowedInstanceTypes.length === 0 ? {} : { 'ec2:InstanceType': [...scope.allowedInstanceTypes] };
  allow(grantee, {
    sid: 'CreateTaggedLaunchTemplates',
    actions: ['ec2:CreateLaunchTemplate'],
    resources: ec2Arns(scope, 'launch-template/*'),
    conditions: createdByThisDeployment(scope),
  });
  allow(grantee, {
    sid: 'CreateTaggedInstantFleets',
    actions: ['ec2:CreateFleet'],
    resources: ec2Arns(scope, 'fleet/*'),
    conditions: createdByThisDeployment(scope),
  });
  allow(grantee, {
    sid: 'LaunchFromOwnTemplates',
    actions: ['ec2:CreateFleet', 'ec2:RunInstances'],
    resources: ec2Arns(scope, 'launch-template/*'),
    conditions: ownedByThisDeployment(scope),
  });
  allow(grantee, {
    sid: 'LaunchTaggedInstances',
    actions: ['ec2:CreateFleet', 'ec2:RunInstances'],
    resources: ec2Arns(scope, 'instance/*'),
    conditions: createdByThisDeployment(scope, typeCondition),
  });
  allow(grantee, {
    sid: 'LaunchTaggedVolumes',
    actions: ['ec2:CreateFleet', 'ec2:RunInstances'],
    resources: ec2Arns(scope, 'volume/*'),
    conditions: createdByThisDeployment(scope),
  });
  allow(grantee, {
    sid: 'LaunchIntoGivenNetwork',
    actions: ['ec2:CreateFleet', 'ec2:RunInstances'],
    resources: [
      ...scope.regions.flatMap(({ region, subnetIds, securityGroupIds }) => [
        ...subnetIds.map((id) => ec2Arn(region, `subnet/${id}`)),
        ...securityGroupIds.map((id) => ec2Arn(region, `security-group/${id}`)),
      ]),
      // The interface the launch creates (an EFA one with network_tier: best), in those subnets only.
      ...ec2Arns(scope, 'network-interface/*'),
      // The spot request of a spot launch; the instance it starts is tag-gated above.
      ...ec2Arns(scope, 'spot-instances-request/*'),
      ...ec2Arns(scope, 'image/*', ''),
      ...ec2Arns(scope, 'snapshot/*', ''),
    ],
  });
  allow(grantee, {
    sid: 'TagOnlyAtCreation',
    actions: ['ec2:CreateTags'],
    resources: [...ec2Arns(scope, 'instance/*'), ...ec2Arns(scope, 'volume/*'), ...ec2Arns(scope, 'launch-template/*'), ...ec2Arns(scope, 'fleet/*')],
    conditions: { StringEquals: { 'ec2:CreateAction': ['RunInstances', 'CreateFleet', 'CreateLaunchTemplate'] } },
  });
  allow(grantee, {
    sid: 'TagNodesOfJobInstances',
    actions: ['ec2:CreateTags'],
    resources: ec2Arns(scope, 'instance/*'),
    conditions: {
      ...ownedByThisDeployment(scope),
      'ForAllValues:StringLike': { 'aws:TagKeys': TAGS_AFTER_LAUNCH },
    },
  });
  allow(grantee, {
    sid: 'PassOnlyTheInstanceRole',
    actions: ['iam:PassRole'],
    resources: [scope.instanceRoleArn],
    conditions: { StringEquals: { 'iam:PassedToService': 'ec2.amazonaws.com' } },
  });
  // PutParameter with tags is also authorized as AddTagsToResource. The default aws/ssm
  // key encrypts them: its key policy lets the account's principals use it through SSM.
  allow(grantee, {
    sid: 'PutAgentSecrets',
    actions: ['ssm:PutParameter', 'ssm:AddTagsToResource'],
    resources: agentSecretArns(scope),
  });
  // AWS's own public parameters: the reference's ARN format for a parameter has an account,
  // while AWS names these with none (`arn:aws:ssm:REGION::parameter/aws/...`, as GetParameter
  // answers). `*` for the account grants both forms; no account but AWS can own a parameter
  // under /aws/.
  allow(grantee, {
    sid: 'PublicAmiParameters',
    actions: ['ssm:GetParameter'],
    resources: scope.regions.map(({ region }) => `arn:${Aws.PARTITION}:ssm:${region}:*:parameter/aws/service/*`),
  });
  // An account that never launched spot has no AWSServiceRoleForEC2Spot. EC2 may create it
  // during a spot launch only for a caller allowed to, and refuses the launch otherwise
  // (AuthFailure.ServiceLinkedRoleCreationNotPermitted); AWS's documentation asks API
  // callers to create it beforehand (docs/aws.md). This role, and only for EC2 Spot.
  allow(grantee, {
    sid: 'CreateSpotServiceLinkedRole',
    actions: ['iam:CreateServiceLinkedRole'],
    resources: [`arn:${Aws.PARTITION}:iam::${Aws.ACCOUNT_ID}:role/aws-service-role/${SPOT_SERVICE_LINKED_ROLE.service}/${SPOT_SERVICE_LINKED_ROLE.name}`],
    conditions: { StringEquals: { 'iam:AWSServiceName': SPOT_SERVICE_LINKED_ROLE.service } },
  });
}

/** The SSM action behind each call of the JobSecrets port (SsmJobSecrets). */
export const JOB_SECRETS_ACTIONS: Readonly<Record<JobSecretsCall, string>> = {
  put: 'ssm:PutParameter',
  get: 'ssm:GetParameter',
  delete: 'ssm:DeleteParameter',
};

/** Exactly the JobSecrets calls given, on the jobs' secrets only (the stack's region). */
export function grantJobSecrets(grantee: iam.IGrantable, path: string, calls: readonly JobSecretsCall[]): void {
  if (calls.length === 0) return;
  allow(grantee, {
    sid: 'JobSecrets',
    actions: calls.map((call) => JOB_SECRETS_ACTIONS[call]),
    resources: [`arn:${Aws.PARTITION}:ssm:${Aws.REGION}:${Aws.ACCOUNT_ID}:parameter${path}/*`],
  });
}

/** The agents' secret parameters in every launch region. */
export function agentSecretArns(scope: Pick<LaunchScope, 'regions' | 'agentSecretPath'>): string[] {
  return scope.regions.map(({ region }) => `arn:${Aws.PARTITION}:ssm:${region}:${Aws.ACCOUNT_ID}:parameter${scope.agentSecretPath}/*`);
}

function allow(grantee: iam.IGrantable, statement: iam.PolicyStatementProps): void {
  grantee.grantPrincipal.addToPrincipalPolicy(new iam.PolicyStatement(statement));
}

/** What the API reads for `relaunch logs`: its only CloudWatch Logs actions. */
export const LOG_READ_ACTIONS = ['logs:GetLogEvents', 'logs:FilterLogEvents', 'logs:DescribeLogStreams'] as const;

/**
 * Lets `grantee` read the deployment's job log group (named, so its ARN is known before the
 * shipper's construct makes it) and the given functions' log groups, and no other: a group
 * is granted as IAM names it for FilterLogEvents and DescribeLogStreams (`log-group:NAME`)
 * and with its streams for GetLogEvents (`log-group:NAME:*`).
 */
export function grantLogReading(grantee: iam.IGrantable, jobLogGroupName: string, controllerLogGroups: readonly { readonly logGroupName: string; readonly logGroupArn: string }[]): void {
  const group = (name: string) => `arn:${Aws.PARTITION}:logs:${Aws.REGION}:${Aws.ACCOUNT_ID}:log-group:${name}`;
  const resourceArns = [group(jobLogGroupName), `${group(jobLogGroupName)}:*`];
  for (const logGroup of controllerLogGroups) resourceArns.push(group(logGroup.logGroupName), logGroup.logGroupArn);
  iam.Grant.addToPrincipal({ grantee, actions: [...LOG_READ_ACTIONS], resourceArns });
}
