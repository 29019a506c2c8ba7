// The Workflow port over Step Functions: start the controller, resume or fail its waiting task.
// Throttling or a 5xx that outlived the SDK's retries is a TransientError, as in every adapter.

import {
  ExecutionAlreadyExists,
  ExecutionDoesNotExist,
  GetExecutionHistoryCommand,
  InvalidToken,
  SendTaskFailureCommand,
  SendTaskHeartbeatCommand,
  SendTaskSuccessCommand,
  StartExecutionCommand,
  StopExecutionCommand,
  TaskDoesNotExist,
  TaskTimedOut,
  type SFNClient,
} from '@aws-sdk/client-sfn';
import { ConfigurationError, StaleAttemptError, UnexpectedCloudResponseError } from '../errors.ts';
import type { Workflow } from '../ports.ts';
import { sendAws } from './aws-errors.ts';
import { WorkflowError, type ExecutionInput } from '../workflow/contract.ts';

/** What SfnWorkflow needs: its client and the controller's state machine. */
export interface SfnWorkflowOptions {
  readonly client: SFNClient;
  readonly stateMachineArn: string;
}

/** Step Functions caps `error` at 256 characters and `cause` at 32,768. */
const MAX_ERROR = 256;
const MAX_CAUSE = 32_768;

/**
 * Step Functions as the Workflow port. Starting is idempotent by execution name, and a
 * token whose task has ended (timed out, already resumed, execution gone) is a
 * StaleAttemptError: the attempt it belonged to is no longer the live one.
 */
export class SfnWorkflow implements Workflow {
  private readonly client: SFNClient;
  private readonly stateMachineArn: string;

  constructor(options: SfnWorkflowOptions) {
    this.client = options.client;
    this.stateMachineArn = options.stateMachineArn;
  }

  async start(executionName: string, input: ExecutionInput): Promise<string> {
    try {
      const out = await sendAws('Step Functions StartExecution', () =>
        this.client.send(
          new StartExecutionCommand({ stateMachineArn: this.stateMachineArn, name: executionName, input: JSON.stringify(input) }),
        ),
      );
      if (out.executionArn === undefined) throw new UnexpectedCloudResponseError('StartExecution answered without an executionArn');
      return out.executionArn;
    } catch (error) {
      // The name is taken: this job's execution was started before (a retried request).
      if (error instanceof ExecutionAlreadyExists) return executionArnOf(this.stateMachineArn, executionName);
      throw error;
    }
  }

  async resume(taskToken: string, output: unknown): Promise<void> {
    await staleOnEndedTask('Step Functions SendTaskSuccess', () =>
      this.client.send(new SendTaskSuccessCommand({ taskToken, output: JSON.stringify(output) })),
    );
  }

  async fail(taskToken: string, error: string, cause: string): Promise<void> {
    await staleOnEndedTask('Step Functions SendTaskFailure', () =>
      this.client.send(
        new SendTaskFailureCommand({ taskToken, error: error.slice(0, MAX_ERROR), cause: cause.slice(0, MAX_CAUSE) }),
      ),
    );
  }

  async heartbeat(taskToken: string): Promise<void> {
    await staleOnEndedTask('Step Functions SendTaskHeartbeat', () => this.client.send(new SendTaskHeartbeatCommand({ taskToken })));
  }

  /**
   * Stops the execution if it is in a Wait state (a backoff, a wait for capacity), the one
   * place no step of it is running; elsewhere it is left to reach the job's CANCELLING at
   * its next step. Its newest history event says where it is.
   *
   * Called after the job was marked CANCELLING, so the race is safe: a Wait that ends
   * between the read and the stop leads into a LaunchAttempt that sees CANCELLING and
   * launches nothing. The execution's end (ABORTED) reaches the janitor's rule, which
   * finishes the job. false when it was not in a Wait, or has ended.
   */
  async stopBetweenSteps(executionArn: string, cause: string): Promise<boolean> {
    try {
      const history = await sendAws('Step Functions GetExecutionHistory', () =>
        this.client.send(new GetExecutionHistoryCommand({ executionArn, reverseOrder: true, maxResults: 1 })),
      );
      if (history.events?.[0]?.type !== 'WaitStateEntered') return false;
      await sendAws('Step Functions StopExecution', () =>
        this.client.send(new StopExecutionCommand({ executionArn, error: WorkflowError.JobCancelled, cause: cause.slice(0, MAX_CAUSE) })),
      );
      return true;
    } catch (error) {
      if (error instanceof ExecutionDoesNotExist) return false;
      throw error;
    }
  }
}

/** `arn:…:stateMachine:NAME` → `arn:…:execution:NAME:EXECUTION`, as Step Functions names it. */
export function executionArnOf(stateMachineArn: string, executionName: string): string {
  const marker = ':stateMachine:';
  const at = stateMachineArn.indexOf(marker);
  if (at < 0) throw new ConfigurationError(`expected a state machine ARN (arn:…:stateMachine:NAME), got ${stateMachineArn}`);
  return `${stateMachineArn.slice(0, at)}:execution:${stateMachineArn.slice(at + marker.length)}:${executionName}`;
}

async function staleOnEndedTask(call: string, send: () => Promise<unknown>): Promise<void> {
  try {
    await sendAws(call, send);
  } catch (error) {
    if (error instanceof TaskTimedOut || error instanceof InvalidToken || error instanceof TaskDoesNotExist) {
      throw new StaleAttemptError(`the task this token belonged to has ended (${error.name})`, { cause: error });
    }
    throw error;
  }
}
