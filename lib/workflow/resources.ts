// The names and shapes the stack (infra/) and the code it deploys (functions/, the adapters)
// must agree on about AWS resources: the tags IAM conditions match, the service-linked role
// a spot launch needs, the SSM path of jobs' secrets, the prefixes of the data bucket, and
// the network and data settings a stack hands its functions. Written once here, imported by
// both sides, so that infra/ never reads an adapter or a Lambda for a constant. Beside it:
// contract.ts (the state machine's names and payloads), env.ts (the Lambdas' variables) and
// operations.ts (metrics).


import type { PortRange } from '../task-file/types.ts';

/**
 * The tag naming the deployment (its name prefix) that made an instance, volume, fleet or
 * launch template. Two deployments in one account and region (staging and prod) share the
 * job tags' keys, which the agent reads: this one keeps them apart in releases, the
 * janitor's sweeps and the IAM conditions.
 */
export const DEPLOYMENT_TAG_KEY = 'relaunch:deployment';

/**
 * EC2's service-linked role for spot instances, which an account that never ran spot does
 * not have. The launch function may create it (infra/permissions.ts), which is what EC2
 * needs to create it during a spot launch; AWS's documentation asks API callers to create
 * it beforehand. A launch refused for want of it answers SPOT_ROLE_MISSING_ERROR
 * (lib/adapters/ec2-compute.ts).
 */
export const SPOT_SERVICE_LINKED_ROLE = { name: 'AWSServiceRoleForEC2Spot', service: 'spot.amazonaws.com' } as const;

/** One region relaunch launches in: its subnets (one per zone) and security groups. */
export interface Ec2RegionConfig {
  readonly region: string;
  /** A subnet per availability zone, in order of preference; the zones are these keys. */
  readonly subnetsByZone: Readonly<Record<string, string>>;
  /** Security groups of the subnets' VPC; they must allow HTTPS out to the API. */
  readonly securityGroupIds: readonly string[];
}

/** The folder of every job's secrets of a deployment (names are validated: letters, digits, -). */
export function jobSecretsPath(namePrefix: string): string {
  return `/${namePrefix}/job-secrets`;
}

/** Prefix of uploaded sources in the stack's bucket: `sources/<sha256>.tar.gz`. */
export const SOURCES_PREFIX = 'sources';
/** Prefix of nameless mounts in the stack's bucket: `mounts/<jobId>/<path>/`. */
export const MOUNTS_PREFIX = 'mounts';

/** What the stack says about S3 (DATA_CONFIG, and COMPUTE_CONFIG's `data`). */
export interface DataConfig {
  /** The stack's own bucket. */
  readonly bucket: string;
  /**
   * Other buckets tasks may copy and mount (`relaunch:dataBuckets`): names, or
   * prefixes of names ending in `*`.
   */
  readonly allowedBuckets: readonly string[];
  /**
   * The AWS partition the buckets are in (`aws`, `aws-cn`, `aws-us-gov`), for their ARNs.
   * @default 'aws'
   */
  readonly partition?: string;
}

/**
 * Where a deployment's jobs' output goes in CloudWatch Logs (JOB_LOGS, and COMPUTE_CONFIG's
 * `logs`): the log group the stack makes, and what its streams' ARNs are made of.
 */
export interface JobLogsConfig {
  /** The log group (job-logs.ts's jobLogGroupName of the stack's name prefix). */
  readonly group: string;
  /** The group's region: the stack's; nodes of other regions ship there too. */
  readonly region: string;
  /** The account that owns it. */
  readonly account: string;
  /** @default 'aws' */
  readonly partition?: string;
  /** The deployment's name prefix (the group is jobLogGroupName of it), for the streams' console links. */
  readonly namePrefix?: string;
  /**
   * The controller functions' log groups by function name, for the API that reads their
   * lines about a job (`relaunch logs --controller`); absent where no function reads them.
   */
  readonly controllerLogGroups?: Readonly<Record<string, string>>;
}

/** The kinds of default image: CPU architecture, and NVIDIA drivers for GPU types. */
export type ImageKind = 'x86_64' | 'arm64' | 'x86_64-gpu' | 'arm64-gpu';

/** How Ec2Compute launches: COMPUTE_CONFIG, which the stack writes and the compute steps read. */
export interface Ec2ComputeConfig {
  /** The regions to launch in, in order of preference. */
  readonly regions: readonly Ec2RegionConfig[];
  /** The instance profile every instance gets. */
  readonly instanceProfileArn: string;
  /** The API the agents call back (heartbeat, report). */
  readonly apiUrl: string;
  /**
   * Instances are named `<namePrefix>-<jobId>-<attempt>`; agent secrets live under
   * agentSecretPath(namePrefix).
   */
  readonly namePrefix: string;
  /** @default HEARTBEAT_INTERVAL_SECONDS */
  readonly heartbeatSeconds?: number;
  /**
   * Root volume size when the task gives no `disk_size` (SkyPilot's default).
   * @default DEFAULT_DISK_SIZE_GB (256)
   */
  readonly defaultDiskSizeGb?: number;
  /** SSM parameters for the default AMIs. @default DEFAULT_IMAGE_PARAMETERS */
  readonly imageParameters?: Partial<Record<ImageKind, string>>;
  /** When set, only these instance types are launched. */
  readonly allowedInstanceTypes?: readonly string[];
  /**
   * The stack's bucket and the buckets instances may mount: where uploads and nameless
   * mounts are. Absent (a stack from before them), a task with mounts is refused at submit.
   */
  readonly data?: DataConfig;
  /**
   * The log group the nodes ship their phases' output to. Absent (a stack from before it),
   * nothing is shipped.
   */
  readonly logs?: JobLogsConfig;
  /**
   * The ports the instances' security group opens (in the stack's region; other regions'
   * groups are given as they are). A task asking for others is refused.
   * @default - none: a task with `ports` is refused
   */
  readonly openPorts?: readonly PortRange[];
  /**
   * Whether the instances' security group admits its own members (the stack's
   * relaunch:nodeToNodeTraffic): false refuses a multi-node task before anything launches.
   * @default true
   */
  readonly nodeToNodeTraffic?: boolean;
  /**
   * Retries of a throttled call before its error propagates, waiting 0.5 s, doubling,
   * capped at 20 s.
   * @default 8
   */
  readonly throttleRetries?: number;
  /**
   * Checks that released instances are going (1 s apart, doubling) before release fails.
   * @default 6
   */
  readonly releaseChecks?: number;
  /**
   * The most one release waits between checks, over all regions: it must end well inside
   * its Lambda's timeout, and Step Functions retries InstancesStillRunningError after it.
   * @default RELEASE_WAIT_BUDGET_MS
   */
  readonly releaseWaitBudgetMs?: number;
}
