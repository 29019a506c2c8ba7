// Ec2EventForwarderStack: in a failover region, the same three EC2 event rules as the home
// region's, sending what they match to the home region's default bus, where relaunch's
// own rules pick it up. Without it, an attempt preempted there is only noticed when its
// heartbeats stop.

import { Stack, type StackProps } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { Construct } from 'constructs';
import { ConfigurationError } from '../lib/errors.ts';
import { deadLetterQueue, forwardedDeadLetterQueueName } from './constructs/dead-letters.ts';
import { EC2_EVENT_PATTERNS } from './constructs/instance-events.ts';
import { DEFAULT_NAME_PREFIX } from '../lib/deployment-names.ts';

/** Where the events go, and what this region's stack is. */
export interface Ec2EventForwarderStackProps extends StackProps {
  /** The region of the stack that runs relaunch (its default bus receives the events). */
  readonly homeRegion: string;
  /** This stack's region: the failover region whose EC2 events are forwarded. */
  readonly region: string;
  /**
   * The deployment's name prefix: the queue of events that could not be forwarded is
   * named from it, for the home region's janitor to replay.
   * @default DEFAULT_NAME_PREFIX ('relaunch')
   */
  readonly namePrefix?: string;
}

/** One failover region's EC2 events, forwarded to relaunch's region. */
export class Ec2EventForwarderStack extends Stack {
  constructor(scope: Construct, id: string, props: Ec2EventForwarderStackProps) {
    const { homeRegion, region, namePrefix = DEFAULT_NAME_PREFIX, ...stackProps } = props;
    if (region === homeRegion) throw new ConfigurationError(`${region} is relaunch's own region: its EC2 events need no forwarding`);
    super(scope, id, {
      description: `relaunch: EC2 events of ${region}, forwarded to ${homeRegion}`,
      ...stackProps,
      env: { ...stackProps.env, region },
    });
    // Same account (the stack's). EventBridge delivers across regions as this role, which
    // may put events on that one bus; every rule shares it.
    const home = events.EventBus.fromEventBusArn(this, 'HomeBus', `arn:${this.partition}:events:${homeRegion}:${this.account}:event-bus/default`);
    const role = new iam.Role(this, 'Forwarder', { assumedBy: new iam.ServicePrincipal('events.amazonaws.com') });
    // What cannot reach the home bus waits here; the home region's janitor replays it.
    const undelivered = deadLetterQueue(this, 'Undelivered', forwardedDeadLetterQueueName(namePrefix));
    const target = new targets.EventBus(home, { role, deadLetterQueue: undelivered });
    new events.Rule(this, 'SpotInterruption', { ...EC2_EVENT_PATTERNS.interruption, targets: [target] });
    new events.Rule(this, 'RebalanceRecommendation', { ...EC2_EVENT_PATTERNS.rebalance, targets: [target] });
    new events.Rule(this, 'InstanceGone', { ...EC2_EVENT_PATTERNS.gone, targets: [target] });
  }
}
