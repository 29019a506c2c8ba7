// A job's S3 data on moto: the session the API gives a node (STS AssumeRole with the job's
// session policy), and, when the job ends, its `persistent: false` mounts deleted: the
// bucket `run` created for it and its folder of the stack's bucket, never a bucket it did
// not create.

import { CreateBucketCommand, HeadBucketCommand, ListObjectsV2Command, PutBucketTaggingCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { beforeAll, describe, expect, it } from 'vitest';
import { CREATED_BUCKET_TAG, CREATED_FOR_JOB_TAG } from '../../../lib/adapters/s3-job-buckets.ts';
import { s3JobFolder } from '../../../lib/adapters/s3-data.ts';
import { recordedCalls } from './recorder.ts';
import { useWorld, type StackInWorld } from './world.ts';

const world = useWorld();
let stack: StackInWorld;
let ami: string;
let s3: S3Client;

beforeAll(async () => {
  stack = await world().deploy({ config: { namePrefix: 'data', dataBuckets: ['relaunch-scratch-*'] } });
  ami = await world().amazonLinuxAmi();
  s3 = new S3Client({ region: 'us-east-1', endpoint: world().moto.endpoint, forcePathStyle: true });
});

async function keys(bucket: string, prefix = ''): Promise<string[]> {
  const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
  return (listed.Contents ?? []).map((object) => object.Key as string);
}

describe("a job's S3 data", () => {
  it('is reached with a session narrowed to the job, and what the job said not to keep is deleted when it ends', async () => {
    const created = 'relaunch-scratch-made-for-job';
    const existing = 'relaunch-scratch-shared';
    for (const bucket of [created, existing]) await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    // `run` creates the job's bucket and tags it; the job's id once the submit answered.
    await s3.send(new PutBucketTaggingCommand({ Bucket: created, Tagging: { TagSet: [{ Key: CREATED_BUCKET_TAG, Value: 'relaunch run' }] } }));
    const jobId = await stack.submit(
      `name: data\nfile_mounts:\n  /scratch: {name: ${created}, mode: MOUNT, persistent: false}\n  /shared: {name: ${existing}, mode: MOUNT, persistent: false}\n  /ckpt: {mode: MOUNT, persistent: false}\nresources:\n  cpus: 2\n  image_id: ${ami}\nrun: train\n`,
    );
    await s3.send(
      new PutBucketTaggingCommand({ Bucket: created, Tagging: { TagSet: [{ Key: CREATED_BUCKET_TAG, Value: 'relaunch run' }, { Key: CREATED_FOR_JOB_TAG, Value: jobId }] } }),
    );
    await stack.awaiting(jobId, 1, 'AwaitBoot');
    const [agent] = await stack.agents(jobId, 1);
    await agent!.heartbeat();
    await stack.awaiting(jobId, 1, 'AwaitAttempt');

    const credentials = await agent!.dataCredentials();
    expect(credentials.statusCode).toBe(200);
    expect(credentials.body).toMatchObject({ Version: 1, AccessKeyId: expect.any(String), SecretAccessKey: expect.any(String), SessionToken: expect.any(String) });
    const assumed = recordedCalls().filter((call) => call.service === 'STS' && call.operation === 'AssumeRole');
    expect(assumed).toHaveLength(1);
    const policy = String(assumed[0]?.input.Policy);
    const dataBucket = stack.deployment.only('AWS::S3::Bucket').physical.ref;
    const folder = s3JobFolder({ bucket: dataBucket, allowedBuckets: [] }, jobId, '/ckpt');
    expect(policy).toContain(`${dataBucket}/${folder.prefix}`);
    expect(policy).toContain(created);
    expect(assumed[0]?.input.RoleArn).toBe(stack.deployment.functions.api.environment.DATA_ACCESS_ROLE_ARN);

    // What the job wrote, as its node would have.
    await s3.send(new PutObjectCommand({ Bucket: dataBucket, Key: `${folder.prefix}/step-1.pt`, Body: 'weights' }));
    await s3.send(new PutObjectCommand({ Bucket: dataBucket, Key: 'mounts/another-job/ckpt/step-1.pt', Body: 'theirs' }));
    await s3.send(new PutObjectCommand({ Bucket: created, Key: 'tmp/a', Body: 'a' }));
    await s3.send(new PutObjectCommand({ Bucket: existing, Key: 'tmp/b', Body: 'b' }));
    await agent!.report('run', 0);
    expect((await stack.ended(jobId)).status).toBe('SUCCEEDED');

    await expect(s3.send(new HeadBucketCommand({ Bucket: created }))).rejects.toMatchObject({ name: 'NotFound' });
    expect(await keys(existing)).toEqual(['tmp/b']);
    expect(await keys(dataBucket, 'mounts/')).toEqual(['mounts/another-job/ckpt/step-1.pt']);
  });
});
