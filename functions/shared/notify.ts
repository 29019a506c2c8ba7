// A job's end, announced: counted (the metric the FAILED_CONTROLLER alarm reads) and published
// through the jobs' notifier where the deployment has a topic (JOB_NOTIFICATIONS_TOPIC_ARN).
// Without one nothing is published and the SNS client is never loaded: the notifier
// (job-notifier.ts) sits in a chunk of its own that the first notification imports.

import { summaryLine } from '../../lib/accounting/format.ts';
import { accountView } from '../../lib/accounting/view.ts';
import type { JobEnded } from '../../lib/ports.ts';
import { store } from './deps.ts';
import { logger } from './log.ts';
import { recordJobAccount, recordJobEnded, recordNotificationFailure } from './metrics.ts';
import { JOB_NOTIFICATIONS_TOPIC_ENV } from '../../lib/workflow/operations.ts';

/** Counts a job's end (the metric the FAILED_CONTROLLER alarm reads) and notifies it. */
export async function announceJobEnded(ended: JobEnded): Promise<void> {
  recordJobEnded(ended.jobId, ended.status);
  await notifyJobEnded(ended);
}

/**
 * Publishes `ended` when a topic is configured. At least once, not exactly once: a step
 * the state machine retries after it published publishes again.
 *
 * A failure to publish is logged with the job's id and counted (NotificationFailures, which
 * an alarm watches), and not thrown: the job has ended whatever SNS says, and failing the
 * step would send a finished job down the controller's catch-all to FAILED_CONTROLLER.
 */
export async function notifyJobEnded(given: JobEnded): Promise<void> {
  const ended = await withAccount(given);
  const topicArn = process.env[JOB_NOTIFICATIONS_TOPIC_ENV];
  if (topicArn === undefined || topicArn === '') return;
  try {
    const { jobNotifier } = await import('./job-notifier.ts');
    await jobNotifier(topicArn).jobEnded(ended);
    logger().info('job end notified', { status: ended.status, topicArn });
  } catch (error) {
    logger().error('job end notification failed', { status: ended.status, topicArn, error: error as Error });
    recordNotificationFailure(ended.jobId);
  }
}

/**
 * The end with the job's goodput and cost (lib/accounting), which are also recorded as the
 * deployment's JobGoodput and JobCost metrics. Reading the job is the job's end's only
 * extra cost (two reads); a read that fails leaves the end as given, logged, not thrown.
 */
async function withAccount(ended: JobEnded): Promise<JobEnded> {
  try {
    const jobStore = store();
    const account = accountView(await jobStore.getJob(ended.jobId), await jobStore.listAttempts(ended.jobId));
    recordJobAccount(ended.jobId, account.goodput, account.cost.dollars);
    const { dollars, onDemandDollars, estimate } = account.cost;
    return { ...ended, goodput: account.goodput, cost: { dollars, onDemandDollars, estimate }, summary: summaryLine(account) };
  } catch (error) {
    logger().error('job account not worked out', { jobId: ended.jobId, error: error as Error });
    return ended;
  }
}
