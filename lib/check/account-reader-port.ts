// What `relaunch check` reads from an account, as a port: every method is a read, and a
// call the caller's credentials may not make is a PermissionDeniedError naming the IAM
// action, which the check reports as a warning instead of failing.

import { RelaunchError } from '../errors.ts';
import type { Market } from '../policy/types.ts';
import type { NatGatewayFacts, RouteTableFacts, SubnetFacts, VpcEndpointFacts } from './network.ts';
import type { InstanceInUse } from './quotas.ts';

/** A call these credentials may not make; `action` is the IAM action it needs (`ec2:DescribeSubnets`). */
export class PermissionDeniedError extends RelaunchError {
  override readonly name = 'PermissionDeniedError';
  constructor(
    readonly action: string,
    message: string,
  ) {
    super(message);
  }
}

/** Who the credentials are. */
export interface CallerIdentity {
  readonly account: string;
  readonly arn: string;
}

/** A CloudFormation stack as DescribeStacks shows it. */
export interface StackFacts {
  readonly name: string;
  readonly status: string;
  readonly statusReason: string | null;
  readonly outputs: readonly { readonly key: string; readonly value: string }[];
}

/** An AMI as DescribeImages shows it. */
export interface ImageFacts {
  readonly imageId: string;
  /** `available`, `pending`, `failed`, `deregistered`... */
  readonly state: string;
  /** `x86_64`, `arm64`; null when EC2 does not say. */
  readonly architecture: string | null;
}

/**
 * What HeadBucket says of a bucket: reachable (in `region`), missing, or forbidden (it
 * exists, and these credentials may not list it: another account's, or no s3:ListBucket).
 */
export type BucketFacts =
  | { readonly kind: 'reachable'; readonly region: string | null }
  | { readonly kind: 'missing' }
  | { readonly kind: 'forbidden' };

/**
 * What EC2's DescribeRegions (all regions, asked in the partition's first region) says of
 * a region: none of that name (with the partition's regions, for the message), or one the
 * account has enabled or not (an opt-in region).
 */
export type RegionStatus = { readonly kind: 'none'; readonly regions: readonly string[] } | { readonly kind: 'enabled' } | { readonly kind: 'not-enabled' };

/** The reads check makes; an adapter implements them over the AWS SDK (AwsAccountReader). */
export interface AccountReader {
  /** Whether a region exists and the account may use it; needs no service of that region. */
  regionStatus(region: string): Promise<RegionStatus>;
  /** STS GetCallerIdentity: needs no permission, so any failure means the credentials are not usable. */
  identity(): Promise<CallerIdentity>;
  /** The CDK bootstrap version of a region (its SSM parameter); null when the region is not bootstrapped. */
  bootstrapVersion(region: string): Promise<number | null>;
  /** null when no such stack exists in the region. */
  stack(region: string, name: string): Promise<StackFacts | null>;
  /** Whether an IAM role of that name exists (IAM is global). */
  roleExists(name: string): Promise<boolean>;
  /** An EC2 quota's value in a region (applied, else AWS's default); null when Service Quotas has no such quota there. */
  quota(region: string, code: string): Promise<number | null>;
  /** The instances running or starting in a region, with their vCPUs where EC2 or relaunch's catalog says. */
  instancesInUse(region: string): Promise<InstanceInUse[]>;
  /** vCPUs of instance types, from EC2's description; a type EC2 does not know is left out. */
  vcpusOf(region: string, instanceTypes: readonly string[]): Promise<ReadonlyMap<string, number>>;
  /** The subnets among `subnetIds` that exist (a missing id is left out). */
  subnets(region: string, subnetIds: readonly string[]): Promise<SubnetFacts[]>;
  routeTables(region: string, vpcIds: readonly string[]): Promise<RouteTableFacts[]>;
  vpcEndpoints(region: string, vpcIds: readonly string[]): Promise<VpcEndpointFacts[]>;
  /** The VPCs among `vpcIds` that exist (a missing id is left out). */
  vpcs(region: string, vpcIds: readonly string[]): Promise<string[]>;
  natGateways(region: string, vpcIds: readonly string[]): Promise<NatGatewayFacts[]>;
  /** The zones, among `zones` (every zone of the region when none is given), that offer each type: `type -> zones`. */
  offerings(region: string, instanceTypes: readonly string[], zones: readonly string[]): Promise<ReadonlyMap<string, readonly string[]>>;
  /** An SSM parameter's value (public AMI parameters); null when there is none of that name. */
  parameter(region: string, name: string): Promise<string | null>;
  /** null when the account cannot use (or see) the AMI in the region. */
  image(region: string, imageId: string): Promise<ImageFacts | null>;
  bucket(name: string): Promise<BucketFacts>;
}

/** How the API answered `GET /sources`: status 0 when nothing answered (`failure` says why). */
export interface ApiAnswer {
  readonly status: number;
  readonly body: unknown;
  readonly failure?: string;
}

/** A signed read of the deployed API. */
export interface ApiProbe {
  sources(apiUrl: string): Promise<ApiAnswer>;
}

/** The market of an instance EC2 describes: spot when its lifecycle says so. */
export function marketOfLifecycle(lifecycle: string | undefined): Market {
  return lifecycle === 'spot' ? 'spot' : 'on-demand';
}
