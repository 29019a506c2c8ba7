// launch_on_warning on moto: EC2's warning reaches on-ec2-event, the execution launches
// the standby through CreateFleet (LaunchStandby, the launch-attempt function), its agent
// holds through the API until the relaunch takes it, or is told to stop when the job ends
// without one. Each function's calls pass the IAM check after every test.

import { ReceiveMessageCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { beforeAll, describe, expect, it } from 'vitest';
import { TagKey } from '../../../lib/agent/tags.ts';
import { StateName } from '../../../lib/workflow/contract.ts';
import { onFailureRecord, rebalanceRecommendation } from '../../support/fixtures/events/shapes.ts';
import { tagOf, useWorld, type StackInWorld } from './world.ts';

const world = useWorld();
let stack: StackInWorld;
let ami: string;

beforeAll(async () => {
  stack = await world().deploy();
  ami = await world().amazonLinuxAmi();
});

const task = (option: 'true' | 'rebalance') =>
  `name: warm\nresources:\n  cpus: 2\n  use_spot: true\n  image_id: ${ami}\n  job_recovery:\n    launch_on_warning: ${option}\nsetup: pip install -r requirements.txt\nrun: train\n`;

/** Submits the task and brings attempt 1's agent to its run (AwaitAttempt). */
async function running(option: 'true' | 'rebalance') {
  const jobId = await stack.submit(task(option));
  await stack.awaiting(jobId, 1, StateName.AwaitBoot);
  const [first] = await stack.agents(jobId, 1);
  expect((await first!.heartbeat()).statusCode).toBe(200);
  await stack.awaiting(jobId, 1, StateName.AwaitAttempt);
  return { jobId, first: first! };
}

/** What LaunchStandby answered for the job. */
async function standbyLaunched(jobId: string): Promise<unknown> {
  const event = await stack.next((e) => e.kind === 'task' && e.jobId === jobId && e.state === StateName.LaunchStandby);
  return (event as { output: unknown }).output;
}

describe('a spot interruption warning for a launch_on_warning job', () => {
  it('launches the standby through CreateFleet at once; its agent runs setup, holds, and goes once the warned attempt is preempted and the job relaunched', async () => {
    const { jobId, first } = await running('true');
    const noted = (await stack.ec2Event(first.instanceId, { interruption: true })) as { action: string; reason: string };
    expect(noted).toMatchObject({ action: 'noted', reason: expect.stringContaining('asked for attempt 2 as its standby (launch_on_warning)') });
    expect(await standbyLaunched(jobId)).toMatchObject({ attempt: 2, launched: true, reason: expect.stringContaining('as the standby of attempt 1, on its spot interruption warning') });

    // What moto holds: the warned instance still running, and the standby's own, tagged as attempt 2's node 0.
    const [warned] = await world().instances('us-east-1', { [TagKey.jobId]: jobId, [TagKey.attempt]: '1' });
    expect(warned?.State?.Name).toBe('running');
    const [launched] = await world().instances('us-east-1', { [TagKey.jobId]: jobId, [TagKey.attempt]: '2' });
    expect(launched?.State?.Name).toBe('running');
    expect(launched?.InstanceLifecycle).toBe('spot');
    expect(tagOf(launched!, TagKey.nodeRank)).toBe('0');
    expect(launched?.InstanceId).not.toBe(first.instanceId);
    // The warned attempt's placement counts as preempted: the standby is placed away from its zone.
    expect(launched?.Placement?.AvailabilityZone).not.toBe(warned?.Placement?.AvailabilityZone);
    // The same warning again (EventBridge delivers at least once) launches nothing more.
    expect(await stack.ec2Event(first.instanceId, { interruption: true })).toMatchObject({ action: 'ignored' });

    const [standby] = await stack.agents(jobId, 2);
    expect((await standby!.heartbeat()).statusCode).toBe(200);
    expect((await standby!.report('setup', 0)).statusCode).toBe(200);
    expect((await standby!.hold()).body).toMatchObject({ run: 'hold' });
    // Neither node's secret opens the other's attempt.
    expect((await first.holdAs(2)).statusCode).toBe(401);
    expect((await standby!.holdAs(1)).statusCode).toBe(401);
    const waiting = await stack.job(jobId);
    expect(waiting.attempts).toMatchObject([{ attempt: 1 }, { attempt: 2, standby: { for: 1, on: 'interruption', state: 'holding' } }]);

    await stack.ec2Event(first.instanceId, { state: 'shutting-down' });
    await stack.awaiting(jobId, 2, StateName.AwaitAttempt);
    expect((await standby!.hold()).body).toMatchObject({ run: 'go', reason: expect.stringContaining('is the live attempt') });
    expect((await standby!.report('run', 0)).statusCode).toBe(200);
    expect((await stack.ended(jobId)).status).toBe('SUCCEEDED');

    const job = await stack.job(jobId);
    // Counted as a relaunch without the option would be: one recovery, no error restart.
    expect(job).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 });
    expect(job.attempts).toMatchObject([
      { attempt: 1, outcome: 'PREEMPTED', decision: 'RECOVER' },
      { attempt: 2, outcome: 'EXITED', decision: 'SUCCEED', standby: { state: 'adopted' }, gapSeconds: expect.any(Number) },
    ]);
    // Two instances in all: the relaunch took the standby and launched nothing.
    const all = await world().instances('us-east-1', { [TagKey.jobId]: jobId });
    expect(all.map((i) => [tagOf(i, TagKey.attempt), i.State?.Name]).sort()).toEqual([
      ['1', 'terminated'],
      ['2', 'terminated'],
    ]);
  });
});

