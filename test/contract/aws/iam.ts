// The IAM check: every AWS call a handler made in the suite, turned into the requests IAM
// authorizes for it (the action, the resource ARN and the condition keys it had), and each
// evaluated against the function's role policies from the synthesized template with
// @cloud-copilot/iam-simulate, whose action and resource data come from AWS's Service
// Authorization Reference. A call the model does not know fails the check: a new AWS call
// cannot slip past it.
//
// What EC2 authorizes for an instant CreateFleet follows AWS's documentation: CreateFleet
// on the fleet, and CreateFleet and RunInstances on every resource the launch creates or
// uses (the instances and volumes, with the tags the request gives them; the launch
// templates with their own tags; subnets, security groups, the image, network interfaces,
// the spot request), CreateTags for tags given at creation (ec2:CreateAction), PassRole
// for the instance profile's role, and CreateServiceLinkedRole where EC2 must create the
// spot role for a spot launch. IAM is not documented to count a launch template's tags as
// request tags (issue 23, item 4): the model, like IAM's own simulator, does not.

import {
  DescribeImagesCommand,
  DescribeInstancesCommand,
  DescribeLaunchTemplatesCommand,
  DescribeLaunchTemplateVersionsCommand,
  EC2Client,
} from '@aws-sdk/client-ec2';
import { GetInstanceProfileCommand, GetRoleCommand, IAMClient } from '@aws-sdk/client-iam';
import { runSimulation } from '@cloud-copilot/iam-simulate';
import type { Deployment, PolicyStatement } from './deploy.ts';
import type { Moto } from './moto.ts';
import type { Observed, RecordedCall } from './recorder.ts';

/** One request IAM authorizes for a call. */
export interface Authorization {
  readonly action: string;
  readonly resource: string;
  readonly context: Readonly<Record<string, string | readonly string[]>>;
}

/** EC2's service-linked role for spot, which EC2 creates for a spot launch where it is missing. */
export const SPOT_ROLE = { name: 'AWSServiceRoleForEC2Spot', service: 'spot.amazonaws.com' } as const;

type Tags = Readonly<Record<string, string>>;

interface TemplateSeen {
  readonly tags: Tags;
  readonly imageId?: string;
  readonly securityGroupIds: readonly string[];
  readonly instanceProfileArn?: string;
}

/** What the model reads from moto before a call: the resources' tags and contents. */
interface Seen {
  readonly templates?: Readonly<Record<string, TemplateSeen>>;
  readonly instances?: Readonly<Record<string, Tags>>;
  readonly snapshots?: Readonly<Record<string, readonly string[]>>;
  readonly roleOfProfile?: Readonly<Record<string, string>>;
  readonly spotRoleExists?: boolean;
}

const tagsOf = (list: readonly { Key?: string; Value?: string }[] | undefined): Tags =>
  Object.fromEntries((list ?? []).map((tag) => [tag.Key ?? '', tag.Value ?? '']));

/**
 * Looks at what a call acts on, before it is sent: the tags and launch data its
 * templates hold, the tags of its instances, the image's snapshots, the instance
 * profile's role, whether the spot role exists. With clients of the suite (unrecorded).
 */
