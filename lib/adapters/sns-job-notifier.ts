// JobNotifier over SNS: a job's end published to the deployment's topic, one message per
// end, which a subscription's filter policy can narrow by status.

import { PublishCommand, type SNSClient } from '@aws-sdk/client-sns';
import type { JobEnded, JobNotifier } from '../ports.ts';

/** SNS refuses a subject over 100 characters. */
const MAX_SUBJECT_CHARS = 100;

/** What SnsJobNotifier publishes through, and to. */
export interface SnsJobNotifierOptions {
  readonly client: SNSClient;
  readonly topicArn: string;
}

/**
 * Publishes each end as one message: the end as JSON, a subject a mail reader shows, and
 * the status and job id as message attributes, so a subscription's filter policy can take
 * failures only. SNS's errors are thrown as the SDK gives them.
 */
export class SnsJobNotifier implements JobNotifier {
  readonly destination: string;

  constructor(private readonly options: SnsJobNotifierOptions) {
    this.destination = options.topicArn;
  }

  async jobEnded(ended: JobEnded): Promise<void> {
    await this.options.client.send(
      new PublishCommand({
        TopicArn: this.options.topicArn,
        Subject: `relaunch job ${ended.jobId} ${ended.status}`.slice(0, MAX_SUBJECT_CHARS),
        Message: JSON.stringify(ended),
        MessageAttributes: {
          status: { DataType: 'String', StringValue: ended.status },
          jobId: { DataType: 'String', StringValue: ended.jobId },
        },
      }),
    );
  }
}
