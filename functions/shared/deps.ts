// The Lambdas' ports, built on first use from the environment and then reused across warm
// invocations. Each is its own function so a handler's bundle holds only the SDK clients
// it calls (esbuild drops what no handler references), and nothing runs at import time.

import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EC2Client } from '@aws-sdk/client-ec2';
import { SFNClient } from '@aws-sdk/client-sfn';
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { SSMClient } from '@aws-sdk/client-ssm';
import { DynamoJobStore } from '../../lib/adapters/dynamo-job-store/index.ts';
import { DynamoLaunchPace } from '../../lib/adapters/dynamo-launch-pace.ts';
import { Ec2Compute } from '../../lib/adapters/ec2-compute.ts';
import { Ec2Inventory } from '../../lib/adapters/ec2-inventory.ts';
import { Ec2LaunchTemplates } from '../../lib/adapters/ec2-launch-templates.ts';
import { S3JobBuckets } from '../../lib/adapters/s3-job-buckets.ts';
import { SqsDeadLetters } from '../../lib/adapters/sqs-dead-letters.ts';
import { SsmJobSecrets } from '../../lib/adapters/ssm-job-secrets.ts';
import { SsmParameters } from '../../lib/adapters/ssm-parameters.ts';
import { SfnWorkflow } from '../../lib/adapters/sfn-workflow.ts';
import type {
  Clock,
  Compute,
  DeadLetters,
  InstanceInventory,
  JobBuckets,
  JobSecrets,
  JobStore,
  LaunchPace,
  LaunchTemplateInventory,
  Random,
  Workflow,
} from '../../lib/ports.ts';
import { ConfigurationError } from '../../lib/errors.ts';
import {
  EnvVar,
  parseComputeConfig,
  parseComputeScope,
  parseDataConfig,
  parseDeadLetterQueues,
  parseLaunchPace,
  requireEnv,
  type ReleaseEnvConfig,
} from '../../lib/workflow/env.ts';
import { traced } from './tracing.ts';

let cachedDynamo: DynamoDBClient | undefined;
let cachedStore: JobStore | undefined;
let cachedPace: LaunchPace | undefined;
let cachedWorkflow: Workflow | undefined;
let cachedCompute: Compute | undefined;
let cachedInventory: InstanceInventory | undefined;
let cachedLaunchTemplates: LaunchTemplateInventory | undefined;
let cachedDeadLetters: DeadLetters | undefined;
let cachedJobSecrets: JobSecrets | undefined;
let cachedJobBuckets: JobBuckets | null | undefined;

/** The jobs table (TABLE_NAME). */
export function store(): JobStore {
  cachedStore ??= new DynamoJobStore({ client: dynamo(), tableName: requireEnv(EnvVar.tableName) });
  return cachedStore;
}

/** The launch pace's bucket, an item of the jobs table (TABLE_NAME), sized by LAUNCH_PACE. */
export function pace(): LaunchPace {
  cachedPace ??= new DynamoLaunchPace({ client: dynamo(), tableName: requireEnv(EnvVar.tableName), config: parseLaunchPace() });
  return cachedPace;
}

function dynamo(): DynamoDBClient {
  cachedDynamo ??= traced(new DynamoDBClient({}));
  return cachedDynamo;
}

/** The controller's state machine (STATE_MACHINE_ARN). */
export function workflow(): Workflow {
  cachedWorkflow ??= new SfnWorkflow({ client: traced(new SFNClient({})), stateMachineArn: requireEnv(EnvVar.stateMachineArn) });
  return cachedWorkflow;
}

/**
 * EC2 in every configured region, one client per region made when first used, and SSM for
 * the default AMIs and the agents' secrets (a release deletes those). The launching
 * function has COMPUTE_CONFIG and API_URL; a function that only releases has
 * RELEASE_CONFIG, and its launch refuses.
 */
export function compute(): Compute {
  if (cachedCompute !== undefined) return cachedCompute;
  const ec2 = perRegion((region) => new EC2Client({ region }));
  const parameters = new SsmParameters(perRegion((region) => new SSMClient({ region })));
  if ((process.env[EnvVar.computeConfig] ?? '') !== '') {
    cachedCompute = new Ec2Compute({ config: { ...parseComputeConfig(), apiUrl: requireEnv(EnvVar.apiUrl) }, ec2, parameters });
  } else {
    cachedCompute = releasingCompute(parseComputeScope(), ec2, parameters);
  }
  return cachedCompute;
}

