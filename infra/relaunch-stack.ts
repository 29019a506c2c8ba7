// RelaunchStack: the deployable stack, env-agnostic (no account or region baked in, no
// lookups); and the app's stacks: it, plus an EC2 event forwarder per failover region.

import { Annotations, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { forwarderStackName, stackNameOf } from '../lib/deployment-names.ts';
import { ConfigurationError } from '../lib/errors.ts';
import { ContextKey, isExampleNetwork, type RelaunchConfig } from './config.ts';
import { isAwsZone, regionOfZone } from '../lib/task-file/cloud-region-zone.ts';
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
    ({ region }) => new Ec2EventForwarderStack(scope, forwarderStackName(id, region), { homeRegion, region, namePrefix: props.namePrefix }),
  );
  return { relaunch, forwarders };
}

/**
 * The stacks of the deployment `config` describes, as `cdk deploy` of relaunch's app makes
 * them: named from its prefix (stackNameOf), so two prefixes are two stacks. The home
 * stack deploys to the region `cdk` found (`deployRegion`: AWS_REGION or the profile's),
 * which must be its subnets'.
 *
 * @throws ConfigurationError when `deployRegion` is not the region of the subnets.
 */
export function addDeployment(scope: Construct, config: RelaunchConfig, deployRegion?: string): RelaunchStacks {
  const home = regionOfSubnets(config.subnetsByZone);
  if (deployRegion !== undefined && deployRegion !== '' && deployRegion !== home) {
    throw new ConfigurationError(
      `relaunch:subnets are zones of ${home}, but cdk deploys to ${deployRegion} (AWS_REGION, else your AWS profile's region, else us-east-1): ` +
        `set AWS_REGION=${home}, or give subnets of ${deployRegion}`,
    );
  }
  const stacks = addRelaunchStacks(scope, stackNameOf(config.namePrefix), config);
  if (isExampleNetwork(config)) {
    Annotations.of(stacks.relaunch).addWarningV2(
      'relaunch:placeholder-network',
      `${ContextKey.vpcId} and ${ContextKey.subnets} are cdk.json's examples: set your own before cdk deploy`,
    );
  }
  return stacks;
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