describe('a rebalance recommendation for a job with launch_on_warning: rebalance', () => {
  it('launches the standby; when the warned attempt then succeeds the standby is released, its instance terminated, its agent told to stop, and nothing is charged', async () => {
    const { jobId, first } = await running('rebalance');
    expect(await stack.ec2Event(first.instanceId, { rebalance: true })).toMatchObject({ action: 'noted' });
    expect(await standbyLaunched(jobId)).toMatchObject({ attempt: 2, launched: true, reason: expect.stringContaining('on its rebalance recommendation') });
    const [standby] = await stack.agents(jobId, 2);
    await standby!.heartbeat();
    await standby!.report('setup', 0);
    expect((await standby!.hold()).body).toMatchObject({ run: 'hold' });

    expect((await first.report('run', 0)).statusCode).toBe(200);
    expect((await stack.ended(jobId)).status).toBe('SUCCEEDED');
    expect((await standby!.hold()).body).toMatchObject({ run: 'stop' });
    const job = await stack.job(jobId);
    expect(job).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 0, restartsOnErrors: 0 });
    expect(job.attempts).toMatchObject([
      { attempt: 1, outcome: 'EXITED', decision: 'SUCCEED' },
      { attempt: 2, standby: { for: 1, on: 'rebalance', state: 'released', releaseReason: expect.stringContaining('not needed') } },
    ]);
    const [released] = await world().instances('us-east-1', { [TagKey.jobId]: jobId, [TagKey.attempt]: '2' });
    expect(released?.State?.Name).toBe('terminated');
  });

  it('is ignored for a job with launch_on_warning: true, which launches nothing before the interruption warning', async () => {
    const { jobId, first } = await running('true');
    expect(await stack.ec2Event(first.instanceId, { rebalance: true })).toMatchObject({ action: 'ignored', reason: expect.stringContaining('not rebalance') });
    expect(await world().instances('us-east-1', { [TagKey.jobId]: jobId, [TagKey.attempt]: '2' })).toEqual([]);
    await first.report('run', 0);
    expect((await stack.ended(jobId)).status).toBe('SUCCEEDED');
  });
});

describe('a warning whose delivery failed', () => {
  it("is replayed by the janitor from on-ec2-event's failure queue, and launches the standby as the event would have", async () => {
    const { jobId, first } = await running('rebalance');
    const queues = JSON.parse(stack.deployment.functions.janitor.environment.DEAD_LETTER_QUEUES as string) as { name: string; url: string }[];
    const failed = queues.find((queue) => queue.name === 'ec2-events-failed')?.url as string;
    const sqs = new SQSClient({ region: 'us-east-1', endpoint: world().moto.endpoint, useQueueUrlAsEndpoint: false });
    await sqs.send(new SendMessageCommand({ QueueUrl: failed, MessageBody: JSON.stringify(onFailureRecord(rebalanceRecommendation(first.instanceId))) }));
    const run = (await stack.invoke('janitor', { source: 'aws.events', 'detail-type': 'Scheduled Event', detail: {} })) as { replayed: { queue: string; outcome: string }[] };
    expect(run.replayed).toEqual([expect.objectContaining({ queue: 'ec2-events-failed', outcome: 'applied' })]);
    expect((await sqs.send(new ReceiveMessageCommand({ QueueUrl: failed, WaitTimeSeconds: 0 }))).Messages ?? []).toEqual([]);
    expect(await standbyLaunched(jobId)).toMatchObject({ attempt: 2, launched: true });
    expect((await world().instances('us-east-1', { [TagKey.jobId]: jobId, [TagKey.attempt]: '2' })).map((i) => i.State?.Name)).toEqual(['running']);
    expect((await stack.api('DELETE', `/jobs/${jobId}`)).statusCode).toBe(202);
    expect((await stack.ended(jobId)).status).toBe('FAILED');
    expect((await stack.job(jobId)).status).toBe('CANCELLED');
    // A cancel lets the standby go with the rest.
    expect((await world().instances('us-east-1', { [TagKey.jobId]: jobId })).map((i) => i.State?.Name)).toEqual(['terminated', 'terminated']);
  });
});
