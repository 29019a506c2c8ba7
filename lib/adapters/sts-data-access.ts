// DataAccess on STS: one role per stack (infra JobData's access role) holds the widest S3
// access any job may have; each node gets a session of it narrowed by a session policy to
// its own job's data. IAM grants a session the intersection of the two.

import { AssumeRoleCommand, type STSClient } from '@aws-sdk/client-sts';
import type { ProcessCredentials } from '../agent/protocol.ts';
import { InvalidInputError, UnexpectedCloudResponseError } from '../errors.ts';
import type { JobRecord } from '../model.ts';
import type { DataAccess } from '../ports.ts';
import { awsErrorCode, sendAws } from './aws-errors.ts';
import { jobDataPolicyOf } from './s3-data.ts';
import type { DataConfig } from '../workflow/resources.ts';

/**
 * How long a session lasts, in seconds: an hour, the most a role may give a session it
 * assumes from another role's (the API function's) credentials. The agent asks again
 * every 15 minutes.
 */
export const DATA_SESSION_SECONDS = 3600;

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
    const issued = answer.Credentials;
    if (issued?.AccessKeyId === undefined || issued.SecretAccessKey === undefined || issued.SessionToken === undefined || issued.Expiration === undefined) {
      throw new UnexpectedCloudResponseError(`STS AssumeRole of ${this.deps.roleArn} answered without credentials`);
    }
    return {
      Version: 1,
      AccessKeyId: issued.AccessKeyId,
      SecretAccessKey: issued.SecretAccessKey,
      SessionToken: issued.SessionToken,
      Expiration: issued.Expiration.toISOString(),
    };
  }
}
