// The deployable stack, synthesized in process (no bundling, no CloudFormation validation):
// what matters about each resource, never a whole-template snapshot.

import { App, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { EC2_DETAIL_TYPES, EXECUTION_STATUS_CHANGE, GONE_STATE_NAMES } from '../../../lib/aws-events.ts';
import { EnvVar } from '../../../lib/workflow/env.ts';
import { OUTPUT_TAIL_MAX_BYTES } from '../../../lib/agent/protocol.ts';
import { TagKey } from '../../../lib/agent/tags.ts';
import { DEPLOYMENT_TAG_KEY } from '../../../lib/workflow/resources.ts';
import { InstancesStillRunningError, TransientError } from '../../../lib/errors.ts';
import { INSTANCE_INDEX, JOB_LIST_INDEX, TABLE_KEY } from '../../../lib/workflow/job-table.ts';
import { ROUTES } from '../../../lib/http/routes.ts';
import {
  AWAIT_STATES,
  HEARTBEAT_TIMEOUT_SECONDS,
  LAMBDA_CRASH_ERRORS,
  StateName,
  WorkflowError,
  type TaskStateName,
} from '../../../lib/workflow/contract.ts';
import { JobInstances } from '../../../infra/constructs/job-instances.ts';
import { TAKE_DOWN_RESOURCE_TYPE } from '../../../infra/constructs/take-down.ts';
import { Relaunch } from '../../../infra/relaunch.ts';
import { RelaunchStack } from '../../../infra/relaunch-stack.ts';
import { LAMBDA_NAMES, LAMBDA_NEEDS, TASK_LAMBDAS, type JobSecretsCall, LambdaName } from '../../../infra/lambda-catalog.ts';
import { JOB_SECRETS_ACTIONS } from '../../../infra/permissions.ts';
import { flat } from '../../support/fixtures/cfn.ts';
import { FEATURE_FLAGS } from '../../../infra/feature-flags.ts';

process.env.CDK_VALIDATION = 'false';

const SUBNETS = { 'us-east-1a': 'subnet-0123456789abcdef0', 'us-east-1b': 'subnet-0123456789abcdef1' };
const NETWORK = { vpcId: 'vpc-0123456789abcdef0', subnetsByZone: SUBNETS };

type Resource = { Type: string; Properties: Record<string, unknown>; DeletionPolicy?: string; UpdateReplacePolicy?: string };
type Statement = { Sid?: string; Action: string | string[]; Resource: unknown; Condition?: Record<string, Record<string, unknown>> };

let template: Template;
let resources: Record<string, Resource>;

function synth(props: Partial<ConstructorParameters<typeof RelaunchStack>[2]['relaunch']> = {}): Template {
  const app = new App({ context: { ...FEATURE_FLAGS, 'aws:cdk:bundling-stacks': [] } });
  const stack = new RelaunchStack(app, 'Test', { relaunch: { ...NETWORK, ...props } });
  return Template.fromStack(stack);
}

/** The logical id of a Lambda by its catalog name (the construct id is the name). */
function functionId(name: LambdaName): string {
  const found = Object.entries(resources).find(
    ([id, r]) => r.Type === 'AWS::Lambda::Function' && id.startsWith(`RelaunchFunctions${name.replaceAll('-', '')}`),
  );
  if (found === undefined) throw new Error(`no function ${name}`);
  return found[0];
}

/** Every statement of the policies attached to a Lambda's role. */
function statementsOf(name: LambdaName): Statement[] {
  const fn = resources[functionId(name)] as Resource;
  const roleId = ((fn.Properties.Role as { 'Fn::GetAtt': string[] })['Fn::GetAtt'])[0];
  return Object.values(resources)
    .filter((r) => r.Type === 'AWS::IAM::Policy' && (r.Properties.Roles as { Ref: string }[]).some((role) => role.Ref === roleId))
    .flatMap((r) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement)
    .flatMap(perAction);
}

/**
 * A statement with no Sid, one per action: the app's `@aws-cdk/aws-iam:minimizePolicies`
 * (infra/feature-flags.ts) merges such statements when their resources match (X-Ray's
 * with Step Functions' task-token calls, both on `*`), and what is asserted is each
 * action's scope. A statement with a Sid is kept whole, as the flag keeps it.
 */
function perAction(statement: Statement): Statement[] {
  if (statement.Sid !== undefined || !Array.isArray(statement.Action)) return [statement];
  return statement.Action.map((action) => ({ ...statement, Action: action }));
}

/**
 * What statements allow, one line per action, resource and condition, sorted: equal for
 * two policies that grant the same whatever the order and grouping minimizePolicies gives.
 */
function grants(statements: readonly (Statement & { Effect?: string })[]): string[] {
  return statements
    .flatMap((statement) =>
      [statement.Action].flat().flatMap((action) => [statement.Resource].flat().map((resource) => JSON.stringify([statement.Sid ?? '', statement.Effect ?? '', action, resource, statement.Condition ?? null]))),
    )
    .sort();
}

const actionsOf = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);
const withAction = (statements: Statement[], prefix: string) => statements.filter((s) => actionsOf(s).some((a) => a.startsWith(prefix)));


beforeAll(() => {
  template = synth({ allowedInstanceTypes: ['g5.*', 'm5.large'] });
  resources = template.toJSON().Resources as Record<string, Resource>;
});

describe('JobTable', () => {
  it('is the single table of lib/workflow/job-table.ts: keys, both indexes, on demand', () => {
    template.resourceCountIs('AWS::DynamoDB::Table', 1);
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [
        { AttributeName: TABLE_KEY.partitionKey, KeyType: 'HASH' },
        { AttributeName: TABLE_KEY.sortKey, KeyType: 'RANGE' },
      ],
      GlobalSecondaryIndexes: Match.arrayWith([
        Match.objectLike({ IndexName: INSTANCE_INDEX.indexName, Projection: { ProjectionType: 'KEYS_ONLY' } }),
        Match.objectLike({ IndexName: JOB_LIST_INDEX.indexName, Projection: { ProjectionType: 'KEYS_ONLY' } }),
      ]),
    });
  });

  it('keeps the data: PITR, deletion protection, RETAIN, AWS-managed encryption', () => {
    template.hasResource('AWS::DynamoDB::Table', {
      DeletionPolicy: 'Retain',
      UpdateReplacePolicy: 'Retain',
      Properties: Match.objectLike({
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true, RecoveryPeriodInDays: 35 },
        DeletionProtectionEnabled: true,
        // SSEEnabled with no key of ours: KMS with the AWS-managed aws/dynamodb key.
        SSESpecification: { SSEEnabled: true },
      }),
    });
  });
});

