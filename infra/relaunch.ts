// Relaunch: the whole service as one construct, for the bundled stack or a user's own app.
// It wires the constructs of each concern and grants each Lambda only what it uses.

import { ArnFormat, Aws, CfnOutput, CfnResource, RemovalPolicy, Stack } from 'aws-cdk-lib';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { TASK_STATES } from '../lib/workflow/contract.ts';
import { EnvVar, type ComputeEnvConfig } from '../lib/workflow/env.ts';
import type { RelaunchConfig } from './config.ts';
import { ControllerFunctions } from './constructs/controller-functions.ts';
import { forwardedDeadLetterQueueName } from './constructs/dead-letters.ts';
import { ExecutionEvents } from './constructs/execution-events.ts';
import { TransientMounts } from './constructs/transient-mounts.ts';
import { Janitor } from './constructs/janitor.ts';
import { InstanceEvents } from './constructs/instance-events.ts';
import { JobApi } from './constructs/job-api.ts';
import { JobData } from './constructs/job-data.ts';
import { JobInstances } from './constructs/job-instances.ts';
import { JobTable, type JobTableProps } from './constructs/job-table.ts';
import { JobWorkflow } from './constructs/job-workflow.ts';
import { Operations } from './constructs/operations.ts';
import { TakeDown } from './constructs/take-down.ts';
import { LAMBDA_NAMES, LAMBDA_NEEDS, LambdaName, TASK_LAMBDAS } from './lambda-catalog.ts';
import { acknowledgeWildcards } from './nag.ts';
import { agentSecretPath } from '../lib/agent/secret-parameter.ts';
import { DEPLOYMENT_OUTPUT_ID, deploymentRecord } from '../lib/check/deployment.ts';
import { jobSecretsPath, type Ec2RegionConfig, type JobLogsConfig } from '../lib/workflow/resources.ts';
import { DEFAULT_JOB_LOG_RETENTION_DAYS, jobLogGroupName } from '../lib/job-log-names.ts';
import { LOG_SHIPPING_ACTIONS, logStreamArn } from '../lib/adapters/sts-data-access.ts';
import { grantCompute, grantJobSecrets, grantLogReading, grantSweepLaunchTemplates, grantTable, grantWorkflow, type LaunchScope } from './permissions.ts';
import type { ControllerTasks } from './workflow.ts';
import { DEFAULT_NAME_PREFIX } from '../lib/deployment-names.ts';

/** Everything Relaunch needs: where instances run, plus optional tuning. */
export interface RelaunchProps extends RelaunchConfig {
  /**
   * Options of the jobs table (retention, deletion protection, PITR window).
   * @default - retained, deletion-protected, 35 days of PITR
   */
  readonly table?: JobTableProps;
  /**
   * What the controller's execution log records.
   * @default sfn.LogLevel.ERROR
   */
  readonly workflowLogLevel?: sfn.LogLevel;
  /**
   * Emit the API URL and state machine ARN as stack outputs.
   * @default true
   */
  readonly outputs?: boolean;
}

/** relaunch: the table, the Lambdas, the controller, the EC2 and execution event rules and the API. */
export class Relaunch extends Construct {
  readonly table: JobTable;
  readonly functions: ControllerFunctions;
  readonly workflow: JobWorkflow;
  readonly instances: JobInstances;
  /** The stack's bucket: uploaded sources and nameless mounts. */
  readonly data: JobData;
  /** The role whose per-job sessions reach jobs' S3 data (JobData.createAccessRole), and whose per-node sessions ship their output. */
  readonly dataAccessRole: iam.Role;
  /** Every job's output, one stream per job, attempt, node and phase (lib/job-log-names.ts). */
  readonly jobLogs: logs.LogGroup;
  readonly events: InstanceEvents;
  readonly executionEvents: ExecutionEvents;
  /** Every execution's end, to the function that deletes `persistent: false` mounts. */
  readonly transientMounts: TransientMounts;
  readonly janitor: Janitor;
  readonly api: JobApi;
  /** Attach to whoever may use the deployment: execute-api:Invoke on the API's job routes. */
  readonly submitPolicy: iam.ManagedPolicy;
  /** The alarms, their topic, the dashboard and the optional job notifications topic. */
  readonly operations: Operations;
  /** What `cdk destroy` runs: every instance terminated, every live job ended. */
  readonly takeDown: TakeDown;

