// delete-transient-mounts: every end of an execution, on dynalite with S3 mocked, asserting
// what was sent: a bucket goes only when its tags say `run` created it for this job, a
// nameless mount's folder is the job's own prefix, and a repeated or late event deletes
// nothing more.

import {
  DeleteBucketCommand,
  DeleteObjectsCommand,
  GetBucketTaggingCommand,
  ListObjectVersionsCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { handler } from '../../../../functions/delete-transient-mounts/handler.ts';
import { resetDeps } from '../../../../functions/shared/deps.ts';
import { InvalidInputError } from '../../../../lib/errors.ts';
import { parseTaskFile } from '../../../../lib/task-file/parse.ts';
import { newJobRecord } from '../../../../lib/usecases/submit-job.ts';
import { EnvVar } from '../../../../lib/workflow/env.ts';
import { executionArnOf, executionStatusChange, useWorld } from '../../../support/functions-world.ts';

const world = useWorld();
const s3 = mockClient(S3Client);
const DATA = { bucket: 'relaunch-data-1', allowedBuckets: ['team-*'] };
const JOB = 'j-00mm8abcd-mounts1';

const TASK = `file_mounts:
  /scratch: {name: team-scratch, mode: MOUNT, persistent: false}
  /kept: {name: team-kept, mode: MOUNT}
  /tmp-out: {mode: MOUNT, persistent: false}
  /ckpt: {mode: MOUNT}
run: x
`;

/** An end of the job's execution (or of another one, by its ARN). */
function ended(jobId: string, status: string, arn = executionArnOf(jobId)): unknown {
  return executionStatusChange(jobId, status, {}, arn);
}

function s3Error(name: string, status: number): S3ServiceException {
  return new S3ServiceException({ name, $fault: 'client', $metadata: { httpStatusCode: status }, message: name });
}

async function givenJob(task = TASK): Promise<void> {
  const job = newJobRecord(JOB, parseTaskFile(task).spec, new Date().toISOString());
  await world.store().createJob({ ...job, executionArn: executionArnOf(JOB) });
}

/** One page of versions under `prefix` (keys a and b), then nothing: as S3 lists after the delete. */
function objectsOnce(bucket: string, prefix?: string): void {
  const keys = ['a', 'b'].map((key) => `${prefix ?? ''}${key}`);
  s3.on(ListObjectVersionsCommand, { Bucket: bucket, ...(prefix === undefined ? {} : { Prefix: prefix }) })
    .resolvesOnce({ Versions: keys.map((Key) => ({ Key, VersionId: `v-${Key}` })), DeleteMarkers: [{ Key: `${prefix ?? ''}old`, VersionId: 'dm-1' }] })
    .resolves({});
}

beforeEach(() => {
  s3.reset();
  process.env[EnvVar.dataConfig] = JSON.stringify(DATA);
  resetDeps();
  s3.on(DeleteObjectsCommand).resolves({});
  s3.on(DeleteBucketCommand).resolves({});
});

describe('delete-transient-mounts', () => {
  it("deletes, at the job's end, the bucket run created for it and the job's folder of a nameless mount, and nothing kept", async () => {
    await givenJob();
    s3.on(GetBucketTaggingCommand, { Bucket: 'team-scratch' }).resolves({ TagSet: [{ Key: 'relaunch:created-by', Value: 'relaunch run' }, { Key: 'relaunch:job', Value: JOB }] });
    objectsOnce('team-scratch');
    objectsOnce(DATA.bucket, `mounts/${JOB}/root/tmp-out/`);

    const result = await handler(ended(JOB, 'SUCCEEDED'), {} as never);

    expect(result).toEqual([
      { folder: '/tmp-out', outcome: 'deleted' },
      { bucket: 'team-scratch', outcome: 'deleted' },
    ]);
    expect(s3.commandCalls(GetBucketTaggingCommand).map((call) => call.args[0].input.Bucket)).toEqual(['team-scratch']);
    expect(s3.commandCalls(DeleteObjectsCommand).map((call) => call.args[0].input)).toEqual([
      {
        Bucket: DATA.bucket,
        Delete: {
          Objects: [
            { Key: `mounts/${JOB}/root/tmp-out/a`, VersionId: `v-mounts/${JOB}/root/tmp-out/a` },
            { Key: `mounts/${JOB}/root/tmp-out/b`, VersionId: `v-mounts/${JOB}/root/tmp-out/b` },
            { Key: `mounts/${JOB}/root/tmp-out/old`, VersionId: 'dm-1' },
          ],
          Quiet: true,
        },
      },
      { Bucket: 'team-scratch', Delete: { Objects: [{ Key: 'a', VersionId: 'v-a' }, { Key: 'b', VersionId: 'v-b' }, { Key: 'old', VersionId: 'dm-1' }], Quiet: true } },
    ]);
    expect(s3.commandCalls(DeleteBucketCommand).map((call) => call.args[0].input)).toEqual([{ Bucket: 'team-scratch' }]);
  });

  it.each(['FAILED', 'ABORTED', 'TIMED_OUT'])('deletes them when the execution ended %s too', async (status) => {
    await givenJob();
    s3.on(GetBucketTaggingCommand).resolves({ TagSet: [{ Key: 'relaunch:job', Value: JOB }] });
    s3.on(ListObjectVersionsCommand).resolves({});
    const result = await handler(ended(JOB, status), {} as never);
    expect(result).toContainEqual({ bucket: 'team-scratch', outcome: 'deleted' });
  });

  it.each([
    ['tagged for another job', () => s3.on(GetBucketTaggingCommand).resolves({ TagSet: [{ Key: 'relaunch:job', Value: 'j-00mm8abcd-other1' }] }), 'kept'],
    ['not tagged at all (it was there before the job)', () => s3.on(GetBucketTaggingCommand).rejects(s3Error('NoSuchTagSet', 404)), 'kept'],
    ['gone already (a repeated event)', () => s3.on(GetBucketTaggingCommand).rejects(s3Error('NoSuchBucket', 404)), 'gone'],
  ])('keeps a bucket %s, sending no delete for it', async (_name, stub, outcome) => {
    await givenJob();
    stub();
    s3.on(ListObjectVersionsCommand).resolves({});
    const result = await handler(ended(JOB, 'SUCCEEDED'), {} as never);
    expect(result).toContainEqual({ bucket: 'team-scratch', outcome });
    expect(s3.commandCalls(DeleteBucketCommand)).toEqual([]);
    expect(s3.commandCalls(ListObjectVersionsCommand).map((call) => call.args[0].input.Bucket)).toEqual([DATA.bucket]);
  });

  it('passes over an execution that handed its job to a new one, and a job it does not know', async () => {
    await givenJob();
    expect(await handler(ended(JOB, 'SUCCEEDED', executionArnOf(JOB, '-continued')), {} as never)).toEqual([]);
    expect(await handler(ended('j-00mm8abcd-nobody', 'SUCCEEDED'), {} as never)).toEqual([]);
    expect(s3.calls()).toEqual([]);
  });

  it('sends nothing for a job whose mounts all keep their data', async () => {
    await givenJob('file_mounts:\n  /kept: {name: team-kept, mode: MOUNT}\nrun: x\n');
    expect(await handler(ended(JOB, 'SUCCEEDED'), {} as never)).toEqual([]);
    expect(s3.calls()).toEqual([]);
  });

  it('fails (Lambda invokes it again, then keeps it in the queue) when S3 refuses to delete an object, before deleting the bucket', async () => {
    await givenJob();
    s3.on(GetBucketTaggingCommand).resolves({ TagSet: [{ Key: 'relaunch:job', Value: JOB }] });
    s3.on(ListObjectVersionsCommand).resolves({ Versions: [{ Key: 'locked', VersionId: 'v1' }] });
    s3.on(DeleteObjectsCommand).resolves({ Errors: [{ Key: 'locked', Code: 'AccessDenied', Message: 'Access Denied' }] });
    await expect(handler(ended(JOB, 'SUCCEEDED'), {} as never)).rejects.toThrow('S3 refused to delete 1 object(s) of relaunch-data-1, the first locked: AccessDenied Access Denied');
    expect(s3.commandCalls(DeleteBucketCommand)).toEqual([]);
  });

  it('does nothing on a stack without a data bucket', async () => {
    await givenJob();
    delete process.env[EnvVar.dataConfig];
    resetDeps();
    expect(await handler(ended(JOB, 'SUCCEEDED'), {} as never)).toEqual([]);
    expect(s3.calls()).toEqual([]);
  });

  it.each([
    ['a status that is no end', { detail: { status: 'RUNNING' } }, 'event.detail.status'],
    ['an input that is not JSON', { detail: { input: '{oops' } }, 'event.detail.input'],
    ['an input without a job', { detail: { input: '{}' } }, 'event.detail.input.jobId'],
    ['another detail-type', { 'detail-type': 'EC2 Instance State-change Notification' }, 'event.detail-type'],
  ])('refuses %s, naming the field, and sends nothing', async (_name, change, field) => {
    const base = ended(JOB, 'SUCCEEDED') as { detail: Record<string, unknown> };
    const event = { ...base, ...change, detail: { ...base.detail, ...((change as { detail?: object }).detail ?? {}) } };
    const refused = handler(event, {} as never);
    await expect(refused).rejects.toThrow(InvalidInputError);
    await expect(refused).rejects.toThrow(field);
    expect(s3.calls()).toEqual([]);
  });
});
