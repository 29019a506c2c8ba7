// Operations on the synthesized stack: each alarm (what it watches, its threshold, where it
// goes), the topics, the dashboard's metrics, and the job notifications' variable and
// permission, only on the functions that end jobs. No bundling, no CloudFormation validation.

import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import { beforeAll, describe, expect, it } from 'vitest';
import { JOB_NOTIFICATIONS_TOPIC_ENV, MetricName, METRICS_NAMESPACE, SERVICE_NAME_ENV } from '../../../../lib/workflow/operations.ts';
import { configFromContext, ContextKey } from '../../../../infra/config.ts';
import { EXECUTIONS_FAILED_METRIC } from '../../../../infra/constructs/operations.ts';
import { LAMBDA_NAMES, LAMBDA_NEEDS, type LambdaName } from '../../../../infra/lambda-catalog.ts';
import { RelaunchStack } from '../../../../infra/relaunch-stack.ts';
import { JobStatus } from '../../../../lib/status.ts';
import { flat } from '../../../support/fixtures/cfn.ts';
import { FEATURE_FLAGS } from '../../../../infra/feature-flags.ts';

process.env.CDK_VALIDATION = 'false';

const NETWORK = { vpcId: 'vpc-0123456789abcdef0', subnetsByZone: { 'us-east-1a': 'subnet-0123456789abcdef0' } };
const PAGING_TOPIC = 'arn:aws:sns:us-east-1:123456789012:team-paging';
const JOBS_TOPIC = 'arn:aws:sns:us-east-1:123456789012:team-jobs';

type Resource = { Type: string; Properties: Record<string, unknown> };
type Synth = { stack: RelaunchStack; template: Template; resources: Record<string, Resource> };

function synth(props: Partial<ConstructorParameters<typeof RelaunchStack>[2]['relaunch']> = {}): Synth {
  const app = new App({ context: { ...FEATURE_FLAGS, 'aws:cdk:bundling-stacks': [] } });
  const stack = new RelaunchStack(app, 'Test', { relaunch: { ...NETWORK, ...props } });
  const template = Template.fromStack(stack);
  return { stack, template, resources: template.toJSON().Resources as Record<string, Resource> };
}


const ofType = (resources: Record<string, Resource>, type: string) => Object.entries(resources).filter(([, r]) => r.Type === type);

/** The alarms the Operations construct makes (other constructs make theirs and add them). */
const operationsAlarms = (resources: Record<string, Resource>) =>
  ofType(resources, 'AWS::CloudWatch::Alarm').filter(([id]) => id.startsWith('RelaunchOperations'));

/** An alarm by its name's suffix (names are `<prefix>-<what>`). */
function alarmNamed(resources: Record<string, Resource>, name: string): Resource {
  const found = ofType(resources, 'AWS::CloudWatch::Alarm').find(([, r]) => r.Properties.AlarmName === `relaunch-${name}`);
  if (found === undefined) throw new Error(`no alarm relaunch-${name}`);
  return found[1];
}

/** The logical id of a Lambda by its catalog name. */
function functionId(resources: Record<string, Resource>, name: LambdaName): string {
  const found = ofType(resources, 'AWS::Lambda::Function').find(([id]) => id.startsWith(`RelaunchFunctions${name.replaceAll('-', '')}`));
  if (found === undefined) throw new Error(`no function ${name}`);
  return found[0];
}

/** Every statement of the policies on a Lambda's role. */
function statementsOf(resources: Record<string, Resource>, name: LambdaName): { Action: string | string[]; Resource: unknown }[] {
  const fn = resources[functionId(resources, name)] as Resource;
  const roleId = (fn.Properties.Role as { 'Fn::GetAtt': string[] })['Fn::GetAtt'][0];
  return ofType(resources, 'AWS::IAM::Policy')
    .filter(([, r]) => (r.Properties.Roles as { Ref: string }[]).some((role) => role.Ref === roleId))
    .flatMap(([, r]) => (r.Properties.PolicyDocument as { Statement: { Action: string | string[]; Resource: unknown }[] }).Statement);
}

const publishes = (statements: { Action: string | string[] }[]) =>
  statements.filter((s) => (Array.isArray(s.Action) ? s.Action : [s.Action]).includes('sns:Publish'));

const envOf = (resources: Record<string, Resource>, name: LambdaName) =>
  ((resources[functionId(resources, name)] as Resource).Properties.Environment as { Variables: Record<string, unknown> }).Variables;

