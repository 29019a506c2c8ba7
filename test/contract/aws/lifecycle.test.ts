// A job's life on moto: the real handlers, the deployment's own state machine definition,
// and what moto holds afterwards.

import { DescribeLaunchTemplatesCommand, DescribeLaunchTemplateVersionsCommand, DescribeSecurityGroupsCommand, EC2Client } from '@aws-sdk/client-ec2';
import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { DescribeExecutionCommand, ListExecutionsCommand, SFNClient } from '@aws-sdk/client-sfn';
import { ReceiveMessageCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { TagKey } from '../../../lib/agent/tags.ts';
import { SPOT_ROLE_MISSING_ERROR } from '../../../lib/adapters/ec2-compute.ts';
import { MAX_ATTEMPTS_PER_EXECUTION } from '../../../lib/workflow/contract.ts';
import { LAMBDA_NAMES } from '../../../infra/lambda-catalog.ts';
import { instanceStateChange, onFailureRecord } from '../../support/fixtures/events/shapes.ts';
import { awsError, checkedFunctions, tagOf, useWorld, type StackInWorld } from './world.ts';

const world = useWorld();
let stack: StackInWorld;
let ami: string;

beforeAll(async () => {
  stack = await world().deploy();
  ami = await world().amazonLinuxAmi();
});

describe('a spot job on moto', () => {
  it('launches through CreateFleet, runs, reports and ends SUCCEEDED with nothing left behind', async () => {
    const jobId = await stack.submit(`name: train\nresources:\n  cpus: 2\n  use_spot: true\n  image_id: ${ami}\nrun: echo hi\n`);
    await stack.awaiting(jobId, 1, 'AwaitBoot');
    const [agent] = await stack.agents(jobId, 1);
    expect(agent).toBeDefined();
    expect((await agent!.heartbeat()).statusCode).toBe(200);
    await stack.awaiting(jobId, 1, 'AwaitAttempt');
    const reported = await agent!.report('run', 0, 'done');
    expect(reported.statusCode, JSON.stringify(reported.body)).toBe(200);
    const result = await stack.ended(jobId);
    expect(result.status).toBe('SUCCEEDED');
    const [instance] = await world().instances('us-east-1', { [TagKey.jobId]: jobId });
    expect(instance?.State?.Name).toBe('terminated');
    expect(tagOf(instance!, TagKey.nodeRank)).toBe('0');
    const ec2 = new EC2Client({ region: 'us-east-1', endpoint: world().moto.endpoint });
    const templates = await ec2.send(new DescribeLaunchTemplatesCommand({}));
    expect(templates.LaunchTemplates ?? []).toEqual([]);
    expect((await stack.job(jobId)).status).toBe('SUCCEEDED');
  });
});

describe('an account that never ran spot', () => {
  it.each([
    ['refused for the whole request', (stack: StackInWorld) => stack.answerNext('EC2', 'CreateFleet', () => {
      throw awsError(SPOT_ROLE_MISSING_ERROR, 'The provided credentials do not have permission to create the service-linked role for EC2 Spot Instances.');
    })],
    ['refused in the answer\'s Errors', (stack: StackInWorld) => stack.answerNext('EC2', 'CreateFleet', () => ({
      FleetId: 'fleet-11111111-2222-3333-4444-555555555555',
      Instances: [],
      Errors: [{ ErrorCode: SPOT_ROLE_MISSING_ERROR, ErrorMessage: 'The provided credentials do not have permission to create the service-linked role for EC2 Spot Instances.', Lifecycle: 'spot', LaunchTemplateAndOverrides: { Overrides: { InstanceType: 'm6i.large' } } }],
    }))],
  ])('ends the job FAILED_PRECHECKS saying how to create the spot role, not "no capacity", when EC2 is %s', async (_, refuse) => {
    refuse(stack);
    const jobId = await stack.submit(`name: spot\nresources:\n  cpus: 2\n  use_spot: true\n  image_id: ${ami}\nrun: echo hi\n`);
    const result = await stack.ended(jobId);
    expect(result.status).toBe('FAILED');
    const job = await stack.job(jobId);
    expect(job.status).toBe('FAILED_PRECHECKS');
    expect(String(job.failureReason)).toContain('aws iam create-service-linked-role --aws-service-name spot.amazonaws.com');
    expect(String(job.failureReason)).toContain('AWSServiceRoleForEC2Spot');
    expect(await world().instances('us-east-1', { [TagKey.jobId]: jobId })).toEqual([]);
  });
});

describe('the default image', () => {
  it('is read from AWS\'s public parameter with a grant that covers its ARN with and without an account (moto publishes no Ubuntu parameter: the job ends saying so)', async () => {
    const jobId = await stack.submit('name: default-image\nresources:\n  cpus: 2\nrun: echo hi\n');
    await stack.ended(jobId);
    const job = await stack.job(jobId);
    expect(job.status).toBe('FAILED_NO_RESOURCE');
    expect(String(job.failureReason)).toContain('no image for it there');
  });
});

describe('multi-node and EFA jobs', () => {
  it.each([
    ['p4d.24xlarge', 4],
    ['p5.48xlarge', 32],
    ['g5.48xlarge', 1],
  ])('launch %s with network_tier: best with one EFA interface per network card (%i), all in the group that admits its own nodes', async (type, cards) => {
    // The template is kept (its delete refused) so that moto can be asked what it holds.
    stack.answerNext('EC2', 'DeleteLaunchTemplate', () => {
      throw awsError('UnauthorizedOperation', 'kept for the test');
    });
    const jobId = await stack.submit(`name: efa\nnum_nodes: 2\nresources:\n  instance_type: ${type}\n  network_tier: best\n  image_id: ${ami}\nrun: echo hi\n`);
    await stack.awaiting(jobId, 1, 'AwaitBoot');
    const ec2 = new EC2Client({ region: 'us-east-1', endpoint: world().moto.endpoint });
    const [template] = (await ec2.send(new DescribeLaunchTemplatesCommand({ Filters: [{ Name: `tag:${TagKey.jobId}`, Values: [jobId] }] }))).LaunchTemplates ?? [];
    const versions = await ec2.send(new DescribeLaunchTemplateVersionsCommand({ LaunchTemplateId: template?.LaunchTemplateId, Versions: ['$Latest'] }));
    const interfaces = versions.LaunchTemplateVersions?.[0]?.LaunchTemplateData?.NetworkInterfaces ?? [];
    const group = stack.deployment.only('AWS::EC2::SecurityGroup').physical.ref;
    expect(interfaces.map((nic) => [nic.NetworkCardIndex, nic.DeviceIndex, nic.InterfaceType, nic.Groups])).toEqual(
      Array.from({ length: cards }, (_, card) => [card, card === 0 ? 0 : 1, card === 0 ? 'efa' : 'efa-only', [group]]),
    );
    // The group every node is in admits every other member (NCCL, torchrun's rendezvous).
    const groups = await ec2.send(new DescribeSecurityGroupsCommand({ GroupIds: [group] }));
    expect(groups.SecurityGroups?.[0]?.IpPermissions).toContainEqual(expect.objectContaining({ IpProtocol: '-1', UserIdGroupPairs: [expect.objectContaining({ GroupId: group })] }));
    expect(await world().instances('us-east-1', { [TagKey.jobId]: jobId })).toHaveLength(2);
    const cancelled = await stack.api('DELETE', `/jobs/${jobId}`);
    expect(cancelled.statusCode).toBe(202);
    expect((await stack.ended(jobId)).status).toBe('FAILED');
    expect((await stack.job(jobId)).status).toBe('CANCELLED');
  });

  it('are refused at submit, naming num_nodes and the setting, by a stack whose nodes may not reach each other', async () => {
    const closed = await world().deploy({ config: { namePrefix: 'closed', nodeToNodeTraffic: false } });
    const answer = await closed.api('POST', '/jobs', { body: `name: two\nnum_nodes: 2\nresources:\n  image_id: ${ami}\nrun: echo hi\n`, headers: { 'content-type': 'application/yaml' } });
    expect(answer.statusCode).toBe(400);
    expect(answer.body.issues).toEqual([expect.objectContaining({ path: 'num_nodes', message: expect.stringContaining('relaunch:nodeToNodeTraffic') })]);
    const one = await closed.submit(`name: one\nresources:\n  cpus: 2\n  image_id: ${ami}\nrun: echo hi\n`);
    await closed.api('DELETE', `/jobs/${one}`);
    await closed.ended(one);
  });
});

describe('markets and candidates', () => {
  it.each([
    ['on demand', 'resources:\n  instance_type: m6i.large\n', undefined, 'm6i.large'],
    ['any_of, the first fitting candidate on spot', 'resources:\n  use_spot: true\n  any_of:\n    - instance_type: c7i.large\n    - instance_type: m6i.large\n', 'spot', 'c7i.large'],
  ])('%s: launches the instance EC2 gives, on its market, ranked and tagged', async (_, resources, lifecycle, type) => {
    const jobId = await stack.submit(`name: market\n${resources}  image_id: ${ami}\nrun: echo hi\n`);
    await stack.awaiting(jobId, 1, 'AwaitBoot');
    const [instance] = await world().instances('us-east-1', { [TagKey.jobId]: jobId });
    expect(instance?.InstanceLifecycle).toBe(lifecycle);
    expect(instance?.InstanceType).toBe(type);
    expect(tagOf(instance!, 'relaunch:node-ips:0')).toBe(instance?.PrivateIpAddress);
    const attempt = (await stack.job(jobId)).attempts[0] as { market: string; placement: { instanceType: string } };
    expect(attempt.market).toBe(lifecycle ?? 'on-demand');
    expect(attempt.placement.instanceType).toBe(type);
    const [agent] = await stack.agents(jobId, 1);
    await agent!.heartbeat();
    await stack.awaiting(jobId, 1, 'AwaitAttempt');
    await agent!.report('run', 0);
    expect((await stack.ended(jobId)).status).toBe('SUCCEEDED');
  });
});

describe('a spot preemption', () => {
  it("ends the attempt PREEMPTED from EC2's events, releases it and comes back on a fresh instance, not charged to the error budget", async () => {
    const jobId = await stack.submit(`name: preempted\nresources:\n  cpus: 2\n  use_spot: true\n  image_id: ${ami}\nrun: train\n`);
    await stack.awaiting(jobId, 1, 'AwaitBoot');
    const [first] = await stack.agents(jobId, 1);
    await first!.heartbeat();
    await stack.awaiting(jobId, 1, 'AwaitAttempt');
    await stack.ec2Event(first!.instanceId, { interruption: true });
    await stack.ec2Event(first!.instanceId, { state: 'shutting-down' });
    await stack.awaiting(jobId, 2, 'AwaitBoot');
    const [gone] = await world().instances('us-east-1', { [TagKey.jobId]: jobId, [TagKey.attempt]: '1' });
    expect(gone?.State?.Name).toBe('terminated');
    // EC2's last word on the old instance arrives late, and changes nothing.
    await stack.ec2Event(first!.instanceId, { state: 'terminated' });
    const [second] = await stack.agents(jobId, 2);
    expect(second?.instanceId).not.toBe(first?.instanceId);
    // The old attempt's agent is refused: its secret is not this attempt's.
    expect((await first!.report('run', 0)).statusCode).toBe(409);
    await second!.heartbeat();
    await stack.awaiting(jobId, 2, 'AwaitAttempt');
    await second!.report('run', 0);
    expect((await stack.ended(jobId)).status).toBe('SUCCEEDED');
    const job = await stack.job(jobId);
    expect(job).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 });
    expect(job.attempts.map((a) => [a.outcome, a.decision])).toEqual([['PREEMPTED', 'RECOVER'], ['EXITED', 'SUCCEED']]);
    expect((await world().instances('us-east-1', { [TagKey.jobId]: jobId })).map((i) => i.State?.Name)).toEqual(['terminated', 'terminated']);
  });
});

