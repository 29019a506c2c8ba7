// The dead-letter queues of relaunch's event deliveries: one shape for all of them.

import { Duration, Validations } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';

/**
 * A queue for events a delivery gave up on: kept 14 days (SQS's longest), encrypted,
 * reachable over TLS only. The janitor replays what most of them hold every 10 minutes;
 * `whatHappens` says otherwise for one it does not.
 */
export function deadLetterQueue(
  scope: Construct,
  id: string,
  queueName?: string,
  whatHappens = 'what it holds is replayed by the janitor',
): sqs.Queue {
  const queue = new sqs.Queue(scope, id, {
    ...(queueName === undefined ? {} : { queueName }),
    retentionPeriod: Duration.days(14),
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
  });
  const reason = `This queue is itself a dead-letter queue: ${whatHappens}, never redriven further.`;
  Validations.of(queue).acknowledge({ id: 'AwsSolutions-SQS3', reason });
  Validations.of(queue).acknowledge({ id: 'Serverless-SQSRedrivePolicy', reason });
  return queue;
}

/**
 * The name of a failover region's queue for EC2 events its forwarder could not deliver
 * home. Named, so the home stack can reach it without a cross-region reference.
 */
export function forwardedDeadLetterQueueName(namePrefix: string): string {
  return `${namePrefix}-forwarded-ec2-events-undelivered`;
}
