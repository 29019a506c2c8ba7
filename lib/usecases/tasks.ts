// Resuming the execution's waiting task when more than one writer may try.

import { StaleAttemptError } from '../errors.ts';
import type { Workflow } from '../ports.ts';
import type { AwaitResult } from '../workflow/contract.ts';

/**
 * Sends the attempt's outcome to the waiting task. Returns false when the task had
 * already ended (the Workflow port's StaleAttemptError): the report, the EC2 event and
 * AwaitAttempt itself race to resume it by design, and only the first one counts.
 */
export async function resumeTask(workflow: Workflow, taskToken: string, result: AwaitResult): Promise<boolean> {
  return settled(() => workflow.resume(taskToken, result));
}

/** Fails the waiting task with an error its Catch matches; false when the task had already ended. */
export async function failTask(workflow: Workflow, taskToken: string, error: string, cause: string): Promise<boolean> {
  return settled(() => workflow.fail(taskToken, error, cause));
}

async function settled(send: () => Promise<void>): Promise<boolean> {
  try {
    await send();
    return true;
  } catch (error) {
    if (error instanceof StaleAttemptError) return false;
    throw error;
  }
}
