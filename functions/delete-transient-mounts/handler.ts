// Every end of an execution: what the job's mounts said not to keep (`persistent: false`)
// is deleted once the job has ended, the buckets `run` created for it and its folders of
// the stack's bucket. An execution that handed its job to a new one is passed over.

import { executionEndedOf, ExecutionFinishedEventSchema } from '../../lib/aws-events.ts';
import { deleteTransientMounts, type DeletedMount } from '../../lib/usecases/job-buckets.ts';
import { jobBuckets, store } from '../shared/deps.ts';
import { lambdaHandler } from '../shared/invocation.ts';
import { withJob } from '../shared/log.ts';
import { parseEvent } from '../shared/parse.ts';

/** EventBridge delivers at least once: a repeat finds the buckets gone and deletes nothing more. */
export const handler = lambdaHandler(async (event, log): Promise<DeletedMount[]> => {
  const ended = executionEndedOf(parseEvent(ExecutionFinishedEventSchema, event, 'event'));
  withJob(ended);
  const target = jobBuckets();
  if (target === null) return [];
  const deleted = await deleteTransientMounts(ended, { store: store(), buckets: target });
  for (const mount of deleted) {
    log.info('transient mount deleted', {
      action: mount.outcome === 'deleted' ? 'DELETED' : 'KEPT',
      reason:
        mount.bucket === undefined
          ? `the job's folder for its nameless mount at ${mount.folder} (persistent: false)`
          : mount.outcome === 'deleted'
            ? `bucket ${mount.bucket} was created for this job by relaunch run (persistent: false)`
            : mount.outcome === 'gone'
              ? `bucket ${mount.bucket} no longer exists`
              : `bucket ${mount.bucket} was not created for this job; persistent: false deletes only those`,
    });
  }
  return deleted;
});
