// Operations: what an on-call engineer gets from a deployed relaunch. Alarms on the faults
// that harm jobs (relaunch failing an execution or a job, Lambda errors and throttles, API
// 5xx), all sent to one SNS topic; a dashboard of the jobs' metrics and of the services
// under them; and, when asked for, a topic that hears of every job's end.

import { Duration } from 'aws-cdk-lib';
import type * as apigateway from 'aws-cdk-lib/aws-apigateway';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sns from 'aws-cdk-lib/aws-sns';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { MetricDimension, MetricName, METRICS_NAMESPACE } from '../../lib/workflow/operations.ts';
import { isTerminal, JOB_STATUSES, JobStatus } from '../../lib/status.ts';

/** Options of the alarms, the dashboard and the topics. */
export interface OperationsProps {
  /** Prefix of the alarms', dashboard's and topics' names; also the `service` of relaunch's metrics. */
  readonly namePrefix: string;
  /** The Lambdas, by name: each gets an errors alarm and a throttles alarm. */
  readonly functions: Readonly<Record<string, lambda.Function>>;
  /** The controller. */
  readonly stateMachine: sfn.IStateMachine;
  /** The controller's execution log (its ERROR level records how each failed execution failed). */
  readonly executionLogs: logs.ILogGroup;
  /** The REST API. */
  readonly api: apigateway.RestApiBase;
  /**
   * An existing SNS topic for the alarms (a team's paging topic).
   * @default - a topic is created; subscribe to it after deploying
   */
  readonly alarmTopicArn?: string;
  /**
   * Publish each job's end (id, terminal status, reason) to an SNS topic.
   * @default false
   */
  readonly jobNotifications?: boolean;
  /**
   * The topic for job end notices, when `jobNotifications` is on.
   * @default - a topic is created
   */
  readonly jobNotificationsTopicArn?: string;
}

/** The statistic period of every alarm and graph. */
const PERIOD = Duration.minutes(5);

/**
 * Terminal statuses a user's job ends in by its own doing or its user's (a failure, a
 * cancel): their executions fail through the JobFailed state on purpose, so they are not
 * an execution failure to page about. FAILED_CONTROLLER, relaunch's own, is not among them.
 */
const USER_ENDINGS = JOB_STATUSES.filter((status) => isTerminal(status) && status !== JobStatus.SUCCEEDED && status !== JobStatus.FAILED_CONTROLLER);

/** The metric the execution log's filter writes: executions that failed for relaunch's own reasons. */
export const EXECUTIONS_FAILED_METRIC = 'ExecutionsFailedByRelaunch';

/** The alarms, the dashboard and the topics: see the module header. */
export class Operations extends Construct {
  /** Where every alarm goes, in ALARM and back to OK. */
  readonly alarmTopic: sns.ITopic;
  /** Where each job's end is published, when job notifications are on. */
  readonly jobNotificationsTopic?: sns.ITopic;
  readonly dashboard: cloudwatch.Dashboard;
  private readonly alarmList: cloudwatch.AlarmBase[] = [];
  private readonly service: string;

