// RelaunchStack: the deployable stack, env-agnostic (no account or region baked in, no
// lookups); and the app's stacks: it, plus an EC2 event forwarder per failover region.

import { Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { ConfigurationError } from '../lib/errors.ts';
import { isAwsZone, regionOfZone } from '../lib/spec/placement.ts';
import { Ec2EventForwarderStack } from './event-forwarder-stack.ts';
import { Relaunch, type RelaunchProps } from './relaunch.ts';

/** The stack's props: a stack's, plus relaunch's. */
export interface RelaunchStackProps extends StackProps {
  readonly relaunch: RelaunchProps;
}

/** One Relaunch in its own stack. */
export class RelaunchStack extends Stack {
  readonly relaunch: Relaunch;

  constructor(scope: Construct, id: string, props: RelaunchStackProps) {
    super(scope, id, { description: 'relaunch: batch jobs on EC2 that come back by themselves', ...props });
    this.relaunch = new Relaunch(this, 'Relaunch', props.relaunch);
  }
}

/** The stacks of a relaunch deployment. */
export interface RelaunchStacks {
  readonly relaunch: RelaunchStack;
  /** One per `otherRegions` entry, in its region: `<id>-events-<region>`. */
  readonly forwarders: readonly Ec2EventForwarderStack[];
}

/**
 * Relaunch's stack (deployed to the region of its subnets), and a forwarder of EC2 events
 * in each failover region, so that a preemption there is seen as promptly as at home.
 */
export function addRelaunchStacks(scope: Construct, id: string, props: RelaunchProps): RelaunchStacks {
  const homeRegion = regionOfSubnets(props.subnetsByZone);
  const relaunch = new RelaunchStack(scope, id, { relaunch: props });
  const forwarders = (props.otherRegions ?? []).map(
    ({ region }) => new Ec2EventForwarderStack(scope, `${id}-events-${region}`, { homeRegion, region, namePrefix: props.namePrefix }),
  );
  return { relaunch, forwarders };
}

function regionOfSubnets(subnetsByZone: Readonly<Record<string, string>>): string {
  const zones = Object.keys(subnetsByZone);
  const regions = new Set(zones.filter(isAwsZone).map(regionOfZone));
  const [region] = regions;
  if (region === undefined || regions.size > 1 || !zones.every(isAwsZone)) {
    throw new ConfigurationError(`subnetsByZone: expected availability zones of one region, got ${zones.join(', ') || 'none'}`);
  }
  return region;
}
