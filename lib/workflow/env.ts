// The Lambdas' configuration, shared by the CDK construct that sets it and the functions that read it.

import * as z from '../zod.ts';
import type { DataConfig, Ec2ComputeConfig, JobLogsConfig } from './resources.ts';
import { ConfigurationError } from '../errors.ts';
import { EC2_LAUNCH_PACE, LaunchPaceConfigSchema, type LaunchPaceConfig } from '../launch-pace.ts';
import type { PortRange } from '../task-file/types.ts';

/** Every variable a relaunch Lambda may read; the CDK construct sets the ones each function needs. */
export const EnvVar = {
  tableName: 'TABLE_NAME',
  stateMachineArn: 'STATE_MACHINE_ARN',
  apiUrl: 'API_URL',
  /** JSON of the Ec2Compute settings (subnets, security group, instance profile, …), for the function that launches. */
  computeConfig: 'COMPUTE_CONFIG',
  /** JSON of what a function that only releases instances needs (ReleaseEnvConfig): the regions and the name prefix. */
  releaseConfig: 'RELEASE_CONFIG',
  /** JSON list of the dead-letter queues the janitor replays: `[{ name, url }]`. */
  deadLetterQueues: 'DEAD_LETTER_QUEUES',
  /** The SSM path under which each job's secrets are a SecureString (jobSecretsPath). */
  jobSecretsPath: 'JOB_SECRETS_PATH',
  /** JSON of the stack's data bucket and the buckets instances may use (DataConfig), for the API's checks. */
  dataConfig: 'DATA_CONFIG',
  /** The role whose sessions, narrowed per job, reach jobs' S3 data (the API gives them to nodes). */
  dataAccessRoleArn: 'DATA_ACCESS_ROLE_ARN',
  /**
   * JSON of the deployment's job log group (JobLogsConfig): for the API that gives nodes
   * credentials to ship into it, and reads it and the controller's groups for `relaunch logs`.
   */
  jobLogs: 'JOB_LOGS',
  /** JSON list of the TCP port ranges job instances open, `[{ from, to }]`; unset: none. */
  openPorts: 'OPEN_PORTS',
  /** JSON of the launch pace's bucket, `{ burst, perSecond }`; unset: EC2's default bucket. */
  launchPace: 'LAUNCH_PACE',
  /** `false` when the job instances may not reach each other (multi-node jobs are refused); unset: they may. */
  nodeToNodeTraffic: 'NODE_TO_NODE_TRAFFIC',
} as const;
/** The name of one of those variables. */
export type EnvVar = (typeof EnvVar)[keyof typeof EnvVar];

/** A variable that must be set: a missing one names itself, so a misdeployed function says why. */
export function requireEnv(name: EnvVar, env: NodeJS.ProcessEnv = process.env): string {
  const value = env[name];
  if (value === undefined || value === '') {
    throw new ConfigurationError(`environment variable ${name} is not set; the relaunch stack sets it on every function that needs it`);
  }
  return value;
}

/**
 * COMPUTE_CONFIG: Ec2Compute's configuration as the stack knows it at deploy time. The API
 * URL comes separately (API_URL): the API is created after the functions.
 */
export type ComputeEnvConfig = Omit<Ec2ComputeConfig, 'apiUrl'>;

const positiveInt = z.number().check(z.int(), z.minimum(1));
const nonEmpty = z.string().check(z.minLength(1));
const PortRangesSchema = z.array(z.strictObject({ from: positiveInt, to: positiveInt }));

/** DATA_CONFIG's shape (and COMPUTE_CONFIG's `data`). */
const DataConfigSchema = z.strictObject({ bucket: nonEmpty, allowedBuckets: z.array(nonEmpty), partition: z.optional(nonEmpty) }) satisfies z.ZodMiniType<DataConfig>;

/** JOB_LOGS's shape (and COMPUTE_CONFIG's `logs`). */
const JobLogsConfigSchema = z.strictObject({
  group: nonEmpty,
  region: nonEmpty,
  account: nonEmpty,
  partition: z.optional(nonEmpty),
  namePrefix: z.optional(nonEmpty),
  controllerLogGroups: z.optional(z.record(z.string(), nonEmpty)),
}) satisfies z.ZodMiniType<JobLogsConfig>;