export function observer(moto: Moto): (call: RecordedCall) => Promise<Observed | undefined> {
  return async (call) => {
    if (call.service !== 'EC2') return undefined;
    const ec2 = new EC2Client({ region: call.region, endpoint: moto.endpoint });
    const input = call.input as Record<string, unknown>;
    if (call.operation === 'CreateFleet') {
      const ids = ((input.LaunchTemplateConfigs ?? []) as { LaunchTemplateSpecification?: { LaunchTemplateId?: string } }[]).map(
        (config) => config.LaunchTemplateSpecification?.LaunchTemplateId as string,
      );
      const templates: Record<string, TemplateSeen> = {};
      const snapshots: Record<string, string[]> = {};
      const roleOfProfile: Record<string, string> = {};
      const iam = new IAMClient({ region: call.region, endpoint: moto.endpoint });
      for (const id of ids) {
        const described = await ec2.send(new DescribeLaunchTemplatesCommand({ LaunchTemplateIds: [id] }));
        const versions = await ec2.send(new DescribeLaunchTemplateVersionsCommand({ LaunchTemplateId: id, Versions: ['$Latest'] }));
        const data = versions.LaunchTemplateVersions?.[0]?.LaunchTemplateData;
        const groups = [...(data?.SecurityGroupIds ?? []), ...(data?.NetworkInterfaces ?? []).flatMap((nic) => nic.Groups ?? [])];
        templates[id] = {
          tags: tagsOf(described.LaunchTemplates?.[0]?.Tags),
          securityGroupIds: [...new Set(groups)],
          ...(data?.ImageId === undefined ? {} : { imageId: data.ImageId }),
          ...(data?.IamInstanceProfile?.Arn === undefined ? {} : { instanceProfileArn: data.IamInstanceProfile.Arn }),
        };
        const imageId = data?.ImageId;
        if (imageId !== undefined && snapshots[imageId] === undefined) {
          const images = await ec2.send(new DescribeImagesCommand({ ImageIds: [imageId] }));
          snapshots[imageId] = (images.Images?.[0]?.BlockDeviceMappings ?? []).flatMap((mapping) => (mapping.Ebs?.SnapshotId === undefined ? [] : [mapping.Ebs.SnapshotId]));
        }
        const profileArn = data?.IamInstanceProfile?.Arn;
        if (profileArn !== undefined && roleOfProfile[profileArn] === undefined) {
          const profile = await iam.send(new GetInstanceProfileCommand({ InstanceProfileName: profileArn.split('/').pop() }));
          roleOfProfile[profileArn] = profile.InstanceProfile?.Roles?.[0]?.Arn ?? 'no role';
        }
      }
      const spotRoleExists = await iam.send(new GetRoleCommand({ RoleName: SPOT_ROLE.name })).then(
        () => true,
        () => false,
      );
      return { templates, snapshots, roleOfProfile, spotRoleExists } satisfies Seen;
    }
    if (call.operation === 'CreateTags' || call.operation === 'DeleteTags' || call.operation === 'TerminateInstances') {
      const ids = ((input.Resources ?? input.InstanceIds ?? []) as string[]).filter((id) => id.startsWith('i-'));
      const instances: Record<string, Tags> = {};
      for (const id of ids) {
        const found = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [id] })).catch(() => undefined);
        const instance = found?.Reservations?.[0]?.Instances?.[0];
        if (instance !== undefined) instances[id] = tagsOf(instance.Tags);
      }
      return { instances } satisfies Seen;
    }
    if (call.operation === 'DeleteLaunchTemplate') {
      const id = input.LaunchTemplateId as string;
      const described = await ec2.send(new DescribeLaunchTemplatesCommand({ LaunchTemplateIds: [id] })).catch(() => undefined);
      const template = described?.LaunchTemplates?.[0];
      return { templates: template === undefined ? {} : { [id]: { tags: tagsOf(template.Tags), securityGroupIds: [] } } } satisfies Seen;
    }
    return undefined;
  };
}

/** `aws:RequestTag/<key>` for each tag, and `aws:TagKeys`. */
function requestTags(tags: Tags): Record<string, string | string[]> {
  const keys = Object.keys(tags);
  if (keys.length === 0) return {};
  return { ...Object.fromEntries(keys.map((key) => [`aws:RequestTag/${key}`, tags[key] as string])), 'aws:TagKeys': keys };
}

/** `aws:ResourceTag/<key>` for each tag the resource has. */
function resourceTags(tags: Tags | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(tags ?? {}).map(([key, value]) => [`aws:ResourceTag/${key}`, value]));
}

/** The tags a request gives resources of `type` (TagSpecifications). */
function specTags(input: Record<string, unknown>, type: string): Tags {
  const specs = (input.TagSpecifications ?? []) as { ResourceType?: string; Tags?: { Key?: string; Value?: string }[] }[];
  return tagsOf(specs.filter((spec) => spec.ResourceType === type).flatMap((spec) => spec.Tags ?? []));
}

