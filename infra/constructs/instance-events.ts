// InstanceEvents: EC2's spot interruption warnings, rebalance recommendations and instance
// state changes, to the Lambda that ends (or marks) the attempt owning the instance.

import { Duration } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as destinations from 'aws-cdk-lib/aws-lambda-destinations';
import { Construct } from 'constructs';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { deadLetterQueue } from './dead-letters.ts';
import { EC2_DETAIL_TYPES, GONE_STATE_NAMES } from '../../lib/aws-events.ts';

/** Options of the EC2 event rules. */
export interface InstanceEventsProps {
  /** The Lambda that handles both events (functions/on-ec2-event). */
  readonly handler: lambda.IFunction;
  /**
   * How long EventBridge keeps retrying a failed delivery. A missed termination would
   * leave the attempt to the heartbeat timeout, so retry for a good while.
   * @default Duration.hours(2)
   */
  readonly maxEventAge?: Duration;
}

/** The events relaunch acts on, as EventBridge patterns: one rule each, per region. */
export const EC2_EVENT_PATTERNS = {
  interruption: {
    description: 'relaunch: a spot instance will be reclaimed in two minutes',
    eventPattern: { source: ['aws.ec2'], detailType: [EC2_DETAIL_TYPES.interruption] },
  },
  // For jobs with launch_on_warning: rebalance, whose next attempt starts on it; every
  // other job's attempt ignores it.
  rebalance: {
    description: 'relaunch: a spot instance is at an elevated risk of interruption',
    eventPattern: { source: ['aws.ec2'], detailType: [EC2_DETAIL_TYPES.rebalance] },
  },
  // Only the states in which an instance is gone or going: `pending` and `running` of every
  // instance in the account would invoke the Lambda for nothing.
  gone: {
    description: 'relaunch: an instance is stopping or terminating',
    eventPattern: { source: ['aws.ec2'], detailType: [EC2_DETAIL_TYPES.stateChange], detail: { state: [...GONE_STATE_NAMES] } },
  },
} as const satisfies Record<string, Pick<events.RuleProps, 'description' | 'eventPattern'>>;

/**
 * Three rules on the default bus: interruption warnings, rebalance recommendations, and
 * instances going away. Events from other regions arrive on the same bus
 * (Ec2EventForwarderStack) and match the same rules.
 *
 * No event is dropped: one EventBridge could not deliver lands in `undelivered`, and one
 * the handler failed on (Lambda retries an asynchronous invocation twice) lands in
 * `failed`, Lambda's on-failure destination. The janitor replays both.
 */
export class InstanceEvents extends Construct {
  readonly interruptionRule: events.Rule;
  readonly rebalanceRule: events.Rule;
  readonly stateChangeRule: events.Rule;
  readonly undelivered: sqs.Queue;
  readonly failed: sqs.Queue;

  constructor(scope: Construct, id: string, props: InstanceEventsProps) {
    super(scope, id);
    this.undelivered = deadLetterQueue(this, 'Undelivered');
    this.failed = deadLetterQueue(this, 'Failed');
    props.handler.configureAsyncInvoke({
      onFailure: new destinations.SqsDestination(this.failed),
      retryAttempts: 2,
      maxEventAge: Duration.hours(6),
    });
    const target = new targets.LambdaFunction(props.handler, {
      retryAttempts: 10,
      maxEventAge: props.maxEventAge ?? Duration.hours(2),
      deadLetterQueue: this.undelivered,
    });
    this.interruptionRule = new events.Rule(this, 'SpotInterruption', { ...EC2_EVENT_PATTERNS.interruption, targets: [target] });
    this.rebalanceRule = new events.Rule(this, 'RebalanceRecommendation', { ...EC2_EVENT_PATTERNS.rebalance, targets: [target] });
    this.stateChangeRule = new events.Rule(this, 'InstanceGone', { ...EC2_EVENT_PATTERNS.gone, targets: [target] });
  }
}
