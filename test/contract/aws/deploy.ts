// A relaunch stack "deployed" onto moto: the real synthesized template of the shipped app
// (CDK, in process, no bundling, its stacks named as `cdk deploy` names them), its resources that the Lambdas touch made in moto from their template
// properties (the table, the security group, queues, topics, the bucket, the roles and the
// instance profile, the state machine), and each Lambda's environment and role policies
// resolved from the template as CloudFormation would. Nothing is made by hand that the
// template describes otherwise.

import { createHash } from 'node:crypto';
import { App } from 'aws-cdk-lib';
import { CreateTableCommand, DynamoDBClient, UpdateTimeToLiveCommand, type CreateTableCommandInput } from '@aws-sdk/client-dynamodb';
import { AuthorizeSecurityGroupIngressCommand, CreateSecurityGroupCommand, CreateSubnetCommand, CreateVpcCommand, EC2Client } from '@aws-sdk/client-ec2';
import { AddRoleToInstanceProfileCommand, CreateInstanceProfileCommand, CreateRoleCommand, IAMClient } from '@aws-sdk/client-iam';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { CreateStateMachineCommand, SFNClient } from '@aws-sdk/client-sfn';
import { CreateTopicCommand, SNSClient } from '@aws-sdk/client-sns';
import { CreateQueueCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { RelaunchConfig } from '../../../infra/config.ts';
import { LAMBDA_NAMES, type LambdaName } from '../../../infra/lambda-catalog.ts';
import { addDeployment } from '../../../infra/relaunch-stack.ts';
import { resolveCfn, resolveString, type CfnResource, type CfnTemplate, type CfnValues, type Physical } from '../../support/cfn-intrinsics.ts';
import { MOTO_ACCOUNT, type Moto } from './moto.ts';
import { FEATURE_FLAGS } from '../../../infra/feature-flags.ts';

/** A policy statement as IAM reads it. */
export interface PolicyStatement {
  readonly Sid?: string;
  readonly Effect: 'Allow' | 'Deny';
  readonly Action: string | readonly string[];
  readonly Resource: string | readonly string[];
  readonly Condition?: Readonly<Record<string, Readonly<Record<string, string | readonly string[]>>>>;
}

/** One Lambda of a deployment, as CloudFormation would create it. */
export interface DeployedFunction {
  readonly name: LambdaName;
  readonly functionName: string;
  readonly roleArn: string;
  /** Its environment, resolved. */
  readonly environment: Readonly<Record<string, string>>;
  /** Every statement of the inline policies on its role, resolved. */
  readonly statements: readonly PolicyStatement[];
}

/** A relaunch stack on moto. */
export interface Deployment {
  /** The stack's name, as the shipped app gives it (`Relaunch` for the default prefix). */
  readonly id: string;
  readonly namePrefix: string;
  readonly region: string;
  readonly account: string;
  readonly config: RelaunchConfig;
  readonly template: CfnTemplate;
  /** The templates of the failover regions' forwarder stacks, by region. */
  readonly forwarders: Readonly<Record<string, CfnTemplate>>;
  /** The forwarder stacks' names, by region. */
  readonly forwarderStacks: Readonly<Record<string, string>>;
  readonly functions: Readonly<Record<LambdaName, DeployedFunction>>;
  readonly values: CfnValues;
  /** The one resource of `type` (throws when there is not exactly one). */
  only(type: string): { readonly logicalId: string; readonly resource: CfnResource; readonly physical: Physical };
}

/** A VPC with a subnet per zone, in moto: what a deployer brings. */
export interface Network {
  readonly vpcId: string;
  readonly subnetsByZone: Readonly<Record<string, string>>;
}

/** Makes a VPC with one subnet per zone (all in one region) in moto. */
export async function createNetwork(moto: Moto, region: string, zones: readonly string[]): Promise<Network> {
  const ec2 = new EC2Client({ region, endpoint: moto.endpoint });
  const vpc = await ec2.send(new CreateVpcCommand({ CidrBlock: '10.0.0.0/16' }));
  const vpcId = vpc.Vpc?.VpcId as string;
  const subnetsByZone: Record<string, string> = {};
  for (const [index, zone] of zones.entries()) {
    const subnet = await ec2.send(new CreateSubnetCommand({ VpcId: vpcId, CidrBlock: `10.0.${index * 16}.0/20`, AvailabilityZone: zone }));
    subnetsByZone[zone] = subnet.Subnet?.SubnetId as string;
  }
  return { vpcId, subnetsByZone };
}

/** The shipped app's stacks for `config`, synthesized in process as `cdk synth` would without bundling. */
export interface Synthesized {
  /** The stack's name. */
  readonly id: string;
  readonly template: CfnTemplate;
  /** The forwarder stacks' templates and names, by region. */
  readonly forwarders: Record<string, CfnTemplate>;
  readonly forwarderStacks: Record<string, string>;
}

/** Synthesizes the shipped app's stacks (infra/app.ts's addDeployment) in process, as `cdk synth` would without bundling. */
export function synthesize(config: RelaunchConfig): Synthesized {
  process.env.CDK_VALIDATION = 'false';
  const app = new App({ context: { ...FEATURE_FLAGS, 'aws:cdk:bundling-stacks': [] } });
  const stacks = addDeployment(app, config);
  const assembly = app.synth();
  const forwarders = Object.fromEntries(
    stacks.forwarders.map((stack) => [stack.region, assembly.getStackByName(stack.stackName).template as CfnTemplate]),
  );
  const forwarderStacks = Object.fromEntries(stacks.forwarders.map((stack) => [stack.region, stack.stackName]));
  return { id: stacks.relaunch.stackName, template: assembly.getStackByName(stacks.relaunch.stackName).template as CfnTemplate, forwarders, forwarderStacks };
}

/** CloudFormation's answer to a stack whose first resource could not be created: nothing of it was made. */
export class StackRefusedError extends Error {
  override readonly name = 'StackRefusedError';
}

/**
 * Synthesizes relaunch with `config` (its network made in moto beforehand) and makes in
 * moto what its Lambdas use, in the home region of its subnets. As CloudFormation does, it
 * creates first the resource every other one DependsOn (the prefix's claim): when that
 * fails, nothing else is made and StackRefusedError says why.
 */
export async function deploy(moto: Moto, config: RelaunchConfig): Promise<Deployment> {
  const region = regionOf(config);
  const { id, template, forwarders, forwarderStacks } = synthesize(config);
  const clients = {
    ec2: new EC2Client({ region, endpoint: moto.endpoint }),
    iam: new IAMClient({ region, endpoint: moto.endpoint }),
    dynamo: new DynamoDBClient({ region, endpoint: moto.endpoint }),
    s3: new S3Client({ region, endpoint: moto.endpoint, forcePathStyle: true }),
    sqs: new SQSClient({ region, endpoint: moto.endpoint }),
    sns: new SNSClient({ region, endpoint: moto.endpoint }),
    sfn: new SFNClient({ region, endpoint: moto.endpoint }),
    logs: { endpoint: moto.endpoint, region },
  };
  const physical = new Map<string, Physical>();
  const values: CfnValues = {
    pseudo: { 'AWS::Region': region, 'AWS::AccountId': MOTO_ACCOUNT, 'AWS::Partition': 'aws', 'AWS::URLSuffix': 'amazonaws.com', 'AWS::StackName': id, 'AWS::NoValue': '' },
    physical: (logicalId) => {
      const found = physical.get(logicalId);
      if (found === undefined) throw new Error(`the suite's deployment of ${id} has no ${logicalId} (${template.Resources[logicalId]?.Type ?? 'not in the template'})`);
      return found;
    },
  };
  const entries = Object.entries(template.Resources);
  const first = firstResources(template);
  for (const logicalId of first) {
    const resource = template.Resources[logicalId] as CfnResource;
    physical.set(logicalId, namesOf(id, region, logicalId, resource));
    try {
      await create(clients, logicalId, resource, values);
    } catch (error) {
      const name = values.physical(logicalId).ref;
      throw new StackRefusedError(`${id}: ${logicalId} (${resource.Type} ${name}) could not be created, so nothing else was: ${(error as Error).message}`);
    }
  }
  // What moto names itself comes next; every other name is chosen here, as CloudFormation would.
  for (const [logicalId, resource] of entries) {
    if (resource.Type !== 'AWS::EC2::SecurityGroup') continue;
    const props = resource.Properties ?? {};
    const group = await clients.ec2.send(
      new CreateSecurityGroupCommand({ GroupName: `${id}-${logicalId}`, Description: String(props.GroupDescription), VpcId: resolveString(props.VpcId, values) }),
    );
    physical.set(logicalId, { ref: group.GroupId as string, attributes: { GroupId: group.GroupId as string } });
  }
  for (const [logicalId, resource] of entries) {
    if (!physical.has(logicalId)) physical.set(logicalId, namesOf(id, region, logicalId, resource));
  }
  for (const [logicalId, resource] of entries) if (!first.includes(logicalId)) await create(clients, logicalId, resource, values);

  const functions = Object.fromEntries(
    LAMBDA_NAMES.map((name) => {
      const [logicalId, resource] = functionResource(template, name);
      const props = resource.Properties ?? {};
      const roleArn = resolveString(props.Role, values);
      const roleId = ((props.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'])[0];
      const statements = entries
        .filter(([, r]) => r.Type === 'AWS::IAM::Policy' && ((r.Properties?.Roles ?? []) as { Ref?: string }[]).some((role) => role.Ref === roleId))
        .flatMap(([, r]) => (resolveCfn((r.Properties?.PolicyDocument as { Statement: unknown }).Statement, values) as PolicyStatement[]));
      const environment = resolveCfn((props.Environment as { Variables?: unknown } | undefined)?.Variables ?? {}, values) as Record<string, string>;
      return [name, { name, functionName: values.physical(logicalId).ref, roleArn, environment, statements } satisfies DeployedFunction];
    }),
  ) as unknown as Record<LambdaName, DeployedFunction>;

  return {
    id,
    namePrefix: config.namePrefix ?? 'relaunch',
    region,
    account: MOTO_ACCOUNT,
    config,
    template,
    forwarders,
    forwarderStacks,
    functions,
    values,
    only(type) {
      const found = entries.filter(([, resource]) => resource.Type === type);
      if (found.length !== 1) throw new Error(`expected one ${type} in ${id}, found ${found.length}`);
      const [logicalId, resource] = found[0] as [string, CfnResource];
      return { logicalId, resource, physical: values.physical(logicalId) };
    },
  };
}

/** The resources every other resource of the template DependsOn: CloudFormation creates them before any other. */
function firstResources(template: CfnTemplate): string[] {
  const entries = Object.entries(template.Resources);
  return entries
    .map(([logicalId]) => logicalId)
    .filter((logicalId) => entries.every(([other, resource]) => other === logicalId || [resource.DependsOn ?? []].flat().includes(logicalId)));
}

function regionOf(config: RelaunchConfig): string {
  const [zone] = Object.keys(config.subnetsByZone);
  if (zone === undefined) throw new Error('the config has no subnets');
  return zone.slice(0, -1);
}

/** The Lambda of a catalog name: its construct id is the name, so its logical id starts with it. */
function functionResource(template: CfnTemplate, name: LambdaName): [string, CfnResource] {
  const prefix = `RelaunchFunctions${name.replaceAll('-', '')}`;
  const found = Object.entries(template.Resources).filter(([id, r]) => r.Type === 'AWS::Lambda::Function' && id.startsWith(prefix));
  if (found.length !== 1) throw new Error(`expected one function ${name}, found ${found.length}`);
  return found[0] as [string, CfnResource];
}

/** A short, stable, lower-case suffix, as CloudFormation adds to the names it makes. */
function suffix(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 8);
}

/** What Ref and GetAtt give for a resource whose name CloudFormation (here: the suite) chooses. */
function namesOf(stack: string, region: string, logicalId: string, resource: CfnResource): Physical {
  const props = resource.Properties ?? {};
  const generated = `${stack}-${logicalId}`.slice(0, 40) + `-${suffix(`${stack}/${logicalId}`)}`;
  const arn = (service: string, path: string, where = `${region}:${MOTO_ACCOUNT}`) => `arn:aws:${service}:${where}:${path}`;
  switch (resource.Type) {
    case 'AWS::DynamoDB::Table':
      return { ref: generated, attributes: { Arn: arn('dynamodb', `table/${generated}`) } };
    case 'AWS::IAM::Role':
      return { ref: generated, attributes: { Arn: arn('iam', `role/${generated}`, `:${MOTO_ACCOUNT}`), RoleId: `AROA${suffix(generated).toUpperCase()}` } };
    case 'AWS::IAM::InstanceProfile':
      return { ref: generated, attributes: { Arn: arn('iam', `instance-profile/${generated}`, `:${MOTO_ACCOUNT}`) } };
    case 'AWS::S3::Bucket': {
      const bucket = generated.toLowerCase();
      return { ref: bucket, attributes: { Arn: `arn:aws:s3:::${bucket}`, DomainName: `${bucket}.s3.amazonaws.com` } };
    }
    case 'AWS::SQS::Queue': {
      const name = typeof props.QueueName === 'string' ? props.QueueName : generated;
      return { ref: `https://sqs.${region}.amazonaws.com/${MOTO_ACCOUNT}/${name}`, attributes: { Arn: arn('sqs', name), QueueName: name, QueueUrl: `https://sqs.${region}.amazonaws.com/${MOTO_ACCOUNT}/${name}` } };
    }
    case 'AWS::SNS::Topic': {
      const name = typeof props.TopicName === 'string' ? props.TopicName : generated;
      return { ref: arn('sns', name), attributes: { TopicArn: arn('sns', name), TopicName: name } };
    }
    case 'AWS::StepFunctions::StateMachine': {
      const name = typeof props.StateMachineName === 'string' ? props.StateMachineName : generated;
      return { ref: arn('states', `stateMachine:${name}`), attributes: { Arn: arn('states', `stateMachine:${name}`), Name: name } };
    }
    case 'AWS::Lambda::Function':
      return { ref: generated, attributes: { Arn: arn('lambda', `function:${generated}`) } };
    case 'AWS::Logs::LogGroup': {
      const name = typeof props.LogGroupName === 'string' ? props.LogGroupName : generated;
      return { ref: name, attributes: { Arn: arn('logs', `log-group:${name}:*`) } };
    }
    case 'AWS::ApiGateway::RestApi': {
      const apiId = suffix(generated).slice(0, 10);
      return { ref: apiId, attributes: { RootResourceId: `root${apiId}`.slice(0, 10) } };
    }
    case 'AWS::ApiGateway::Stage':
      return { ref: String(props.StageName ?? 'v1'), attributes: {} };
    case 'AWS::Events::Rule':
      return { ref: generated, attributes: { Arn: arn('events', `rule/${generated}`) } };
    case 'AWS::WAFv2::WebACL':
      return { ref: generated, attributes: { Arn: arn('wafv2', `regional/webacl/${generated}`), Id: suffix(generated) } };
    default:
      return { ref: generated, attributes: {} };
  }
}

interface Clients {
  readonly ec2: EC2Client;
  readonly iam: IAMClient;
  readonly dynamo: DynamoDBClient;
  readonly s3: S3Client;
  readonly sqs: SQSClient;
  readonly sns: SNSClient;
  readonly sfn: SFNClient;
  /** Where CloudWatch Logs is (the project has no SDK client of it: see createLogGroup). */
  readonly logs: { readonly endpoint: string; readonly region: string };
}

/**
 * CreateLogGroup on moto, which fails when the name is taken, as CloudFormation's log
 * group does. The project ships no CloudWatch Logs client, so this is the JSON protocol by
 * hand: moto reads the service and region from the SigV4 scope and checks no signature.
 */
async function createLogGroup(logs: Clients['logs'], logGroupName: string): Promise<void> {
  const response = await fetch(logs.endpoint, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-amz-json-1.1',
      'x-amz-target': 'Logs_20140328.CreateLogGroup',
      authorization: `AWS4-HMAC-SHA256 Credential=testing/20260101/${logs.region}/logs/aws4_request, SignedHeaders=host, Signature=0`,
    },
    body: JSON.stringify({ logGroupName }),
  });
  if (response.ok) return;
  const answer = (await response.json()) as { __type?: string; message?: string };
  throw new Error(`${answer.__type ?? response.status}: ${answer.message ?? 'CreateLogGroup failed'}`);
}