  constructor(scope: Construct, id: string, props: OperationsProps) {
    super(scope, id);
    this.service = props.namePrefix;
    this.alarmTopic =
      props.alarmTopicArn === undefined
        ? // CloudWatch cannot publish to a topic encrypted with the AWS managed SNS key, so
          // the created topic is not encrypted at rest; it carries alarm states, not job data.
          new sns.Topic(this, 'Alarms', { topicName: `${props.namePrefix}-alarms`, displayName: 'relaunch alarms', enforceSSL: true })
        : sns.Topic.fromTopicArn(this, 'Alarms', props.alarmTopicArn);
    if (props.jobNotifications === true || props.jobNotificationsTopicArn !== undefined) {
      this.jobNotificationsTopic =
        props.jobNotificationsTopicArn === undefined
          ? new sns.Topic(this, 'JobNotifications', {
              topicName: `${props.namePrefix}-job-ends`,
              displayName: 'relaunch job ends',
              enforceSSL: true,
            })
          : sns.Topic.fromTopicArn(this, 'JobNotifications', props.jobNotificationsTopicArn);
    }

    const executionsFailed = this.executionsFailedMetric(props.executionLogs);
    const controllerFailures = this.jobsEnded(JobStatus.FAILED_CONTROLLER);
    this.alarm('ExecutionsFailed', executionsFailed, {
      name: 'executions-failed',
      description:
        'A controller execution failed for relaunch\'s own reasons (ControllerFailed, an error no Catch expected) or timed out. ' +
        'Its job is FAILED_CONTROLLER; the execution history in the Step Functions console shows the failing step and its error.',
    });
    this.alarm('JobsFailedByController', controllerFailures, {
      name: 'jobs-failed-controller',
      description:
        "A job ended FAILED_CONTROLLER: relaunch's fault, not the job's. Find its jobId in the Lambda logs " +
        '(Logs Insights: level = "ERROR") and its reason with `relaunch status JOB`.',
    });
    for (const [name, fn] of Object.entries(props.functions)) {
      this.alarm(`${name}-errors`, fn.metricErrors({ period: PERIOD, statistic: 'Sum' }), {
        name: `${name}-errors`,
        description:
          `The ${name} Lambda failed in 2 of the last 3 five-minute periods. One-off errors are retried by the state machine; ` +
          'errors that persist end jobs FAILED_CONTROLLER. Its log lines name the jobId and attempt.',
        datapointsToAlarm: 2,
        evaluationPeriods: 3,
      });
      this.alarm(`${name}-throttles`, fn.metricThrottles({ period: PERIOD, statistic: 'Sum' }), {
        name: `${name}-throttles`,
        description: `The ${name} Lambda was throttled: the account's or the function's concurrency is exhausted. Heartbeats and reports may be delayed.`,
      });
    }
    this.alarm('Api5xx', props.api.metricServerError({ period: PERIOD, statistic: 'Sum' }), {
      name: 'api-5xx',
      description:
        "relaunch's API answered 5xx: the API Lambda failed or timed out (bad input is a 4xx). Agents retry heartbeats; " +
        'the API access log and the api Lambda log show the request.',
    });
    if (this.jobNotificationsTopic !== undefined) {
      this.alarm('NotificationFailures', this.relaunchMetric(MetricName.notificationFailures), {
        name: 'job-notifications-failed',
        description: "A job's end could not be published to the job notifications topic (the job itself ended normally). The Lambda log line 'job end notification failed' says why.",
      });
    }

    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
      dashboardName: `${props.namePrefix}-operations`,
      defaultInterval: Duration.hours(6),
    });
    this.dashboard.addWidgets(new cloudwatch.AlarmStatusWidget({ title: 'Alarms', alarms: this.alarmList, width: 24 }));
    this.addJobWidgets();
    this.addServiceWidgets(props, executionsFailed);
  }

  /** Every alarm sent to the topic, those added with addAlarm included. */
  get alarms(): readonly cloudwatch.AlarmBase[] {
    return this.alarmList;
  }

  /**
   * Sends another alarm (a dead-letter queue's depth, say) to the alarm topic, in ALARM and
   * back to OK, and shows it among the dashboard's alarms.
   */
  addAlarm(alarm: cloudwatch.AlarmBase): void {
    const action = new actions.SnsAction(this.alarmTopic);
    alarm.addAlarmAction(action);
    alarm.addOkAction(action);
    this.alarmList.push(alarm);
  }

  private alarm(
    id: string,
    metric: cloudwatch.IMetric,
    options: { name: string; description: string; datapointsToAlarm?: number; evaluationPeriods?: number },
  ): void {
    this.addAlarm(
      new cloudwatch.Alarm(this, id, {
        alarmName: `${this.service}-${options.name}`,
        alarmDescription: options.description,
        metric,
        threshold: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods: options.evaluationPeriods ?? 1,
        datapointsToAlarm: options.datapointsToAlarm ?? 1,
        // No data is no fault: most periods have no job ending and no error.
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
  }

  /** One of relaunch's own metrics with only the `service` dimension (a total). */
  private relaunchMetric(metricName: string, statistic = 'Sum'): cloudwatch.Metric {
    return new cloudwatch.Metric({
      namespace: METRICS_NAMESPACE,
      metricName,
      dimensionsMap: { [MetricDimension.service]: this.service },
      period: PERIOD,
      statistic,
    });
  }

  private jobsEnded(status: JobStatus): cloudwatch.Metric {
    return new cloudwatch.Metric({
      namespace: METRICS_NAMESPACE,
      metricName: MetricName.jobsEnded,
      dimensionsMap: { [MetricDimension.service]: this.service, [MetricDimension.status]: status },
      period: PERIOD,
      statistic: 'Sum',
    });
  }

  /**
   * Executions that failed for relaunch's own reasons, counted from the execution log:
   * every job that fails fails its execution (through JobFailed, with the job's status as
   * the error), so Step Functions' own ExecutionsFailed would page for users' failures.
   * This counts failed executions whose error is not a user's ending, and timeouts.
   *
   * A metric filter's dimensions can only name fields of the log event (`$.field`): a
   * constant one is refused or never emitted. No field of the execution log names the
   * deployment, so the metric has no dimension and lives in a namespace of the
   * deployment's own (`relaunch/<prefix>`): two stacks never count each other's.
   */
  private executionsFailedMetric(executionLogs: logs.ILogGroup): cloudwatch.Metric {
    const failedByRelaunch = logs.FilterPattern.all(
      logs.FilterPattern.stringValue('$.type', '=', 'ExecutionFailed'),
      ...USER_ENDINGS.map((status) => logs.FilterPattern.stringValue('$.details.error', '!=', status)),
    );
    const filter = new logs.MetricFilter(this, 'ExecutionsFailedFilter', {
      logGroup: executionLogs,
      filterPattern: logs.FilterPattern.any(failedByRelaunch, logs.FilterPattern.stringValue('$.type', '=', 'ExecutionTimedOut')),
      metricNamespace: `${METRICS_NAMESPACE}/${this.service}`,
      metricName: EXECUTIONS_FAILED_METRIC,
      metricValue: '1',
    });
    return filter.metric({ period: PERIOD, statistic: 'Sum' });
  }

  /**
   * A graph of every series of `metricName` whose dimensions are exactly `service` and
   * `dimensions` (a SEARCH, so a new exit code or zone shows up without a deploy).
   */
  private search(metricName: string, dimensions: readonly string[], statistic: string, label: string): cloudwatch.MathExpression {
    const schema = [METRICS_NAMESPACE, MetricDimension.service, ...dimensions].join(',');
    return new cloudwatch.MathExpression({
      expression: `SEARCH('{${schema}} MetricName="${metricName}" ${MetricDimension.service}="${this.service}"', '${statistic}', ${PERIOD.toSeconds()})`,
      usingMetrics: {},
      label,
      period: PERIOD,
    });
  }

  private addJobWidgets(): void {
    const graph = (title: string, left: cloudwatch.IMetric[], stacked = false) =>
      new cloudwatch.GraphWidget({ title, left, width: 8, height: 6, stacked, view: cloudwatch.GraphWidgetView.TIME_SERIES });
    this.dashboard.addWidgets(
      graph('Jobs ended, by status', [this.search(MetricName.jobsEnded, [MetricDimension.status], 'Sum', '')], true),
      graph('Decisions, by action and exit code', [this.search(MetricName.decisions, [MetricDimension.action, MetricDimension.exitCode], 'Sum', '')], true),
      graph('Launch failures, by error', [this.search(MetricName.launchFailures, [MetricDimension.error], 'Sum', '')], true),
    );
    const relaunchTime = (statistic: string) => this.relaunchMetric(MetricName.exitToRelaunch, statistic).with({ label: statistic });
    this.dashboard.addWidgets(
      graph('Preemptions, by zone and instance type', [this.search(MetricName.preemptions, [MetricDimension.zone, MetricDimension.instanceType], 'Sum', '')], true),
      new cloudwatch.GraphWidget({
        title: 'Exit to relaunch (ms, backoff included)',
        left: ['p50', 'p90', 'Maximum'].map(relaunchTime),
        width: 8,
        height: 6,
      }),
      graph('Exit to relaunch, by how the attempt ended (p90, ms)', [this.search(MetricName.exitToRelaunch, [MetricDimension.outcome], 'p90', '')]),
    );
    this.dashboard.addWidgets(
      graph('Goodput of ended jobs (%, useful run / wall time)', ['Average', 'Minimum'].map((statistic) => this.relaunchMetric(MetricName.jobGoodput, statistic).with({ label: statistic }))),
      graph("Cost of ended jobs' instances ($)", [this.relaunchMetric(MetricName.jobCost, 'Sum').with({ label: 'Sum' })]),
    );
  }

  private addServiceWidgets(props: OperationsProps, executionsFailed: cloudwatch.Metric): void {
    const fns = Object.entries(props.functions);
    const perFunction = (metric: (fn: lambda.Function) => cloudwatch.Metric) => fns.map(([name, fn]) => metric(fn).with({ label: name, period: PERIOD }));
    const machine = props.stateMachine;
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Controller executions',
        left: [
          machine.metricStarted({ period: PERIOD, label: 'started' }),
          machine.metricSucceeded({ period: PERIOD, label: 'succeeded' }),
          machine.metricFailed({ period: PERIOD, label: 'failed (jobs failing included)' }),
          machine.metricAborted({ period: PERIOD, label: 'aborted' }),
          executionsFailed.with({ label: 'failed by relaunch' }),
        ],
        width: 8,
        height: 6,
      }),
      new cloudwatch.GraphWidget({
        title: 'API requests and errors',
        left: [props.api.metricCount({ period: PERIOD, label: 'requests' })],
        right: [
          props.api.metricClientError({ period: PERIOD, label: '4xx' }),
          props.api.metricServerError({ period: PERIOD, label: '5xx' }),
        ],
        width: 8,
        height: 6,
      }),
      new cloudwatch.GraphWidget({ title: 'API latency p99 (ms)', left: [props.api.metricLatency({ period: PERIOD, statistic: 'p99' })], width: 8, height: 6 }),
    );
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({ title: 'Lambda errors', left: perFunction((fn) => fn.metricErrors({ statistic: 'Sum' })), width: 8, height: 6 }),
      new cloudwatch.GraphWidget({ title: 'Lambda throttles', left: perFunction((fn) => fn.metricThrottles({ statistic: 'Sum' })), width: 8, height: 6 }),
      new cloudwatch.GraphWidget({ title: 'Lambda duration p99 (ms)', left: perFunction((fn) => fn.metricDuration({ statistic: 'p99' })), width: 8, height: 6 }),
    );
    this.dashboard.addWidgets(
      new cloudwatch.LogQueryWidget({
        title: 'Lambda errors, newest first (every line names its jobId and attempt)',
        logGroupNames: fns.map(([, fn]) => fn.logGroup.logGroupName),
        queryLines: [
          'fields @timestamp, service, jobId, attempt, message, error.name, error.message',
          'filter level = "ERROR"',
          'sort @timestamp desc',
          'limit 50',
        ],
        width: 24,
        height: 8,
      }),
    );
  }
}
