import {
  ExecutionAlreadyExists,
  ExecutionDoesNotExist,
  GetExecutionHistoryCommand,
  InvalidToken,
  SendTaskFailureCommand,
  SendTaskHeartbeatCommand,
  SendTaskSuccessCommand,
  SFNClient,
  StartExecutionCommand,
  StopExecutionCommand,
  TaskDoesNotExist,
  TaskTimedOut,
} from '@aws-sdk/client-sfn';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import { executionArnOf, SfnWorkflow } from '../../../../lib/adapters/sfn-workflow.ts';
import { ConfigurationError, StaleAttemptError, UnexpectedCloudResponseError } from '../../../../lib/errors.ts';

const MACHINE = 'arn:aws:states:eu-west-1:123456789012:stateMachine:relaunch-controller';
const sfn = mockClient(SFNClient);
const workflow = () => new SfnWorkflow({ client: new SFNClient({ region: 'eu-west-1' }), stateMachineArn: MACHINE });
const meta = { $metadata: {} };

beforeEach(() => sfn.reset());

describe('SfnWorkflow.start', () => {
  it('starts a named execution with the input as JSON and returns its ARN', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: 'arn:exec', startDate: new Date() });
    const arn = await workflow().start('job-1', { jobId: 'job-1', attempt: 0, attemptsInExecution: 0 });
    expect(arn).toBe('arn:exec');
    expect(sfn).toHaveReceivedCommandWith(StartExecutionCommand, {
      stateMachineArn: MACHINE,
      name: 'job-1',
      input: JSON.stringify({ jobId: 'job-1', attempt: 0, attemptsInExecution: 0 }),
    });
  });

  it('answers the existing execution ARN when the name was already started', async () => {
    sfn.on(StartExecutionCommand).rejects(new ExecutionAlreadyExists({ message: 'exists', ...meta }));
    const arn = await workflow().start('job-1', { jobId: 'job-1', attempt: 0, attemptsInExecution: 0 });
    expect(arn).toBe('arn:aws:states:eu-west-1:123456789012:execution:relaunch-controller:job-1');
  });

  it('lets any other error through', async () => {
    sfn.on(StartExecutionCommand).rejects(new Error('throttled'));
    await expect(workflow().start('job-1', { jobId: 'job-1', attempt: 0, attemptsInExecution: 0 })).rejects.toThrow(
      'throttled',
    );
  });
});

describe('SfnWorkflow task callbacks', () => {
  it('resumes with the output as JSON', async () => {
    sfn.on(SendTaskSuccessCommand).resolves({});
    await workflow().resume('tok', { outcome: 'EXITED' });
    expect(sfn).toHaveReceivedCommandWith(SendTaskSuccessCommand, { taskToken: 'tok', output: '{"outcome":"EXITED"}' });
  });

  it('fails the task with an error name the Catch matches, truncated to the API limits', async () => {
    sfn.on(SendTaskFailureCommand).resolves({});
    await workflow().fail('tok', 'JobCancelled', 'x'.repeat(40_000));
    expect(sfn).toHaveReceivedCommandWith(SendTaskFailureCommand, { taskToken: 'tok', error: 'JobCancelled' });
    const sent = sfn.commandCalls(SendTaskFailureCommand)[0]?.args[0].input;
    expect(sent?.cause).toHaveLength(32_768);
  });

  it('sends heartbeats', async () => {
    sfn.on(SendTaskHeartbeatCommand).resolves({});
    await workflow().heartbeat('tok');
    expect(sfn).toHaveReceivedCommandWith(SendTaskHeartbeatCommand, { taskToken: 'tok' });
  });

  it.each([
    ['TaskTimedOut', new TaskTimedOut({ message: 'timed out', ...meta })],
    ['InvalidToken', new InvalidToken({ message: 'bad token', ...meta })],
    ['TaskDoesNotExist', new TaskDoesNotExist({ message: 'gone', ...meta })],
  ])('turns %s into StaleAttemptError on every callback', async (_name, error) => {
    sfn.on(SendTaskSuccessCommand).rejects(error);
    sfn.on(SendTaskFailureCommand).rejects(error);
    sfn.on(SendTaskHeartbeatCommand).rejects(error);
    await expect(workflow().resume('tok', {})).rejects.toBeInstanceOf(StaleAttemptError);
    await expect(workflow().fail('tok', 'JobCancelled', 'why')).rejects.toBeInstanceOf(StaleAttemptError);
    await expect(workflow().heartbeat('tok')).rejects.toBeInstanceOf(StaleAttemptError);
  });

  it('lets an unexpected callback error through unchanged', async () => {
    sfn.on(SendTaskSuccessCommand).rejects(new Error('network down'));
    await expect(workflow().resume('tok', {})).rejects.toThrow('network down');
  });
});

