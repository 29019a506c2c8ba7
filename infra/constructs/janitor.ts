// Janitor: every 10 minutes, the janitor Lambda replays the dead-letter queues and sweeps
// for instances whose attempt is over. An alarm on each queue says something waits there.

import { Duration, Stack, Validations } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { EnvVar, type DeadLetterQueueConfig } from '../../lib/adapters/env.ts';

/** Options of the janitor's schedule and alarms. */
export interface JanitorProps {
  /** functions/janitor. */
  readonly handler: lambda.Function;
  /** The dead-letter queues it replays, by the name its logs give them, each with an alarm. */
  readonly queues: Readonly<Record<string, sqs.IQueue>>;
  /**
   * Queues in other regions (the forwarders'): replayed too, but not alarmed on, as a
   * CloudWatch alarm watches its own region only; the janitor's logs report them.
   */
  readonly remoteQueues?: Readonly<Record<string, sqs.IQueue>>;
  /** @default Duration.minutes(10) */
  readonly every?: Duration;
}

/** The janitor's schedule, its access to the queues, and an alarm per queue. */
export class Janitor extends Construct {
  readonly schedule: events.Rule;
  /** One per queue: a letter has waited there for a replay (or is stuck: see the logs). */
  readonly alarms: readonly cloudwatch.Alarm[];

  constructor(scope: Construct, id: string, props: JanitorProps) {
    super(scope, id);
    const all = { ...props.queues, ...props.remoteQueues };
    const queues: DeadLetterQueueConfig[] = Object.entries(all).map(([name, queue]) => ({ name, url: queue.queueUrl }));
    props.handler.addEnvironment(EnvVar.deadLetterQueues, Stack.of(this).toJsonString(queues));
    for (const queue of Object.values(all)) queue.grantConsumeMessages(props.handler);

    // A missed tick costs nothing but 10 minutes: no retries, no dead letters of its own.
    this.schedule = new events.Rule(this, 'Every10Minutes', {
      description: 'relaunch: replay dead-lettered events, sweep instances whose attempt is over',
      schedule: events.Schedule.rate(props.every ?? Duration.minutes(10)),
      targets: [new targets.LambdaFunction(props.handler, { retryAttempts: 0 })],
    });
    Validations.of(this.schedule).acknowledge({
      id: 'Serverless-EventBusDLQ',
      reason: 'A missed tick of the schedule loses nothing: the next run, 10 minutes later, does the same work.',
    });

    this.alarms = Object.entries(props.queues).map(
      ([name, queue]) =>
        new cloudwatch.Alarm(this, `${name}-waiting`, {
          alarmDescription: `relaunch: events wait in the ${name} dead-letter queue; the janitor replays them every 10 minutes, so one that stays is failing (see the janitor's logs)`,
          metric: queue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(5), statistic: cloudwatch.Stats.MAXIMUM }),
          threshold: 1,
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
          evaluationPeriods: 3,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        }),
    );
  }
}