describe('a cancel', () => {
  it.each(['AwaitBoot', 'AwaitAttempt'])('in %s fails the waiting task, releases the instances and ends the job CANCELLED', async (state) => {
    const jobId = await stack.submit(`name: cancelled\nresources:\n  cpus: 2\n  image_id: ${ami}\nrun: sleep 3600\n`);
    await stack.awaiting(jobId, 1, 'AwaitBoot');
    if (state === 'AwaitAttempt') {
      const [agent] = await stack.agents(jobId, 1);
      await agent!.heartbeat();
      await stack.awaiting(jobId, 1, 'AwaitAttempt');
    }
    expect((await stack.api('DELETE', `/jobs/${jobId}`)).statusCode).toBe(202);
    expect((await stack.ended(jobId)).status).toBe('FAILED');
    expect((await stack.job(jobId)).status).toBe('CANCELLED');
    expect((await world().instances('us-east-1', { [TagKey.jobId]: jobId })).map((i) => i.State?.Name)).toEqual(['terminated']);
  });

  it('in the backoff before a relaunch stops the execution (ABORTED in moto) and the janitor rule ends the job CANCELLED', async () => {
    const jobId = await stack.submit(
      `name: backoff\nresources:\n  cpus: 2\n  image_id: ${ami}\n  job_recovery:\n    max_restarts_on_errors: 1\n    restart_backoff: {initial_seconds: 3600, factor: 1, max_seconds: 3600, jitter: none}\nrun: exit 1\n`,
    );
    await stack.awaiting(jobId, 1, 'AwaitBoot');
    const [agent] = await stack.agents(jobId, 1);
    await agent!.heartbeat();
    await stack.awaiting(jobId, 1, 'AwaitAttempt');
    await agent!.report('run', 1);
    await stack.next((event) => event.kind === 'task' && event.jobId === jobId && event.state === 'ReleaseInstances');
    expect((await stack.job(jobId)).status).toBe('RECOVERING');
    expect((await stack.api('DELETE', `/jobs/${jobId}`)).statusCode).toBe(202);
    expect((await stack.ended(jobId)).status).toBe('ABORTED');
    expect((await stack.job(jobId)).status).toBe('CANCELLED');
    const sfn = new SFNClient({ region: 'us-east-1', endpoint: world().moto.endpoint });
    const execution = await sfn.send(new DescribeExecutionCommand({ executionArn: executionArnOf(stack, jobId) }));
    expect(execution.status).toBe('ABORTED');
  });
});