/** Reads JOB_LOGS, as parseComputeConfig reads its variable; unset is undefined (a stack from before it). */
export function parseJobLogsConfig(env: NodeJS.ProcessEnv = process.env): JobLogsConfig | undefined {
  if ((env[EnvVar.jobLogs] ?? '') === '') return undefined;
  return parseJsonEnv(EnvVar.jobLogs, JobLogsConfigSchema, 'job logs configuration', env);
}

/** Reads DATA_CONFIG, as parseComputeConfig reads its variable; unset is undefined (a stack without it). */
export function parseDataConfig(env: NodeJS.ProcessEnv = process.env): DataConfig | undefined {
  if ((env[EnvVar.dataConfig] ?? '') === '') return undefined;
  return parseJsonEnv(EnvVar.dataConfig, DataConfigSchema, 'data configuration', env);
}

/** Reads LAUNCH_PACE, as parseComputeConfig reads its variable; unset is EC2's default bucket. */
export function parseLaunchPace(env: NodeJS.ProcessEnv = process.env): LaunchPaceConfig {
  if ((env[EnvVar.launchPace] ?? '') === '') return EC2_LAUNCH_PACE;
  return parseJsonEnv(EnvVar.launchPace, LaunchPaceConfigSchema, 'launch pace', env);
}

/** COMPUTE_CONFIG's shape; `satisfies` keeps it in step with Ec2ComputeConfig. */
const ComputeEnvConfigSchema = z.strictObject({
  regions: z
    .array(
      z.strictObject({
        region: nonEmpty,
        subnetsByZone: z.record(z.string(), nonEmpty),
        securityGroupIds: z.array(nonEmpty),
      }),
    )
    .check(z.minLength(1)),
  instanceProfileArn: nonEmpty,
  namePrefix: nonEmpty,
  heartbeatSeconds: z.optional(positiveInt),
  defaultDiskSizeGb: z.optional(positiveInt),
  imageParameters: z.optional(z.partialRecord(z.enum(['x86_64', 'arm64', 'x86_64-gpu', 'arm64-gpu']), nonEmpty)),
  allowedInstanceTypes: z.optional(z.array(nonEmpty)),
  openPorts: z.optional(PortRangesSchema),
  nodeToNodeTraffic: z.optional(z.boolean()),
  throttleRetries: z.optional(z.number().check(z.int(), z.minimum(0))),
  releaseChecks: z.optional(positiveInt),
  releaseWaitBudgetMs: z.optional(z.number().check(z.int(), z.minimum(0))),
  data: z.optional(DataConfigSchema),
  logs: z.optional(JobLogsConfigSchema),
}) satisfies z.ZodMiniType<ComputeEnvConfig>;

/**
 * Reads COMPUTE_CONFIG: not JSON, or not the shape Ec2Compute takes, is a
 * ConfigurationError naming the variable and every field that is wrong.
 */
export function parseComputeConfig(env: NodeJS.ProcessEnv = process.env): ComputeEnvConfig {
  return parseJsonEnv(EnvVar.computeConfig, ComputeEnvConfigSchema, 'compute configuration', env);
}

/**
 * RELEASE_CONFIG: what the functions that only release instances need, and no more (a
 * release reads the regions and the deployment's name prefix, not subnets or images):
 * Lambda refuses an environment over 4 KB, and COMPUTE_CONFIG grows with every region.
 */
export interface ReleaseEnvConfig {
  readonly namePrefix: string;
  /** The regions relaunch launches in, the stack's own first. */
  readonly regions: readonly string[];
  readonly throttleRetries?: number;
  readonly releaseChecks?: number;
  readonly releaseWaitBudgetMs?: number;
}

const ReleaseEnvConfigSchema = z.strictObject({
  namePrefix: nonEmpty,
  regions: z.array(nonEmpty).check(z.minLength(1)),
  throttleRetries: z.optional(z.number().check(z.int(), z.minimum(0))),
  releaseChecks: z.optional(positiveInt),
  releaseWaitBudgetMs: z.optional(z.number().check(z.int(), z.minimum(0))),
}) satisfies z.ZodMiniType<ReleaseEnvConfig>;

