// JobWorkflow: the controller, a Standard state machine (one execution per job) built by
// buildControllerDefinition, with its logs and traces.

import { ArnFormat, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { buildControllerDefinition, type ControllerTasks } from '../workflow.ts';

/** Options of the controller. */
export interface JobWorkflowProps {
  /** The state machine's name: fixed, so functions can know its ARN before it exists. */
  readonly stateMachineName: string;
  /** The Lambda behind each Task state. */
  readonly tasks: ControllerTasks;
  /**
   * What the execution log records. ERROR keeps every failed step and catch with its
   * input, at a fraction of ALL's cost (ALL logs each of the ~6 transitions per attempt);
   * the execution history has the rest for 90 days.
   * @default sfn.LogLevel.ERROR
   */
  readonly logLevel?: sfn.LogLevel;
  /**
   * How long execution logs are kept.
   * @default logs.RetentionDays.THREE_MONTHS
   */
  readonly logRetention?: logs.RetentionDays;
}

/** The controller state machine. */
export class JobWorkflow extends Construct {
  readonly stateMachine: sfn.StateMachine;
  readonly logGroup: logs.LogGroup;

  /** The ARN a state machine of this name has in `scope`'s stack, usable before it exists. */
  static stateMachineArn(scope: Construct, stateMachineName: string): string {
    return Stack.of(scope).formatArn({
      service: 'states',
      resource: 'stateMachine',
      resourceName: stateMachineName,
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
    });
  }

  /** Every execution of the named state machine, for IAM (`arn:…:execution:<name>:*`). */
  static executionsArn(scope: Construct, stateMachineName: string): string {
    return Stack.of(scope).formatArn({
      service: 'states',
      resource: 'execution',
      resourceName: `${stateMachineName}:*`,
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
    });
  }

  constructor(scope: Construct, id: string, props: JobWorkflowProps) {
    super(scope, id);
    this.logGroup = new logs.LogGroup(this, 'Logs', {
      // Step Functions asks for the /aws/vendedlogs/ prefix to keep the resource policy small.
      logGroupName: `/aws/vendedlogs/states/${props.stateMachineName}`,
      retention: props.logRetention ?? logs.RetentionDays.THREE_MONTHS,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const states = new Construct(this, 'States');
    this.stateMachine = new sfn.StateMachine(this, 'StateMachine', {
      stateMachineName: props.stateMachineName,
      stateMachineType: sfn.StateMachineType.STANDARD,
      comment: 'relaunch: one execution per job; launch, await, decide, release, relaunch',
      definitionBody: sfn.DefinitionBody.fromChainable(buildControllerDefinition(states, props.tasks)),
      tracingEnabled: true,
      logs: { destination: this.logGroup, level: props.logLevel ?? sfn.LogLevel.ERROR, includeExecutionData: true },
    });
    const acknowledge = (id: string, reason: string) => Validations.of(this.stateMachine).acknowledge({ id, reason });
    acknowledge(
      'AwsSolutions-SF1',
      "Every event is in the execution's own history (what the console shows, kept 90 days); the log holds errors, " +
        'which the on-call alarms read. Logging ALL would bill every transition of every job twice.',
    );
  }
}