describe('a controller fault', () => {
  it('that no retry clears ends the job FAILED_CONTROLLER saying why, with the instances it launched given back', async () => {
    // Tagging the launched nodes is refused outright (a role changed under the stack, say).
    stack.answerNext('EC2', 'CreateTags', () => {
      throw awsError('UnauthorizedOperation', 'You are not authorized to perform this operation.');
    });
    const jobId = await stack.submit(`name: fault\nresources:\n  cpus: 2\n  image_id: ${ami}\nrun: echo hi\n`);
    expect((await stack.ended(jobId)).status).toBe('FAILED');
    const job = await stack.job(jobId);
    expect(job.status).toBe('FAILED_CONTROLLER');
    expect(String(job.failureReason)).toContain('UnauthorizedOperation');
    expect((await world().instances('us-east-1', { [TagKey.jobId]: jobId })).map((i) => i.State?.Name)).toEqual(['terminated']);
  });
});

/** The ARN Step Functions gives the job's first execution (named after the job). */
function executionArnOf(stack: StackInWorld, jobId: string): string {
  return `${stack.deployment.only('AWS::StepFunctions::StateMachine').physical.attributes.Arn?.replace(':stateMachine:', ':execution:')}:${jobId}`;
}

describe('a long job', () => {
  it('continues as a new execution near the history limit, which moto records and the job follows to its end', async () => {
    // The job's first execution starts as one 499 attempts into its history would be.
    const long = await world().deploy({
      config: { namePrefix: 'long' },
      startInput: (input, name) => (name === input.jobId ? { ...input, attemptsInExecution: MAX_ATTEMPTS_PER_EXECUTION - 1 } : input),
    });
    const jobId = await long.submit(`name: long\nresources:\n  cpus: 2\n  image_id: ${ami}\n  job_recovery:\n    max_restarts_on_errors: 1\nrun: train\n`);
    await long.awaiting(jobId, 1, 'AwaitBoot');
    const [first] = await long.agents(jobId, 1);
    await first!.heartbeat();
    await long.awaiting(jobId, 1, 'AwaitAttempt');
    await first!.report('run', 1);
    expect((await long.ended(jobId)).status).toBe('SUCCEEDED');
    await long.awaiting(jobId, 2, 'AwaitBoot');
    const [second] = await long.agents(jobId, 2);
    await second!.heartbeat();
    await long.awaiting(jobId, 2, 'AwaitAttempt');
    await second!.report('run', 0);
    const continuation = `${jobId}-a1`;
    expect((await long.ended(jobId, continuation)).status).toBe('SUCCEEDED');
    const sfn = new SFNClient({ region: 'us-east-1', endpoint: world().moto.endpoint });
    const machine = long.deployment.only('AWS::StepFunctions::StateMachine').physical.attributes.Arn;
    const executions = await sfn.send(new ListExecutionsCommand({ stateMachineArn: machine }));
    expect(executions.executions?.map((e) => e.name).sort()).toEqual([jobId, continuation].sort());
    expect(await long.job(jobId)).toMatchObject({ status: 'SUCCEEDED', restartsOnErrors: 1 });
    // The job's record names the continuation as its controller.
    const dynamo = new DynamoDBClient({ region: 'us-east-1', endpoint: world().moto.endpoint });
    const { Item } = await dynamo.send(
      new GetItemCommand({ TableName: long.deployment.only('AWS::DynamoDB::Table').physical.ref, Key: { pk: { S: `JOB#${jobId}` }, sk: { S: 'JOB' } } }),
    );
    expect(Item?.executionArn?.S).toMatch(new RegExp(`:execution:long-controller:${continuation}$`));
  });
});