describe('ControllerFunctions', () => {
  it('deploys every handler on Node 22, arm64, traced, with JSON logs', () => {
    template.resourceCountIs('AWS::Lambda::Function', LAMBDA_NAMES.length);
    for (const name of LAMBDA_NAMES) {
      expect(resources[functionId(name)]?.Properties).toMatchObject({
        Runtime: 'nodejs22.x',
        Architectures: ['arm64'],
        TracingConfig: { Mode: 'Active' },
        LoggingConfig: expect.objectContaining({ LogFormat: 'JSON' }),
        Handler: 'index.handler',
      });
    }
  });

  it('gives each function only the variables of the ports it uses', () => {
    for (const name of LAMBDA_NAMES) {
      const variables = (resources[functionId(name)]?.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
      const needs = LAMBDA_NEEDS[name];
      expect(Object.hasOwn(variables, EnvVar.tableName), name).toBe(true);
      expect(Object.hasOwn(variables, EnvVar.stateMachineArn), name).toBe(needs.workflow.length > 0);
      expect(Object.hasOwn(variables, EnvVar.computeConfig), name).toBe(needs.compute === 'launch');
      expect(Object.hasOwn(variables, EnvVar.apiUrl), name).toBe(needs.compute === 'launch');
      expect(Object.hasOwn(variables, EnvVar.releaseConfig), name).toBe(needs.compute === 'release');
      expect(Object.hasOwn(variables, EnvVar.launchPace), name).toBe(needs.paces === true);
    }
  });

  it("sizes the launch pace at EC2's default bucket, or at the one the context gives", () => {
    const paceOf = (template: Template): unknown => {
      const launcher = Object.entries(template.toJSON().Resources as Record<string, { Type: string; Properties: { Environment?: { Variables: Record<string, unknown> } } }>).find(
        ([id, r]) => r.Type === 'AWS::Lambda::Function' && id.startsWith('RelaunchFunctionslaunchattempt'),
      );
      return JSON.parse(String(launcher?.[1].Properties.Environment?.Variables[EnvVar.launchPace]));
    };
    expect(paceOf(template)).toEqual({ burst: 1000, perSecond: 2 });
    expect(paceOf(synth({ launchPace: { burst: 200, perSecond: 1.5 } }))).toEqual({ burst: 200, perSecond: 1.5 });
  });
});

describe('IAM', () => {
  /** What a resource the launch creates must carry, and what one a function touches must have: the job tag and this deployment's. */
  const CREATED_HERE = { StringLike: { [`aws:RequestTag/${TagKey.jobId}`]: '*' }, StringEquals: { [`aws:RequestTag/${DEPLOYMENT_TAG_KEY}`]: 'relaunch' } };
  const OWNED_HERE = { StringLike: { [`aws:ResourceTag/${TagKey.jobId}`]: '*' }, StringEquals: { [`aws:ResourceTag/${DEPLOYMENT_TAG_KEY}`]: 'relaunch' } };
  const ALLOWED_STAR = new Set(['Ec2DescribeHasNoResourceScope', 'ListLaunchTemplates']);

  it('uses `*` only where the service has no resource scope (X-Ray, EC2 Describe, Step Functions task tokens)', () => {
    for (const name of LAMBDA_NAMES) {
      for (const statement of statementsOf(name)) {
        if (flat(statement.Resource) !== '*') continue;
        const xray = actionsOf(statement).every((a) => a.startsWith('xray:'));
        const taskToken = actionsOf(statement).every((a) => /^states:SendTask(Success|Failure|Heartbeat)$/.test(a));
        expect(xray || taskToken || ALLOWED_STAR.has(statement.Sid ?? ''), `${name}: ${JSON.stringify(statement)}`).toBe(true);
      }
    }
  });

  it('passes only the instance role, only to EC2, and only from the launching function', () => {
    for (const name of LAMBDA_NAMES) {
      const passRole = withAction(statementsOf(name), 'iam:PassRole');
      if (LAMBDA_NEEDS[name].compute !== 'launch') {
        expect(passRole, name).toEqual([]);
        continue;
      }
      expect(passRole).toEqual([
        expect.objectContaining({
          Action: 'iam:PassRole',
          Resource: { 'Fn::GetAtt': [expect.stringMatching(/^RelaunchInstancesRole/), 'Arn'] },
          Condition: { StringEquals: { 'iam:PassedToService': 'ec2.amazonaws.com' } },
        }),
      ]);
    }
  });

  it('launches only instances tagged with a job and this deployment, of allowed types, into the given subnets and group, by CreateFleet and the RunInstances it makes', () => {
    for (const action of ['ec2:CreateFleet', 'ec2:RunInstances']) {
      const ec2 = withAction(statementsOf('launch-attempt'), action);
      const instance = ec2.find((s) => flat(s.Resource).endsWith(':instance/*'));
      expect(instance?.Condition, action).toEqual({
        StringLike: { [`aws:RequestTag/${TagKey.jobId}`]: '*', 'ec2:InstanceType': ['g5.*', 'm5.large'] },
        StringEquals: { [`aws:RequestTag/${DEPLOYMENT_TAG_KEY}`]: 'relaunch' },
      });
      const volume = ec2.find((s) => flat(s.Resource).endsWith(':volume/*'));
      expect(volume?.Condition, action).toEqual(CREATED_HERE);
      const network = flat(ec2.find((s) => s.Sid === 'LaunchIntoGivenNetwork')?.Resource);
      for (const subnet of Object.values(SUBNETS)) expect(network).toContain(`:subnet/${subnet}`);
      expect(network).not.toContain('subnet/*');
      expect(network).toMatch(/security-group\/<RelaunchInstancesSecurityGroup\w+\.GroupId>/);
      // Only from this deployment's own launch templates: tagged with a job and its name.
      const template = ec2.find((s) => flat(s.Resource).endsWith(':launch-template/*'));
      expect(template?.Condition, action).toEqual(OWNED_HERE);
    }
  });

  it('creates launch templates and fleets only tagged with a job and this deployment, and deletes only those so tagged', () => {
    const statements = statementsOf('launch-attempt');
    const tagged = CREATED_HERE;
    expect(withAction(statements, 'ec2:CreateLaunchTemplate')).toEqual([
      expect.objectContaining({ Condition: tagged, Resource: expect.anything() }),
    ]);
    expect(flat(withAction(statements, 'ec2:CreateLaunchTemplate')[0]?.Resource)).toMatch(/:launch-template\/\*$/);
    const fleets = withAction(statements, 'ec2:CreateFleet').filter((s) => flat(s.Resource).endsWith(':fleet/*'));
    expect(fleets.map((s) => s.Condition)).toEqual([tagged]);
    for (const name of ['launch-attempt', 'janitor', 'take-down'] as const) {
      expect(withAction(statementsOf(name), 'ec2:DeleteLaunchTemplate'), name).toEqual([expect.objectContaining({ Condition: OWNED_HERE })]);
    }
    for (const name of LAMBDA_NAMES.filter((n) => n !== 'launch-attempt' && n !== 'janitor' && n !== 'take-down')) {
      expect(withAction(statementsOf(name), 'ec2:DeleteLaunchTemplate'), name).toEqual([]);
      expect(withAction(statementsOf(name), 'ec2:CreateFleet'), name).toEqual([]);
    }
    expect(withAction(statementsOf('janitor'), 'ec2:DescribeLaunchTemplates')).toEqual([expect.objectContaining({ Resource: '*' })]);
  });

  it('tags only at creation, or the node-IP, rank and attempt tags of this deployment\'s instances, or their held-after mark', () => {
    const tagging = withAction(statementsOf('launch-attempt'), 'ec2:CreateTags');
    expect(tagging.map((s) => s.Condition)).toEqual([
      { StringEquals: { 'ec2:CreateAction': ['RunInstances', 'CreateFleet', 'CreateLaunchTemplate'] } },
      { ...OWNED_HERE, 'ForAllValues:StringLike': { 'aws:TagKeys': [TagKey.nodeRank, 'relaunch:node-ips:*', TagKey.attempt] } },
      { ...OWNED_HERE, 'ForAllValues:StringEquals': { 'aws:TagKeys': [TagKey.heldAfter] } },
    ]);
    // The release marks the kept nodes (Compute.hold); the mark is never removed.
    for (const name of ['launch-attempt', 'release-instances'] as const) {
      for (const action of ['ec2:CreateTags']) {
        expect(withAction(statementsOf(name), action).find((s) => s.Sid === 'MarkHeldNodes')?.Condition, `${name} ${action}`).toEqual({
          ...OWNED_HERE,
          'ForAllValues:StringEquals': { 'aws:TagKeys': [TagKey.heldAfter] },
        });
      }
    }
    expect(withAction(statementsOf('launch-attempt'), 'ec2:DeleteTags')).toEqual([]);
  });

  it('terminates only instances tagged as this deployment\'s jobs, and only from the compute functions', () => {
    for (const name of LAMBDA_NAMES) {
      const terminate = withAction(statementsOf(name), 'ec2:TerminateInstances');
      if (LAMBDA_NEEDS[name].compute === false) {
        expect(withAction(statementsOf(name), 'ec2:'), name).toEqual([]);
        continue;
      }
      expect(terminate, name).toEqual([expect.objectContaining({ Condition: OWNED_HERE })]);
    }
  });

  it('reaches Step Functions only on the controller and its executions, with only the actions each function calls', () => {
    const expected: Record<LambdaName, string[]> = {
      'launch-attempt': [],
      'await-attempt': ['states:SendTaskFailure', 'states:SendTaskSuccess'],
      'evaluate-policy': [],
      'release-instances': [],
      'record-controller-failure': [],
      'continue-as-new': ['states:StartExecution'],
      api: [
        'states:GetExecutionHistory',
        'states:SendTaskFailure',
        'states:SendTaskHeartbeat',
        'states:SendTaskSuccess',
        'states:StartExecution',
        'states:StopExecution',
      ],
      'on-ec2-event': ['states:SendTaskFailure', 'states:SendTaskSuccess'],
      'on-execution-ended': [],
      janitor: ['states:SendTaskFailure', 'states:SendTaskSuccess', 'states:StartExecution'],
      'delete-transient-mounts': [],
      'take-down': [],
    };
    const onExecutions = new Set(['states:GetExecutionHistory', 'states:StopExecution']);
    // AWS's reference gives these no resource type: only `*` grants them (the task token scopes them).
    const onTaskTokens = new Set(['states:SendTaskSuccess', 'states:SendTaskFailure', 'states:SendTaskHeartbeat']);
    for (const name of LAMBDA_NAMES) {
      const states = withAction(statementsOf(name), 'states:');
      expect(states.flatMap(actionsOf).sort(), name).toEqual(expected[name]);
      for (const statement of states) {
        const actions = actionsOf(statement);
        if (actions.every((action) => onTaskTokens.has(action))) expect(statement.Resource, name).toBe('*');
        else if (actions.every((action) => onExecutions.has(action))) expect(flat(statement.Resource), name).toMatch(/:execution:relaunch-controller:\*$/);
        else expect(flat(statement.Resource), name).toMatch(/:stateMachine:relaunch-controller$/);
      }
    }
  });

  it('reads AWS\'s public AMI parameters in either ARN form (with an account, or none as AWS answers), and creates only the spot service-linked role', () => {
    const launch = statementsOf('launch-attempt');
    const ami = launch.find((s) => s.Sid === 'PublicAmiParameters') as Statement;
    expect(flat(ami.Resource)).toBe('arn:<AWS::Partition>:ssm:<AWS::Region>:*:parameter/aws/service/*');
    const role = launch.find((s) => s.Sid === 'CreateSpotServiceLinkedRole') as Statement;
    expect(role.Action).toBe('iam:CreateServiceLinkedRole');
    expect(flat(role.Resource)).toBe('arn:<AWS::Partition>:iam::<AWS::AccountId>:role/aws-service-role/spot.amazonaws.com/AWSServiceRoleForEC2Spot');
    expect(role.Condition).toEqual({ StringEquals: { 'iam:AWSServiceName': 'spot.amazonaws.com' } });
    for (const name of LAMBDA_NAMES.filter((n) => n !== 'launch-attempt')) expect(withAction(statementsOf(name), 'iam:Create'), name).toEqual([]);
  });

  it('grants ConditionCheckItem (a standby\'s start and retirement check the job in their transaction) to launch-attempt alone', () => {
    for (const name of LAMBDA_NAMES) {
      const actions = withAction(statementsOf(name), 'dynamodb:').flatMap(actionsOf);
      expect(actions.includes('dynamodb:ConditionCheckItem'), name).toBe(name === 'launch-attempt');
    }
  });

  it('reaches DynamoDB only on the table and its indexes, read-only where the function only reads', () => {
    for (const name of LAMBDA_NAMES) {
      const dynamo = withAction(statementsOf(name), 'dynamodb:');
      for (const statement of dynamo) expect(flat(statement.Resource), name).toMatch(/^<RelaunchJobsTable\w+\.Arn>(\/index\/\*)?$/);
      const writes = dynamo.flatMap(actionsOf).filter((a) => /Put|Update|Delete|BatchWrite|Scan/.test(a));
      if (LAMBDA_NEEDS[name].store === 'read') expect(writes, name).toEqual([]);
      expect(dynamo.flatMap(actionsOf), name).not.toContain('dynamodb:Scan');
    }
  });

  it('lets the API read jobs in batches (a list reads keys, then BatchGetItem) and delete an item (a cancel takes its launch slot out)', () => {
    const actions = withAction(statementsOf('api'), 'dynamodb:').flatMap(actionsOf);
    expect(actions).toEqual(expect.arrayContaining(['dynamodb:BatchGetItem', 'dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:Query', 'dynamodb:PutItem', 'dynamodb:UpdateItem']));
    // The janitor reads its queue the same way.
    expect(withAction(statementsOf('janitor'), 'dynamodb:').flatMap(actionsOf)).toContain('dynamodb:BatchGetItem');
  });

  it('lets the state machine invoke exactly the six task functions', () => {
    const policy = Object.values(resources).find(
      (r) => r.Type === 'AWS::IAM::Policy' && flat((r.Properties.Roles as unknown[])[0]).includes('StateMachineRole'),
    ) as Resource;
    const statements = (policy.Properties.PolicyDocument as { Statement: Statement[] }).Statement;
    const invoked = new Set(
      withAction(statements, 'lambda:InvokeFunction').flatMap((s) => (s.Resource as unknown[]).map(flat)).map((r) => r.replace(/:\*$/, '')),
    );
    expect(invoked.size).toBe(6);
    for (const r of invoked) expect(r).not.toMatch(/api|onec2event/i);
  });
});

describe('JobWorkflow', () => {
  /** The definition, with each CloudFormation intrinsic replaced by a placeholder string. */
  function definition(): { States: Record<string, Record<string, unknown>> } {
    const machine = Object.values(resources).find((r) => r.Type === 'AWS::StepFunctions::StateMachine') as Resource;
    const parts = (machine.Properties.DefinitionString as { 'Fn::Join': [string, unknown[]] })['Fn::Join'][1];
    return JSON.parse(parts.map((part) => (typeof part === 'string' ? part : 'placeholder')).join('')) as never;
  }

  it('is a Standard machine with X-Ray and error logs to its own log group', () => {
    template.hasResourceProperties('AWS::StepFunctions::StateMachine', {
      StateMachineName: 'relaunch-controller',
      StateMachineType: 'STANDARD',
      TracingConfiguration: { Enabled: true },
      LoggingConfiguration: Match.objectLike({ Level: 'ERROR', IncludeExecutionData: true }),
    });
    template.hasResourceProperties('AWS::Logs::LogGroup', { LogGroupName: '/aws/vendedlogs/states/relaunch-controller' });
  });

  it('waits for the task token on the boot clock, then with a heartbeat, and retries Lambda faults on every task', () => {
    const { States } = definition();
    expect(States[StateName.AwaitBoot]).toMatchObject({
      Resource: expect.stringContaining(':states:::lambda:invoke.waitForTaskToken'),
      TimeoutSecondsPath: '$.bootTimeoutSeconds',
    });
    expect(States[StateName.AwaitAttempt]).toMatchObject({
      Resource: expect.stringContaining(':states:::lambda:invoke.waitForTaskToken'),
      HeartbeatSeconds: HEARTBEAT_TIMEOUT_SECONDS,
    });
    const tasks = Object.entries(States).filter(([, s]) => s.Type === 'Task');
    expect(tasks).toHaveLength(8);
    for (const [name, state] of tasks) {
      expect((state.Retry as unknown[])[0], name).toEqual(
        expect.objectContaining({ ErrorEquals: expect.arrayContaining(['Lambda.TooManyRequestsException']), JitterStrategy: 'FULL' }),
      );
    }
    expect(States[StateName.ReleaseInstances]?.Retry).toContainEqual(
      expect.objectContaining({ ErrorEquals: [InstancesStillRunningError.errorName] }),
    );
  });

  it('retries TransientError and a dead Lambda on every task, and a task timeout only where it means a lost invocation', () => {
    const { States } = definition();
    const tasks = Object.entries(States).filter(([, s]) => s.Type === 'Task');
    for (const [name, state] of tasks) {
      const retried = (state.Retry as { ErrorEquals: string[] }[]).map((retry) => retry.ErrorEquals);
      expect(retried, name).toContainEqual([TransientError.errorName]);
      expect(retried.flat(), name).toEqual(expect.arrayContaining([...LAMBDA_CRASH_ERRORS]));
      // AwaitBoot's States.Timeout is its boot clock running out: the policy's to decide.
      const waits = (AWAIT_STATES as readonly string[]).includes(name);
      expect(retried.flat().includes(WorkflowError.Timeout), name).toBe(!waits);
    }
  });

  it('times each Lambda task out a little after its deployed function would have', () => {
    const { States } = definition();
    const lambdaTasks = Object.keys(TASK_LAMBDAS).filter((name) => !(AWAIT_STATES as readonly string[]).includes(name)) as TaskStateName[];
    expect(lambdaTasks).toHaveLength(6);
    for (const name of lambdaTasks) {
      const functionTimeout = (resources[functionId(TASK_LAMBDAS[name])] as Resource).Properties.Timeout as number;
      expect(functionTimeout, name).toBe(LAMBDA_NEEDS[TASK_LAMBDAS[name]].timeoutSeconds);
      expect(States[name]?.TimeoutSeconds, name).toBeGreaterThan(functionTimeout);
      expect(States[name]?.TimeoutSeconds, name).toBeLessThanOrEqual(functionTimeout + 60);
    }
  });
});

describe('InstanceEvents', () => {
  it('forwards spot interruption warnings, rebalance recommendations and instances going away to on-ec2-event', () => {
    const target = Match.arrayWith([Match.objectLike({ Arn: { 'Fn::GetAtt': [functionId('on-ec2-event'), 'Arn'] } })]);
    for (const detailType of [EC2_DETAIL_TYPES.interruption, EC2_DETAIL_TYPES.rebalance]) {
      template.hasResourceProperties('AWS::Events::Rule', {
        EventPattern: { source: ['aws.ec2'], 'detail-type': [detailType] },
        Targets: target,
      });
    }
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        source: ['aws.ec2'],
        'detail-type': [EC2_DETAIL_TYPES.stateChange],
        detail: { state: [...GONE_STATE_NAMES] },
      },
      Targets: target,
    });
    // And the execution rules (one for the janitor, one for transient mounts) and the janitor's schedule.
    template.resourceCountIs('AWS::Events::Rule', 6);
  });

  it('keeps what EventBridge could not deliver, and what on-ec2-event failed on, in queues the janitor reads', () => {
    const rules = Object.values(resources).filter(
      (r) => r.Type === 'AWS::Events::Rule' && (r.Properties.EventPattern as { source?: string[] } | undefined)?.source?.[0] === 'aws.ec2',
    );
    expect(rules).toHaveLength(3);
    for (const rule of rules) {
      expect((rule.Properties.Targets as Record<string, unknown>[])[0]).toMatchObject({
        DeadLetterConfig: { Arn: { 'Fn::GetAtt': [expect.stringMatching(/^RelaunchEc2EventsUndelivered/), 'Arn'] } },
      });
    }
    template.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
      FunctionName: { Ref: functionId('on-ec2-event') },
      MaximumRetryAttempts: 2,
      DestinationConfig: { OnFailure: { Destination: { 'Fn::GetAtt': [Match.stringLikeRegexp('^RelaunchEc2EventsFailed'), 'Arn'] } } },
    });
  });
});

