// AwaitAttempt: store the task token on the attempt; a report, an EC2 event or a cancel resumes it.

import { awaitAttempt } from '../../lib/usecases/await-attempt.ts';
import { AwaitPayloadSchema } from '../../lib/workflow/contract.ts';
import { store, workflow } from '../shared/deps.ts';
import { startInvocation, type LambdaContext } from '../shared/log.ts';
import { parseEvent } from '../shared/parse.ts';

/** Invoked by `.waitForTaskToken`: its own answer is ignored, the task waits for the token. */
export async function handler(event: unknown, context?: LambdaContext): Promise<void> {
  const log = startInvocation(context);
  const payload = parseEvent(AwaitPayloadSchema, event, 'payload');
  await awaitAttempt(payload, { store: store(), workflow: workflow() });
  log.info('attempt awaited', {
    jobId: payload.jobId,
    attempt: payload.attempt,
    action: 'AWAIT',
    reason: 'task token stored on the attempt',
  });
}
