// The state machine's Lambdas (those that need no EC2): each parses its state, calls its use
// case against DynamoDB (dynalite), and answers the state the next step reads.

import { SendTaskFailureCommand, SendTaskSuccessCommand, StartExecutionCommand } from '@aws-sdk/client-sfn';
import 'aws-sdk-client-mock-vitest/extend';
import { describe, expect, it } from 'vitest';
import { handler as awaitAttempt } from '../../../functions/await-attempt/handler.ts';
import { handler as continueAsNew } from '../../../functions/continue-as-new/handler.ts';
import { handler as evaluatePolicy } from '../../../functions/evaluate-policy/handler.ts';
import { JobStatus } from '../../../lib/status.ts';
import { WorkflowError, type WorkflowState } from '../../../lib/workflow/contract.ts';
import { givenAttempt, givenJob, sfn, STATE_MACHINE_ARN, useWorld } from '../../support/functions-world.ts';

const world = useWorld();
const at = () => new Date().toISOString();
const state = (attempt: number, extra: Partial<WorkflowState> = {}): WorkflowState => ({
  jobId: 'j-1',
  attempt,
  attemptsInExecution: attempt,
  launched: true,
  ...extra,
});

async function exited(exitCode: number): Promise<void> {
  await givenJob('j-1', JobStatus.RUNNING);
  await givenAttempt('j-1', 1);
  await world.store().endAttempt('j-1', 1, { kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode }] }, at());
}

describe('evaluate-policy', () => {
  it.each([
    [0, 'SUCCEED', JobStatus.SUCCEEDED],
    [29, 'RESTART', JobStatus.RECOVERING],
    [1, 'RESTART', JobStatus.RECOVERING],
  ])('exit %i: %s, job %s, with a reason', async (code, action, status) => {
    await exited(code);
    const next = await evaluatePolicy(state(1, { awaited: { outcome: 'EXITED' } }));
    expect(next.decision).toMatchObject({ action, status, reason: expect.any(String), continueAsNew: false });
    expect(next.awaited).toBeUndefined();
    expect((await world.store().getJob('j-1')).status).toBe(status);
  });

  it('FAIL once the error budget is spent', async () => {
    await exited(1);
    await evaluatePolicy(state(1));
    await world.store().changeStatus('j-1', { from: JobStatus.RECOVERING, to: JobStatus.STARTING, reason: 't', attempt: 2, at: at() });
    await givenAttempt('j-1', 2);
    await world.store().endAttempt('j-1', 2, { kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 1 }] }, at());
    const next = await evaluatePolicy(state(2));
    expect(next.decision).toMatchObject({ action: 'FAIL', status: JobStatus.FAILED });
    expect((await world.store().getJob('j-1')).failureReason).toBe(next.decision?.reason);
  });

  it('RECOVER after a heartbeat timeout, ending the attempt LOST', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1);
    const next = await evaluatePolicy(state(1, { awaitError: { Error: WorkflowError.HeartbeatTimeout, Cause: '' } }));
    expect(next.decision).toMatchObject({ action: 'RECOVER', status: JobStatus.RECOVERING });
    expect((await world.store().getAttempt('j-1', 1)).outcome).toMatchObject({ kind: 'LOST' });
  });

  it('refuses a state that is not the contract, naming the field', async () => {
    await expect(evaluatePolicy({ jobId: 'j-1' })).rejects.toMatchObject({
      name: 'InvalidInputError',
      issues: expect.arrayContaining([expect.objectContaining({ path: 'state.attempt' })]),
    });
  });
});

describe('await-attempt', () => {
  it('stores the token and waits when the attempt is still running', async () => {
    await givenJob('j-1', JobStatus.STARTING);
    await givenAttempt('j-1', 1);
    await awaitAttempt({ jobId: 'j-1', attempt: 1, taskToken: 'token-1' });
    expect((await world.store().getAttempt('j-1', 1)).taskToken).toBe('token-1');
    expect(sfn).not.toHaveReceivedCommand(SendTaskSuccessCommand);
  });

  it('resumes at once when a report ended the attempt before the token was stored', async () => {
    sfn.on(SendTaskSuccessCommand).resolves({});
    await exited(0);
    await awaitAttempt({ jobId: 'j-1', attempt: 1, taskToken: 'token-1' });
    expect(sfn).toHaveReceivedCommandWith(SendTaskSuccessCommand, { taskToken: 'token-1', output: '{"outcome":"EXITED"}' });
  });

  it('fails the task with JobCancelled when the job is being cancelled', async () => {
    sfn.on(SendTaskFailureCommand).resolves({});
    await givenJob('j-1', JobStatus.STARTING);
    await givenAttempt('j-1', 1);
    await world.store().changeStatus('j-1', { from: JobStatus.STARTING, to: JobStatus.CANCELLING, reason: 't', attempt: 1, at: at() });
    await awaitAttempt({ jobId: 'j-1', attempt: 1, taskToken: 'token-1' });
    expect(sfn).toHaveReceivedCommandWith(SendTaskFailureCommand, { taskToken: 'token-1', error: WorkflowError.JobCancelled });
  });
});

describe('continue-as-new', () => {
  it('starts the continuation by name and records it as the controller', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: 'arn:exec:cont', startDate: new Date() });
    await givenJob('j-1', JobStatus.RECOVERING);
    const input = state(500, { attemptsInExecution: 500 });
    expect(await continueAsNew(input)).toEqual(input);
    expect(sfn).toHaveReceivedCommandWith(StartExecutionCommand, {
      stateMachineArn: STATE_MACHINE_ARN,
      name: 'j-1-a500',
      input: JSON.stringify({ jobId: 'j-1', attempt: 500, attemptsInExecution: 0 }),
    });
    expect((await world.store().getJob('j-1')).executionArn).toBe('arn:exec:cont');
  });
});