describe('Janitor', () => {
  const queueIds = ['RelaunchEc2EventsUndelivered', 'RelaunchEc2EventsFailed', 'RelaunchExecutionEventsUndelivered'];

  it('runs the janitor every 10 minutes, once per tick', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(10 minutes)',
      Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [functionId('janitor'), 'Arn'] }, RetryPolicy: { MaximumRetryAttempts: 0 } })],
    });
  });

  it('tells the janitor where the three queues are, and lets it read and delete only there', () => {
    const janitor = resources[functionId('janitor')] as Resource;
    const variables = (janitor.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
    expect(flat(variables.DEAD_LETTER_QUEUES)).toMatch(/ec2-events-undelivered.*ec2-events-failed.*execution-events-undelivered/);
    const sqs = withAction(statementsOf('janitor'), 'sqs:');
    expect(new Set(sqs.flatMap(actionsOf))).toEqual(new Set(['sqs:ReceiveMessage', 'sqs:ChangeMessageVisibility', 'sqs:GetQueueUrl', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes']));
    const reached = sqs.flatMap((s) => [s.Resource].flat().map(flat));
    expect(reached.every((arn) => queueIds.some((id) => arn.startsWith(`<${id}`)))).toBe(true);
    for (const name of LAMBDA_NAMES.filter((n) => n !== 'janitor')) expect(withAction(statementsOf(name), 'sqs:Receive'), name).toEqual([]);
  });

  it('alarms when a letter waits in any of the three queues for 15 minutes', () => {
    for (const id of queueIds) {
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        MetricName: 'ApproximateNumberOfMessagesVisible',
        Namespace: 'AWS/SQS',
        Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [Match.stringLikeRegexp(`^${id}`), 'QueueName'] } }],
        Threshold: 1,
        EvaluationPeriods: 3,
        Period: 300,
      });
    }
  });

  it('keeps every dead letter 14 days, encrypted, over TLS only', () => {
    // The janitor's queues, and the one of transient mounts' deletions, which an operator reads.
    const allQueues = [...queueIds, 'RelaunchTransientMountsUndelivered'];
    const queues = Object.entries(resources).filter(([, r]) => r.Type === 'AWS::SQS::Queue');
    expect(queues.map(([id]) => allQueues.find((q) => id.startsWith(q))).sort()).toEqual([...allQueues].sort());
    for (const [, queue] of queues) expect(queue.Properties).toMatchObject({ MessageRetentionPeriod: 1_209_600, SqsManagedSseEnabled: true });
  });
});

