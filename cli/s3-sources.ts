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
import { archiveName } from '../lib/spec/mounts.ts';
import type { ParsedJob } from '../lib/spec/parse.ts';
import { taskPath } from '../lib/spec/path.ts';
import type { Io } from './exit.ts';
import type { SourceStore } from './sources.ts';

/** The most one PutObject takes: a larger source is refused before anything is sent. */
export const MAX_SOURCE_BYTES = 5 * 1024 ** 3;

/** The tag relaunch puts on a bucket it creates, so an account can find them. */
export const CREATED_BUCKET_TAG = 'relaunch:created-by';

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

  async has(sha256: string): Promise<boolean> {
    try {
      await this.s3.send(new HeadObjectCommand({ Bucket: this.location.bucket, Key: this.key(sha256) }));
      return true;
    } catch (error) {
      if (notFound(error)) return false;
      throw error;
    }
  }

  async put(sha256: string, archive: string, bytes: number, progress: (sent: number) => void): Promise<void> {
    if (bytes > MAX_SOURCE_BYTES) {
      throw new InvalidInputError([{ path: 'file_mounts', message: `expected each local source to pack into at most 5 GiB, got ${bytes} bytes: put large data in S3 and mount it` }]);
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
 * tagged as relaunch's. A bucket that exists but this account may not use is refused.
 *
 * @throws InvalidInputError naming the field of a bucket that cannot be used.
 */
export async function ensureBuckets(job: ParsedJob, s3: S3Client, region: string, io: Io): Promise<void> {
  const seen = new Set<string>();
  for (const [index, { spec }] of job.tasks.entries()) {
    for (const mount of spec.fileMounts ?? []) {
      if (mount.source.kind !== 'bucket' || mount.source.name === null || seen.has(mount.source.name)) continue;
      const bucket = mount.source.name;
      seen.add(bucket);
      const field = `file_mounts["${mount.path}"].name`;
      const at = job.pipeline === null ? field : taskPath(index, field);
      try {
        await s3.send(new HeadBucketCommand({ Bucket: bucket }));
        continue;
      } catch (error) {
        if (statusOf(error) === 403 || awsErrorCode(error) === 'Forbidden') {
          throw new InvalidInputError([{ path: at, message: `expected a bucket this account may use, but ${bucket} exists and refuses it (403)` }]);
        }
        if (!notFound(error)) throw error;
      }
      await s3.send(
        new CreateBucketCommand({
          Bucket: bucket,
          ...(region === 'us-east-1' ? {} : { CreateBucketConfiguration: { LocationConstraint: region as BucketLocationConstraint } }),
        }),
      );
      await s3.send(new PutBucketTaggingCommand({ Bucket: bucket, Tagging: { TagSet: [{ Key: CREATED_BUCKET_TAG, Value: 'relaunch run' }] } }));
      io.err(`created bucket ${bucket} in ${region} for ${at}`);
    }
  }
}
