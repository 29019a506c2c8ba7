// Publishes a job's end to SNS. Imported only by notify.ts, and only dynamically, so no
// function carries the SNS client into its cold start.

import { PublishCommand, SNSClient } from '@aws-sdk/client-sns';
import type { JobEndedNotice } from './notify.ts';
import { traced } from './tracing.ts';

/** SNS refuses a subject over 100 characters. */
const MAX_SUBJECT_CHARS = 100;

let client: SNSClient | undefined;

/**
 * One message per notice: the notice as JSON, a subject a mail reader shows, and the status
 * as a message attribute, so a subscription's filter policy can take failures only.
 */
export async function publishJobEnded(topicArn: string, notice: JobEndedNotice): Promise<void> {
  client ??= traced(new SNSClient({}));
  await client.send(
    new PublishCommand({
      TopicArn: topicArn,
      Subject: `relaunch job ${notice.jobId} ${notice.status}`.slice(0, MAX_SUBJECT_CHARS),
      Message: JSON.stringify(notice),
      MessageAttributes: {
        status: { DataType: 'String', StringValue: notice.status },
        jobId: { DataType: 'String', StringValue: notice.jobId },
      },
    }),
  );
}

/** Forgets the client, so a test's environment applies to the next one. */
export function resetPublisher(): void {
  client = undefined;
}