describe('ExecutionEvents', () => {
  it('sends this controller\'s executions that ended stopped, timed out or failed to on-execution-ended, with retries and a dead-letter queue', () => {
    const rule = Object.values(resources).find(
      (r) => r.Type === 'AWS::Events::Rule' && (r.Properties.EventPattern as { source: string[] }).source[0] === 'aws.states',
    ) as Resource;
    const pattern = rule.Properties.EventPattern as { 'detail-type': string[]; detail: { stateMachineArn: unknown[]; status: string[] } };
    expect(pattern['detail-type']).toEqual([EXECUTION_STATUS_CHANGE]);
    expect(flat(pattern.detail.stateMachineArn)).toMatch(/:stateMachine:relaunch-controller$/);
    expect(pattern.detail.status).toEqual(['FAILED', 'TIMED_OUT', 'ABORTED']);
    const [target] = rule.Properties.Targets as Record<string, unknown>[];
    expect(target).toMatchObject({
      Arn: { 'Fn::GetAtt': [functionId('on-execution-ended'), 'Arn'] },
      RetryPolicy: { MaximumRetryAttempts: 185, MaximumEventAgeInSeconds: 86_400 },
      DeadLetterConfig: { Arn: { 'Fn::GetAtt': [expect.stringMatching(/^RelaunchExecutionEventsUndelivered/), 'Arn'] } },
    });
  });
});

