// functions/janitor as a schedule invokes it, against dynalite with EC2, SSM and SQS
// mocked: a dead-lettered termination is applied and deleted, a stale instance is
// terminated and its secret deleted, and a launch template a launch left behind is deleted.

import {
  DeleteLaunchTemplateCommand,
  DescribeInstancesCommand,
  DescribeLaunchTemplatesCommand,
  EC2Client,
  TerminateInstancesCommand,
} from '@aws-sdk/client-ec2';
import { SendTaskSuccessCommand, StartExecutionCommand } from '@aws-sdk/client-sfn';
import { DeleteMessageCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { DeleteParametersCommand } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import { handler } from '../../../../functions/janitor/handler.ts';
import { TagKey } from '../../../../lib/agent/tags.ts';
import { DEPLOYMENT_TAG_KEY } from '../../../../lib/workflow/resources.ts';
import { JobStatus } from '../../../../lib/status.ts';
import { EnvVar } from '../../../../lib/workflow/env.ts';
import { instanceStateChange, onFailureRecord } from '../../../support/fixtures/events/shapes.ts';
import { computeConfig, givenAttempt, givenJob, instance, sfn, ssm, STATE_MACHINE_ARN, useWorld } from '../../../support/functions-world.ts';
import { parseTaskFile } from '../../../../lib/task-file/parse.ts';
import { newJobRecord } from '../../../../lib/usecases/submit-job.ts';

const world = useWorld();
const ec2 = mockClient(EC2Client);
const sqs = mockClient(SQSClient);

const CONFIG = computeConfig({ releaseChecks: 2, releaseWaitBudgetMs: 5 });
const FAILED_QUEUE = 'https://sqs.us-east-1.amazonaws.com/123456789012/relaunch-ec2-events-failed';

/** EventBridge's scheduled event, which the janitor does not read. */
const TICK = { version: '0', id: 'x', 'detail-type': 'Scheduled Event', source: 'aws.events', account: '123456789012', time: '2026-03-01T12:00:00Z', region: 'us-east-1', resources: [], detail: {} };

beforeEach(() => {
  ec2.reset();
  sqs.reset();
  ssm.reset();
  ssm.on(DeleteParametersCommand).resolves({});
  process.env[EnvVar.computeConfig] = JSON.stringify(CONFIG);
  process.env[EnvVar.apiUrl] = 'https://api.example.com/v1/';
  process.env[EnvVar.deadLetterQueues] = JSON.stringify([{ name: 'ec2-events-failed', url: FAILED_QUEUE }]);
  sqs.on(ReceiveMessageCommand).resolves({});
  sqs.on(DeleteMessageCommand).resolves({});
  ec2.on(DescribeInstancesCommand).resolves({ Reservations: [] });
  ec2.on(TerminateInstancesCommand).resolves({});
  ec2.on(DescribeLaunchTemplatesCommand).resolves({ LaunchTemplates: [] });
  ec2.on(DeleteLaunchTemplateCommand).resolves({});
  sfn.on(SendTaskSuccessCommand).resolves({});
});

describe('janitor', () => {
  it('starts a job whose StartExecution was throttled at submit (PENDING, no execution), once past its grace', async () => {
    const spec = parseTaskFile('run: x\n').spec;
    const old = new Date(Date.now() - 120_000).toISOString();
    await world.store().createJob(newJobRecord('j-queued', spec, old));
    await world.store().createJob(newJobRecord('j-young', spec, new Date().toISOString()));
    sfn.on(StartExecutionCommand).resolves({ executionArn: `${STATE_MACHINE_ARN.replace(':stateMachine:', ':execution:')}:j-queued` });

    const result = await handler(TICK);

    expect(result.queued).toEqual({ started: ['j-queued'], cancelled: [], stillQueued: [], failed: [] });
    expect(sfn).toHaveReceivedCommandExactlyOnceWith(StartExecutionCommand, { stateMachineArn: STATE_MACHINE_ARN, name: 'j-queued' });
    expect((await world.store().getJob('j-queued')).executionArn).toMatch(/:execution:relaunch-controller:j-queued$/);
    expect((await world.store().getJob('j-young')).executionArn).toBeNull();
  });

  it('deletes relaunch launch templates older than the grace period, and leaves a young one and untagged ones', async () => {
    const old = new Date(Date.now() - 3_600_000);
    const tags = [{ Key: TagKey.jobId, Value: 'j-1' }, { Key: DEPLOYMENT_TAG_KEY, Value: 'relaunch' }];
    ec2.on(DescribeLaunchTemplatesCommand, { Filters: [{ Name: 'tag-key', Values: [TagKey.jobId] }, { Name: `tag:${DEPLOYMENT_TAG_KEY}`, Values: ['relaunch'] }] }).resolves({
      LaunchTemplates: [
        { LaunchTemplateId: 'lt-old', CreateTime: old, Tags: tags },
        { LaunchTemplateId: 'lt-young', CreateTime: new Date(), Tags: tags },
        { LaunchTemplateId: 'lt-theirs', CreateTime: old, Tags: [] },
      ],
    });

    const result = await handler(TICK);

    expect(ec2).toHaveReceivedCommandExactlyOnceWith(DeleteLaunchTemplateCommand, { LaunchTemplateId: 'lt-old' });
    expect(result.templates).toMatchObject({ checked: 2, deleted: [{ templateId: 'lt-old', jobId: 'j-1', region: 'us-east-1' }], failed: [] });
  });

  it('applies a termination on-ec2-event failed on, ending the attempt LOST, and deletes the letter', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1, { instances: [instance('i-0abc')], taskToken: 'token-1' });
    const record = onFailureRecord(instanceStateChange('i-0abc', 'terminated'));
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: FAILED_QUEUE })
      .resolvesOnce({ Messages: [{ ReceiptHandle: 'r1', Body: JSON.stringify(record), Attributes: { ApproximateReceiveCount: '1' } }] })
      .resolves({});

    const result = await handler(TICK);

    expect(result.replayed).toEqual([{ queue: 'ec2-events-failed', outcome: 'applied', detail: expect.stringMatching(/^ended/) }]);
    expect((await world.store().getAttempt('j-1', 1)).outcome).toMatchObject({ kind: 'LOST' });
    expect(sfn).toHaveReceivedCommandWith(SendTaskSuccessCommand, { taskToken: 'token-1', output: '{"outcome":"LOST"}' });
    expect(sqs).toHaveReceivedCommandWith(DeleteMessageCommand, { QueueUrl: FAILED_QUEUE, ReceiptHandle: 'r1' });
  });

  it('terminates a tagged instance of a job the table does not hold, and leaves a young one and a live attempt\'s', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1, { instances: [instance('i-0live')] });
    const old = new Date(Date.now() - 3_600_000);
    const tags = (job: string) => [
      { Key: TagKey.jobId, Value: job },
      { Key: TagKey.attempt, Value: '1' },
      { Key: DEPLOYMENT_TAG_KEY, Value: 'relaunch' },
    ];
    const live = { Name: 'instance-state-name', Values: ['pending', 'running', 'stopping', 'stopped'] };
    const ours = { Name: `tag:${DEPLOYMENT_TAG_KEY}`, Values: ['relaunch'] };
    ec2.on(DescribeInstancesCommand, { Filters: [{ Name: 'tag-key', Values: [TagKey.jobId] }, ours, live] }).resolves({
      Reservations: [
        {
          Instances: [
            { InstanceId: 'i-0orphan', LaunchTime: old, Tags: tags('j-gone') },
            { InstanceId: 'i-0young', LaunchTime: new Date(), Tags: tags('j-gone') },
            { InstanceId: 'i-0live', LaunchTime: old, Tags: tags('j-1') },
          ],
        },
      ],
    });
    // The release finds the orphan by its job and attempt tags.
    ec2
      .on(DescribeInstancesCommand, { Filters: [ours, { Name: `tag:${TagKey.jobId}`, Values: ['j-gone'] }, { Name: `tag:${TagKey.attempt}`, Values: ['1'] }, live] })
      .resolvesOnce({ Reservations: [{ Instances: [{ InstanceId: 'i-0orphan' }] }] })
      .resolves({ Reservations: [] });

    const { sweep } = await handler(TICK);

    expect(sweep).toMatchObject({ checked: 3, kept: 2, failed: [], released: [{ jobId: 'j-gone', attempt: 1, instanceIds: ['i-0orphan'], reason: 'job j-gone is not in the table' }] });
    expect(ec2).toHaveReceivedCommandWith(TerminateInstancesCommand, { InstanceIds: ['i-0orphan'] });
    expect(ec2).toHaveReceivedCommandTimes(TerminateInstancesCommand, 1);
    expect(ssm).toHaveReceivedCommandExactlyOnceWith(DeleteParametersCommand, { Names: ['/relaunch/agent-secrets/i-0orphan'] });
  });

  it('names DEAD_LETTER_QUEUES when it is not a list of queues', async () => {
    process.env[EnvVar.deadLetterQueues] = JSON.stringify([{ name: 'x', url: 'http://evil.example/q' }]);
    await expect(handler(TICK)).rejects.toThrow(/DEAD_LETTER_QUEUES\.0\.url/);
  });
});