  constructor(scope: Construct, id: string, props: RelaunchProps) {
    super(scope, id);
    const namePrefix = props.namePrefix ?? DEFAULT_NAME_PREFIX;
    // Named, so the Lambdas it calls (and that call it) know its ARN without a cycle.
    const stateMachineName = `${namePrefix}-controller`;
    const stateMachineArn = JobWorkflow.stateMachineArn(this, stateMachineName);
    const controller = { stateMachineArn, executionsArn: JobWorkflow.executionsArn(this, stateMachineName) };

    this.table = new JobTable(this, 'Jobs', props.table);
    this.instances = new JobInstances(this, 'Instances', {
      vpcId: props.vpcId,
      nodeToNodeTraffic: props.nodeToNodeTraffic ?? true,
      openPorts: props.jobPorts,
      openPortsTo: props.jobPortsCidr ?? props.vpcCidr,
      ecrRepositories: props.ecrRepositories,
    });
    // The stack's own region first (its security group is made here), then the others given.
    const regions: Ec2RegionConfig[] = [
      { region: Aws.REGION, subnetsByZone: props.subnetsByZone, securityGroupIds: [this.instances.securityGroupId] },
      ...(props.otherRegions ?? []),
    ];
    const launchScope: LaunchScope = {
      regions: regions.map(({ region, subnetsByZone, securityGroupIds }) => ({
        region,
        subnetIds: Object.values(subnetsByZone),
        securityGroupIds,
      })),
      instanceRoleArn: this.instances.role.roleArn,
      allowedInstanceTypes: props.allowedInstanceTypes ?? [],
      agentSecretPath: agentSecretPath(namePrefix),
      deployment: namePrefix,
    };
    this.instances.allowReadingOwnSecret(launchScope);
    this.data = new JobData(this, 'Data', { allowedBuckets: props.dataBuckets });
    this.jobLogs = new logs.LogGroup(this, 'JobLogs', {
      logGroupName: jobLogGroupName(namePrefix),
      retention: (props.logRetentionDays ?? DEFAULT_JOB_LOG_RETENTION_DAYS) as logs.RetentionDays,
      // Named after the deployment: a stack deployed again after a delete makes it again.
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const jobLogsConfig: JobLogsConfig = { group: jobLogGroupName(namePrefix), region: Aws.REGION, account: Aws.ACCOUNT_ID, partition: Aws.PARTITION };
    const computeConfig: ComputeEnvConfig = {
      regions,
      instanceProfileArn: this.instances.instanceProfile.instanceProfileArn,
      namePrefix,
      data: this.data.config,
      logs: jobLogsConfig,
      ...(props.allowedInstanceTypes === undefined ? {} : { allowedInstanceTypes: props.allowedInstanceTypes }),
      ...(this.instances.openPorts.length === 0 ? {} : { openPorts: this.instances.openPorts }),
      ...(props.nodeToNodeTraffic === false ? { nodeToNodeTraffic: false } : {}),
    };
    this.functions = new ControllerFunctions(this, 'Functions', {
      namePrefix,
      tableName: this.table.table.tableName,
      stateMachineArn,
      computeConfig,
      dataConfig: this.data.config,
      ...(props.launchPace === undefined ? {} : { launchPace: props.launchPace }),
    });
    // Nodes reach S3 only with the sessions the API gives them, each narrowed to its job's data.
    const givers = LAMBDA_NAMES.filter((name) => LAMBDA_NEEDS[name].givesDataCredentials === true).map((name) => this.functions.functions[name]);
    this.dataAccessRole = this.data.createAccessRole(
      givers.map((fn) => {
        if (fn.role === undefined) throw new Error(`function ${fn.node.id} has no role to give data credentials with`);
        return fn.role;
      }),
    );
    for (const fn of givers) {
      fn.addEnvironment(EnvVar.dataAccessRoleArn, this.dataAccessRole.roleArn);
      fn.addEnvironment(EnvVar.jobLogs, Stack.of(this).toJsonString(jobLogsConfig));
    }
    // Nodes ship their output only with the sessions the API gives them, each narrowed to its
    // own streams: no instance-role policy can tell one node's streams from another's.
    this.dataAccessRole.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'ShipJobOutput',
        actions: [...LOG_SHIPPING_ACTIONS],
        resources: [logStreamArn(jobLogsConfig, '')],
      }),
    );
    // The API refuses at submit a task asking for ports the instances do not open, or for
    // nodes that could not reach each other.
    if (this.instances.openPorts.length > 0) {
      this.functions.functions[LambdaName.api].addEnvironment(EnvVar.openPorts, JSON.stringify(this.instances.openPorts));
    }
    if (props.nodeToNodeTraffic === false) this.functions.functions[LambdaName.api].addEnvironment(EnvVar.nodeToNodeTraffic, 'false');
    this.letApiReadLogs(namePrefix, jobLogsConfig);
    for (const name of LAMBDA_NAMES) {
      const fn = this.functions.functions[name];
      const needs = LAMBDA_NEEDS[name];
      grantTable(fn, this.table.table, needs.store, needs.writesStandbys === true);
      grantWorkflow(fn, controller, needs.workflow);
      if (needs.compute !== false) grantCompute(fn, launchScope, needs.compute);
      if (needs.sweepsLaunchTemplates === true) grantSweepLaunchTemplates(fn, launchScope);
      grantJobSecrets(fn, jobSecretsPath(namePrefix), needs.secrets ?? []);
      if (needs.deletesMounts === true) this.data.grantMountDeletion(fn);
    }