describe('JobApi', () => {
  it('logs API Gateway\'s own errors for every method, never request bodies', () => {
    const stage = Object.values(resources).find((r) => r.Type === 'AWS::ApiGateway::Stage') as Resource;
    const settings = stage.Properties.MethodSettings as { HttpMethod: string; ResourcePath: string; LoggingLevel?: string; DataTraceEnabled?: boolean }[];
    expect(settings.length).toBeGreaterThan(0);
    for (const setting of settings) expect(setting, `${setting.HttpMethod} ${setting.ResourcePath}`).toMatchObject({ LoggingLevel: 'ERROR' });
    expect(settings.find((s) => s.ResourcePath === '/*')).toMatchObject({ DataTraceEnabled: false });
  });

  /** The method of a route, found by its resource path (`/jobs/{id}`) and verb. */
  function method(pattern: string, verb: string): Resource {
    const last = pattern.split('/').at(-1) as string;
    const found = Object.values(resources).find((r) => {
      if (r.Type !== 'AWS::ApiGateway::Method' || r.Properties.HttpMethod !== verb) return false;
      const resourceRef = (r.Properties.ResourceId as { Ref?: string }).Ref;
      const resource = resourceRef === undefined ? undefined : resources[resourceRef];
      // The last path part and the verb are unique among relaunch's routes.
      return resource?.Properties.PathPart === last;
    });
    if (found === undefined) throw new Error(`no method ${verb} ${pattern}`);
    return found;
  }

  it('requires IAM on the job routes and nothing but the secret on agent callbacks', () => {
    template.resourceCountIs('AWS::ApiGateway::Method', ROUTES.length);
    for (const route of ROUTES) {
      const props = method(route.pattern, route.method).Properties;
      if (route.auth === 'iam') {
        expect(props.AuthorizationType, route.pattern).toBe('AWS_IAM');
      } else {
        expect(props, route.pattern).toMatchObject({
          AuthorizationType: 'NONE',
          RequestParameters: { 'method.request.header.Authorization': true },
          RequestValidatorId: expect.anything(),
          RequestModels: { 'application/json': expect.anything() },
        });
      }
    }
  });

  /**
   * A gateway response's body as API Gateway renders it: plain substitution of `$context`
   * variables, no VTL (no $util to escape with). Only the `...String` variables are quoted
   * (JSON strings); every other is put in as it is, quotes and backslashes included.
   */
  function renderGatewayResponse(body: string, error: { message: string; validationErrorString: string }): string {
    return body.replace(/\$context\.error\.(messageString|message|validationErrorString|responseType)/g, (_, name: string) => {
      if (name === 'messageString') return JSON.stringify(error.message);
      if (name === 'message') return error.message;
      if (name === 'responseType') return 'BAD_REQUEST_BODY';
      return error.validationErrorString;
    });
  }

  it.each(['BAD_REQUEST_BODY', 'BAD_REQUEST_PARAMETERS'])('answers a %s refusal with the API error shape, valid JSON whatever the validator says', (type) => {
    const [response] = Object.values(template.findResources('AWS::ApiGateway::GatewayResponse', { Properties: { ResponseType: type } })) as Resource[];
    expect(response?.Properties.StatusCode).toBe('400');
    const source = (response?.Properties.ResponseTemplates as Record<string, string>)['application/json'] ?? '';
    // What API Gateway's validator says about a body with a wrong phase: its text holds quotes.
    const rendered = renderGatewayResponse(source, {
      message: 'Invalid request body',
      validationErrorString: '[instance value ("build") not found in enum (possible values: ["setup","run"])]',
    });
    expect(() => JSON.parse(rendered), rendered).not.toThrow();
    expect(JSON.parse(rendered)).toEqual({ error: expect.any(String), issues: [{ path: '', message: 'Invalid request body' }] });
  });

  it('validates agent bodies against the protocol schema before invoking the Lambda', () => {
    template.hasResourceProperties('AWS::ApiGateway::RequestValidator', { ValidateRequestBody: true, ValidateRequestParameters: true });
    template.hasResourceProperties('AWS::ApiGateway::Model', {
      ContentType: 'application/json',
      Schema: Match.objectLike({
        $schema: 'http://json-schema.org/draft-04/schema#',
        // exitCode or agentFailure: which one is the handler's check (lib/agent/protocol.ts), past API Gateway's.
        required: ['nodeRank', 'phase', 'outputTail'],
        properties: Match.objectLike({
          outputTail: { type: 'string', maxLength: OUTPUT_TAIL_MAX_BYTES },
          exitCode: Match.objectLike({ type: 'integer', minimum: 0, maximum: 255 }),
          agentFailure: Match.objectLike({ required: ['step', 'error'] }),
        }),
      }),
    });
  });

  it('traces the stage and throttles the user routes on it', () => {
    template.hasResourceProperties('AWS::ApiGateway::Stage', {
      TracingEnabled: true,
      MethodSettings: Match.arrayWith([
        Match.objectLike({ ResourcePath: '/*', HttpMethod: '*', ThrottlingRateLimit: 50, ThrottlingBurstLimit: 100 }),
      ]),
    });
  });

  it('gives each agent route a throttle of its own, so users polling cannot use up the heartbeats\' share', () => {
    const agentRoutes = ROUTES.filter((route) => route.auth === 'agent-secret');
    expect(agentRoutes.map((route) => route.name).sort()).toEqual(['agentShipper', 'dataCredentials', 'heartbeat', 'holdOrRun', 'logCredentials', 'nextAttempt', 'reportPhase']);
    const stage = Object.values(template.findResources('AWS::ApiGateway::Stage'))[0] as Resource;
    const settings = stage.Properties.MethodSettings as Record<string, unknown>[];
    for (const route of agentRoutes) {
      expect(settings, route.pattern).toContainEqual(
        expect.objectContaining({
          // API Gateway's method-setting path: each `/` of the resource path written `~1`.
          ResourcePath: `/${route.pattern.replaceAll('/', '~1')}`,
          HttpMethod: route.method,
          ThrottlingRateLimit: 100,
          ThrottlingBurstLimit: 200,
          MetricsEnabled: true,
        }),
      );
    }
    // Only the agent routes are set apart; the user routes stay on the stage's default.
    expect(settings).toHaveLength(1 + agentRoutes.length);
  });

  it('logs every request as one JSON line to a log group of its own, kept 90 days', () => {
    const stage = Object.values(template.findResources('AWS::ApiGateway::Stage'))[0] as Resource;
    const access = stage.Properties.AccessLogSetting as { DestinationArn: { 'Fn::Join': [string, unknown[]] }; Format: string };
    // The log group's ARN without `:*` (@aws-cdk/aws-apigateway:logGroupDestinationArnWithoutWildcard): `...:log-group:` then its name.
    const parts = access.DestinationArn['Fn::Join'][1];
    expect(parts.at(-2)).toBe(':log-group:');
    const logGroupId = (parts.at(-1) as { Ref: string }).Ref;
    expect(resources[logGroupId as string]).toMatchObject({ Type: 'AWS::Logs::LogGroup', Properties: { RetentionInDays: 90 }, DeletionPolicy: 'Retain' });
    expect(JSON.parse(access.Format)).toMatchObject({
      requestId: '$context.requestId',
      ip: '$context.identity.sourceIp',
      route: '$context.resourcePath',
      status: '$context.status',
      latency: '$context.responseLatency',
    });
    // API Gateway writes no log without the account's CloudWatch role.
    template.resourceCountIs('AWS::ApiGateway::Account', 1);
  });

  it('puts no WAF in front of the API unless asked', () => {
    template.resourceCountIs('AWS::WAFv2::WebACL', 0);
    template.resourceCountIs('AWS::WAFv2::WebACLAssociation', 0);
  });

  it('rate-limits each IP on the agent routes with a WAF rule when asked, answering 429 (which agents back off from)', () => {
    const withWaf = synth({ agentWafRateLimit: 500 });
    const acls = Object.values(withWaf.findResources('AWS::WAFv2::WebACL')) as Resource[];
    expect(acls).toHaveLength(1);
    const acl = acls[0] as Resource;
    expect(acl.Properties).toMatchObject({ Scope: 'REGIONAL', DefaultAction: { Allow: {} } });
    const [rule] = acl.Properties.Rules as { Action: unknown; Statement: { RateBasedStatement: Record<string, unknown> } }[];
    expect(rule?.Action).toEqual({ Block: { CustomResponse: expect.objectContaining({ ResponseCode: 429 }) } });
    const rate = rule?.Statement.RateBasedStatement as {
      Limit: number;
      AggregateKeyType: string;
      ScopeDownStatement: { RegexMatchStatement: { RegexString: string; FieldToMatch: unknown } };
    };
    expect(rate).toMatchObject({ Limit: 500, AggregateKeyType: 'IP' });
    expect(rate.ScopeDownStatement.RegexMatchStatement.FieldToMatch).toEqual({ UriPath: {} });
    const agentPath = new RegExp(rate.ScopeDownStatement.RegexMatchStatement.RegexString);
    for (const path of ['/v1/jobs/j-00mm8abcd-test01/attempts/2/heartbeat', '/v1/jobs/j-1/attempts/1/report', '/jobs/j-1/attempts/1/report']) {
      expect(path).toMatch(agentPath);
    }
    for (const path of ['/v1/jobs', '/v1/jobs/j-1', '/v1/jobs/j-1/attempts/1/heartbeat/x', '/v1/jobs/j-1/attempts']) {
      expect(path).not.toMatch(agentPath);
    }
    const association = Object.values(withWaf.findResources('AWS::WAFv2::WebACLAssociation'))[0] as Resource;
    expect(flat(association.Properties.ResourceArn)).toMatch(/:apigateway:<AWS::Region>::\/restapis\/<RelaunchApi\w+>\/stages\/<RelaunchApiDeploymentStagev1\w+>$/);
  });

  it('refuses a WAF rate limit WAF would refuse, naming the prop', () => {
    expect(() => synth({ agentWafRateLimit: 9 })).toThrow(/agentWafRateLimit: expected an integer >= 10/);
  });
});

describe('JobInstances', () => {
  it("gives the instance role Session Manager's shell, its own secret and ECR pulls, nothing else: no managed policy, no other parameter, no S3 at all", () => {
    const role = Object.entries(resources).find(([id]) => id.startsWith('RelaunchInstancesRole'))?.[1] as Resource;
    expect(role.Properties.ManagedPolicyArns ?? []).toEqual([]);
    expect(role.Properties.Policies).toBeUndefined();
    const attached = Object.values(resources).filter(
      (r) => r.Type === 'AWS::IAM::Policy' && flat(r.Properties.Roles).includes('RelaunchInstancesRole'),
    );
    const statements = attached.flatMap((p) => (p.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
    expect(statements).toEqual([
      {
        Sid: 'SessionManagerShell',
        Effect: 'Allow',
        Action: [
          'ssm:UpdateInstanceInformation',
          'ssmmessages:CreateControlChannel',
          'ssmmessages:CreateDataChannel',
          'ssmmessages:OpenControlChannel',
          'ssmmessages:OpenDataChannel',
        ],
        Resource: '*',
      },
      { Sid: 'EcrLogin', Effect: 'Allow', Action: 'ecr:GetAuthorizationToken', Resource: '*' },
      {
        Sid: 'PullFromAccountEcr',
        Effect: 'Allow',
        Action: ['ecr:BatchCheckLayerAvailability', 'ecr:BatchGetImage', 'ecr:GetDownloadUrlForLayer'],
        Resource: { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':ecr:*:', { Ref: 'AWS::AccountId' }, ':repository/*']] },
      },
      {
        Sid: 'ReadOwnAgentSecret',
        Effect: 'Allow',
        Action: 'ssm:GetParameter',
        Resource: { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':ssm:', { Ref: 'AWS::Region' }, ':', { Ref: 'AWS::AccountId' }, ':parameter/relaunch/agent-secrets/*']] },
        // The instance whose credentials sign the request must be the one the parameter's tag names.
        Condition: { StringEquals: { 'ssm:resourceTag/relaunch:instance-arn': '${ec2:SourceInstanceARN}' } },
      },
    ]);
  });
});

