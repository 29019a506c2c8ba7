// The dead-letter queues of relaunch's event deliveries: one shape for all of them.

import { Duration } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';

/**
 * A queue for events a delivery gave up on: kept 14 days (SQS's longest), encrypted,
 * reachable over TLS only. The janitor replays what it holds every 10 minutes.
 */
export function deadLetterQueue(scope: Construct, id: string): sqs.Queue {
  return new sqs.Queue(scope, id, {
    retentionPeriod: Duration.days(14),
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
  });
}