    const tasks = Object.fromEntries(
      TASK_STATES.map((state) => [state, this.functions.functions[TASK_LAMBDAS[state]]]),
    ) as Record<string, lambda.IFunction> as ControllerTasks;
    this.workflow = new JobWorkflow(this, 'Controller', { stateMachineName, tasks, logLevel: props.workflowLogLevel });
    this.events = new InstanceEvents(this, 'Ec2Events', { handler: this.functions.functions[LambdaName.onEc2Event] });
    this.executionEvents = new ExecutionEvents(this, 'ExecutionEvents', {
      handler: this.functions.functions[LambdaName.onExecutionEnded],
      stateMachineArn,
    });
    this.transientMounts = new TransientMounts(this, 'TransientMounts', {
      handler: this.functions.functions[LambdaName.deleteTransientMounts],
      stateMachineArn,
    });
    this.janitor = new Janitor(this, 'Janitor', {
      handler: this.functions.functions[LambdaName.janitor],
      queues: {
        'ec2-events-undelivered': this.events.undelivered,
        'ec2-events-failed': this.events.failed,
        'execution-events-undelivered': this.executionEvents.deadLetters,
      },
      remoteQueues: Object.fromEntries(
        (props.otherRegions ?? []).map(({ region }) => [`forwarded-ec2-events-${region}`, forwardedQueue(this, namePrefix, region)]),
      ),
    });
    this.api = new JobApi(this, 'Api', {
      handler: this.functions.functions[LambdaName.api],
      restApiName: namePrefix,
      agentWafRateLimit: props.agentWafRateLimit,
      accountLogRole: props.apiGatewayAccountRole ?? true,
    });
    this.functions.setApiUrl(this.api.url);
    this.submitPolicy = this.api.createSubmitPolicy('SubmitPolicy');

    this.operations = new Operations(this, 'Operations', {
      namePrefix,
      functions: this.functions.functions,
      stateMachine: this.workflow.stateMachine,
      executionLogs: this.workflow.logGroup,
      api: this.api.api,
      alarmTopicArn: props.alarmTopicArn,
      jobNotifications: props.jobNotifications,
      jobNotificationsTopicArn: props.jobNotificationsTopicArn,
    });
    if (this.operations.jobNotificationsTopic !== undefined) this.functions.notifyJobEnds(this.operations.jobNotificationsTopic);
    // A letter waiting in a dead-letter queue pages on-call like any other alarm.
    for (const alarm of [...this.janitor.alarms, this.transientMounts.alarm]) this.operations.addAlarm(alarm);
    // `cdk destroy`: the functions go first (none can launch any more), then the take-down
    // terminates what runs, then the instances' security group and role can go.
    this.takeDown = new TakeDown(this, 'TakeDown', {
      handler: this.functions.functions[LambdaName.takeDown],
      deletedBefore: LAMBDA_NAMES.filter((name) => name !== LambdaName.takeDown).map((name) => this.functions.functions[name]),
      deletedAfter: [this.instances],
    });
    acknowledgeWildcards(this);

