// The jobs' notifier (SNS), apart from deps.ts as data-access.ts is: notify.ts imports it only
// dynamically, with a function's first announcement, so no function carries the SNS client
// into its cold start. (esbuild keeps the chunk of every import() in a bundle, even one in a
// function no handler calls, so that import cannot sit in deps.ts, which every Lambda loads.)

import { SNSClient } from '@aws-sdk/client-sns';
import { SnsJobNotifier } from '../../lib/adapters/sns-job-notifier.ts';
import type { JobNotifier } from '../../lib/ports.ts';
import { traced } from './tracing.ts';

let cached: JobNotifier | undefined;

/** Publishes to `topicArn` (JOB_NOTIFICATIONS_TOPIC_ARN), built on first use and then reused across warm invocations. */
export function jobNotifier(topicArn: string): JobNotifier {
  if (cached?.destination !== topicArn) cached = new SnsJobNotifier({ client: traced(new SNSClient({})), topicArn });
  return cached;
}

/** Forgets the notifier and its client, so a test's environment applies to the next one. */
export function resetJobNotifier(): void {
  cached = undefined;
}
