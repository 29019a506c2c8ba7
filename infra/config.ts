// The deployment's settings, from CDK context (cdk.json or `-c key=value`), validated before
// any construct is built: a bad value names its context key and says what was expected.
// Nothing is looked up: synth needs no credentials and no network.

import { ConfigurationError } from '../lib/errors.ts';
import * as z from '../lib/zod.ts';
import type { Ec2RegionConfig } from '../lib/workflow/resources.ts';
import { LaunchPaceConfigSchema, type LaunchPaceConfig } from '../lib/launch-pace.ts';
import { regionOfZone } from '../lib/task-file/cloud-region-zone.ts';
import { portsSchema } from '../lib/task-file/network-ports.ts';
import type { PortRange } from '../lib/task-file/types.ts';
import { issuePath } from '../lib/zod-issues.ts';

/** The context keys relaunch reads. */
export const ContextKey = {
  vpcId: 'relaunch:vpcId',
  subnets: 'relaunch:subnets',
  otherRegions: 'relaunch:otherRegions',
  allowedInstanceTypes: 'relaunch:allowedInstanceTypes',
  namePrefix: 'relaunch:namePrefix',
  nodeToNodeTraffic: 'relaunch:nodeToNodeTraffic',
  jobPorts: 'relaunch:jobPorts',
  vpcCidr: 'relaunch:vpcCidr',
  jobPortsCidr: 'relaunch:jobPortsCidr',
  agentWafRateLimit: 'relaunch:agentWafRateLimit',
  alarmTopicArn: 'relaunch:alarmTopicArn',
  jobNotifications: 'relaunch:jobNotifications',
  jobNotificationsTopicArn: 'relaunch:jobNotificationsTopicArn',
  dataBuckets: 'relaunch:dataBuckets',
  launchPace: 'relaunch:launchPace',
  ecrRepositories: 'relaunch:ecrRepositories',
  apiGatewayAccountRole: 'relaunch:apiGatewayAccountRole',
  logRetentionDays: 'relaunch:logRetentionDays',
} as const;

/** Where job instances run and what they may be; see ContextKey for where each comes from. */
export interface RelaunchConfig {
  /** The VPC, in the stack's region, of the job instances' security group. */
  readonly vpcId: string;
  /**
   * Subnets of that VPC instances launch in, one per availability zone, in order of
   * preference (`{ "us-east-1a": "subnet-…" }`): the zones are the launch candidates.
   */
  readonly subnetsByZone: Readonly<Record<string, string>>;
  /**
   * More regions to fail over to, each with its subnets and security groups (a stack
   * cannot create resources in another region, so these are given). A user of the
   * Relaunch construct adds an Ec2EventForwarderStack per region (addRelaunchStacks does),
   * or preemptions there are only noticed when heartbeats stop.
   * @default - the stack's region only
   */
  readonly otherRegions?: readonly Ec2RegionConfig[];
  /**
   * Exact instance types relaunch may launch (enforced in IAM and before launching).
   * @default - any type
   */
  readonly allowedInstanceTypes?: readonly string[];
  /**
   * Prefix of named resources (the state machine, log groups, instance names).
   * @default 'relaunch'
   */
  readonly namePrefix?: string;
  /**
   * Let a job's instances reach each other (multi-node jobs: torchrun, NCCL, EFA): their
   * security group admits its own members, and nothing from outside. Off, it has no inbound
   * rule at all, and multi-node tasks are refused at submit.
   * @default true
   */
  readonly nodeToNodeTraffic?: boolean;
  /**
   * TCP ports (`8080`, `"30000-30010"`) the job instances' security group opens, to
   * `jobPortsCidr`: a task's `resources.ports` must lie within them, or its launch is
   * refused (FAILED_PRECHECKS). The group is shared by every job, so the ports are open
   * on every job's nodes while they run, to that CIDR only.
   * @default - none
   */
  readonly jobPorts?: readonly PortRange[];
  /**
   * The VPC's IPv4 CIDR (given, as synth looks nothing up): where `jobPorts` are open from
   * unless `jobPortsCidr` says otherwise. Needed with `jobPorts`.
   * @default - none
   */
  readonly vpcCidr?: string;
  /**
   * A wider CIDR that may reach `jobPorts` (e.g. an office range, or `0.0.0.0/0` with a
   * public subnet). Opening ports beyond the VPC is a deliberate choice, hence its own key.
   * @default - vpcCidr
   */
  readonly jobPortsCidr?: string;
  /**
   * Put a WAF web ACL on the API whose rate-based rule answers 429 to a source IP sending
   * more than this many agent callbacks (heartbeats, reports) in 5 minutes: an integer of
   * at least 10; allow about 10 per node behind one IP. WAF is billed per web ACL and rule.
   * @default - no web ACL
   */
  readonly agentWafRateLimit?: number;
  /**
   * An existing SNS topic (standard, in the stack's region) every alarm is sent to.
   * @default - a topic named `<namePrefix>-alarms` is created
   */
  readonly alarmTopicArn?: string;
  /**
   * Publish each job's end (job id, terminal status, reason) to an SNS topic.
   * @default false
   */
  readonly jobNotifications?: boolean;
  /**
   * An existing SNS topic for job ends; setting it turns job notifications on.
   * @default - a topic named `<namePrefix>-job-ends` is created when jobNotifications is on
   */
  readonly jobNotificationsTopicArn?: string;
  /**
   * S3 buckets, besides the stack's own, that tasks may mount or copy from (`file_mounts`):
   * names, or name prefixes ending in `*` (`team-ckpts-*`). Job instances may read and
   * write them; a task naming any other bucket is refused at submit.
   * @default - none
   */
  readonly dataBuckets?: readonly string[];
  /**
   * The bucket every launch draws on (`{ "burst": 1000, "perSecond": 2 }`, or `1000/2`
   * with -c): launches beyond it wait in the state machine (WaitForLaunchPace) for their
   * slot. Lower it when other tools launch in the same account and region; raise it with
   * the EC2 limit increase AWS granted.
   * @default EC2_LAUNCH_PACE (EC2's default instance-launch bucket: 1,000, then 2 a second)
   */
  readonly launchPace?: LaunchPaceConfig;
  /**
   * The ECR repositories of the account a task's image may be pulled from: names
   * (`team/trainer`), or name prefixes ending in `*`. The instance role may pull only
   * from these, in any region of the account.
   * @default - every repository of the account
   */
  readonly ecrRepositories?: readonly string[];
  /**
   * Create the role API Gateway writes logs with and set it on the account
   * (AWS::ApiGateway::Account: one setting per account and region, shared by every API
   * there). Turn it off when the account already has one: the stage's access logs need it.
   * @default true
   */
  readonly apiGatewayAccountRole?: boolean;
  /**
   * Days CloudWatch Logs keeps jobs' output (the deployment's job log group): one of the
   * retentions CloudWatch Logs offers.
   * @default DEFAULT_JOB_LOG_RETENTION_DAYS (30)
   */
  readonly logRetentionDays?: number;
}

