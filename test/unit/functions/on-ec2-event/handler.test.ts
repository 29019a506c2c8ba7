// functions/on-ec2-event: EventBridge's EC2 events end or mark the owning attempt, once.

import { SendTaskFailureCommand, SendTaskSuccessCommand } from '@aws-sdk/client-sfn';
import 'aws-sdk-client-mock-vitest/extend';
import { describe, expect, it } from 'vitest';
import { EC2_DETAIL_TYPES } from '../../../../lib/aws-events.ts';
import { handler } from '../../../../functions/on-ec2-event/handler.ts';
import { JobStatus } from '../../../../lib/status.ts';
import { WorkflowError } from '../../../../lib/workflow/contract.ts';
import { rebalanceRecommendation } from '../../../support/fixtures/events/shapes.ts';
import { givenAttempt, givenJob, instance, sfn, TASK_YAML, useWorld } from '../../../support/functions-world.ts';

const world = useWorld();

const base = { version: '0', id: 'e-1', source: 'aws.ec2', account: '123456789012', region: 'us-east-1', resources: [] };
const interruption = (id: string, time = '2026-03-01T12:00:00Z') => ({
  ...base,
  'detail-type': EC2_DETAIL_TYPES.interruption,
  time,
  detail: { 'instance-id': id, 'instance-action': 'terminate' },
});
const stateChange = (id: string, state: string, time = '2026-03-01T12:02:00Z') => ({
  ...base,
  'detail-type': EC2_DETAIL_TYPES.stateChange,
  time,
  detail: { 'instance-id': id, state },
});

async function runningAttempt(yaml = TASK_YAML): Promise<void> {
  sfn.on(SendTaskSuccessCommand).resolves({});
  sfn.on(SendTaskFailureCommand).resolves({});
  await givenJob('j-1', JobStatus.RUNNING, yaml);
  await givenAttempt('j-1', 1, { instances: [instance('i-0abc')], taskToken: 'token-1' });
}

describe('on-ec2-event', () => {
  it('notes a spot interruption warning and keeps the attempt running', async () => {
    await runningAttempt();
    expect(await handler(interruption('i-0abc'))).toMatchObject({ action: 'noted' });
    const attempt = await world.store().getAttempt('j-1', 1);
    expect(attempt).toMatchObject({ interruptionNoticedAt: '2026-03-01T12:00:00Z', outcome: null });
    expect(sfn).not.toHaveReceivedCommand(SendTaskSuccessCommand);
  });

  it('ends the attempt PREEMPTED at termination after a warning, resuming the task once', async () => {
    await runningAttempt();
    await handler(interruption('i-0abc'));
    expect(await handler(stateChange('i-0abc', 'shutting-down'))).toMatchObject({ action: 'ended' });
    expect(await handler(stateChange('i-0abc', 'terminated'))).toMatchObject({ action: 'ignored' });
    expect(await handler(interruption('i-0abc'))).toMatchObject({ action: 'ignored' });
    expect(sfn).toHaveReceivedCommandTimes(SendTaskSuccessCommand, 1);
    expect(sfn).toHaveReceivedCommandWith(SendTaskSuccessCommand, { taskToken: 'token-1', output: '{"outcome":"PREEMPTED"}' });
    expect((await world.store().getAttempt('j-1', 1)).outcome).toEqual({ kind: 'PREEMPTED', nodes: [0] });
  });

  it('ends the attempt LOST when an instance terminates with no warning', async () => {
    await runningAttempt();
    await handler(stateChange('i-0abc', 'terminated'));
    expect((await world.store().getAttempt('j-1', 1)).outcome).toMatchObject({ kind: 'LOST', reason: expect.stringContaining('i-0abc') });
    expect(sfn).toHaveReceivedCommandWith(SendTaskSuccessCommand, { output: '{"outcome":"LOST"}' });
  });

  it('ignores an instance relaunch does not know, and a state that is not going away', async () => {
    await runningAttempt();
    expect(await handler(stateChange('i-0fff', 'terminated'))).toMatchObject({ action: 'ignored' });
    expect(await handler(stateChange('i-0abc', 'running'))).toMatchObject({ action: 'ignored' });
    expect(sfn).not.toHaveReceivedCommand(SendTaskSuccessCommand);
    expect((await world.store().getAttempt('j-1', 1)).outcome).toBeNull();
  });

  it("asks the execution for a standby on a rebalance recommendation when the job's launch_on_warning is rebalance, once", async () => {
    await runningAttempt(TASK_YAML.replace('  job_recovery:\n', '  job_recovery:\n    launch_on_warning: rebalance\n'));
    expect(await handler(rebalanceRecommendation('i-0abc'))).toMatchObject({ action: 'noted', reason: expect.stringContaining('asked for attempt 2 as its standby') });
    expect(await handler(rebalanceRecommendation('i-0abc'))).toMatchObject({ action: 'ignored' });
    expect(sfn).toHaveReceivedCommandTimes(SendTaskFailureCommand, 1);
    expect(sfn).toHaveReceivedCommandWith(SendTaskFailureCommand, { taskToken: 'token-1', error: WorkflowError.StandbyWanted });
    expect(sfn).not.toHaveReceivedCommand(SendTaskSuccessCommand);
    expect(await world.store().getAttempt('j-1', 1)).toMatchObject({ rebalanceNoticedAt: '2026-03-01T11:58:00Z', interruptionNoticedAt: null, outcome: null });
  });

  it('ignores a rebalance recommendation for a job that did not ask to start on it', async () => {
    await runningAttempt();
    expect(await handler(rebalanceRecommendation('i-0abc'))).toMatchObject({ action: 'ignored', reason: expect.stringContaining('not rebalance') });
    expect(sfn).not.toHaveReceivedCommand(SendTaskFailureCommand);
    expect((await world.store().getAttempt('j-1', 1)).rebalanceNoticedAt ?? null).toBeNull();
  });

  it('rejects an event that is not one of the three, naming the field', async () => {
    await expect(handler({ ...stateChange('i-0abc', 'terminated'), 'detail-type': 'EC2 AMI State Change' })).rejects.toMatchObject({
      name: 'InvalidInputError',
      issues: [expect.objectContaining({ path: 'event.detail-type' })],
    });
    await expect(handler(stateChange('not-an-instance', 'terminated'))).rejects.toMatchObject({ name: 'InvalidInputError' });
  });
});
