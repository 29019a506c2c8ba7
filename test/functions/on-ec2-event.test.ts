// functions/on-ec2-event: EventBridge's EC2 events end or mark the owning attempt, once.

import { SendTaskSuccessCommand } from '@aws-sdk/client-sfn';
import 'aws-sdk-client-mock-vitest/extend';
import { describe, expect, it } from 'vitest';
import { EC2_DETAIL_TYPES } from '../../lib/aws-events.ts';
import { handler } from '../../functions/on-ec2-event/handler.ts';
import { JobStatus } from '../../lib/status.ts';
import { givenAttempt, givenJob, instance, sfn, useWorld } from './world.ts';

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

async function runningAttempt(): Promise<void> {
  sfn.on(SendTaskSuccessCommand).resolves({});
  await givenJob('j-1', JobStatus.RUNNING);
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
    expect((await world.store().getAttempt('j-1', 1)).outcome).toEqual({ kind: 'PREEMPTED' });
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

  it('rejects an event that is not one of the two, naming the field', async () => {
    await expect(handler({ ...stateChange('i-0abc', 'terminated'), 'detail-type': 'EC2 AMI State Change' })).rejects.toMatchObject({
      name: 'InvalidInputError',
      issues: [expect.objectContaining({ path: 'event.detail-type' })],
    });
    await expect(handler(stateChange('not-an-instance', 'terminated'))).rejects.toMatchObject({ name: 'InvalidInputError' });
  });
});