    if (props.outputs ?? true) {
      new CfnOutput(this, 'ApiUrl', { value: this.api.url, description: 'RELAUNCH_API_URL for the CLI' });
      new CfnOutput(this, 'StateMachineArn', { value: this.workflow.stateMachine.stateMachineArn });
      new CfnOutput(this, 'AlarmTopicArn', { value: this.operations.alarmTopic.topicArn, description: 'subscribe on-call here' });
      new CfnOutput(this, 'DashboardName', { value: this.operations.dashboard.dashboardName });
      new CfnOutput(this, 'SubmitPolicyArn', {
        value: this.submitPolicy.managedPolicyArn,
        description: 'attach to a teammate who may submit: aws iam attach-user-policy --user-name NAME --policy-arn ARN',
      });
      const record = deploymentRecord({ ...props, namePrefix, apiUrl: this.api.url, dataBucket: this.data.bucket.bucketName });
      new CfnOutput(this, DEPLOYMENT_OUTPUT_ID, { value: Stack.of(this).toJsonString(record), description: 'what relaunch check reads: version and settings' });
      if (this.operations.jobNotificationsTopic !== undefined) {
        new CfnOutput(this, 'JobNotificationsTopicArn', { value: this.operations.jobNotificationsTopic.topicArn });
      }
    }
    claimNamePrefix(this, this.workflow.logGroup.node.defaultChild as CfnResource);
  }

  /**
   * `relaunch logs` reads through the API, so users need only execute-api:Invoke: the API's
   * function reads the jobs' log group and the controller functions' groups with its own
   * role, scoped to those groups (docs/architecture.md, "Reading a job's output").
   */
  private letApiReadLogs(namePrefix: string, shipped: JobLogsConfig): void {
    const controller = LAMBDA_NAMES.filter((name) => LAMBDA_NEEDS[name].readsLogs !== true).map((name) => [name, this.functions.functions[name].logGroup] as const);
    // One JOB_LOGS: the same function may also give nodes their shipping credentials.
    const config: JobLogsConfig = { ...shipped, namePrefix, controllerLogGroups: Object.fromEntries(controller.map(([name, group]) => [name, group.logGroupName])) };
    for (const name of LAMBDA_NAMES.filter((reader) => LAMBDA_NEEDS[reader].readsLogs === true)) {
      const fn = this.functions.functions[name];
      grantLogReading(fn, jobLogGroupName(namePrefix), controller.map(([, group]) => group));
      fn.addEnvironment(EnvVar.jobLogs, Stack.of(this).toJsonString(config));
    }
  }
}

/**
 * Makes every resource of `relaunch` wait for `claim`, a resource named from the prefix
 * alone (the controller's log group): CloudFormation creates it first, and a second stack
 * of the same prefix (the same deployment under another stack name) fails on it, its name
 * already taken, before it has created anything else. A stack made before stack names
 * followed the prefix holds that log group too.
 */
function claimNamePrefix(relaunch: Construct, claim: CfnResource): void {
  for (const child of relaunch.node.findAll()) {
    if (child instanceof CfnResource && child !== claim) child.addResourceDependency(claim);
  }
}

/** A failover region's queue of EC2 events its forwarder could not deliver, by its name. */
function forwardedQueue(scope: Construct, namePrefix: string, region: string): sqs.IQueue {
  const stack = Stack.of(scope);
  const queueName = forwardedDeadLetterQueueName(namePrefix);
  return sqs.Queue.fromQueueAttributes(scope, `Forwarded-${region}`, {
    queueArn: stack.formatArn({ service: 'sqs', region, resource: queueName, arnFormat: ArnFormat.NO_RESOURCE_NAME }),
    queueUrl: `https://sqs.${region}.${stack.urlSuffix}/${stack.account}/${queueName}`,
  });
}