/** The resource types the Lambdas touch (the security groups are made first, above). */
const CREATED_IN_MOTO = new Set([
  'AWS::DynamoDB::Table',
  'AWS::EC2::SecurityGroupIngress',
  'AWS::IAM::Role',
  'AWS::IAM::InstanceProfile',
  'AWS::Logs::LogGroup',
  'AWS::S3::Bucket',
  'AWS::SQS::Queue',
  'AWS::SNS::Topic',
  'AWS::StepFunctions::StateMachine',
]);

/** Makes in moto the resources the Lambdas touch, from their template properties. */
async function create(clients: Clients, logicalId: string, resource: CfnResource, values: CfnValues): Promise<void> {
  if (!CREATED_IN_MOTO.has(resource.Type)) return;
  const props = (resolveCfn(resource.Properties ?? {}, values) ?? {}) as Record<string, unknown>;
  const { ref, attributes } = values.physical(logicalId);
  switch (resource.Type) {
    case 'AWS::DynamoDB::Table': {
      const input = {
        TableName: ref,
        AttributeDefinitions: props.AttributeDefinitions,
        KeySchema: props.KeySchema,
        GlobalSecondaryIndexes: props.GlobalSecondaryIndexes,
        BillingMode: props.BillingMode,
      } as CreateTableCommandInput;
      await clients.dynamo.send(new CreateTableCommand(input));
      const ttl = props.TimeToLiveSpecification as { AttributeName: string; Enabled: boolean } | undefined;
      if (ttl !== undefined) await clients.dynamo.send(new UpdateTimeToLiveCommand({ TableName: ref, TimeToLiveSpecification: ttl }));
      return;
    }
    case 'AWS::EC2::SecurityGroupIngress': {
      const { GroupId, SourceSecurityGroupId, IpProtocol, FromPort, ToPort, CidrIp } = props as Record<string, string | number | undefined>;
      await clients.ec2.send(
        new AuthorizeSecurityGroupIngressCommand({
          GroupId: String(GroupId),
          IpPermissions: [
            {
              IpProtocol: String(IpProtocol),
              ...(FromPort === undefined ? {} : { FromPort: Number(FromPort), ToPort: Number(ToPort) }),
              ...(SourceSecurityGroupId === undefined ? {} : { UserIdGroupPairs: [{ GroupId: String(SourceSecurityGroupId) }] }),
              ...(CidrIp === undefined ? {} : { IpRanges: [{ CidrIp: String(CidrIp) }] }),
            },
          ],
        }),
      );
      return;
    }
    case 'AWS::IAM::Role':
      await clients.iam.send(new CreateRoleCommand({ RoleName: ref, AssumeRolePolicyDocument: JSON.stringify(props.AssumeRolePolicyDocument) }));
      return;
    case 'AWS::IAM::InstanceProfile':
      await clients.iam.send(new CreateInstanceProfileCommand({ InstanceProfileName: ref }));
      for (const role of (props.Roles ?? []) as string[]) {
        await clients.iam.send(new AddRoleToInstanceProfileCommand({ InstanceProfileName: ref, RoleName: role }));
      }
      return;
    case 'AWS::Logs::LogGroup':
      await createLogGroup(clients.logs, ref);
      return;
    case 'AWS::S3::Bucket':
      await clients.s3.send(new CreateBucketCommand({ Bucket: ref }));
      return;
    case 'AWS::SQS::Queue':
      await clients.sqs.send(new CreateQueueCommand({ QueueName: attributes.QueueName }));
      return;
    case 'AWS::SNS::Topic':
      await clients.sns.send(new CreateTopicCommand({ Name: attributes.TopicName }));
      return;
    case 'AWS::StepFunctions::StateMachine':
      await clients.sfn.send(
        new CreateStateMachineCommand({ name: attributes.Name, definition: String(props.DefinitionString), roleArn: String(props.RoleArn), type: 'STANDARD' }),
      );
      return;
    default:
      return;
  }
}
