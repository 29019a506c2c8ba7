// The optional notification of a job's end: its id, terminal status and reason, published to
// the SNS topic in JOB_NOTIFICATIONS_TOPIC_ARN. Unset, nothing is published and the SNS client
// is never loaded: it sits in a chunk of its own that the first notification imports.

import { logger } from './log.ts';
import type { JobEnded } from '../../lib/usecases/deps.ts';
import { recordJobEnded, recordNotificationFailure } from './metrics.ts';
import { JOB_NOTIFICATIONS_TOPIC_ENV } from './operations-contract.ts';

/** A job that reached a terminal status, as the notification carries it. */
export interface JobEndedNotice {
  readonly jobId: string;
  readonly status: string;
  readonly reason: string;
  /** The attempt that ended it; absent when the job never launched one. */
  readonly attempt?: number;
}

/** Counts a job's end (the metric the FAILED_CONTROLLER alarm reads) and notifies it. */
export async function announceJobEnded(ended: JobEnded & Pick<JobEndedNotice, 'attempt'>): Promise<void> {
  recordJobEnded(ended.jobId, ended.status);
  await notifyJobEnded(ended);
}

/**
 * Publishes `notice` when a topic is configured. At least once, not exactly once: a step
 * the state machine retries after it published publishes again.
 *
 * A failure to publish is logged with the job's id and counted (NotificationFailures, which
 * an alarm watches), and not thrown: the job has ended whatever SNS says, and failing the
 * step would send a finished job down the controller's catch-all to FAILED_CONTROLLER.
 */
export async function notifyJobEnded(notice: JobEndedNotice): Promise<void> {
  const topicArn = process.env[JOB_NOTIFICATIONS_TOPIC_ENV];
  if (topicArn === undefined || topicArn === '') return;
  try {
    const { publishJobEnded } = await import('./sns-publisher.ts');
    await publishJobEnded(topicArn, notice);
    logger().info('job end notified', { status: notice.status, topicArn });
  } catch (error) {
    logger().error('job end notification failed', { status: notice.status, topicArn, error: error as Error });
    recordNotificationFailure(notice.jobId);
  }
}