/** The requests IAM authorizes for one recorded call. */
export function authorizationsOf(call: RecordedCall, account: string): Authorization[] {
  const input = call.input as Record<string, unknown>;
  const output = (call.output ?? {}) as Record<string, unknown>;
  const seen = (call.observed ?? {}) as Seen;
  const { region } = call;
  const ec2 = (path: string, owner = account) => `arn:aws:ec2:${region}:${owner}:${path}`;
  const one = (action: string, resource: string, context: Authorization['context'] = {}): Authorization[] => [{ action, resource, context }];
  const key = `${call.service}:${call.operation}`;
  switch (key) {
    case 'DynamoDB:GetItem':
    case 'DynamoDB:PutItem':
    case 'DynamoDB:UpdateItem':
    case 'DynamoDB:DeleteItem':
      return one(`dynamodb:${call.operation}`, table(region, account, input.TableName));
    case 'DynamoDB:Query':
      return one('dynamodb:Query', `${table(region, account, input.TableName)}${input.IndexName === undefined ? '' : `/index/${String(input.IndexName)}`}`);
    case 'DynamoDB:BatchGetItem':
      return Object.keys((input.RequestItems ?? {}) as object).map((name) => ({ action: 'dynamodb:BatchGetItem', resource: table(region, account, name), context: {} }));
    case 'DynamoDB:TransactWriteItems': {
      const actions: Record<string, string> = { Put: 'PutItem', Update: 'UpdateItem', Delete: 'DeleteItem', ConditionCheck: 'ConditionCheckItem' };
      return ((input.TransactItems ?? []) as Record<string, { TableName?: string }>[]).flatMap((item) =>
        Object.entries(item).map(([kind, body]) => ({ action: `dynamodb:${actions[kind] ?? kind}`, resource: table(region, account, body.TableName), context: {} })),
      );
    }
    case 'EC2:DescribeInstances':
    case 'EC2:DescribeImages':
    case 'EC2:DescribeLaunchTemplates':
    case 'EC2:DescribeSpotPriceHistory':
      return one(`ec2:${call.operation}`, '*');
    case 'EC2:CreateLaunchTemplate': {
      const id = ((output.LaunchTemplate ?? {}) as { LaunchTemplateId?: string }).LaunchTemplateId ?? 'lt-0000000000pending';
      const tags = specTags(input, 'launch-template');
      const arn = ec2(`launch-template/${id}`);
      return [
        { action: 'ec2:CreateLaunchTemplate', resource: arn, context: requestTags(tags) },
        ...(Object.keys(tags).length === 0 ? [] : [{ action: 'ec2:CreateTags', resource: arn, context: { ...requestTags(tags), 'ec2:CreateAction': 'CreateLaunchTemplate' } }]),
      ];
    }
    case 'EC2:CreateFleet':
      return createFleetAuthorizations(input, output, seen, region, account);
    case 'EC2:CreateTags':
      return ((input.Resources ?? []) as string[]).map((id) => ({
        action: 'ec2:CreateTags',
        resource: ec2(`instance/${id}`),
        context: { ...resourceTags(seen.instances?.[id]), ...requestTags(tagsOf(input.Tags as { Key?: string; Value?: string }[])) },
      }));
    case 'EC2:DeleteTags':
      // The keys asked for (a tag given without a value goes whatever its value).
      return ((input.Resources ?? []) as string[]).map((id) => ({
        action: 'ec2:DeleteTags',
        resource: ec2(`instance/${id}`),
        context: { ...resourceTags(seen.instances?.[id]), 'aws:TagKeys': ((input.Tags ?? []) as { Key?: string }[]).map((tag) => tag.Key ?? '') },
      }));
    case 'EC2:TerminateInstances':
      return ((input.InstanceIds ?? []) as string[]).map((id) => ({ action: 'ec2:TerminateInstances', resource: ec2(`instance/${id}`), context: resourceTags(seen.instances?.[id]) }));
    case 'EC2:DeleteLaunchTemplate': {
      const id = String(input.LaunchTemplateId);
      return one('ec2:DeleteLaunchTemplate', ec2(`launch-template/${id}`), resourceTags(seen.templates?.[id]?.tags));
    }
    case 'SSM:GetParameter': {
      const name = String(input.Name);
      // AWS's public parameters: the reference's ARN format has an account, while AWS
      // answers them with none (arn:aws:ssm:REGION::parameter/aws/...). Both must be granted.
      if (name.startsWith('/aws/')) return [...one('ssm:GetParameter', parameter(region, account, name)), ...one('ssm:GetParameter', parameter(region, '', name))];
      return one('ssm:GetParameter', parameter(region, account, name));
    }
    case 'SSM:PutParameter': {
      const arn = parameter(region, account, String(input.Name));
      const tags = tagsOf(input.Tags as { Key?: string; Value?: string }[] | undefined);
      return [
        { action: 'ssm:PutParameter', resource: arn, context: requestTags(tags) },
        ...(Object.keys(tags).length === 0 ? [] : [{ action: 'ssm:AddTagsToResource', resource: arn, context: requestTags(tags) }]),
      ];
    }
    case 'SSM:AddTagsToResource':
      return one('ssm:AddTagsToResource', parameter(region, account, String(input.ResourceId)), requestTags(tagsOf(input.Tags as { Key?: string; Value?: string }[] | undefined)));
    case 'SSM:DeleteParameter':
      return one('ssm:DeleteParameter', parameter(region, account, String(input.Name)));
    case 'SSM:DeleteParameters':
      return ((input.Names ?? []) as string[]).map((name) => ({ action: 'ssm:DeleteParameters', resource: parameter(region, account, name), context: {} }));
    case 'STS:AssumeRole':
      return one('sts:AssumeRole', String(input.RoleArn));
    case 'S3:GetBucketTagging':
    case 'S3:DeleteBucket':
      return one(`s3:${call.operation}`, `arn:aws:s3:::${String(input.Bucket)}`);
    case 'S3:ListObjectVersions':
      return one('s3:ListBucketVersions', `arn:aws:s3:::${String(input.Bucket)}`, input.Prefix === undefined ? {} : { 's3:prefix': String(input.Prefix) });
    case 'S3:DeleteObjects':
      return (((input.Delete ?? {}) as { Objects?: { Key?: string; VersionId?: string }[] }).Objects ?? []).map((object) => ({
        action: object.VersionId === undefined ? 's3:DeleteObject' : 's3:DeleteObjectVersion',
        resource: `arn:aws:s3:::${String(input.Bucket)}/${object.Key ?? ''}`,
        context: {},
      }));
    case 'SQS:ReceiveMessage':
    case 'SQS:DeleteMessage':
      return one(`sqs:${call.operation}`, queueArn(String(input.QueueUrl)));
    case 'SNS:Publish':
      return one('sns:Publish', String(input.TopicArn));
    case 'SFN:StartExecution':
      return one('states:StartExecution', String(input.stateMachineArn));
    case 'SFN:SendTaskSuccess':
    case 'SFN:SendTaskFailure':
    case 'SFN:SendTaskHeartbeat':
      // AWS's reference lists no resource type for these: only `*` names them.
      return one(`states:${call.operation}`, '*');
    case 'SFN:GetExecutionHistory':
    case 'SFN:StopExecution':
      return one(`states:${call.operation}`, String(input.executionArn));
    // GetLogEvents is authorized on the stream, FilterLogEvents on its group (AWS's reference).
    case 'CloudWatchLogs:GetLogEvents':
      return one('logs:GetLogEvents', `arn:aws:logs:${region}:${account}:log-group:${String(input.logGroupName)}:log-stream:${String(input.logStreamName)}`);
    case 'CloudWatchLogs:FilterLogEvents':
      return one('logs:FilterLogEvents', `arn:aws:logs:${region}:${account}:log-group:${String(input.logGroupName)}`);
    default:
      throw new Error(`the IAM check has no model of ${key}: add what IAM authorizes for it to test/contract/aws/iam.ts`);
  }
}

