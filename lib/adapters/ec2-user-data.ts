// EC2 user data: the agent script gzipped, as launches send it (launchUserData), and the
// checks a submit can make of it before any launch. No SDK client here: the API reads this at
// submit.

import { gzipSync } from 'node:zlib';
import { renderAgentScript } from '../agent/script.ts';
import { agentSecretPath, ssmEndpoint } from '../agent/secret-parameter.ts';
import { PrecheckError, type InputIssue } from '../errors.ts';
import { hasGpus, instanceTypeInfo } from '../instance-types.ts';
import type { LaunchRequest } from '../ports.ts';
import { mountProblems } from '../task-file/mounts.ts';
import type { TaskSpec } from '../task-file/types.ts';
import { jobDataPolicyOf, s3AgentMounts, s3MountProblems, SESSION_POLICY_MAX_CHARS } from './s3-data.ts';
import type { DataConfig, JobLogsConfig } from '../workflow/resources.ts';
import { jobLogGroupName } from '../job-log-names.ts';
import { HEARTBEAT_INTERVAL_SECONDS } from '../workflow/contract.ts';

/** EC2 user data is at most 16 KB before base64; the script goes gzipped (cloud-init inflates it). */
export const USER_DATA_MAX_BYTES = 16_384;

/** The agent script, gzipped as user data carries it. */
export function packedAgent(params: Parameters<typeof renderAgentScript>[0]): Buffer {
  return gzipSync(renderAgentScript(params), { level: 9 });
}

/** What a launch's user data says beside the attempt: the deployment's side of it. */
export interface UserDataSettings {
  /** The API the agents call back (heartbeat, report). */
  readonly apiUrl: string;
  /** The deployment's name prefix: its agents' secrets live under agentSecretPath(namePrefix). */
  readonly namePrefix: string;
  readonly heartbeatSeconds: number;
  /** The stack's buckets, for the task's S3 mounts; absent, the task has none. */
  readonly data?: DataConfig;
  /** The log group the nodes ship their output to; absent, nothing is shipped. */
  readonly logs?: JobLogsConfig;
}

/** CloudWatch Logs' endpoint in a region (China's regions have their own suffix). */
export function logsEndpoint(region: string): string {
  return ssmEndpoint(region).replace('https://ssm.', 'https://logs.');
}

/**
 * The agent for one node type of an attempt in a region, gzipped and base64-encoded. Rank,
 * IPs and secret come from IMDS and SSM at boot. Too large for user data is a PrecheckError.
 */
export function launchUserData(settings: UserDataSettings, request: Pick<LaunchRequest, 'jobId' | 'attempt' | 'spec'>, region: string, instanceType: string): string {
  const packed = packedAgent({
    apiUrl: settings.apiUrl,
    jobId: request.jobId,
    attempt: request.attempt,
    secretSource: { path: agentSecretPath(settings.namePrefix), region, endpoint: ssmEndpoint(region) },
    spec: request.spec,
    heartbeatSeconds: settings.heartbeatSeconds,
    // A type the catalog knows has its own count (0 for a CPU type, whatever the task
    // asked for); only an unknown one is taken at the task's word.
    gpusPerNode: gpusOf(instanceType, request.spec),
    // Whatever the count says: a GPU type boots the GPU image, and its container gets them.
    containerGpus: hasGpus(instanceType),
    ...(settings.data === undefined ? {} : s3AgentMounts(request.spec, request.jobId, settings.data)),
    ...(settings.logs === undefined ? {} : { logs: { group: settings.logs.group, region: settings.logs.region, endpoint: logsEndpoint(settings.logs.region) } }),
  });
  if (packed.length > USER_DATA_MAX_BYTES) throw new PrecheckError(tooLargeForUserData(packed.length));
  return packed.toString('base64');
}

/** SKYPILOT_NUM_GPUS_PER_NODE for a node of this type. */
function gpusOf(instanceType: string, spec: TaskSpec): number {
  const info = instanceTypeInfo(instanceType);
  if (info !== null && info !== undefined) return info.gpu?.count ?? 0;
  return spec.resources.accelerators[0]?.count ?? 0;
}

