// DataAccess on STS: what AssumeRole is sent for a job (a mocked STS), what a node gets
// back, and the API's route wired to it.

import { AssumeRoleCommand, STSClient, STSServiceException } from '@aws-sdk/client-sts';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import { jobDataPolicyOf, SESSION_POLICY_MAX_CHARS } from '../../../../lib/adapters/s3-data.ts';
import { StsDataAccess } from '../../../../lib/adapters/sts-data-access.ts';
import { authorizationHeader } from '../../../../lib/agent/protocol.ts';
import { InvalidInputError, TransientError, UnexpectedCloudResponseError } from '../../../../lib/errors.ts';
import { handleApiRequest } from '../../../../lib/http/index.ts';
import { parseTaskFile } from '../../../../lib/task-file/parse.ts';
import { newJobRecord } from '../../../../lib/usecases/submit-job.ts';
import { givenLaunched, harness, JOB_ID } from '../../../support/usecases-harness.ts';

const ROLE_ARN = 'arn:aws:iam::123456789012:role/relaunch-DataAccessRole';
const DATA = { bucket: 'relaunch-data-7', allowedBuckets: ['team-data', 'ckpt-*'], partition: 'aws' };
const SHA = 'a'.repeat(64);
const TASK = `workdir: upload:dir:sha256:${SHA}\nfile_mounts:\n  /data: s3://team-data/imagenet/\n  /checkpoint: {name: ckpt-bert, mode: MOUNT}\nrun: python train.py\n`;
const EXPIRATION = new Date('2026-12-03T16:00:00Z');

/** An STS error as the SDK throws it from a query-protocol answer: the exception's name, and the answer's code in `Code`. */
const stsError = (code: string, status = 400) =>
  Object.assign(new STSServiceException({ name: `${code}Exception`, $fault: status >= 500 ? 'server' : 'client', $metadata: { httpStatusCode: status }, message: `${code} happened` }), { Code: code });

describe('StsDataAccess', () => {
  const sts = mockClient(STSClient);
  const access = new StsDataAccess({ sts: new STSClient({ region: 'us-east-1' }), roleArn: ROLE_ARN, data: DATA });
  const job = newJobRecord(JOB_ID, parseTaskFile(TASK).spec, '2026-12-03T14:00:00Z');
  beforeEach(() => sts.reset());

  it("assumes the access role for an hour, narrowed to the job's data, with the job and attempt in the session's name", async () => {
    sts.on(AssumeRoleCommand).resolves({ Credentials: { AccessKeyId: 'ASIA1', SecretAccessKey: 'secret-1', SessionToken: 'token-1', Expiration: EXPIRATION } });

    const credentials = await access.credentialsFor(job, 3);

    expect(credentials).toEqual({ Version: 1, AccessKeyId: 'ASIA1', SecretAccessKey: 'secret-1', SessionToken: 'token-1', Expiration: '2026-12-03T16:00:00.000Z' });
    expect(sts).toHaveReceivedCommandTimes(AssumeRoleCommand, 1);
    const input = sts.commandCalls(AssumeRoleCommand)[0]?.args[0].input;
    expect(input).toMatchObject({ RoleArn: ROLE_ARN, RoleSessionName: `${JOB_ID}-3`, DurationSeconds: 3600 });
    expect(JSON.parse(input?.Policy ?? '')).toEqual(jobDataPolicyOf(job.spec, JOB_ID, DATA));
    expect(input?.Policy).toContain(`"arn:aws:s3:::relaunch-data-7/sources/${SHA}.tar.gz"`);
    expect(input?.Policy).toContain('"arn:aws:s3:::ckpt-bert/*"');
    expect(input?.Policy?.length).toBeLessThanOrEqual(SESSION_POLICY_MAX_CHARS);
    // A session name takes letters, digits and =,.@_- only, at most 64 of them.
    expect(input?.RoleSessionName).toMatch(/^[\w+=,.@-]{2,64}$/);
  });

  it('asks nothing of STS for a job without S3 data, and says so', async () => {
    const plain = newJobRecord(JOB_ID, parseTaskFile('run: echo hi\n').spec, '2026-12-03T14:00:00Z');
    await expect(access.credentialsFor(plain, 1)).rejects.toThrow(new InvalidInputError([{ path: 'file_mounts', message: `job ${JOB_ID} has no S3 data: its nodes need no data credentials` }]));
    expect(sts).toHaveReceivedCommandTimes(AssumeRoleCommand, 0);
  });

  it('is a TransientError when STS throttles or fails, a named refusal for a policy IAM packs too large or calls malformed, and a cloud error without credentials', async () => {
    sts.on(AssumeRoleCommand)
      .rejectsOnce(stsError('Throttling'))
      .rejectsOnce(stsError('InternalFailure', 500))
      .rejectsOnce(stsError('PackedPolicyTooLarge'))
      .rejectsOnce(stsError('MalformedPolicyDocument'))
      .resolves({});
    await expect(access.credentialsFor(job, 1)).rejects.toBeInstanceOf(TransientError);
    await expect(access.credentialsFor(job, 1)).rejects.toBeInstanceOf(TransientError);
    const tooLarge = await access.credentialsFor(job, 1).catch((error: unknown) => error);
    expect(tooLarge).toBeInstanceOf(InvalidInputError);
    expect((tooLarge as InvalidInputError).issues).toEqual([{ path: 'file_mounts', message: expect.stringContaining('too varied for one IAM session policy: PackedPolicyTooLarge happened') }]);
    await expect(access.credentialsFor(job, 1)).rejects.toThrow(/IAM refused the session policy of job .*: MalformedPolicyDocument happened/);
    await expect(access.credentialsFor(job, 1)).rejects.toBeInstanceOf(UnexpectedCloudResponseError);
  });

  it("through the API: the live attempt's agent gets them; STS refusing to be reached is a 503 the agent retries, never a leak of why", async () => {
    const h = harness();
    await givenLaunched(h, parseTaskFile(TASK).spec);
    const secret = h.compute.secretFor(JOB_ID, 1);
    const ask = () =>
      handleApiRequest(
        {
          method: 'POST',
          path: `/jobs/${JOB_ID}/attempts/1/data-credentials`,
          headers: { Authorization: authorizationHeader(secret), 'Content-Type': 'application/json' },
          body: '{"nodeRank":0}',
        },
        { ...h.deps, dataAccess: access },
      );
    sts.on(AssumeRoleCommand).rejectsOnce(stsError('Throttling')).resolves({ Credentials: { AccessKeyId: 'ASIA2', SecretAccessKey: 'secret-2', SessionToken: 'token-2', Expiration: EXPIRATION } });

    const throttled = await ask();
    expect(throttled.statusCode).toBe(503);
    expect(throttled.body).not.toContain(ROLE_ARN);
    const answered = await ask();
    expect(answered.statusCode).toBe(200);
    expect(JSON.parse(answered.body)).toMatchObject({ Version: 1, AccessKeyId: 'ASIA2', SessionToken: 'token-2' });
    expect(sts.commandCalls(AssumeRoleCommand).map((call) => call.args[0].input.RoleSessionName)).toEqual([`${JOB_ID}-1`, `${JOB_ID}-1`]);
  });
});