describe('Operations, as deployed by default', () => {
  let built: Synth;
  let topicId: string;
  beforeAll(() => {
    built = synth();
    const topics = ofType(built.resources, 'AWS::SNS::Topic');
    expect(topics.map(([, r]) => r.Properties.TopicName)).toEqual(['relaunch-alarms']);
    topicId = (topics[0] as [string, Resource])[0];
  });

  it('creates the alarm topic, refusing publishers that do not use TLS', () => {
    built.template.hasResourceProperties('AWS::SNS::TopicPolicy', {
      Topics: [{ Ref: topicId }],
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
        ]),
      },
    });
  });

  it('sends every alarm to the topic, in ALARM and back to OK, and counts no missing data as a fault', () => {
    const alarms = operationsAlarms(built.resources);
    // Two per function, plus executions, FAILED_CONTROLLER jobs and API 5xx.
    expect(alarms).toHaveLength(2 * LAMBDA_NAMES.length + 3);
    for (const [, alarm] of alarms) {
      expect(alarm.Properties).toMatchObject({
        AlarmActions: [{ Ref: topicId }],
        OKActions: [{ Ref: topicId }],
        TreatMissingData: 'notBreaching',
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      });
      expect(alarm.Properties.AlarmDescription).toEqual(expect.any(String));
    }
  });

  it('alarms on a job ended FAILED_CONTROLLER, from the metric the Lambdas write', () => {
    expect(alarmNamed(built.resources, 'jobs-failed-controller').Properties).toMatchObject({
      Namespace: METRICS_NAMESPACE,
      MetricName: MetricName.jobsEnded,
      Dimensions: expect.arrayContaining([
        { Name: 'service', Value: 'relaunch' },
        { Name: 'Status', Value: JobStatus.FAILED_CONTROLLER },
      ]),
      Statistic: 'Sum',
      Period: 300,
      EvaluationPeriods: 1,
    });
  });

  it("alarms on executions failed by relaunch, counted from the controller's log without the jobs' own failures", () => {
    const filters = ofType(built.resources, 'AWS::Logs::MetricFilter');
    expect(filters).toHaveLength(1);
    const filter = (filters[0] as [string, Resource])[1].Properties;
    const logGroup = ofType(built.resources, 'AWS::Logs::LogGroup').find(([, r]) => r.Properties.LogGroupName === '/aws/vendedlogs/states/relaunch-controller');
    expect(filter.LogGroupName).toEqual({ Ref: logGroup?.[0] });
    const pattern = String(filter.FilterPattern);
    expect(pattern).toContain('$.type = "ExecutionFailed"');
    expect(pattern).toContain('$.type = "ExecutionTimedOut"');
    for (const status of [JobStatus.FAILED, JobStatus.FAILED_SETUP, JobStatus.FAILED_PRECHECKS, JobStatus.FAILED_NO_RESOURCE, JobStatus.CANCELLED]) {
      expect(pattern).toContain(`$.details.error != "${status}"`);
    }
    expect(pattern).not.toContain(JobStatus.FAILED_CONTROLLER);
    const [transformation] = filter.MetricTransformations as Record<string, unknown>[];
    expect(transformation).toMatchObject({ MetricNamespace: `${METRICS_NAMESPACE}/relaunch`, MetricName: EXECUTIONS_FAILED_METRIC, MetricValue: '1' });
    const alarm = alarmNamed(built.resources, 'executions-failed').Properties;
    expect(alarm).toMatchObject({ Namespace: `${METRICS_NAMESPACE}/relaunch`, MetricName: EXECUTIONS_FAILED_METRIC, Statistic: 'Sum' });
    // The alarm reads exactly the series the filter writes.
    expect(alarm.Dimensions ?? []).toEqual(((transformation?.Dimensions ?? []) as { Key: string }[]).map(({ Key }) => expect.objectContaining({ Name: Key })));
  });

  it("gives a metric filter's dimensions only log fields (`$.field`), as CloudWatch Logs takes them, and keeps two deployments' series apart", () => {
    const written = (resources: Record<string, Resource>) =>
      ofType(resources, 'AWS::Logs::MetricFilter').flatMap(([, r]) => r.Properties.MetricTransformations as { MetricNamespace: string; MetricName: string; Dimensions?: { Key: string; Value: string }[] }[]);
    const ours = written(built.resources);
    const other = written(synth({ namePrefix: 'batch2' }).resources);
    for (const transformation of [...ours, ...other]) {
      for (const dimension of transformation.Dimensions ?? []) expect(dimension.Value, dimension.Key).toMatch(/^\$(\.[A-Za-z_][\w-]*)+$/);
    }
    const series = (list: typeof ours) => list.map((t) => `${t.MetricNamespace}/${t.MetricName} ${JSON.stringify(t.Dimensions ?? [])}`);
    for (const one of series(ours)) expect(series(other)).not.toContain(one);
  });

  it.each(LAMBDA_NAMES)('alarms on errors (2 of 3 periods) and on any throttle of %s', (name) => {
    const fn = { Name: 'FunctionName', Value: { Ref: functionId(built.resources, name) } };
    expect(alarmNamed(built.resources, `${name}-errors`).Properties).toMatchObject({
      Namespace: 'AWS/Lambda',
      MetricName: 'Errors',
      Dimensions: [fn],
      Statistic: 'Sum',
      EvaluationPeriods: 3,
      DatapointsToAlarm: 2,
    });
    expect(alarmNamed(built.resources, `${name}-throttles`).Properties).toMatchObject({
      Namespace: 'AWS/Lambda',
      MetricName: 'Throttles',
      Dimensions: [fn],
      EvaluationPeriods: 1,
    });
  });

  it("alarms on the API's 5xx answers", () => {
    expect(alarmNamed(built.resources, 'api-5xx').Properties).toMatchObject({
      Namespace: 'AWS/ApiGateway',
      MetricName: '5XXError',
      Dimensions: [{ Name: 'ApiName', Value: 'relaunch' }],
      Statistic: 'Sum',
    });
  });

  it('draws a dashboard of the jobs, the controller, the Lambdas and the API, with every alarm', () => {
    const dashboards = ofType(built.resources, 'AWS::CloudWatch::Dashboard');
    expect(dashboards).toHaveLength(1);
    const [, dashboard] = dashboards[0] as [string, Resource];
    expect(dashboard.Properties.DashboardName).toBe('relaunch-operations');
    const body = flat(dashboard.Properties.DashboardBody);
    for (const name of [MetricName.decisions, MetricName.jobsEnded, MetricName.preemptions, MetricName.exitToRelaunch, MetricName.launchFailures]) {
      expect(body).toContain(`MetricName=\\"${name}\\" service=\\"relaunch\\"`);
    }
    expect(body).toContain('{relaunch,service,Action,ExitCode}');
    expect(body).toContain('{relaunch,service,Zone,InstanceType}');
    expect(body).toContain('{relaunch,service,Error}');
    expect(body).toContain(EXECUTIONS_FAILED_METRIC);
    expect(body).toContain('"5XXError"');
    expect(body).toContain('filter level = \\"ERROR\\"');
    for (const [id] of operationsAlarms(built.resources)) expect(body).toContain(`<${id}.Arn>`);
  });

  it('sends an alarm added later to the same topic and shows it on the dashboard', () => {
    const app = new App({ context: { ...FEATURE_FLAGS, 'aws:cdk:bundling-stacks': [] } });
    const again = new RelaunchStack(app, 'Again', { relaunch: NETWORK });
    const extra = new cloudwatch.Alarm(again, 'QueueDepth', {
      metric: new cloudwatch.Metric({ namespace: 'AWS/SQS', metricName: 'ApproximateNumberOfMessagesVisible', dimensionsMap: { QueueName: 'q' } }),
      threshold: 1,
      evaluationPeriods: 1,
    });
    again.relaunch.operations.addAlarm(extra);
    expect(again.relaunch.operations.alarms).toContain(extra);
    const resources = Template.fromStack(again).toJSON().Resources as Record<string, Resource>;
    const [extraId, extraAlarm] = ofType(resources, 'AWS::CloudWatch::Alarm').find(([id]) => id.startsWith('QueueDepth')) as [string, Resource];
    const [againTopic] = ofType(resources, 'AWS::SNS::Topic')[0] as [string, Resource];
    expect(extraAlarm.Properties).toMatchObject({ AlarmActions: [{ Ref: againTopic }], OKActions: [{ Ref: againTopic }] });
    const [, dashboard] = ofType(resources, 'AWS::CloudWatch::Dashboard')[0] as [string, Resource];
    expect(flat(dashboard.Properties.DashboardBody)).toContain(`<${extraId}.Arn>`);
  });

  it("names every function's service after the prefix, traces it, and gives none the notifications topic", () => {
    for (const name of LAMBDA_NAMES) {
      const fn = (built.resources[functionId(built.resources, name)] as Resource).Properties;
      expect(fn.TracingConfig).toEqual({ Mode: 'Active' });
      expect(envOf(built.resources, name)[SERVICE_NAME_ENV]).toBe('relaunch');
      expect(envOf(built.resources, name)).not.toHaveProperty(JOB_NOTIFICATIONS_TOPIC_ENV);
      expect(publishes(statementsOf(built.resources, name))).toEqual([]);
    }
  });

  it('outputs the alarm topic and the dashboard', () => {
    const outputs = built.template.toJSON().Outputs as Record<string, { Value: unknown }>;
    const values = Object.values(outputs).map((output) => flat(output.Value));
    expect(values).toContain(`<${topicId}>`);
    expect(Object.keys(outputs).some((key) => key.includes('DashboardName'))).toBe(true);
  });
});

