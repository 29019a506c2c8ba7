// `relaunch run` against a deployed stack: uploads go to the stack's bucket with the
// caller's own AWS credentials, and a bucket a MOUNT names is created when missing.

import { createReadStream } from 'node:fs';
import {
  CreateBucketCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  PutBucketTaggingCommand,
  PutObjectCommand,
  S3Client,
  type BucketLocationConstraint,
} from '@aws-sdk/client-s3';
import { awsErrorCode } from '../lib/adapters/aws-errors.ts';
import { InvalidInputError } from '../lib/errors.ts';
import type { SourcesLocation } from '../lib/http/types.ts';
import { bucketAllowed, notAllowedBucket } from '../lib/adapters/s3-data.ts';
import { CREATED_BUCKET_TAG, CREATED_FOR_JOB_TAG } from '../lib/adapters/s3-job-buckets.ts';
import { archiveName, mountField } from '../lib/task-file/mounts.ts';
import type { ParsedJob } from '../lib/task-file/parse.ts';
import { taskPath } from '../lib/located-yaml/path.ts';
import type { Io } from './exit.ts';
import type { SourceStore } from './sources.ts';

/** The most one PutObject takes: a larger source is refused before anything is sent. */
export const MAX_SOURCE_BYTES = 5 * 1024 ** 3;

/**
 * Days after which a stored archive is uploaded again at submit. The stack expires them
 * after 90 (infra/constructs/job-data.ts), so a job always has 60 days of relaunches.
 */
export const REFRESH_AFTER_DAYS = 30;

/** The HTTP status of an S3 error: a HEAD's errors have no body, only their status. */
function statusOf(error: unknown): number | undefined {
  return (error as { $metadata?: { httpStatusCode?: number } } | null)?.$metadata?.httpStatusCode;
}

function notFound(error: unknown): boolean {
  return statusOf(error) === 404 || ['NotFound', 'NoSuchKey', 'NoSuchBucket'].includes(awsErrorCode(error));
}

/** The stack's bucket, under `sources/`: an archive is sent only when its name is not there yet. */
export class S3SourceStore implements SourceStore {
  readonly where: string;

  constructor(
    private readonly s3: S3Client,
    private readonly location: SourcesLocation,
  ) {
    this.where = `s3://${location.bucket}/${location.prefix}`;
  }

  private key(sha256: string): string {
    return `${this.location.prefix}/${archiveName(sha256)}`;
  }

  /**
   * Whether the archive is there and young enough: one uploaded more than REFRESH_AFTER_DAYS
   * ago is sent again, so that the bucket's expiry never takes it from a job just submitted.
   */
  async has(sha256: string): Promise<boolean> {
    try {
      const head = await this.s3.send(new HeadObjectCommand({ Bucket: this.location.bucket, Key: this.key(sha256) }));
      const age = Date.now() - (head.LastModified?.getTime() ?? 0);
      return age < REFRESH_AFTER_DAYS * 24 * 60 * 60 * 1000;
    } catch (error) {
      if (notFound(error)) return false;
      throw error;
    }
  }

  async put(sha256: string, archive: string, bytes: number, progress: (sent: number) => void): Promise<void> {
    if (bytes > MAX_SOURCE_BYTES) {
      throw new InvalidInputError([{ path: this.where, message: `expected each local source to pack into at most 5 GiB for one upload, got ${bytes} bytes (sha256:${sha256.slice(0, 12)}): put large data in S3 and mount it` }]);
    }
    const body = createReadStream(archive);
    let sent = 0;
    body.on('data', (chunk) => {
      sent += chunk.length;
      progress(sent);
    });
    await this.s3.send(
      new PutObjectCommand({
        Bucket: this.location.bucket,
        Key: this.key(sha256),
        Body: body,
        ContentLength: bytes,
        ContentType: 'application/gzip',
        // S3 checks the bytes against the name: a corrupted upload is refused, not stored.
        ChecksumSHA256: Buffer.from(sha256, 'hex').toString('base64'),
      }),
    );
  }
}

/** A client for the stack's region, with the caller's credentials (the default chain). */
export function s3Client(location: SourcesLocation): S3Client {
  return new S3Client({ region: location.region });
}

/**
 * Creates each bucket a task's MOUNT names that does not exist yet, in the stack's region,
 * tagged as relaunch's, and returns the ones it created. A bucket that exists but this
 * account may not use is refused.
 *
 * @throws InvalidInputError naming the field of a bucket that cannot be used.
 */
export async function ensureBuckets(job: ParsedJob, s3: S3Client, location: SourcesLocation, io: Io): Promise<string[]> {
  const { region } = location;
  const data = { bucket: location.bucket, allowedBuckets: location.allowedBuckets };
  const seen = new Set<string>();
  const created: string[] = [];
  for (const [index, { spec }] of job.tasks.entries()) {
    for (const mount of spec.fileMounts ?? []) {
      if (mount.source.kind !== 'bucket' || mount.source.name === null || seen.has(mount.source.name)) continue;
      const bucket = mount.source.name;
      seen.add(bucket);
      const field = mountField(mount.path, 'name');
      const at = job.pipeline === null ? field : taskPath(index, field);
      if (!bucketAllowed(bucket, data)) {
        throw new InvalidInputError([{ path: at, message: notAllowedBucket(bucket, data) }]);
      }
      try {
        await s3.send(new HeadBucketCommand({ Bucket: bucket }));
        continue;
      } catch (error) {
        if (statusOf(error) === 301 || awsErrorCode(error) === 'PermanentRedirect') {
          throw new InvalidInputError([{ path: at, message: `expected a bucket in ${region} (the stack's region, where its instances mount it), but ${bucket} is in another region` }]);
        }
        if (statusOf(error) === 403 || awsErrorCode(error) === 'Forbidden') {
          throw new InvalidInputError([{ path: at, message: `expected a bucket this account may use, but ${bucket} exists and refuses it (403)` }]);
        }
        if (!notFound(error)) throw error;
      }
      try {
        await s3.send(
          new CreateBucketCommand({
            Bucket: bucket,
            ...(region === 'us-east-1' ? {} : { CreateBucketConfiguration: { LocationConstraint: region as BucketLocationConstraint } }),
          }),
        );
      } catch (error) {
        // Made since the HEAD, by another run: it is not this job's to delete.
        if (awsErrorCode(error) === 'BucketAlreadyOwnedByYou') continue;
        if (awsErrorCode(error) === 'BucketAlreadyExists') {
          throw new InvalidInputError([{ path: at, message: `expected a bucket name no other account holds, but ${bucket} is taken (S3 bucket names are global): choose another` }]);
        }
        throw error;
      }
      await s3.send(new PutBucketTaggingCommand({ Bucket: bucket, Tagging: { TagSet: [{ Key: CREATED_BUCKET_TAG, Value: 'relaunch run' }] } }));
      io.err(`created bucket ${bucket} in ${region} for ${at}`);
      created.push(bucket);
    }
  }
  return created;
}

/**
 * Tags the buckets `ensureBuckets` created with the job they were created for, once the
 * submit named it: what lets the job's end delete those its mounts say not to keep.
 */
export async function tagCreatedBuckets(s3: S3Client, buckets: readonly string[], jobId: string): Promise<void> {
  for (const bucket of buckets) {
    await s3.send(
      new PutBucketTaggingCommand({
        Bucket: bucket,
        Tagging: { TagSet: [{ Key: CREATED_BUCKET_TAG, Value: 'relaunch run' }, { Key: CREATED_FOR_JOB_TAG, Value: jobId }] },
      }),
    );
  }
}