/**
 * An instant CreateFleet, as EC2 authorizes it (see the module header): one request per
 * resource kind, the instance once per candidate instance type (each may be launched).
 */
function createFleetAuthorizations(input: Record<string, unknown>, output: Record<string, unknown>, seen: Seen, region: string, account: string): Authorization[] {
  const ec2 = (path: string, owner = account) => `arn:aws:ec2:${region}:${owner}:${path}`;
  // CreateFleet names some resource types, RunInstances more (AWS's reference, as iam-data holds it).
  const both = (resource: string, context: Authorization['context'] = {}): Authorization[] =>
    ['ec2:CreateFleet', 'ec2:RunInstances'].map((action) => ({ action, resource, context }));
  const runOnly = (resource: string): Authorization[] => [{ action: 'ec2:RunInstances', resource, context: {} }];
  const configs = (input.LaunchTemplateConfigs ?? []) as { LaunchTemplateSpecification?: { LaunchTemplateId?: string }; Overrides?: { InstanceType?: string; SubnetId?: string }[] }[];
  const spot = ((input.TargetCapacitySpecification ?? {}) as { DefaultTargetCapacityType?: string }).DefaultTargetCapacityType === 'spot';
  const fleetId = typeof output.FleetId === 'string' ? output.FleetId : 'fleet-00000000-pending';
  const launched = ((output.Instances ?? []) as { InstanceIds?: string[] }[]).flatMap((group) => group.InstanceIds ?? []);
  const instanceTags = specTags(input, 'instance');
  const volumeTags = specTags(input, 'volume');
  const fleetTags = specTags(input, 'fleet');
  const result: Authorization[] = [{ action: 'ec2:CreateFleet', resource: ec2(`fleet/${fleetId}`), context: requestTags(fleetTags) }];
  const types = new Set<string>();
  const subnets = new Set<string>();
  const groups = new Set<string>();
  const images = new Set<string>();
  const profiles = new Set<string>();
  for (const config of configs) {
    const id = config.LaunchTemplateSpecification?.LaunchTemplateId ?? 'unknown';
    const template = seen.templates?.[id];
    result.push(...both(ec2(`launch-template/${id}`), resourceTags(template?.tags)));
    for (const group of template?.securityGroupIds ?? []) groups.add(group);
    if (template?.imageId !== undefined) images.add(template.imageId);
    if (template?.instanceProfileArn !== undefined) profiles.add(template.instanceProfileArn);
    for (const override of config.Overrides ?? []) {
      if (override.InstanceType !== undefined) types.add(override.InstanceType);
      if (override.SubnetId !== undefined) subnets.add(override.SubnetId);
    }
  }
  const instance = launched[0] ?? 'i-00000000pending';
  for (const type of types) result.push(...both(ec2(`instance/${instance}`), { ...requestTags(instanceTags), 'ec2:InstanceType': type }));
  result.push(...both(ec2('volume/vol-00000000pending'), requestTags(volumeTags)));
  result.push(...runOnly(ec2('network-interface/eni-00000000pending')));
  for (const subnet of subnets) result.push(...both(ec2(`subnet/${subnet}`)));
  for (const group of groups) result.push(...runOnly(ec2(`security-group/${group}`)));
  for (const image of images) {
    result.push(...both(ec2(`image/${image}`, '')));
    for (const snapshot of seen.snapshots?.[image] ?? []) result.push(...runOnly(ec2(`snapshot/${snapshot}`, '')));
  }
  if (spot) result.push(...runOnly(ec2('spot-instances-request/sir-00000000pending')));
  for (const [type, tags] of [['fleet', fleetTags], ['instance', instanceTags], ['volume', volumeTags]] as const) {
    if (Object.keys(tags).length === 0) continue;
    const resource = type === 'fleet' ? ec2(`fleet/${fleetId}`) : type === 'instance' ? ec2(`instance/${instance}`) : ec2('volume/vol-00000000pending');
    result.push({ action: 'ec2:CreateTags', resource, context: { ...requestTags(tags), 'ec2:CreateAction': 'CreateFleet' } });
  }
  for (const profile of profiles) {
    const role = seen.roleOfProfile?.[profile] ?? 'no role';
    result.push({ action: 'iam:PassRole', resource: role, context: { 'iam:PassedToService': 'ec2.amazonaws.com' } });
  }
  if (spot && seen.spotRoleExists !== true) {
    result.push({
      action: 'iam:CreateServiceLinkedRole',
      resource: `arn:aws:iam::${account}:role/aws-service-role/${SPOT_ROLE.service}/${SPOT_ROLE.name}`,
      context: { 'iam:AWSServiceName': SPOT_ROLE.service },
    });
  }
  return result;
}