/**
 * An Ec2Compute that releases in the scope's regions and launches nothing: a release reads
 * only the regions and the name prefix, so the launch settings it is built with are empty,
 * and launch() refuses before they could be read.
 */
function releasingCompute(scope: ReleaseEnvConfig, ec2: (region: string) => EC2Client, parameters: SsmParameters): Compute {
  const { regions, ...tuning } = scope;
  const releaser = new Ec2Compute({
    config: { ...tuning, regions: regions.map((region) => ({ region, subnetsByZone: {}, securityGroupIds: [] })), instanceProfileArn: '', apiUrl: '' },
    ec2,
    parameters,
  });
  return {
    launch: async () => {
      throw new ConfigurationError(`this function releases instances only: it has ${EnvVar.releaseConfig}, not ${EnvVar.computeConfig}`);
    },
    release: (jobId, attempt, instances, options) => releaser.release(jobId, attempt, instances, options),
    hold: (jobId, attempt, keep) => releaser.hold(jobId, attempt, keep),
    join: async () => {
      throw new ConfigurationError(`this function releases instances only: it has ${EnvVar.releaseConfig}, not ${EnvVar.computeConfig}`);
    },
  };
}

/** This deployment's live instances in every configured region, for the sweep. */
export function inventory(): InstanceInventory {
  const { regions, namePrefix } = parseComputeScope();
  cachedInventory ??= new Ec2Inventory({ regions, deployment: namePrefix, ec2: perRegion((region) => new EC2Client({ region })) });
  return cachedInventory;
}

/** This deployment's launch templates in every configured region, for the sweep. */
export function launchTemplates(): LaunchTemplateInventory {
  const { regions, namePrefix } = parseComputeScope();
  cachedLaunchTemplates ??= new Ec2LaunchTemplates({ regions, deployment: namePrefix, ec2: perRegion((region) => new EC2Client({ region })) });
  return cachedLaunchTemplates;
}

/** The jobs' secrets, SSM SecureStrings under JOB_SECRETS_PATH in the function's region. */
export function jobSecrets(): JobSecrets {
  cachedJobSecrets ??= new SsmJobSecrets({ ssm: traced(new SSMClient({})), path: requireEnv(EnvVar.jobSecretsPath) });
  return cachedJobSecrets;
}

/**
 * Where jobs' `persistent: false` mounts are deleted: the stack's buckets (DATA_CONFIG), in
 * the function's region, where `run` creates buckets. null for a stack without a data
 * bucket, whose jobs have no mounts.
 */
export function jobBuckets(): JobBuckets | null {
  if (cachedJobBuckets === undefined) {
    const data = parseDataConfig();
    cachedJobBuckets = data === undefined ? null : new S3JobBuckets({ s3: traced(new S3Client({})), data });
  }
  return cachedJobBuckets;
}

/**
 * The dead-letter queues of the event deliveries (DEAD_LETTER_QUEUES), each read in its
 * region. A queue's URL picks its region's client and nothing more: the client's own
 * endpoint (SQS's regional one, the very host of the URL, or one configured with
 * AWS_ENDPOINT_URL) is where requests go, as for every other client.
 */
export function deadLetters(): DeadLetters {
  cachedDeadLetters ??= new SqsDeadLetters({
    queues: parseDeadLetterQueues(),
    client: perRegion((region) => new SQSClient({ region, useQueueUrlAsEndpoint: false })),
  });
  return cachedDeadLetters;
}

/** A client per region, each made on first use (and traced, as every client here is). */
function perRegion<T>(make: (region: string) => T): (region: string) => T {
  const clients = new Map<string, T>();
  return (region) => {
    let client = clients.get(region);
    if (client === undefined) {
      client = traced(make(region));
      clients.set(region, client);
    }
    return client;
  };
}

/** The system clock. */
export const clock: Clock = { now: () => new Date() };

/** Math.random: jitter and job ids need spread, not secrecy (secrets use node:crypto). */
export const random: Random = Math.random;

/** Forgets every built port, so a test can point the next invocation at other resources. */
export function resetDeps(): void {
  cachedDynamo = undefined;
  cachedStore = undefined;
  cachedPace = undefined;
  cachedJobBuckets = undefined;
  cachedWorkflow = undefined;
  cachedCompute = undefined;
  cachedInventory = undefined;
  cachedLaunchTemplates = undefined;
  cachedDeadLetters = undefined;
  cachedJobSecrets = undefined;
}