describe('Operations with a team topic and job notifications', () => {
  it('sends the alarms to the topic given and creates none', () => {
    const { resources } = synth({ alarmTopicArn: PAGING_TOPIC, namePrefix: 'relaunch' });
    expect(ofType(resources, 'AWS::SNS::Topic')).toEqual([]);
    for (const [, alarm] of operationsAlarms(resources)) {
      expect(alarm.Properties).toMatchObject({ AlarmActions: [PAGING_TOPIC], OKActions: [PAGING_TOPIC] });
    }
  });

  it('creates a job ends topic that only the functions ending jobs may publish to, each told its ARN', () => {
    const { resources } = synth({ jobNotifications: true });
    const topics = ofType(resources, 'AWS::SNS::Topic');
    const jobsTopic = topics.find(([, r]) => r.Properties.TopicName === 'relaunch-job-ends');
    expect(jobsTopic).toBeDefined();
    const ref = { Ref: jobsTopic?.[0] };
    const notifying = LAMBDA_NAMES.filter((name) => LAMBDA_NEEDS[name].notifies === true);
    expect(notifying.sort()).toEqual(['api', 'evaluate-policy', 'janitor', 'on-execution-ended', 'record-controller-failure', 'take-down']);
    for (const name of LAMBDA_NAMES) {
      const grants = publishes(statementsOf(resources, name));
      if (notifying.includes(name)) {
        expect(envOf(resources, name)[JOB_NOTIFICATIONS_TOPIC_ENV]).toEqual(ref);
        expect(grants).toEqual([expect.objectContaining({ Action: 'sns:Publish', Resource: ref })]);
      } else {
        expect(envOf(resources, name)).not.toHaveProperty(JOB_NOTIFICATIONS_TOPIC_ENV);
        expect(grants).toEqual([]);
      }
    }
    expect(alarmNamed(resources, 'job-notifications-failed').Properties).toMatchObject({
      Namespace: METRICS_NAMESPACE,
      MetricName: MetricName.notificationFailures,
      Dimensions: [{ Name: 'service', Value: 'relaunch' }],
    });
  });

  it('publishes to a topic given, which turns notifications on by itself', () => {
    const { resources } = synth({ jobNotificationsTopicArn: JOBS_TOPIC });
    expect(ofType(resources, 'AWS::SNS::Topic').map(([, r]) => r.Properties.TopicName)).toEqual(['relaunch-alarms']);
    expect(envOf(resources, 'evaluate-policy')[JOB_NOTIFICATIONS_TOPIC_ENV]).toBe(JOBS_TOPIC);
    expect(publishes(statementsOf(resources, 'evaluate-policy'))).toEqual([expect.objectContaining({ Resource: JOBS_TOPIC })]);
  });

  it("keeps two deployments' metrics apart: the prefix is the service the alarms read", () => {
    const { resources } = synth({ namePrefix: 'batch2' });
    expect(envOf(resources, 'launch-attempt')[SERVICE_NAME_ENV]).toBe('batch2');
    const controller = ofType(resources, 'AWS::CloudWatch::Alarm').find(([, r]) => r.Properties.AlarmName === 'batch2-jobs-failed-controller');
    expect(controller?.[1].Properties.Dimensions).toContainEqual({ Name: 'service', Value: 'batch2' });
  });
});