describe("JobData's access role", () => {
  /** The statements of the policies attached to the role whose logical id starts with `prefix`. */
  const roleStatements = (all: Record<string, Resource>, prefix: string): Statement[] =>
    Object.values(all)
      .filter((r) => r.Type === 'AWS::IAM::Policy' && flat(r.Properties.Roles).includes(prefix))
      .flatMap((p) => (p.Properties.PolicyDocument as { Statement: Statement[] }).Statement);

  it("is assumable by the API function's role alone, for an hour, and holds the data bucket's two prefixes and the job log group's streams as its ceiling", () => {
    const [id, role] = Object.entries(resources).find(([key]) => key.startsWith('RelaunchDataAccessRole') && resources[key]?.Type === 'AWS::IAM::Role') as [string, Resource];
    const apiRole = Object.keys(resources).find((key) => key.startsWith(`RelaunchFunctions${LambdaName.api.replaceAll('-', '')}ServiceRole`) && resources[key]?.Type === 'AWS::IAM::Role') as string;
    expect(role.Properties.MaxSessionDuration).toBe(3600);
    expect(role.Properties.AssumeRolePolicyDocument).toEqual({
      Version: '2012-10-17',
      Statement: [{ Action: 'sts:AssumeRole', Effect: 'Allow', Principal: { AWS: { 'Fn::GetAtt': [apiRole, 'Arn'] } } }],
    });
    // The API's role may assume it, and no other function's.
    const assuming = Object.values(resources).filter((r) => r.Type === 'AWS::IAM::Policy' && JSON.stringify(r.Properties.PolicyDocument).includes('sts:AssumeRole'));
    expect(assuming.map((p) => flat(p.Properties.Roles))).toEqual([expect.stringContaining(apiRole)]);
    expect(JSON.stringify(assuming[0]?.Properties.PolicyDocument)).toContain(JSON.stringify({ Action: 'sts:AssumeRole', Effect: 'Allow', Resource: { 'Fn::GetAtt': [id, 'Arn'] } }));
    const api = resources[functionId(LambdaName.api)] as Resource;
    expect((api.Properties.Environment as { Variables: Record<string, unknown> }).Variables.DATA_ACCESS_ROLE_ARN).toEqual({ 'Fn::GetAtt': [id, 'Arn'] });
    const dataBucket = Object.keys(resources).find((key) => key.startsWith('RelaunchDataBucket') && resources[key]?.Type === 'AWS::S3::Bucket') as string;
    expect(roleStatements(resources, 'RelaunchDataAccessRole')).toEqual([
      { Sid: 'FetchSources', Effect: 'Allow', Action: 's3:GetObject', Resource: { 'Fn::Join': ['', [{ 'Fn::GetAtt': [dataBucket, 'Arn'] }, '/sources/*']] } },
      { Sid: 'ListOwnMounts', Effect: 'Allow', Action: 's3:ListBucket', Resource: { 'Fn::GetAtt': [dataBucket, 'Arn'] }, Condition: { StringLike: { 's3:prefix': 'mounts/*' } } },
      {
        Sid: 'UseOwnMounts',
        Effect: 'Allow',
        Action: ['s3:AbortMultipartUpload', 's3:DeleteObject', 's3:GetObject', 's3:PutObject'],
        Resource: { 'Fn::Join': ['', [{ 'Fn::GetAtt': [dataBucket, 'Arn'] }, '/mounts/*']] },
      },
      { Sid: 'ShipJobOutput', Effect: 'Allow', Action: ['logs:CreateLogStream', 'logs:PutLogEvents'], Resource: expect.anything() },
    ]);
    const ship = roleStatements(resources, 'RelaunchDataAccessRole').find((statement) => statement.Sid === 'ShipJobOutput');
    expect(JSON.stringify(ship?.Resource)).toContain(':log-group:/relaunch/jobs:log-stream:*');
  });

  it('adds the buckets a deployer allows, by name or name prefix, and tells the API which they are', () => {
    const withBuckets = synth({ dataBuckets: ['team-data', 'ckpt-*'] }).toJSON() as { Resources: Record<string, Resource> };
    const statements = roleStatements(withBuckets.Resources, 'RelaunchDataAccessRole');
    const arn = (name: string) => ({ 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:s3:::${name}`]] });
    const withSid = (sid: string) => statements.filter((statement) => statement.Sid === sid);
    expect(grants(withSid('ListAllowedBuckets'))).toEqual(grants([{ Sid: 'ListAllowedBuckets', Effect: 'Allow', Action: ['s3:GetBucketLocation', 's3:ListBucket'], Resource: [arn('team-data'), arn('ckpt-*')] }]));
    expect(grants(withSid('UseAllowedBuckets'))).toEqual(grants([{
      Sid: 'UseAllowedBuckets',
      Effect: 'Allow',
      Action: ['s3:AbortMultipartUpload', 's3:DeleteObject', 's3:GetObject', 's3:PutObject'],
      Resource: [
        { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':s3:::team-data/*']] },
        { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':s3:::ckpt-*/*']] },
      ],
    }]));
    const api = Object.values(withBuckets.Resources).find((r) => r.Type === 'AWS::Lambda::Function' && JSON.stringify(r.Properties.Environment ?? {}).includes('DATA_CONFIG')) as Resource;
    const env = (api.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
    expect(JSON.stringify(env.DATA_CONFIG)).toContain('\\"allowedBuckets\\":[\\"team-data\\",\\"ckpt-*\\"]');
    expect(JSON.stringify(env.DATA_CONFIG)).toContain('\\"partition\\":\\"');
  });

  it("lets only delete-transient-mounts delete mounts: its job folders of the stack's bucket, and the allowed buckets after reading their tags", () => {
    const withBuckets = synth({ dataBuckets: ['team-data', 'ckpt-*'] }).toJSON() as { Resources: Record<string, Resource> };
    const policies = Object.values(withBuckets.Resources).filter((r) => r.Type === 'AWS::IAM::Policy');
    const deleting = policies.filter((p) => JSON.stringify(p.Properties.PolicyDocument).includes('s3:DeleteBucket'));
    expect(deleting.map((p) => flat(p.Properties.Roles))).toEqual([expect.stringContaining('deletetransientmounts')]);
    const statements = (deleting[0]?.Properties.PolicyDocument as { Statement: Statement[] }).Statement.filter((st) => JSON.stringify(st.Action).includes('s3:'));
    const dataBucket = Object.keys(withBuckets.Resources).find((id) => withBuckets.Resources[id]?.Type === 'AWS::S3::Bucket') as string;
    const own = { 'Fn::GetAtt': [dataBucket, 'Arn'] };
    const arn = (name: string) => ({ 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:s3:::${name}`]] });
    expect(grants(statements)).toEqual(grants([
      { Effect: 'Allow', Action: ['s3:ListBucketVersions', 's3:ListBucket'], Resource: own, Condition: { StringLike: { 's3:prefix': 'mounts/*' } } },
      { Effect: 'Allow', Action: ['s3:DeleteObject', 's3:DeleteObjectVersion'], Resource: { 'Fn::Join': ['', [own, '/mounts/*']] } },
      { Effect: 'Allow', Action: ['s3:GetBucketTagging', 's3:ListBucketVersions', 's3:ListBucket', 's3:DeleteBucket'], Resource: [arn('team-data'), arn('ckpt-*')] },
      {
        Effect: 'Allow',
        Action: ['s3:DeleteObject', 's3:DeleteObjectVersion'],
        Resource: [
          { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':s3:::team-data/*']] },
          { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':s3:::ckpt-*/*']] },
        ],
      },
    ]));
    // Every end of an execution reaches it, with a day of retries and a queue (alarmed) after.
    const rule = Object.values(withBuckets.Resources).find(
      (r) => r.Type === 'AWS::Events::Rule' && JSON.stringify(r.Properties.EventPattern ?? {}).includes('SUCCEEDED'),
    );
    expect((rule?.Properties.EventPattern as { detail: { status: string[] } }).detail.status).toEqual(['SUCCEEDED', 'FAILED', 'TIMED_OUT', 'ABORTED']);
    expect(JSON.stringify(rule?.Properties.Targets)).toContain('"MaximumRetryAttempts":185');
    expect(JSON.stringify(rule?.Properties.Targets)).toContain('DeadLetterConfig');
  });

  it('keeps an execution end whose Lambda failed twice more in a queue: on-execution-ended in the one the janitor replays, delete-transient-mounts in its own', () => {
    const queueOf = (name: LambdaName): string => {
      const config = Object.values(resources).find(
        (r) => r.Type === 'AWS::Lambda::EventInvokeConfig' && JSON.stringify(r.Properties.FunctionName) === JSON.stringify({ Ref: functionId(name) }),
      );
      expect(config?.Properties, name).toMatchObject({ MaximumRetryAttempts: 2, MaximumEventAgeInSeconds: 21_600 });
      return flat((config?.Properties.DestinationConfig as { OnFailure: { Destination: unknown } }).OnFailure.Destination);
    };
    expect(queueOf('on-execution-ended')).toMatch(/^<RelaunchExecutionEventsUndelivered/);
    expect(queueOf('delete-transient-mounts')).toMatch(/^<RelaunchTransientMountsUndelivered/);
  });

  it('keeps the data bucket private, encrypted, TLS-only and retained, and lets sources expire', () => {
    template.hasResourceProperties('AWS::S3::Bucket', {
      PublicAccessBlockConfiguration: { BlockPublicAcls: true, BlockPublicPolicy: true, IgnorePublicAcls: true, RestrictPublicBuckets: true },
      BucketEncryption: { ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }] },
      LifecycleConfiguration: { Rules: Match.arrayWith([Match.objectLike({ Id: 'expire-sources', Prefix: 'sources/', ExpirationInDays: 90, Status: 'Enabled' })]) },
    });
    template.hasResource('AWS::S3::Bucket', { DeletionPolicy: 'Retain' });
    template.hasResourceProperties('AWS::S3::BucketPolicy', {
      PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]) },
    });
  });

  it('lets the launcher put agent secrets, and every function that releases delete them, only under the secrets path', () => {
    const secrets = { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':ssm:', { Ref: 'AWS::Region' }, ':', { Ref: 'AWS::AccountId' }, ':parameter/relaunch/agent-secrets/*']] };
    const statementsOf = (fn: string) =>
      Object.values(resources)
        .filter((r) => r.Type === 'AWS::IAM::Policy' && flat(r.Properties.Roles).includes(fn.replaceAll('-', '')))
        .flatMap((p) => (p.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
    const ssmStatements = (fn: string) =>
      statementsOf(fn).filter((statement) => statement.Sid !== 'JobSecrets' && [statement.Action].flat().some((action) => String(action).startsWith('ssm:')));
    expect(ssmStatements('launchattempt')).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ Sid: 'PutAgentSecrets', Action: ['ssm:AddTagsToResource', 'ssm:PutParameter'], Resource: secrets }),
        expect.objectContaining({ Sid: 'DeleteAgentSecrets', Action: ['ssm:DeleteParameter', 'ssm:DeleteParameters'], Resource: secrets }),
      ]),
    );
    for (const fn of ['releaseinstances', 'recordcontrollerfailure', 'onexecutionended', 'janitor']) {
      expect(ssmStatements(fn).map((statement) => statement.Sid)).toEqual(['DeleteAgentSecrets']);
    }
    for (const fn of ['api', 'awaitattempt', 'evaluatepolicy', 'onec2event', 'continueasnew']) expect(ssmStatements(fn)).toEqual([]);
  });

  it("grants each function exactly the calls on jobs' secrets the catalog lists, only under the job secrets path", () => {
    const path = { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':ssm:', { Ref: 'AWS::Region' }, ':', { Ref: 'AWS::AccountId' }, ':parameter/relaunch/job-secrets/*']] };
    for (const name of LAMBDA_NAMES) {
      const id = name.replaceAll('-', '');
      const statements = Object.values(resources)
        .filter((r) => r.Type === 'AWS::IAM::Policy' && flat(r.Properties.Roles).includes(`Functions${id}ServiceRole`))
        .flatMap((p) => (p.Properties.PolicyDocument as { Statement: Statement[] }).Statement)
        .filter((statement) => statement.Sid === 'JobSecrets');
      const calls = LAMBDA_NEEDS[name].secrets ?? [];
      const expected = calls.length === 0 ? [] : [{ Sid: 'JobSecrets', Effect: 'Allow', Action: calls.length === 1 ? JOB_SECRETS_ACTIONS[calls[0] as JobSecretsCall] : calls.map((call) => JOB_SECRETS_ACTIONS[call]), Resource: path }];
      expect(grants(statements), name).toEqual(grants(expected));
    }
    expect(LAMBDA_NEEDS.api.secrets).toEqual(['put', 'delete']);
    expect(LAMBDA_NEEDS['launch-attempt'].secrets).toEqual(['get']);
  });

  it('gives the security group one inbound rule by default: its own members (a multi-node job\'s nodes, EFA), all traffic', () => {
    const group = Object.values(resources).find((r) => r.Type === 'AWS::EC2::SecurityGroup') as Resource;
    expect(group.Properties.SecurityGroupIngress).toBeUndefined();
    expect(group.Properties.VpcId).toBe(NETWORK.vpcId);
    const ingress = Object.values(resources).filter((r) => r.Type === 'AWS::EC2::SecurityGroupIngress');
    expect(ingress).toHaveLength(1);
    expect(ingress[0]?.Properties.IpProtocol).toBe('-1');
    expect(flat(ingress[0]?.Properties.SourceSecurityGroupId)).toBe(flat(ingress[0]?.Properties.GroupId));
  });

  it('admits nothing inbound when node-to-node traffic is turned off, and has the API refuse multi-node tasks', () => {
    const stack = new Stack(new App({ context: FEATURE_FLAGS }), 'Own');
    new JobInstances(stack, 'I', { vpcId: NETWORK.vpcId, nodeToNodeTraffic: false });
    Template.fromStack(stack).resourceCountIs('AWS::EC2::SecurityGroupIngress', 0);
    const closed = synth({ nodeToNodeTraffic: false }).toJSON().Resources as Record<string, Resource>;
    const variablesOf = (all: Record<string, Resource>, name: string) =>
      (Object.entries(all).find(([id, r]) => r.Type === 'AWS::Lambda::Function' && id.startsWith(`RelaunchFunctions${name}`))?.[1].Properties.Environment as { Variables: Record<string, unknown> })
        .Variables;
    expect(variablesOf(closed, 'api')[EnvVar.nodeToNodeTraffic]).toBe('false');
    expect(variablesOf(resources, 'api')[EnvVar.nodeToNodeTraffic]).toBeUndefined();
    expect(JSON.stringify(variablesOf(closed, 'launchattempt')[EnvVar.computeConfig])).toContain('\\"nodeToNodeTraffic\\":false');
  });

  it('opens the deployment\'s job ports over TCP to the given CIDR only, and tells the launcher which', () => {
    const app = new App({ context: { ...FEATURE_FLAGS, 'aws:cdk:bundling-stacks': [] } });
    const stack = new Stack(app, 'Ports', { env: { account: '123456789012', region: 'us-east-1' } });
    const jobPorts = [{ from: 8080, to: 8090 }, { from: 30000, to: 30000 }];
    new Relaunch(stack, 'Jobs', { vpcId: NETWORK.vpcId, subnetsByZone: SUBNETS, jobPorts, vpcCidr: '10.0.0.0/16' });
    const ports = Template.fromStack(stack);
    // The two port ranges, and the group's own members.
    ports.resourceCountIs('AWS::EC2::SecurityGroupIngress', 3);
    ports.hasResourceProperties('AWS::EC2::SecurityGroupIngress', { IpProtocol: 'tcp', FromPort: 8080, ToPort: 8090, CidrIp: '10.0.0.0/16' });
    ports.hasResourceProperties('AWS::EC2::SecurityGroupIngress', { IpProtocol: 'tcp', FromPort: 30000, ToPort: 30000, CidrIp: '10.0.0.0/16' });
    const launcher = Object.values(ports.findResources('AWS::Lambda::Function')).find((r) =>
      JSON.stringify(r).includes('launch-attempt'),
    ) as Resource | undefined;
    expect(JSON.stringify(launcher?.Properties.Environment)).toContain('\\"openPorts\\":[{\\"from\\":8080,\\"to\\":8090},{\\"from\\":30000,\\"to\\":30000}]');
    ports.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ [EnvVar.openPorts]: '[{"from":8080,"to":8090},{"from":30000,"to":30000}]' }) },
    });
  });

  it('opens job ports to a wider CIDR only when the deployment names one', () => {
    const stack = new Stack(new App({ context: FEATURE_FLAGS }), 'Wide');
    new JobInstances(stack, 'I', { vpcId: NETWORK.vpcId, openPorts: [{ from: 8080, to: 8080 }], openPortsTo: '0.0.0.0/0' });
    Template.fromStack(stack).hasResourceProperties('AWS::EC2::SecurityGroupIngress', { FromPort: 8080, ToPort: 8080, CidrIp: '0.0.0.0/0' });
    expect(() => new JobInstances(new Stack(new App({ context: FEATURE_FLAGS }), 'NoCidr'), 'I', { vpcId: NETWORK.vpcId, openPorts: [{ from: 8080, to: 8080 }] })).toThrow(
      /openPorts needs openPortsTo/,
    );
  });
});