/** The retentions CloudWatch Logs offers, in days (PutRetentionPolicy's retentionInDays). */
export const LOG_RETENTION_DAYS = [1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653] as const;
const RETENTION_EXPECTED = `expected one of the retentions CloudWatch Logs offers, in days: ${LOG_RETENTION_DAYS.join(', ')}`;

/** A string matching `pattern`; anything else is `message`. */
const matching = (pattern: RegExp, message: string) => z.string().check(z.regex(pattern, message));

const region = matching(/^[a-z]{2}(-[a-z]+)+-\d$/, 'expected a region like us-east-1');
const zone = matching(/^[a-z]{2}(-[a-z]+)+-\d[a-z]$/, 'expected an availability zone like us-east-1a');
const subnetId = matching(/^subnet-[0-9a-f]{8,17}$/, 'expected a subnet id like subnet-0123456789abcdef0');
const securityGroupId = matching(/^sg-[0-9a-f]{8,17}$/, 'expected a security group id like sg-0123456789abcdef0');
const vpcId = matching(/^vpc-[0-9a-f]{8,17}$/, 'expected a VPC id like vpc-0123456789abcdef0');
const instanceType = matching(/^[a-z][a-z0-9-]*\.[a-z0-9-]+$/, 'expected an instance type like m5.large');
const topicArn = matching(
  /^arn:aws[a-z-]*:sns:[a-z]{2}(-[a-z]+)+-\d:\d{12}:[A-Za-z0-9_-]{1,256}$/,
  'expected a standard SNS topic ARN like arn:aws:sns:us-east-1:123456789012:relaunch-alarms',
);
const bucketPattern = matching(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$|^[a-z0-9][a-z0-9.-]{0,61}\*$/, 'expected an S3 bucket name, or a prefix of names ending in *');
const cidr = matching(/^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}\/(3[0-2]|[12]?\d)$/, 'expected an IPv4 CIDR like 10.0.0.0/16');
const ecrRepository = matching(
  /^(?:[a-z0-9]+(?:[._-][a-z0-9]+)*\/)*[a-z0-9]+(?:[._-][a-z0-9]+)*\*?$|^[a-z0-9][a-z0-9._/-]*\*$/,
  'expected an ECR repository name like team/trainer, or a prefix of names ending in *',
);
const namePrefix = matching(/^[a-zA-Z][a-zA-Z0-9-]{0,31}$/, 'expected 1-32 letters, digits or -, starting with a letter');

/**
 * `value` made over by `fn`, then checked against `schema`: classic zod's `preprocess`,
 * which zod/mini spells as a pipe.
 */