describe('an EC2 event whose delivery failed', () => {
  it("waits in on-ec2-event's failure queue in moto until the janitor replays it: the attempt ends LOST and the job comes back", async () => {
    const jobId = await stack.submit(`name: replayed\nresources:\n  cpus: 2\n  image_id: ${ami}\nrun: train\n`);
    await stack.awaiting(jobId, 1, 'AwaitBoot');
    const [agent] = await stack.agents(jobId, 1);
    await agent!.heartbeat();
    await stack.awaiting(jobId, 1, 'AwaitAttempt');
    // The instance went, and on-ec2-event failed on its event: Lambda put the record in the failure queue.
    const queues = JSON.parse(stack.deployment.functions.janitor.environment.DEAD_LETTER_QUEUES as string) as { name: string; url: string }[];
    const failed = queues.find((queue) => queue.name === 'ec2-events-failed')?.url as string;
    const sqs = new SQSClient({ region: 'us-east-1', endpoint: world().moto.endpoint, useQueueUrlAsEndpoint: false });
    await sqs.send(new SendMessageCommand({ QueueUrl: failed, MessageBody: JSON.stringify(onFailureRecord(instanceStateChange(agent!.instanceId, 'terminated'))) }));
    const run = (await stack.invoke('janitor', { source: 'aws.events', 'detail-type': 'Scheduled Event', detail: {} })) as { replayed: { queue: string; outcome: string }[] };
    expect(run.replayed).toEqual([expect.objectContaining({ queue: 'ec2-events-failed', outcome: 'applied' })]);
    expect((await sqs.send(new ReceiveMessageCommand({ QueueUrl: failed, WaitTimeSeconds: 0 }))).Messages ?? []).toEqual([]);
    await stack.awaiting(jobId, 2, 'AwaitBoot');
    expect((await stack.job(jobId)).attempts[0]).toMatchObject({ outcome: 'LOST', decision: 'RECOVER' });
    const cancelled = await stack.api('DELETE', `/jobs/${jobId}`);
    expect(cancelled.statusCode).toBe(202);
    await stack.ended(jobId);
  });
});

