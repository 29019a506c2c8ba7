// AwaitAttempt: store the task token on the attempt; a report, an EC2 event or a cancel resumes it.

import { awaitAttempt } from '../../lib/usecases/await-attempt.ts';
import { AwaitPayloadSchema } from '../../lib/workflow/contract.ts';
import { store, workflow } from '../shared/deps.ts';
import { lambdaHandler } from '../shared/invocation.ts';
import { withJob } from '../shared/log.ts';
import { parseEvent } from '../shared/parse.ts';

/** Invoked by `.waitForTaskToken`: its own answer is ignored, the task waits for the token. */
export const handler = lambdaHandler(async (event, log): Promise<void> => {
  const payload = parseEvent(AwaitPayloadSchema, event, 'payload');
  withJob(payload);
  await awaitAttempt(payload, { store: store(), workflow: workflow() });
  log.info('attempt awaited', { action: 'AWAIT', reason: 'task token stored on the attempt' });
});