describe('executionArnOf', () => {
  it('refuses an ARN that is not a state machine', () => {
    expect(() => executionArnOf('arn:aws:lambda:x', 'n')).toThrow(ConfigurationError);
    expect(() => executionArnOf('arn:aws:lambda:x', 'n')).toThrow('expected a state machine ARN (arn:…:stateMachine:NAME), got arn:aws:lambda:x');
  });

  it('reports a StartExecution answer without an ARN as a named error Step Functions can match', async () => {
    sfn.on(StartExecutionCommand).resolves({});
    await expect(workflow().start('job-1', { jobId: 'job-1', attempt: 0, attemptsInExecution: 0 })).rejects.toBeInstanceOf(UnexpectedCloudResponseError);
  });
});

describe('SfnWorkflow.stopBetweenSteps', () => {
  const EXECUTION = 'arn:aws:states:eu-west-1:123456789012:execution:relaunch-controller:job-1';
  const newest = (type: string) => ({ events: [{ type: type as never, id: 12, timestamp: new Date() }] });

  it('stops an execution whose newest event is a Wait entered, with JobCancelled and the cause', async () => {
    sfn.on(GetExecutionHistoryCommand).resolves(newest('WaitStateEntered'));
    sfn.on(StopExecutionCommand).resolves({ stopDate: new Date() });
    expect(await workflow().stopBetweenSteps(EXECUTION, 'cancelled by the user')).toBe(true);
    expect(sfn).toHaveReceivedCommandWith(GetExecutionHistoryCommand, { executionArn: EXECUTION, reverseOrder: true, maxResults: 1 });
    expect(sfn).toHaveReceivedCommandWith(StopExecutionCommand, { executionArn: EXECUTION, error: 'JobCancelled', cause: 'cancelled by the user' });
  });

  it.each(['TaskStateEntered', 'LambdaFunctionStarted', 'WaitStateExited', 'TaskSubmitted', 'ExecutionSucceeded'])(
    'leaves an execution whose newest event is %s running',
    async (type) => {
      sfn.on(GetExecutionHistoryCommand).resolves(newest(type));
      expect(await workflow().stopBetweenSteps(EXECUTION, 'cancelled by the user')).toBe(false);
      expect(sfn).not.toHaveReceivedCommand(StopExecutionCommand);
    },
  );

  it('answers false for an execution with no history, or one that does not exist', async () => {
    sfn.on(GetExecutionHistoryCommand).resolvesOnce({}).rejects(new ExecutionDoesNotExist({ message: 'gone', ...meta }));
    expect(await workflow().stopBetweenSteps(EXECUTION, 'c')).toBe(false);
    expect(await workflow().stopBetweenSteps(EXECUTION, 'c')).toBe(false);
    expect(sfn).not.toHaveReceivedCommand(StopExecutionCommand);
  });

  it('answers false when the execution ended between the read and the stop', async () => {
    sfn.on(GetExecutionHistoryCommand).resolves(newest('WaitStateEntered'));
    sfn.on(StopExecutionCommand).rejects(new ExecutionDoesNotExist({ message: 'gone', ...meta }));
    expect(await workflow().stopBetweenSteps(EXECUTION, 'c')).toBe(false);
  });

  it('lets any other error through, and cuts a long cause to Step Functions\' 32,768 characters', async () => {
    sfn.on(GetExecutionHistoryCommand).rejectsOnce(new Error('throttled')).resolves(newest('WaitStateEntered'));
    sfn.on(StopExecutionCommand).resolves({ stopDate: new Date() });
    await expect(workflow().stopBetweenSteps(EXECUTION, 'c')).rejects.toThrow('throttled');
    await workflow().stopBetweenSteps(EXECUTION, 'x'.repeat(40_000));
    expect(sfn.commandCalls(StopExecutionCommand)[0]?.args[0].input.cause).toHaveLength(32_768);
  });
});