/** A URL of the test's own, standing in for the presigned one CloudFormation gives a custom resource, and what was PUT there. */
async function cloudFormationListener(): Promise<{ url: string; received: Record<string, unknown>[]; close: () => void }> {
  const received: Record<string, unknown>[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    request.on('end', () => {
      if (request.method === 'PUT') received.push(JSON.parse(body) as Record<string, unknown>);
      response.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/cloudformation-response?signed`, received, close: () => server.close() };
}

describe('cdk destroy', () => {
  it("terminates every instance of the deployment's jobs, ends each live job CANCELLED and answers CloudFormation; another deployment's jobs run on", async () => {
    const doomed = await world().deploy({ config: { namePrefix: 'doomed' } });
    const task = (name: string, nodes: number) => `name: ${name}\nnum_nodes: ${nodes}\nresources:\n  cpus: 2\n  use_spot: true\n  image_id: ${ami}\nrun: sleep 1000\n`;
    const running = await doomed.submit(task('running', 2));
    await doomed.awaiting(running, 1, 'AwaitBoot');
    for (const agent of await doomed.agents(running, 1)) expect((await agent.heartbeat()).statusCode).toBe(200);
    await doomed.awaiting(running, 1, 'AwaitAttempt');
    const booting = await doomed.submit(task('booting', 1));
    await doomed.awaiting(booting, 1, 'AwaitBoot');
    const elsewhere = await stack.submit(task('elsewhere', 1));
    await stack.awaiting(elsewhere, 1, 'AwaitBoot');
    const live = async (deployment: string) =>
      (await world().instances('us-east-1', { 'relaunch:deployment': deployment })).filter((i) => i.State?.Name !== 'terminated').map((i) => i.InstanceId);
    expect(await live('doomed')).toHaveLength(3);

    const cloudFormation = await cloudFormationListener();
    try {
      const { logicalId } = doomed.deployment.only('Custom::RelaunchTakeDown');
      const request = {
        RequestType: 'Delete',
        ServiceToken: doomed.deployment.functions['take-down'].functionName,
        ResponseURL: cloudFormation.url,
        StackId: `arn:aws:cloudformation:us-east-1:${doomed.deployment.account}:stack/${doomed.id}/1`,
        RequestId: 'request-1',
        ResourceType: 'Custom::RelaunchTakeDown',
        LogicalResourceId: logicalId,
        PhysicalResourceId: 'relaunch-take-down',
        ResourceProperties: {},
      };
      await doomed.invoke('take-down', request);
      expect(cloudFormation.received).toEqual([expect.objectContaining({ Status: 'SUCCESS', RequestId: 'request-1', LogicalResourceId: logicalId })]);
    } finally {
      cloudFormation.close();
    }
    expect(await live('doomed')).toEqual([]);
    expect(await live('relaunch')).toHaveLength(1);
    for (const jobId of [running, booting]) {
      const job = await doomed.job(jobId);
      expect(job.status, jobId).toBe('CANCELLED');
      expect(String(job.failureReason)).toContain('cdk destroy');
      expect(job.attempts[0], jobId).toMatchObject({ outcome: 'CANCELLED' });
    }
    expect((await stack.job(elsewhere)).status).toBe('STARTING');
    const cancelled = await stack.api('DELETE', `/jobs/${elsewhere}`);
    expect(cancelled.statusCode).toBe(202);
  });
});

describe('the IAM check', () => {
  it("saw every function's calls in this file, each allowed by its role", () => {
    expect([...checkedFunctions].sort()).toEqual([...LAMBDA_NAMES].sort());
  });
});
