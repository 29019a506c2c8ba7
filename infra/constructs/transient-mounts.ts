// TransientMounts: every end of the controller's executions goes to the Lambda that deletes
// what a job's mounts said not to keep (`persistent: false`). A day of failed deliveries
// leaves the event in a queue and an alarm says a bucket or folder is still there.

import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as events from 'aws-cdk-lib/aws-events';
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
        "relaunch: a job's persistent: false bucket or folder could not be deleted for a day (see the delete-transient-mounts logs); the queue's events name the job: delete what it left by hand, then purge the queue",
      metric: this.deadLetters.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(5), statistic: cloudwatch.Stats.MAXIMUM }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
  }
}
