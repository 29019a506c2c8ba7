// A Workflow that runs no machine: it records starts and what each task token was sent.

import { StaleAttemptError } from '../../../lib/errors.ts';
import type { Workflow } from '../../../lib/ports.ts';
import type { ExecutionInput } from '../../../lib/workflow/contract.ts';

/** What a task token was closed with. */
export type TaskClosing =
  | { readonly kind: 'resume'; readonly taskToken: string; readonly output: unknown }
  | { readonly kind: 'fail'; readonly taskToken: string; readonly error: string; readonly cause: string };

/**
 * Behaves as Step Functions does where the use cases can tell: starting a name twice
 * starts one execution, and a token already resumed or failed is StaleAttemptError (as
 * SfnWorkflow reports an ended task). `failNextStart` scripts a start that throws.
 */
export class FakeWorkflow implements Workflow {
  readonly starts: { executionName: string; input: ExecutionInput; executionArn: string }[] = [];
  /** Every resume and fail that reached an open task, in order. */
  readonly closings: TaskClosing[] = [];
  /** Calls refused because the task had already ended. */
  readonly refused: { method: 'resume' | 'fail' | 'heartbeat'; taskToken: string }[] = [];
  readonly heartbeats: string[] = [];
  /** Every stopBetweenSteps call, in order. */
  readonly stops: { executionArn: string; cause: string }[] = [];
  /** Whether an execution is in a Wait, so stopBetweenSteps stops it. */
  inAWait = false;
  readonly #startErrors: Error[] = [];

  /** The next start throws this. */
  failNextStart(error: Error): this {
    this.#startErrors.push(error);
    return this;
  }

  async start(executionName: string, input: ExecutionInput): Promise<string> {
    const error = this.#startErrors.shift();
    if (error !== undefined) throw error;
    const executionArn = `arn:aws:states:us-east-1:123456789012:execution:relaunch-controller:${executionName}`;
    if (!this.starts.some((start) => start.executionName === executionName)) {
      this.starts.push({ executionName, input, executionArn });
    }
    return executionArn;
  }

  async resume(taskToken: string, output: unknown): Promise<void> {
    this.#open('resume', taskToken);
    this.closings.push({ kind: 'resume', taskToken, output });
  }

  async fail(taskToken: string, error: string, cause: string): Promise<void> {
    this.#open('fail', taskToken);
    this.closings.push({ kind: 'fail', taskToken, error, cause });
  }

  async heartbeat(taskToken: string): Promise<void> {
    this.#open('heartbeat', taskToken);
    this.heartbeats.push(taskToken);
  }

  async stopBetweenSteps(executionArn: string, cause: string): Promise<boolean> {
    this.stops.push({ executionArn, cause });
    return this.inAWait;
  }

  /** What closed this token, if anything did. */
  closingOf(taskToken: string): TaskClosing | undefined {
    return this.closings.find((closing) => closing.taskToken === taskToken);
  }

  #open(method: 'resume' | 'fail' | 'heartbeat', taskToken: string): void {
    if (this.closingOf(taskToken) !== undefined) {
      this.refused.push({ method, taskToken });
      throw new StaleAttemptError(`the task of token ${taskToken} has ended`);
    }
  }
}
