// `relaunch run` on the local runtime: the folder of each bucket a task names is created
// when missing and marked with the job it was created for (the submit names it), as `run`
// tags the buckets it creates on S3. The job's end deletes the marked ones its mounts say
// not to keep (local/job-buckets.ts).

import { mkdir, rm, rmdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { bucketNameProblem, mountField } from '../lib/task-file/mounts.ts';
import type { ParsedJob } from '../lib/task-file/parse.ts';
import { taskPath } from '../lib/located-yaml/path.ts';
import { bucketDir, createdBucketMark } from '../local/paths.ts';
import type { Io } from './exit.ts';

/** What `run` marks a created bucket with before the submit has named its job. */
const UNCLAIMED = '';

/**
 * Creates the folder of each bucket a task names that has none yet, marked as created by
 * `run`; returns their names. A name S3 would refuse is left to the submit to refuse.
 */
export async function ensureLocalBuckets(job: ParsedJob, dataDir: string, io: Pick<Io, 'err'>): Promise<string[]> {
  const created: string[] = [];
  for (const [index, { spec }] of job.tasks.entries()) {
    for (const mount of spec.fileMounts ?? []) {
      if (mount.source.kind !== 'bucket' || mount.source.name === null) continue;
      const name = mount.source.name;
      const dir = bucketDir(dataDir, name);
      if (created.includes(name) || bucketNameProblem(name) !== undefined) continue;
      await mkdir(dirname(dir), { recursive: true });
      // Not recursive: a folder another run made first is not this job's to delete.
      const made = await mkdir(dir).then(
        () => true,
        (error: NodeJS.ErrnoException) => {
          if (error.code === 'EEXIST') return false;
          throw error;
        },
      );
      if (!made) continue;
      await mark(dataDir, name, UNCLAIMED);
      created.push(name);
      const field = mountField(mount.path, 'name');
      io.err(`created bucket folder ${name} (${dir}) for ${job.pipeline === null ? field : taskPath(index, field)}`);
    }
  }
  return created;
}

/** Marks the buckets `ensureLocalBuckets` created with the job they were created for. */
export async function markCreatedBuckets(dataDir: string, buckets: readonly string[], jobId: string): Promise<void> {
  for (const name of buckets) await mark(dataDir, name, jobId);
}

/**
 * Takes back the bucket folders `ensureLocalBuckets` created for a submit that was refused:
 * each folder (still empty: no job had it) and its mark.
 */
export async function removeCreatedBuckets(dataDir: string, buckets: readonly string[]): Promise<void> {
  for (const name of buckets) {
    await rmdir(bucketDir(dataDir, name));
    await rm(createdBucketMark(dataDir, name), { force: true });
  }
}

async function mark(dataDir: string, name: string, jobId: string): Promise<void> {
  const file = createdBucketMark(dataDir, name);
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, jobId);
}