function table(region: string, account: string, name: unknown): string {
  return `arn:aws:dynamodb:${region}:${account}:table/${String(name)}`;
}

/** A parameter's ARN: `parameter` then its name without the leading slash. */
function parameter(region: string, account: string, name: string): string {
  return `arn:aws:ssm:${region}:${account}:parameter/${name.replace(/^\//, '')}`;
}

/** `https://sqs.REGION.amazonaws.com/ACCOUNT/NAME` as an ARN. */
function queueArn(url: string): string {
  const match = /^https?:\/\/sqs\.([a-z0-9-]+)\.[^/]+\/(\d{12})\/([^/]+)$/.exec(url);
  if (match === null) throw new Error(`not a queue URL the IAM check understands: ${url}`);
  return `arn:aws:sqs:${match[1]}:${match[2]}:${match[3]}`;
}

/** One authorization IAM would refuse, and why. */
export interface Refusal {
  readonly call: RecordedCall;
  readonly authorization: Authorization;
  readonly result: string;
}

/**
 * Every authorization of every call, evaluated against its function's role in
 * `deployments` (by stack id). Returns the refusals; empty means all allowed.
 */
export async function refusals(calls: readonly RecordedCall[], deployments: ReadonlyMap<string, Deployment>): Promise<Refusal[]> {
  const found: Refusal[] = [];
  for (const call of calls) {
    if (call.error !== undefined && call.output === undefined && !authorizedBeforeFailing(call)) continue;
    const deployment = deployments.get(call.deployment);
    if (deployment === undefined) throw new Error(`no deployment ${call.deployment} for a recorded call`);
    const fn = deployment.functions[call.fn];
    for (const authorization of authorizationsOf(call, deployment.account)) {
      const result = await evaluate(fn.roleArn, fn.statements, authorization, deployment.account);
      if (result !== 'Allowed') found.push({ call, authorization, result });
    }
  }
  return found;
}

