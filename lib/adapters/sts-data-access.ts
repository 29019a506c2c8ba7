// DataAccess and LogAccess on STS: one role per stack (infra JobData's access role) holds
// the widest S3 access any job may have and the right to put events into any stream of the
// deployment's job log group; each node gets a session of it narrowed by a session policy
// to its own job's data, or to its own streams of its attempt. IAM grants a session the
// intersection of the two.

import { AssumeRoleCommand, type STSClient } from '@aws-sdk/client-sts';
import type { ProcessCredentials } from '../agent/protocol.ts';
import { InvalidInputError, UnexpectedCloudResponseError } from '../errors.ts';
import type { JobRecord } from '../model.ts';
import type { DataAccess, LogAccess } from '../ports.ts';
import { awsErrorCode, sendAws } from './aws-errors.ts';
import { jobDataPolicyOf } from './s3-data.ts';
import type { DataConfig, JobLogsConfig } from '../workflow/resources.ts';
import { nodeLogStreamPrefix } from '../job-log-names.ts';

/**
 * How long a session lasts, in seconds: an hour, the most a role may give a session it
 * assumes from another role's (the API function's) credentials. The agent asks again
 * every 15 minutes.
 */
export const DATA_SESSION_SECONDS = 3600;

/** What a node's log session may do: create its streams and put events into them. */
export const LOG_SHIPPING_ACTIONS = ['logs:CreateLogStream', 'logs:PutLogEvents'] as const;

/** The ARN of every stream of the deployment's job log group whose name starts with `prefix`. */
export function logStreamArn(logs: JobLogsConfig, prefix: string): string {
  return `arn:${logs.partition ?? 'aws'}:logs:${logs.region}:${logs.account}:log-group:${logs.group}:log-stream:${prefix}*`;
}

/**
 * The session policy of one node's log credentials: its own streams of its attempt (the
 * stream names' prefix, job-logs.ts's nodeLogStreamPrefix, ends in `/`, so node 1's policy
 * never matches node 10's streams), nothing else.
 */
export function nodeLogPolicy(logs: JobLogsConfig, node: { jobId: string; attempt: number; nodeRank: number }): object {
  return {
    Version: '2012-10-17',
    Statement: [{ Sid: 'OwnStreams', Effect: 'Allow', Action: [...LOG_SHIPPING_ACTIONS], Resource: logStreamArn(logs, nodeLogStreamPrefix(node)) }],
  };
}

/** DataAccess by AssumeRole on the stack's access role, with the job's session policy. */
export class StsDataAccess implements DataAccess {
  constructor(private readonly deps: { readonly sts: STSClient; readonly roleArn: string; readonly data: DataConfig }) {}

  async credentialsFor(job: JobRecord, attempt: number): Promise<ProcessCredentials> {
    const policy = jobDataPolicyOf(job.spec, job.jobId, this.deps.data);
    if (policy === null) {
      throw new InvalidInputError([{ path: 'file_mounts', message: `job ${job.jobId} has no S3 data: its nodes need no data credentials` }]);
    }
    let answer;
    try {
      answer = await sendAws('STS AssumeRole', () =>
        this.deps.sts.send(
          new AssumeRoleCommand({
            RoleArn: this.deps.roleArn,
            // CloudTrail names the job and attempt behind each S3 request.
            RoleSessionName: `${job.jobId}-${attempt}`,
            Policy: JSON.stringify(policy),
            DurationSeconds: DATA_SESSION_SECONDS,
          }),
        ),
      );
    } catch (error) {
      // Submit measured the plain text; IAM also packs the policy, and may still refuse it.
      // A refusal is final (400): the agent stops asking, and setup fails saying why.
      const code = awsErrorCode(error);
      if (code === 'PackedPolicyTooLarge') {
        throw new InvalidInputError([{ path: 'file_mounts', message: `job ${job.jobId}'s S3 data is too varied for one IAM session policy: ${(error as Error).message}` }]);
      }
      if (code === 'MalformedPolicyDocument' || code === 'ValidationError') {
        throw new InvalidInputError([{ path: 'file_mounts', message: `IAM refused the session policy of job ${job.jobId}'s S3 data: ${(error as Error).message}` }]);
      }
      throw error;
    }
    return processCredentials(answer.Credentials, this.deps.roleArn);
  }
}

/** LogAccess by AssumeRole on the same role, with the node's log session policy. */
export class StsLogAccess implements LogAccess {
  constructor(private readonly deps: { readonly sts: STSClient; readonly roleArn: string; readonly logs: JobLogsConfig }) {}

  async credentialsFor(job: JobRecord, attempt: number, nodeRank: number): Promise<ProcessCredentials> {
    const answer = await sendAws('STS AssumeRole', () =>
      this.deps.sts.send(
        new AssumeRoleCommand({
          RoleArn: this.deps.roleArn,
          // CloudTrail names the node behind each PutLogEvents.
          RoleSessionName: `${job.jobId}-${attempt}-node-${nodeRank}`.slice(0, 64),
          Policy: JSON.stringify(nodeLogPolicy(this.deps.logs, { jobId: job.jobId, attempt, nodeRank })),
          DurationSeconds: DATA_SESSION_SECONDS,
        }),
      ),
    );
    return processCredentials(answer.Credentials, this.deps.roleArn);
  }
}

function processCredentials(issued: { AccessKeyId?: string; SecretAccessKey?: string; SessionToken?: string; Expiration?: Date } | undefined, roleArn: string): ProcessCredentials {
  if (issued?.AccessKeyId === undefined || issued.SecretAccessKey === undefined || issued.SessionToken === undefined || issued.Expiration === undefined) {
    throw new UnexpectedCloudResponseError(`STS AssumeRole of ${roleArn} answered without credentials`);
  }
  return {
    Version: 1,
    AccessKeyId: issued.AccessKeyId,
    SecretAccessKey: issued.SecretAccessKey,
    SessionToken: issued.SessionToken,
    Expiration: issued.Expiration.toISOString(),
  };
}