/** Reads RELEASE_CONFIG, as parseComputeConfig reads its variable. */
export function parseReleaseConfig(env: NodeJS.ProcessEnv = process.env): ReleaseEnvConfig {
  return parseJsonEnv(EnvVar.releaseConfig, ReleaseEnvConfigSchema, 'release configuration', env);
}

/**
 * Where a compute function's instances are, from whichever of COMPUTE_CONFIG (a launcher)
 * or RELEASE_CONFIG (a releaser) it was given; neither is a ConfigurationError naming both.
 */
export function parseComputeScope(env: NodeJS.ProcessEnv = process.env): ReleaseEnvConfig {
  if ((env[EnvVar.computeConfig] ?? '') !== '') {
    const { namePrefix, regions, throttleRetries, releaseChecks, releaseWaitBudgetMs } = parseComputeConfig(env);
    return {
      namePrefix,
      regions: regions.map((region) => region.region),
      ...(throttleRetries === undefined ? {} : { throttleRetries }),
      ...(releaseChecks === undefined ? {} : { releaseChecks }),
      ...(releaseWaitBudgetMs === undefined ? {} : { releaseWaitBudgetMs }),
    };
  }
  if ((env[EnvVar.releaseConfig] ?? '') !== '') return parseReleaseConfig(env);
  throw new ConfigurationError(
    `environment variables ${EnvVar.computeConfig} and ${EnvVar.releaseConfig} are not set; the relaunch stack sets one on every function that launches or releases instances`,
  );
}

/** One dead-letter queue: its name in reports, and its URL (which names its region). */
export interface DeadLetterQueueConfig {
  readonly name: string;
  readonly url: string;
}

const DeadLetterQueuesSchema = z.array(
  z.strictObject({ name: nonEmpty, url: z.string().check(z.regex(/^https:\/\/sqs\.[a-z0-9-]+\.amazonaws\.com(\.cn)?\/\d{12}\/[\w-]+$/)) }),
) satisfies z.ZodMiniType<readonly DeadLetterQueueConfig[]>;

/** Reads DEAD_LETTER_QUEUES, as parseComputeConfig reads its variable. */
export function parseDeadLetterQueues(env: NodeJS.ProcessEnv = process.env): readonly DeadLetterQueueConfig[] {
  return parseJsonEnv(EnvVar.deadLetterQueues, DeadLetterQueuesSchema, 'list of dead-letter queues', env);
}

/**
 * Reads OPEN_PORTS, the ports the stack opens on job instances (for the API to refuse a
 * task asking for others at submit); unset is none. Not JSON of that shape is a
 * ConfigurationError naming the variable.
 */
export function parseOpenPorts(env: NodeJS.ProcessEnv = process.env): readonly PortRange[] {
  if (env[EnvVar.openPorts] === undefined) return [];
  return parseJsonEnv(EnvVar.openPorts, PortRangesSchema, 'list of port ranges', env);
}

/**
 * Reads NODE_TO_NODE_TRAFFIC, whether the job instances may reach each other (for the API to
 * refuse a multi-node task at submit): unset or `true` is yes, `false` no, anything else a
 * ConfigurationError naming the variable.
 */
export function parseNodeToNodeTraffic(env: NodeJS.ProcessEnv = process.env): boolean {
  const value = env[EnvVar.nodeToNodeTraffic];
  if (value === undefined || value === 'true') return true;
  if (value === 'false') return false;
  throw new ConfigurationError(`environment variable ${EnvVar.nodeToNodeTraffic}: expected true or false, got ${JSON.stringify(value)}`);
}

/** A variable holding JSON of `schema`'s shape; anything else names the variable and each wrong field. */
function parseJsonEnv<T>(name: EnvVar, schema: z.ZodMiniType<T>, what: string, env: NodeJS.ProcessEnv): T {
  let json: unknown;
  try {
    json = JSON.parse(requireEnv(name, env));
  } catch (error) {
    if (error instanceof ConfigurationError) throw error;
    throw new ConfigurationError(`environment variable ${name}: expected JSON, got ${errorText(error)}`, { cause: error });
  }
  const parsed = schema.safeParse(json);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((issue) => `${[name, ...issue.path.map(String)].join('.')}: ${issue.message}`);
  throw new ConfigurationError(`environment variable ${name} is not a valid ${what}: ${issues.join('; ')}`);
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