describe('Relaunch in a user app', () => {
  it('fits in any stack, with its own name prefix and regions', () => {
    const app = new App({ context: { ...FEATURE_FLAGS, 'aws:cdk:bundling-stacks': [] } });
    const stack = new Stack(app, 'Theirs', { env: { account: '123456789012', region: 'eu-west-1' } });
    const other = { region: 'eu-central-1', subnetsByZone: { 'eu-central-1a': 'subnet-0aaaaaaaaaaaaaaaa' }, securityGroupIds: ['sg-0bbbbbbbbbbbbbbbb'] };
    new Relaunch(stack, 'Jobs', { vpcId: NETWORK.vpcId, subnetsByZone: { 'eu-west-1a': 'subnet-0cccccccccccccccc' }, namePrefix: 'team-a', otherRegions: [other] });
    const theirs = Template.fromStack(stack);
    theirs.hasResourceProperties('AWS::StepFunctions::StateMachine', { StateMachineName: 'team-a-controller' });
    const policies = JSON.stringify(theirs.findResources('AWS::IAM::Policy'));
    expect(policies).toContain(':ec2:eu-central-1:');
    expect(policies).toContain('subnet/subnet-0aaaaaaaaaaaaaaaa');
    expect(policies).toContain('security-group/sg-0bbbbbbbbbbbbbbbb');
    expect(policies).toContain('subnet/subnet-0cccccccccccccccc');
    expect(policies).toContain('stateMachine:team-a-controller');
  });

  it('lets the janitor replay the queue of events each failover region could not forward, by its name there', () => {
    const app = new App({ context: { ...FEATURE_FLAGS, 'aws:cdk:bundling-stacks': [] } });
    const stack = new Stack(app, 'Theirs', { env: { account: '123456789012', region: 'eu-west-1' } });
    const other = { region: 'eu-central-1', subnetsByZone: { 'eu-central-1a': 'subnet-0aaaaaaaaaaaaaaaa' }, securityGroupIds: ['sg-0bbbbbbbbbbbbbbbb'] };
    new Relaunch(stack, 'Jobs', { vpcId: NETWORK.vpcId, subnetsByZone: { 'eu-west-1a': 'subnet-0cccccccccccccccc' }, namePrefix: 'team-a', otherRegions: [other] });
    const theirs = Template.fromStack(stack);
    const janitor = Object.values(theirs.findResources('AWS::Lambda::Function')).find((f) => String(f.Properties.Description).endsWith(': janitor'));
    const queues = flat(janitor?.Properties.Environment.Variables.DEAD_LETTER_QUEUES);
    expect(queues).toContain('"name":"forwarded-ec2-events-eu-central-1","url":"https://sqs.eu-central-1.<AWS::URLSuffix>/123456789012/team-a-forwarded-ec2-events-undelivered"');
    expect(JSON.stringify(theirs.findResources('AWS::IAM::Policy'))).toContain(':sqs:eu-central-1:123456789012:team-a-forwarded-ec2-events-undelivered');
  });
});