const preprocess = <T extends z.ZodMiniType>(fn: (value: unknown) => unknown, schema: T) => z.pipe(z.transform(fn), schema);

/** From `-c`, a flag is the string `true` or `false`; from cdk.json, a boolean. */
const flag = preprocess((value) => (value === 'true' ? true : value === 'false' ? false : value), z.boolean({ error: 'expected true or false' }));

/** From `-c`, a list is a comma-separated string; from cdk.json, an array. */
const splitList = (value: unknown): unknown =>
  typeof value === 'string' ? value.split(',').map((part) => part.trim()).filter((part) => part !== '') : value;

/** From `-c`, subnets are `zone=subnet,…`; from cdk.json, an object. */
const splitPairs = (value: unknown): unknown =>
  typeof value === 'string' ? Object.fromEntries((splitList(value) as string[]).map((pair) => pair.split('=').map((s) => s.trim()))) : value;

/** From `-c`, a launch pace is `BURST/PERSECOND` (`1000/2`); from cdk.json, an object. */
const splitPace = (value: unknown): unknown => {
  if (typeof value !== 'string') return value;
  const match = /^\s*(\d+)\s*\/\s*(\d+(?:\.\d+)?)\s*$/.exec(value);
  return match === null ? value : { burst: Number(match[1]), perSecond: Number(match[2]) };
};

/** From `-c`, other regions are a JSON string. */
const parseJson = (value: unknown): unknown => {
  if (typeof value !== 'string') return value;
  try {
    return JSON.parse(value) as unknown;
  } catch {
    return value;
  }
};

const subnetsByZone = z.record(z.string(), subnetId).check(
  z.superRefine((subnets, ctx) => {
    for (const key of Object.keys(subnets)) {
      // Not continued: the checks below read each key as a zone.
      if (!zone.safeParse(key).success) {
        ctx.addIssue({ code: 'custom', path: [key], message: 'expected an availability zone like us-east-1a', continue: false });
      }
    }
  }),
  z.refine((subnets) => Object.keys(subnets).length > 0, 'expected at least one zone with its subnet'),
  z.refine((subnets) => new Set(Object.keys(subnets).map(regionOfZone)).size <= 1, 'expected zones of one region'),
);

const ConfigObject = z.object({
  [ContextKey.vpcId]: vpcId,
  [ContextKey.subnets]: preprocess(splitPairs, subnetsByZone),
  [ContextKey.otherRegions]: z.optional(
    preprocess(
      parseJson,
      z.array(
        z
          .strictObject({ region, subnetsByZone, securityGroupIds: z.array(securityGroupId).check(z.minLength(1)) })
          .check(
            z.superRefine(({ region, subnetsByZone }, ctx) => {
              for (const zone of Object.keys(subnetsByZone)) {
                if (regionOfZone(zone) !== region) ctx.addIssue({ code: 'custom', path: ['subnetsByZone', zone], message: `expected a zone of ${region}` });
              }
            }),
          ),
      ),
    ),
  ),
  [ContextKey.allowedInstanceTypes]: z.optional(preprocess(splitList, z.array(instanceType).check(z.minLength(1)))),
  [ContextKey.namePrefix]: z.optional(namePrefix),
  [ContextKey.nodeToNodeTraffic]: z.optional(flag),
  [ContextKey.jobPorts]: z.optional(preprocess(splitList, portsSchema)),
  [ContextKey.vpcCidr]: z.optional(cidr),
  [ContextKey.jobPortsCidr]: z.optional(cidr),
  [ContextKey.alarmTopicArn]: z.optional(topicArn),
  [ContextKey.jobNotifications]: z.optional(flag),
  [ContextKey.jobNotificationsTopicArn]: z.optional(topicArn),
  [ContextKey.dataBuckets]: z.optional(preprocess(splitList, z.array(bucketPattern))),
  [ContextKey.launchPace]: z.optional(
    preprocess(splitPace, z.strictObject(LaunchPaceConfigSchema.shape, { error: 'expected BURST/PERSECOND like 1000/2, or { "burst": 1000, "perSecond": 2 }' })),
  ),
  [ContextKey.ecrRepositories]: z.optional(preprocess(splitList, z.array(ecrRepository).check(z.minLength(1)))),
  [ContextKey.apiGatewayAccountRole]: z.optional(flag),
  [ContextKey.logRetentionDays]: z.optional(
    preprocess(
      (value) => (typeof value === 'string' && /^[0-9]{1,5}$/.test(value.trim()) ? Number(value) : value),
      z.number({ error: RETENTION_EXPECTED }).check(z.refine((days: number) => (LOG_RETENTION_DAYS as readonly number[]).includes(days), { error: RETENTION_EXPECTED })),
    ),
  ),
  [ContextKey.agentWafRateLimit]: z.optional(
    preprocess(
      (value) => (typeof value === 'string' && /^[0-9]{1,10}$/.test(value.trim()) ? Number(value) : value),
      z
        .number({ error: 'expected an integer of at least 10 (agent requests per source IP in 5 minutes)' })
        .check(
          z.int({ error: 'expected an integer of at least 10 (agent requests per source IP in 5 minutes)' }),
          z.minimum(10, { error: 'expected an integer of at least 10 (agent requests per source IP in 5 minutes)' }),
          z.maximum(2_000_000_000, { error: 'expected at most 2000000000 (WAF\'s largest rate limit)' }),
        ),
    ),
  ),
});

