// SnsJobNotifier: one PublishCommand per end, to its topic, with a subject SNS accepts and
// the attributes a subscription filters on; SNS's refusal reaches the caller as it came.

import { PublishCommand, SNSClient } from '@aws-sdk/client-sns';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import { SnsJobNotifier } from '../../../../lib/adapters/sns-job-notifier.ts';
import { JobStatus } from '../../../../lib/status.ts';

const sns = mockClient(SNSClient);
beforeEach(() => sns.reset());

const TOPIC_ARN = 'arn:aws:sns:us-east-1:123456789012:relaunch-jobs';
const notifier = () => new SnsJobNotifier({ client: new SNSClient({ region: 'us-east-1' }), topicArn: TOPIC_ARN });

describe('SnsJobNotifier', () => {
  it('names its topic as where announcements go', () => {
    expect(notifier().destination).toBe(TOPIC_ARN);
  });

  it('publishes the end as JSON, with the status and job id as attributes', async () => {
    sns.on(PublishCommand).resolves({ MessageId: 'm-1' });
    const ended = { jobId: 'j-1', status: JobStatus.FAILED, reason: 'exit code 1; no restarts left', attempt: 2 };
    await notifier().jobEnded(ended);
    expect(sns).toHaveReceivedCommandTimes(PublishCommand, 1);
    expect(sns).toHaveReceivedCommandWith(PublishCommand, {
      TopicArn: TOPIC_ARN,
      Subject: 'relaunch job j-1 FAILED',
      MessageAttributes: {
        status: { DataType: 'String', StringValue: 'FAILED' },
        jobId: { DataType: 'String', StringValue: 'j-1' },
      },
    });
    expect(JSON.parse(sns.commandCalls(PublishCommand)[0]?.args[0].input.Message ?? '{}')).toEqual(ended);
  });

  it('cuts the subject to the 100 characters SNS accepts', async () => {
    sns.on(PublishCommand).resolves({ MessageId: 'm-1' });
    await notifier().jobEnded({ jobId: 'j'.repeat(120), status: JobStatus.SUCCEEDED, reason: 'every node exited 0' });
    const subject = sns.commandCalls(PublishCommand)[0]?.args[0].input.Subject;
    expect(subject).toBe(`relaunch job ${'j'.repeat(120)}`.slice(0, 100));
    expect(subject).toHaveLength(100);
  });

  it("throws SNS's error as it came", async () => {
    sns.on(PublishCommand).rejects(Object.assign(new Error('topic gone'), { name: 'NotFoundException' }));
    await expect(notifier().jobEnded({ jobId: 'j-1', status: JobStatus.CANCELLED, reason: 'cancelled' })).rejects.toMatchObject({ name: 'NotFoundException' });
  });
});