describe('TakeDown (cdk destroy)', () => {
  type WithDeps = Resource & { DependsOn?: string[] };
  const all = () => resources as Record<string, WithDeps>;
  const takeDownId = () => {
    const found = Object.entries(all()).filter(([, r]) => r.Type === TAKE_DOWN_RESOURCE_TYPE);
    expect(found).toHaveLength(1);
    return (found[0] as [string, WithDeps])[0];
  };

  it('is a custom resource the take-down function answers', () => {
    const resource = all()[takeDownId()] as WithDeps;
    expect(resource.Properties.ServiceToken).toEqual({ 'Fn::GetAtt': [functionId(LambdaName.takeDown), 'Arn'] });
  });

  it('is deleted after every other function and its policies (they depend on it), so none launches once it has looked', () => {
    const id = takeDownId();
    for (const name of LAMBDA_NAMES.filter((n) => n !== LambdaName.takeDown)) {
      const fn = all()[functionId(name)] as WithDeps;
      expect(fn.DependsOn, name).toContain(id);
      const roleId = ((fn.Properties.Role as { 'Fn::GetAtt': string[] })['Fn::GetAtt'])[0] as string;
      const policies = Object.entries(all()).filter(
        ([, r]) => r.Type === 'AWS::IAM::Policy' && (r.Properties.Roles as { Ref: string }[]).some((role) => role.Ref === roleId),
      );
      expect(policies.length, name).toBeGreaterThan(0);
      for (const [policyId, policy] of policies) expect(policy.DependsOn, `${name} ${policyId}`).toContain(id);
    }
  });

  it("is deleted before the instances' security group, which AWS keeps while instances run in it", () => {
    const resource = all()[takeDownId()] as WithDeps;
    const group = Object.entries(all()).find(([, r]) => r.Type === 'AWS::EC2::SecurityGroup')?.[0];
    expect(resource.DependsOn).toContain(group);
  });
});

describe('the submit policy (a teammate who may submit)', () => {
  it("grants execute-api:Invoke on the API's IAM-authorized routes of its stage, and nothing else", () => {
    const policies = Object.entries(resources).filter(([, r]) => r.Type === 'AWS::IAM::ManagedPolicy');
    expect(policies).toHaveLength(1);
    const [, policy] = policies[0] as [string, Resource];
    const statements = (policy.Properties.PolicyDocument as { Statement: Statement[] }).Statement;
    expect(statements.flatMap(actionsOf)).toEqual(['execute-api:Invoke']);
    const arns = statements.flatMap((s) => [s.Resource].flat()).map((r) => JSON.stringify(r));
    const iamRoutes = ROUTES.filter((route) => route.auth === 'iam');
    expect(arns).toHaveLength(iamRoutes.length);
    for (const route of iamRoutes) {
      const path = route.pattern.replace(/\{[^}]+\}/g, '*');
      expect(arns.some((arn) => arn.includes(`/${route.method}${path}"`)), `${route.method} ${route.pattern}`).toBe(true);
    }
    expect(arns.join(' ')).not.toContain('attempts');
  });

  it('is a stack output, SubmitPolicyArn, to attach to a teammate', () => {
    const [policyId] = Object.entries(resources).find(([, r]) => r.Type === 'AWS::IAM::ManagedPolicy') as [string, Resource];
    const outputs = template.toJSON().Outputs as Record<string, { Value: unknown }>;
    const output = Object.entries(outputs).find(([id]) => id.includes('SubmitPolicyArn'));
    expect(output?.[1].Value).toEqual({ Ref: policyId });
  });
});

describe("the instance role's ECR pulls and the account's API Gateway log role", () => {
  const pullStatement = (built: Template) => {
    const policies = Object.values(built.toJSON().Resources as Record<string, Resource>).filter((r) => r.Type === 'AWS::IAM::Policy');
    const statements = policies.flatMap((r) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
    const pulls = statements.filter((st) => st.Sid === 'PullFromAccountEcr');
    expect(pulls).toHaveLength(1);
    return pulls[0] as Statement;
  };

  it("pulls from every repository of the account by default, and only from the named ones (or prefixes) when given", () => {
    expect(JSON.stringify(pullStatement(template).Resource)).toMatch(/:repository\/\*"/);
    const narrowed = JSON.stringify(pullStatement(synth({ ecrRepositories: ['team/trainer', 'base-*'] })).Resource);
    expect(narrowed).toContain(':repository/team/trainer"');
    expect(narrowed).toContain(':repository/base-*"');
    expect(narrowed).not.toMatch(/:repository\/\*"/);
  });

  it('sets the account-wide API Gateway log role by default, and leaves the account alone when told', () => {
    template.resourceCountIs('AWS::ApiGateway::Account', 1);
    const left = synth({ apiGatewayAccountRole: false });
    left.resourceCountIs('AWS::ApiGateway::Account', 0);
    const roles = Object.values(left.toJSON().Resources as Record<string, Resource>).filter(
      (r) => r.Type === 'AWS::IAM::Role' && JSON.stringify(r.Properties.AssumeRolePolicyDocument).includes('apigateway.amazonaws.com'),
    );
    expect(roles).toEqual([]);
  });
});
