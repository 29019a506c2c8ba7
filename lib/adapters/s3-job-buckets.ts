// S3JobBuckets: a job's `persistent: false` mounts deleted on S3 when it ends. A named
// bucket goes only when its tags say relaunch created it for this job; a nameless mount's
// folder is the job's own prefix of the stack's bucket.

import {
  DeleteBucketCommand,
  DeleteObjectsCommand,
  GetBucketTaggingCommand,
  ListObjectVersionsCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import type { BucketDeletion, JobBuckets } from '../ports.ts';
import { awsErrorCode, sendAws } from './aws-errors.ts';
import { s3JobFolder } from './s3-data.ts';
import type { DataConfig } from '../workflow/resources.ts';

/** The tag `run` puts on a bucket it creates, so an account can find them. */
export const CREATED_BUCKET_TAG = 'relaunch:created-by';
/** The tag naming the job a bucket was created for, set once the submit answered. */
export const CREATED_FOR_JOB_TAG = 'relaunch:job';

/** What an S3JobBuckets needs: a client in the stack's region (where `run` creates buckets) and the stack's data settings. */
export interface S3JobBucketsOptions {
  readonly s3: S3Client;
  readonly data: DataConfig;
}

/** JobBuckets on S3. */
export class S3JobBuckets implements JobBuckets {
  readonly #s3: S3Client;
  readonly #data: DataConfig;

  constructor(options: S3JobBucketsOptions) {
    this.#s3 = options.s3;
    this.#data = options.data;
  }

  async deleteCreatedBucket(name: string, jobId: string): Promise<BucketDeletion> {
    let tags;
    try {
      tags = await sendAws('S3 GetBucketTagging', () => this.#s3.send(new GetBucketTaggingCommand({ Bucket: name })));
    } catch (error) {
      if (awsErrorCode(error) === 'NoSuchBucket') return 'gone';
      if (awsErrorCode(error) === 'NoSuchTagSet') return 'kept';
      throw error;
    }
    if (!(tags.TagSet ?? []).some((tag) => tag.Key === CREATED_FOR_JOB_TAG && tag.Value === jobId)) return 'kept';
    await this.#empty(name, '');
    try {
      await sendAws('S3 DeleteBucket', () => this.#s3.send(new DeleteBucketCommand({ Bucket: name })));
    } catch (error) {
      if (awsErrorCode(error) === 'NoSuchBucket') return 'gone';
      throw error;
    }
    return 'deleted';
  }

  async deleteJobFolder(jobId: string, path: string): Promise<void> {
    const folder = s3JobFolder(this.#data, jobId, path);
    await this.#empty(folder.bucket, `${folder.prefix}/`);
  }

  /**
   * Deletes every object version and delete marker under `prefix`, a page (up to 1,000)
   * at a time; listing from the start each round, since what was deleted is gone.
   */
  async #empty(bucket: string, prefix: string): Promise<void> {
    for (;;) {
      const page = await sendAws('S3 ListObjectVersions', () =>
        this.#s3.send(new ListObjectVersionsCommand({ Bucket: bucket, ...(prefix === '' ? {} : { Prefix: prefix }) })),
      );
      const objects = [...(page.Versions ?? []), ...(page.DeleteMarkers ?? [])].flatMap((version) =>
        version.Key === undefined ? [] : [{ Key: version.Key, ...(version.VersionId === undefined ? {} : { VersionId: version.VersionId }) }],
      );
      if (objects.length === 0) return;
      const result = await sendAws('S3 DeleteObjects', () => this.#s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: objects, Quiet: true } })));
      const failed = result.Errors ?? [];
      if (failed.length > 0) {
        throw new Error(`S3 refused to delete ${failed.length} object(s) of ${bucket}, the first ${failed[0]?.Key ?? '?'}: ${failed[0]?.Code ?? '?'} ${failed[0]?.Message ?? ''}`.trim());
      }
    }
  }
}