/**
 * A call that failed on moto's side (a missing item, a capacity error) was still
 * authorized first; one that failed in the suite before it was sent was not made.
 */
function authorizedBeforeFailing(call: RecordedCall): boolean {
  return !(call.error?.message ?? '').startsWith('the suite refused');
}

/** One authorization against a role's statements: Allowed, ImplicitlyDenied, ExplicitlyDenied, or the simulator's error. */
export async function evaluate(roleArn: string, statements: readonly PolicyStatement[], authorization: Authorization, account: string): Promise<string> {
  if (/^arn:aws:ssm:[^:]+::parameter\//.test(authorization.resource)) return evaluateUnconditional(statements, authorization);
  const simulation = await runSimulation(
    {
      request: {
        principal: roleArn,
        action: authorization.action,
        resource: { resource: authorization.resource, accountId: account },
        contextVariables: authorization.context as Record<string, string | string[]>,
      },
      identityPolicies: [{ name: 'role', policy: { Version: '2012-10-17', Statement: statements } }],
      serviceControlPolicies: [],
      resourceControlPolicies: [],
    },
    {},
  );
  if (simulation.resultType === 'error') return `not evaluated: ${JSON.stringify(simulation.errors)}`;
  return simulation.overallResult;
}

/**
 * The simulator parses only ARNs of the reference's format, so an account-less one is
 * matched here: allowed by an Allow with no condition whose action and resource patterns
 * match it, unless a Deny matches it too.
 */
function evaluateUnconditional(statements: readonly PolicyStatement[], authorization: Authorization): string {
  const list = (value: string | readonly string[]) => (typeof value === 'string' ? [value] : [...value]);
  const matches = (statement: PolicyStatement) =>
    list(statement.Action).some((action) => wildcard(action, 'i').test(authorization.action)) &&
    list(statement.Resource).some((resource) => wildcard(resource, '').test(authorization.resource));
  if (statements.some((statement) => statement.Effect === 'Deny' && matches(statement))) return 'ExplicitlyDenied';
  return statements.some((statement) => statement.Effect === 'Allow' && statement.Condition === undefined && matches(statement)) ? 'Allowed' : 'ImplicitlyDenied';
}

/** An IAM pattern (`*`, `?`) as a regular expression (actions match case-insensitively, ARNs not). */
function wildcard(pattern: string, flags: string): RegExp {
  const body = pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.');
  return new RegExp(`^${body}$`, flags);
}

/** A refusal as one line: which function, which call, what IAM was asked, and its answer. */
export function describeRefusal(refusal: Refusal): string {
  const { call, authorization } = refusal;
  return `${call.deployment}/${call.fn} ${call.service}:${call.operation} needs ${authorization.action} on ${authorization.resource} with ${JSON.stringify(authorization.context)}: ${refusal.result}`;
}