/** Each failover region once, and none of them the stack's own (the region of its subnets). */
const distinctRegions = z.superRefine((config: z.output<typeof ConfigObject>, ctx) => {
  const seen = new Set(Object.keys(config[ContextKey.subnets]).map(regionOfZone));
  (config[ContextKey.otherRegions] ?? []).forEach(({ region }, index) => {
    if (seen.has(region)) {
      ctx.addIssue({
        code: 'custom',
        path: [ContextKey.otherRegions, index, 'region'],
        message: `expected a region other than ${[...seen].join(', ')} (the stack's own, or one listed before it)`,
      });
    }
    seen.add(region);
  });
});

/** Ports are opened to a CIDR that must be known: the VPC's, or a wider one given. */
const portsHaveCidr = z.superRefine((config: z.output<typeof ConfigObject>, ctx) => {
  if (config[ContextKey.jobPorts] === undefined || config[ContextKey.vpcCidr] !== undefined || config[ContextKey.jobPortsCidr] !== undefined) return;
  ctx.addIssue({
    code: 'custom',
    path: [ContextKey.vpcCidr],
    message: `is not set: ${ContextKey.jobPorts} are opened to the VPC's CIDR (give it; synth looks nothing up), or to ${ContextKey.jobPortsCidr}`,
  });
});

const ConfigSchema = ConfigObject.check(distinctRegions, portsHaveCidr);

/**
 * Whether the configuration's VPC is cdk.json's all-zero example id, which ships so that a
 * fresh clone synthesizes and which no deploy can use: synth warns about it, check says so.
 */
export function isExampleNetwork(config: Pick<RelaunchConfig, 'vpcId'>): boolean {
  return /^vpc-0+$/.test(config.vpcId);
}

/** Context is read through this, so tests can pass a plain object. */
export type ContextReader = (key: string) => unknown;

/**
 * Reads and validates the configuration. Throws one ConfigurationError listing every bad
 * or missing key, each with how to set it.
 */
export function configFromContext(read: ContextReader): RelaunchConfig {
  const raw = Object.fromEntries(Object.values(ContextKey).map((key) => [key, read(key)]));
  const parsed = ConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => {
      // The context key reads as written (`relaunch:subnets`), the rest as every path does.
      const [key, ...rest] = issue.path;
      const where = issuePath(rest, String(key));
      const message = raw[String(key)] === undefined && !issue.message.startsWith('is not set') ? 'is not set' : issue.message;
      return `context ${where}: ${message}`;
    });
    throw new ConfigurationError(
      `relaunch configuration is not valid:\n  ${problems.join('\n  ')}\n` +
        'Set each key in cdk.json "context", or pass it with -c, e.g. ' +
        '-c relaunch:vpcId=vpc-… -c relaunch:subnets=us-east-1a=subnet-…,us-east-1b=subnet-…',
    );
  }
  const config = parsed.data;
  return {
    vpcId: config[ContextKey.vpcId],
    subnetsByZone: config[ContextKey.subnets],
    otherRegions: config[ContextKey.otherRegions],
    allowedInstanceTypes: config[ContextKey.allowedInstanceTypes],
    namePrefix: config[ContextKey.namePrefix],
    nodeToNodeTraffic: config[ContextKey.nodeToNodeTraffic],
    jobPorts: config[ContextKey.jobPorts],
    vpcCidr: config[ContextKey.vpcCidr],
    jobPortsCidr: config[ContextKey.jobPortsCidr],
    agentWafRateLimit: config[ContextKey.agentWafRateLimit],
    alarmTopicArn: config[ContextKey.alarmTopicArn],
    jobNotifications: config[ContextKey.jobNotifications],
    jobNotificationsTopicArn: config[ContextKey.jobNotificationsTopicArn],
    dataBuckets: config[ContextKey.dataBuckets],
    launchPace: config[ContextKey.launchPace],
    ecrRepositories: config[ContextKey.ecrRepositories],
    apiGatewayAccountRole: config[ContextKey.apiGatewayAccountRole],
    logRetentionDays: config[ContextKey.logRetentionDays],
  };
}
