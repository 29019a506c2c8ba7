// ExecutionEvents: the janitor's rule. An execution of the controller that ends outside its
// own Succeed and Fail states goes to the Lambda that finishes its job.

import { Duration } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as destinations from 'aws-cdk-lib/aws-lambda-destinations';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { EXECUTION_STATUS_CHANGE, UNRECORDED_END_STATUSES } from '../../lib/aws-events.ts';
import { deadLetterQueue } from './dead-letters.ts';

/** Options of the janitor's rule. */
export interface ExecutionEventsProps {
  /** The Lambda that finishes the job (functions/on-execution-ended). */
  readonly handler: lambda.IFunction;
  /** The controller whose executions are watched. */
  readonly stateMachineArn: string;
}

/** The rule's pattern: this controller's executions, in the ends no state of it records (or in `statuses`). */
export function executionEndedPattern(stateMachineArn: string, statuses: readonly string[] = UNRECORDED_END_STATUSES): events.EventPattern {
  return {
    source: ['aws.states'],
    detailType: [EXECUTION_STATUS_CHANGE],
    detail: { stateMachineArn: [stateMachineArn], status: [...statuses] },
  };
}

/**
 * One rule on the default bus. A missed event would leave a job CANCELLING or RUNNING with
 * its instances on, so delivery is retried for a day, a failed invocation twice, and what
 * still fails is kept in a queue the janitor replays.
 */
export class ExecutionEvents extends Construct {
  readonly rule: events.Rule;
  readonly deadLetters: sqs.Queue;

  constructor(scope: Construct, id: string, props: ExecutionEventsProps) {
    super(scope, id);
    this.deadLetters = deadLetterQueue(this, 'Undelivered');
    // EventBridge invokes the function asynchronously: its queue covers a failed delivery;
    // an invocation that fails is retried twice by Lambda, then kept in the same queue.
    props.handler.configureAsyncInvoke({
      onFailure: new destinations.SqsDestination(this.deadLetters),
      retryAttempts: 2,
      maxEventAge: Duration.hours(6),
    });
    this.rule = new events.Rule(this, 'ExecutionEnded', {
      description: 'relaunch: a controller execution ended outside its own states (stopped, timed out, failed)',
      eventPattern: executionEndedPattern(props.stateMachineArn),
      targets: [
        new targets.LambdaFunction(props.handler, {
          retryAttempts: 185,
          maxEventAge: Duration.hours(24),
          deadLetterQueue: this.deadLetters,
        }),
      ],
    });
  }
}
