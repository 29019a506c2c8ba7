// At a job's end, what it asked not to keep (`persistent: false`) is deleted: the buckets
// relaunch created for it, and its folders of relaunch's own bucket. Run for every end of
// an execution (EventBridge on AWS, the local runtime's janitor locally).

import { JobNotFoundError } from '../errors.ts';
import type { BucketDeletion, JobBuckets } from '../ports.ts';
import { transientMounts } from '../task-file/mounts.ts';
import type { ExecutionEnded } from './execution-ended.ts';
import type { UseCaseDeps } from './deps.ts';

/** One deletion, for the log: the bucket or the mount path, and what came of it. */
export interface DeletedMount {
  readonly bucket?: string;
  readonly folder?: string;
  readonly outcome: BucketDeletion;
}

/**
 * Deletes the job's `persistent: false` buckets and folders when its execution ended:
 * nothing for an unknown job or a job another execution now controls (continued as
 * new: the job goes on). Any end of the controlling execution is the job's end: a Succeed
 * or Fail state ended it, or the janitor (onExecutionEnded) is ending it. A bucket is
 * deleted only when relaunch created it for this job; any other is kept.
 */
export async function deleteTransientMounts(
  event: Pick<ExecutionEnded, 'jobId' | 'executionArn'>,
  deps: Pick<UseCaseDeps, 'store'> & { readonly buckets: JobBuckets },
): Promise<DeletedMount[]> {
  let job;
  try {
    job = await deps.store.getJob(event.jobId);
  } catch (error) {
    if (error instanceof JobNotFoundError) return [];
    throw error;
  }
  if (job.executionArn !== event.executionArn) return [];
  const { buckets, folders } = transientMounts(job.pipeline?.tasks ?? [job.spec]);
  const deleted: DeletedMount[] = [];
  for (const folder of folders) {
    await deps.buckets.deleteJobFolder(job.jobId, folder);
    deleted.push({ folder, outcome: 'deleted' });
  }
  for (const bucket of buckets) deleted.push({ bucket, outcome: await deps.buckets.deleteCreatedBucket(bucket, job.jobId) });
  return deleted;
}