describe('configFromContext, operations keys', () => {
  const base = { [ContextKey.vpcId]: NETWORK.vpcId, [ContextKey.subnets]: NETWORK.subnetsByZone };
  const read = (extra: Record<string, unknown>) => configFromContext((key) => ({ ...base, ...extra })[key]);

  it('reads the topics and the notifications flag, from -c strings as from cdk.json', () => {
    expect(
      read({ [ContextKey.alarmTopicArn]: PAGING_TOPIC, [ContextKey.jobNotifications]: 'true', [ContextKey.jobNotificationsTopicArn]: JOBS_TOPIC }),
    ).toMatchObject({ alarmTopicArn: PAGING_TOPIC, jobNotifications: true, jobNotificationsTopicArn: JOBS_TOPIC });
    expect(read({ [ContextKey.jobNotifications]: false })).toMatchObject({ jobNotifications: false });
    expect(read({})).toMatchObject({ alarmTopicArn: undefined, jobNotifications: undefined, jobNotificationsTopicArn: undefined });
  });

  it.each([
    [ContextKey.alarmTopicArn, 'team-paging', /context relaunch:alarmTopicArn: expected a standard SNS topic ARN/],
    [ContextKey.jobNotificationsTopicArn, `${JOBS_TOPIC}.fifo`, /context relaunch:jobNotificationsTopicArn: expected a standard SNS topic ARN/],
    [ContextKey.jobNotifications, 'yes', /context relaunch:jobNotifications: expected true or false/],
  ])('names %s when it is %s', (key, value, message) => {
    expect(() => read({ [key]: value })).toThrow(message);
  });
});