/** As long as any job id. */
const SAMPLE_JOB_ID = 'j-xxxxxxxxx-xxxxxx';

/** As long as any AWS region's name (ap-southeast-5, us-gov-west-1: 14 and 13 characters). */
const LONGEST_REGION = 'xx-xxxxxxxxx-9';

/**
 * About how many bytes of ordinary shell (setup and run like SkyPilot's task files) fit
 * in user data beside the agent: measured by `npm run bench -- user-data`, which checks
 * that it stays within a tenth of the measure. Text gzip cannot shrink fits about half.
 */
export const ORDINARY_SHELL_FIT_BYTES = 12_000;

export function tooLargeForUserData(bytes: number): string {
  return `setup, run and envs are too large for EC2 user data: ${bytes} bytes compressed, at most ${USER_DATA_MAX_BYTES} (about ${Math.floor(ORDINARY_SHELL_FIT_BYTES / 1000)} KB of ordinary shell fits beside relaunch's agent)`;
}

/**
 * What EC2 cannot run, found at submit instead of at the first launch: a local path `run`
 * did not upload, a bucket S3 or the instance role would refuse (lib/task-file/mounts.ts,
 * s3-data.ts), S3 data too varied for one session policy, and an agent too large for user
 * data. The agent is rendered with the longest values its launch could put in: a
 * 200-character API URL, attempt 999999, the longest name prefix, region and bucket, 8 GPUs.
 */
export function ec2TaskProblems(spec: TaskSpec, data?: DataConfig): InputIssue[] {
  // A source never uploaded says all there is to say about the task's mounts.
  const unmountable = mountProblems(spec);
  const problems: InputIssue[] = unmountable.length > 0 ? unmountable : s3MountProblems(spec, data);
  let packed: Buffer;
  try {
    packed = packedAgent({
      apiUrl: `https://${'x'.repeat(160)}.execute-api.us-east-1.amazonaws.com/v1/`,
      jobId: SAMPLE_JOB_ID,
      attempt: 999_999,
      secretSource: { path: agentSecretPath('x'.repeat(32)), region: LONGEST_REGION, endpoint: ssmEndpoint(LONGEST_REGION) },
      spec,
      heartbeatSeconds: HEARTBEAT_INTERVAL_SECONDS,
      gpusPerNode: 8,
      logs: { group: jobLogGroupName('x'.repeat(32)), region: LONGEST_REGION, endpoint: logsEndpoint(LONGEST_REGION) },
      ...(unmountable.length === 0 ? s3AgentMounts(spec, SAMPLE_JOB_ID, { bucket: 'x'.repeat(63), allowedBuckets: [] }) : {}),
    });
    if (problems.length === 0 && data !== undefined) problems.push(...dataPolicyProblems(spec, data));
  } catch (error) {
    // A mount the agent could not be given (agent/mounts.ts): the submit's error, not a 500.
    if (error instanceof PrecheckError) return [...problems, { path: 'file_mounts', message: error.message }];
    throw error;
  }
  if (packed.length > USER_DATA_MAX_BYTES) problems.push({ path: 'run', message: tooLargeForUserData(packed.length) });
  return problems;
}

/**
 * A task whose nodes' S3 access would not fit in one session policy (IAM's 2,048
 * characters): each upload, copied prefix and mount adds a resource to it.
 */
function dataPolicyProblems(spec: TaskSpec, data: DataConfig): InputIssue[] {
  const policy = jobDataPolicyOf(spec, SAMPLE_JOB_ID, data);
  const size = policy === null ? 0 : JSON.stringify(policy).length;
  if (size <= SESSION_POLICY_MAX_CHARS) return [];
  return [
    {
      path: 'file_mounts',
      message: `expected S3 data whose access fits one IAM session policy (at most ${SESSION_POLICY_MAX_CHARS} characters), got ${size}: put local files in one folder, or mount fewer buckets and prefixes`,
    },
  ];
}
