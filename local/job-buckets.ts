// Buckets as the local runtime has them (folders of the data folder), deleted at a job's
// end when its mounts say not to keep them and `run` created them for it (cli/local-buckets.ts
// marks them): what S3 and its tags are on AWS.

import { existsSync } from 'node:fs';
import { readFile, rm, rmdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { BucketDeletion, JobBuckets } from '../lib/ports.ts';
import { bucketNameProblem } from '../lib/task-file/mounts.ts';
import { jobMountsDir, localJobFolder } from './mounts.ts';
import { bucketDir, createdBucketMark } from './paths.ts';

/** JobBuckets on the data folder. */
export class LocalJobBuckets implements JobBuckets {
  readonly #dataDir: string;

  constructor(dataDir: string) {
    this.#dataDir = dataDir;
  }

  async deleteCreatedBucket(name: string, jobId: string): Promise<BucketDeletion> {
    if (bucketNameProblem(name) !== undefined) return 'kept';
    const dir = bucketDir(this.#dataDir, name);
    if (!existsSync(dir)) return 'gone';
    const markFile = createdBucketMark(this.#dataDir, name);
    const createdFor = await readFile(markFile, 'utf8').catch(() => null);
    if (createdFor !== jobId) return 'kept';
    await rm(dir, { recursive: true, force: true });
    await rm(markFile, { force: true });
    return 'deleted';
  }

  async deleteJobFolder(jobId: string, path: string): Promise<void> {
    const folder = localJobFolder(this.#dataDir, jobId, path);
    await rm(folder, { recursive: true, force: true });
    // As on S3, where a prefix is gone once nothing is under it: the job's folders that
    // held only this mount go too, up to the job's own.
    const jobRoot = jobMountsDir(this.#dataDir, jobId);
    for (let dir = dirname(folder); dir === jobRoot || dir.startsWith(`${jobRoot}/`); dir = dirname(dir)) {
      const removed = await rmdir(dir).then(
        () => true,
        () => false,
      );
      if (!removed) break;
    }
  }
}
