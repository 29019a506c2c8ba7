// TransientMounts: every end of the controller's executions goes to the Lambda that deletes
// what a job's mounts said not to keep (`persistent: false`). An event whose delivery or
// deletion keeps failing is left in a queue, and an alarm says a bucket or folder is still
// there.

import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as events from 'aws-cdk-lib/aws-events';
import * as destinations from 'aws-cdk-lib/aws-lambda-destinations';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { END_STATUSES } from '../../lib/aws-events.ts';
import { deadLetterQueue } from './dead-letters.ts';
import { executionEndedPattern } from './execution-events.ts';

/** Options of the rule. */
export interface TransientMountsProps {
  /** The Lambda that deletes them (functions/delete-transient-mounts). */
  readonly handler: lambda.IFunction;
  /** The controller whose executions are watched. */
  readonly stateMachineArn: string;
}

/** The rule, its dead-letter queue and the queue's alarm. */
export class TransientMounts extends Construct {
  readonly rule: events.Rule;
  readonly deadLetters: sqs.Queue;
  readonly alarm: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: TransientMountsProps) {
    super(scope, id);
    this.deadLetters = deadLetterQueue(this, 'Undelivered', undefined, 'an operator deletes by hand what its events name, as its alarm says');
    // EventBridge invokes the function asynchronously: a delivery that fails is retried for
    // a day; an invocation that fails (S3 refusing an object, a bucket larger than one
    // invocation empties) is retried twice by Lambda, each going on where the last stopped.
    // What still fails lands in the queue.
    props.handler.configureAsyncInvoke({
      onFailure: new destinations.SqsDestination(this.deadLetters),
      retryAttempts: 2,
      maxEventAge: Duration.hours(6),
    });
    this.rule = new events.Rule(this, 'ExecutionFinished', {
      description: "relaunch: a controller execution ended; delete the job's persistent: false mounts",
      eventPattern: executionEndedPattern(props.stateMachineArn, END_STATUSES),
      targets: [
        new targets.LambdaFunction(props.handler, {
          retryAttempts: 185,
          maxEventAge: Duration.hours(24),
          deadLetterQueue: this.deadLetters,
        }),
      ],
    });
    this.alarm = new cloudwatch.Alarm(this, 'Waiting', {
      alarmDescription:
        "relaunch: a job's persistent: false bucket or folder could not be deleted (see the delete-transient-mounts logs); the queue's messages name the job: delete what it left by hand, then purge the queue",
      metric: this.deadLetters.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(5), statistic: cloudwatch.Stats.MAXIMUM }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
  }
}
