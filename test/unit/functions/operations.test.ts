// What an on-call engineer sees of the Lambdas: the EMF lines (CloudWatch metrics) and log
// lines each handler writes to stdout and stderr, read back as CloudWatch Logs would, and the SNS
// notification of a job's end. Handlers run as deployed (in Lambda, as far as the
// environment says), against dynalite and mocked EC2, SSM and SNS.

import {
  CreateFleetCommand,
  CreateLaunchTemplateCommand,
  DeleteLaunchTemplateCommand,
  DescribeImagesCommand,
  DescribeInstancesCommand,
  DescribeLaunchTemplatesCommand,
  EC2Client,
  TerminateInstancesCommand,
} from '@aws-sdk/client-ec2';
import { StartExecutionCommand } from '@aws-sdk/client-sfn';
import { PublishCommand, SNSClient } from '@aws-sdk/client-sns';
import { DeleteMessageCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { GetParameterCommand } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { handler as api } from '../../../functions/api/handler.ts';
import { handler as evaluatePolicy } from '../../../functions/evaluate-policy/handler.ts';
import { handler as janitor } from '../../../functions/janitor/handler.ts';
import { handler as launchAttempt } from '../../../functions/launch-attempt/handler.ts';
import { handler as onExecutionEnded } from '../../../functions/on-execution-ended/handler.ts';
import { handler as recordControllerFailure } from '../../../functions/record-controller-failure/handler.ts';
import { resetJobNotifier } from '../../../functions/shared/job-notifier.ts';
import {
  JOB_NOTIFICATIONS_TOPIC_ENV,
  MetricName,
  METRICS_NAMESPACE,
  NO_EXIT_CODE,
} from '../../../lib/workflow/operations.ts';
import { handlerEntry, LAMBDA_NAMES, LAMBDA_NEEDS } from '../../../infra/lambda-catalog.ts';
import { EXECUTION_STATUS_CHANGE } from '../../../lib/aws-events.ts';
import type { AttemptOutcome } from '../../../lib/policy/types.ts';
import { JobStatus } from '../../../lib/status.ts';
import { EnvVar } from '../../../lib/workflow/env.ts';
import { computeConfig, givenAttempt, givenJob, instance, sfn, ssm, STATE_MACHINE_ARN, useWorld } from '../../support/functions-world.ts';

const world = useWorld();
const ec2 = mockClient(EC2Client);
const sns = mockClient(SNSClient);
const sqs = mockClient(SQSClient);

const TOPIC_ARN = 'arn:aws:sns:us-east-1:123456789012:relaunch-jobs';
const CONTEXT = { functionName: 'relaunch-test', awsRequestId: 'request-1' };
const CONFIG = computeConfig({ releaseChecks: 1 });

/** An EMF line as CloudWatch reads it: the `_aws` directive, dimensions and values as fields. */
interface EmfLine {
  readonly _aws: {
    readonly CloudWatchMetrics: readonly {
      readonly Namespace: string;
      readonly Dimensions: readonly (readonly string[])[];
      readonly Metrics: readonly { readonly Name: string; readonly Unit: string }[];
    }[];
  };
  readonly [field: string]: unknown;
}

let written: string[] = [];

/** Every JSON line written to stdout or stderr (both reach CloudWatch Logs) since the test began. */
function lines(): Record<string, unknown>[] {
  return written
    .join('')
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const emfLines = (): EmfLine[] => lines().filter((line): line is EmfLine => '_aws' in line);
const logLines = () => lines().filter((line) => !('_aws' in line));

/** The EMF lines of one metric. */
const metric = (name: string): EmfLine[] => emfLines().filter((line) => line._aws.CloudWatchMetrics[0]?.Metrics.some((m) => m.Name === name));

beforeAll(() => {
  // As deployed: Lambda's variables, logs at INFO.
  process.env.AWS_LAMBDA_FUNCTION_NAME = CONTEXT.functionName;
  process.env.POWERTOOLS_LOG_LEVEL = 'INFO';
});

afterAll(() => {
  delete process.env.AWS_LAMBDA_FUNCTION_NAME;
  process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
});

beforeEach(() => {
  written = [];
  for (const stream of [process.stdout, process.stderr]) {
    vi.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
      return true;
    });
  }
  ec2.reset();
  ssm.reset();
  sns.reset();
  sqs.reset();
  resetJobNotifier();
  delete process.env[JOB_NOTIFICATIONS_TOPIC_ENV];
  process.env[EnvVar.computeConfig] = JSON.stringify(CONFIG);
  process.env[EnvVar.apiUrl] = 'https://api.example.com/v1/';
  ssm.on(GetParameterCommand).resolves({ Parameter: { Value: 'ami-0123456789abcdef0' } });
  ec2.on(DescribeImagesCommand).resolves({ Images: [{ ImageId: 'ami-0123456789abcdef0', RootDeviceName: '/dev/sda1' }] });
  ec2.on(TerminateInstancesCommand).resolves({});
  ec2.on(DescribeInstancesCommand).resolves({ Reservations: [] });
  ec2.on(CreateLaunchTemplateCommand).resolves({ LaunchTemplate: { LaunchTemplateId: 'lt-0123456789abcdef0' } });
  ec2.on(DeleteLaunchTemplateCommand).resolves({});
  ec2.on(DescribeLaunchTemplatesCommand).resolves({ LaunchTemplates: [] });
});

afterEach(() => {
  vi.restoreAllMocks();
});

const secondsAgo = (seconds: number) => new Date(Date.now() - seconds * 1000).toISOString();

/** Job j-1 running attempt 1 on m5.large in us-east-1a, ended with `outcome` `endedSecondsAgo` ago. */
async function attemptEnded(outcome: AttemptOutcome, endedSecondsAgo = 0): Promise<void> {
  await givenJob('j-1', JobStatus.RUNNING);
  await givenAttempt('j-1', 1, { instances: [instance('i-0abc')] });
  await world.store().endAttempt('j-1', 1, outcome, secondsAgo(endedSecondsAgo));
}

/** Step Functions' event for job `jobId`'s execution, stopped by an operator. */
function executionAborted(jobId: string) {
  const executionArn = `${STATE_MACHINE_ARN.replace(':stateMachine:', ':execution:')}:${jobId}`;
  return {
    version: '0',
    id: 'e-1',
    'detail-type': EXECUTION_STATUS_CHANGE,
    source: 'aws.states',
    account: '123456789012',
    time: new Date().toISOString(),
    region: 'us-east-1',
    resources: [executionArn],
    detail: {
      executionArn,
      stateMachineArn: STATE_MACHINE_ARN,
      name: jobId,
      status: 'ABORTED',
      input: JSON.stringify({ jobId, attempt: 0, attemptsInExecution: 0 }),
    },
  };
}

const exited = (exitCode: number): AttemptOutcome => ({ kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode }] });
const evaluateState = { jobId: 'j-1', attempt: 1, attemptsInExecution: 1, launched: true };


/** EC2 launches one instance for the fleet, in us-east-1a. */
function fleetLaunches(instanceId: string): void {
  ec2.on(CreateFleetCommand).resolves({ Instances: [{ InstanceIds: [instanceId] }] });
  ec2.on(DescribeInstancesCommand, { InstanceIds: [instanceId] }).resolves({
    Reservations: [{ OwnerId: '123456789012', Instances: [{ InstanceId: instanceId, PrivateIpAddress: '10.0.0.6', Placement: { AvailabilityZone: 'us-east-1a' } }] }],
  });
}

describe('metrics (EMF on stdout)', () => {
  it('counts a decision by action and deciding exit code, under the namespace, with the job as plain fields', async () => {
    await attemptEnded(exited(29));
    await evaluatePolicy(evaluateState, CONTEXT);
    const [line, ...others] = metric(MetricName.decisions);
    expect(others).toEqual([]);
    expect(line?._aws.CloudWatchMetrics).toEqual([
      {
        Namespace: METRICS_NAMESPACE,
        Dimensions: [['service'], ['service', 'Action', 'ExitCode']],
        Metrics: [{ Name: MetricName.decisions, Unit: 'Count' }],
      },
    ]);
    expect(line).toMatchObject({ service: 'relaunch', Action: 'RESTART', ExitCode: '29', Decisions: 1, jobId: 'j-1', attempt: '1' });
    // A restart ends nothing.
    expect(metric(MetricName.jobsEnded)).toEqual([]);
  });

  it('counts the job ended by status when the decision is its last', async () => {
    await attemptEnded(exited(0));
    await evaluatePolicy(evaluateState, CONTEXT);
    expect(metric(MetricName.decisions)[0]).toMatchObject({ Action: 'SUCCEED', ExitCode: '0' });
    const [ended] = metric(MetricName.jobsEnded);
    expect(ended?._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([['service', 'Status']]);
    expect(ended).toMatchObject({ Status: JobStatus.SUCCEEDED, JobsEnded: 1, jobId: 'j-1' });
  });

  it("records an ended job's goodput and its instances' cost, per deployment", async () => {
    await attemptEnded(exited(0));
    await evaluatePolicy(evaluateState, CONTEXT);
    const [goodput] = metric(MetricName.jobGoodput);
    const [cost] = metric(MetricName.jobCost);
    expect(goodput?._aws.CloudWatchMetrics[0]).toMatchObject({ Dimensions: [['service']], Metrics: [{ Name: MetricName.jobGoodput, Unit: 'Percent' }] });
    expect(goodput).toMatchObject({ JobGoodput: 0, jobId: 'j-1' });
    expect(cost).toMatchObject({ jobId: 'j-1' });
    expect(cost?.[MetricName.jobCost]).toBeGreaterThanOrEqual(0);
  });

  it('counts a preemption by zone and instance type, and its decision with no exit code', async () => {
    await attemptEnded({ kind: 'PREEMPTED' });
    await evaluatePolicy(evaluateState, CONTEXT);
    expect(metric(MetricName.decisions)[0]).toMatchObject({ Action: 'RECOVER', ExitCode: NO_EXIT_CODE });
    const [preempted, ...others] = metric(MetricName.preemptions);
    expect(others).toEqual([]);
    expect(preempted?._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([['service'], ['service', 'Zone', 'InstanceType']]);
    expect(preempted).toMatchObject({ Zone: 'us-east-1a', InstanceType: 'm5.large', Preemptions: 1, jobId: 'j-1' });
  });

  it('records the time from the last attempt ending to the next one launched, by how it ended', async () => {
    await givenJob('j-1', JobStatus.RECOVERING);
    await givenAttempt('j-1', 1);
    await world.store().endAttempt('j-1', 1, exited(29), secondsAgo(2));
    fleetLaunches('i-0def');
    const next = await launchAttempt({ jobId: 'j-1', attempt: 1, attemptsInExecution: 1 }, CONTEXT);
    expect(next).toMatchObject({ attempt: 2, launched: true });
    const [gap] = metric(MetricName.exitToRelaunch);
    expect(gap?._aws.CloudWatchMetrics[0]?.Metrics).toEqual([{ Name: MetricName.exitToRelaunch, Unit: 'Milliseconds' }]);
    expect(gap?._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([['service'], ['service', 'Outcome']]);
    expect(gap).toMatchObject({ Outcome: 'EXITED', jobId: 'j-1', attempt: '2' });
    expect(gap?.ExitToRelaunch).toBeGreaterThanOrEqual(2000);
    expect(gap?.ExitToRelaunch).toBeLessThan(10_000);
  });

  it('writes no relaunch time for a first launch', async () => {
    await givenJob('j-1');
    fleetLaunches('i-0def');
    await launchAttempt({ jobId: 'j-1', attempt: 0, attemptsInExecution: 0 }, CONTEXT);
    expect(metric(MetricName.exitToRelaunch)).toEqual([]);
    expect(metric(MetricName.launchFailures)).toEqual([]);
  });

  it('counts a launch that found no capacity by its cause', async () => {
    ec2.on(CreateFleetCommand).resolves({ Instances: [], Errors: [{ ErrorCode: 'InsufficientInstanceCapacity' }] });
    await givenJob('j-1');
    await launchAttempt({ jobId: 'j-1', attempt: 0, attemptsInExecution: 0 }, CONTEXT);
    const [failure] = metric(MetricName.launchFailures);
    expect(failure?._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([['service'], ['service', 'Error']]);
    expect(failure).toMatchObject({ Error: 'NO_RESOURCE', LaunchFailures: 1, jobId: 'j-1', attempt: '1', reason: expect.stringContaining('InsufficientInstanceCapacity') });
  });

  it('counts a launch that threw by the error name Step Functions sees', async () => {
    delete process.env[EnvVar.apiUrl];
    await givenJob('j-1');
    await expect(launchAttempt({ jobId: 'j-1', attempt: 0, attemptsInExecution: 0 }, CONTEXT)).rejects.toMatchObject({
      name: 'ConfigurationError',
    });
    expect(metric(MetricName.launchFailures)[0]).toMatchObject({ Error: 'ConfigurationError', jobId: 'j-1' });
  });

  it('counts a job the controller failed as FAILED_CONTROLLER, the status its alarm watches', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1);
    await recordControllerFailure({ ...evaluateState, controllerError: { Error: 'Lambda.Unknown', Cause: 'out of memory' } }, CONTEXT);
    expect(metric(MetricName.jobsEnded)).toEqual([expect.objectContaining({ Status: JobStatus.FAILED_CONTROLLER, jobId: 'j-1' })]);
  });

  it('counts the janitor ending a job, and nothing for an execution it ignores', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    await onExecutionEnded(executionAborted('j-1'), CONTEXT);
    await onExecutionEnded(executionAborted('j-unknown'), CONTEXT);
    expect(metric(MetricName.jobsEnded)).toEqual([expect.objectContaining({ Status: JobStatus.FAILED_CONTROLLER, jobId: 'j-1' })]);
  });
});

describe('log lines', () => {
  it('carry the job id and attempt on every line of an invocation, with the request id', async () => {
    await attemptEnded(exited(29));
    await evaluatePolicy(evaluateState, CONTEXT);
    const logged = logLines();
    expect(logged.map((line) => line.message)).toContain('recovery decided');
    for (const line of logged) expect(line).toMatchObject({ jobId: 'j-1', attempt: 1, function_request_id: 'request-1' });
  });

  it('name the job and the error when a handler fails, and drop them at the next invocation', async () => {
    delete process.env[EnvVar.apiUrl];
    await givenJob('j-1');
    await expect(launchAttempt({ jobId: 'j-1', attempt: 0, attemptsInExecution: 0 }, CONTEXT)).rejects.toThrow();
    const failed = logLines().find((line) => line.message === 'invocation failed');
    expect(failed).toMatchObject({ level: 'ERROR', jobId: 'j-1', attempt: 0, error: expect.objectContaining({ name: 'ConfigurationError' }) });

    written = [];
    await expect(evaluatePolicy({ nothing: true }, CONTEXT)).rejects.toMatchObject({ name: 'InvalidInputError' });
    const next = logLines().find((line) => line.message === 'invocation failed');
    expect(next).toBeDefined();
    expect(next).not.toHaveProperty('jobId');
  });

  it('name the job of an input that fails to parse, when the input names one', async () => {
    await expect(evaluatePolicy({ jobId: 'j-9', attempt: -1 }, CONTEXT)).rejects.toMatchObject({ name: 'InvalidInputError' });
    expect(logLines().find((line) => line.message === 'invocation failed')).toMatchObject({ jobId: 'j-9' });
  });
});

describe('job end notifications (SNS)', () => {
  it('publish nothing when no topic is configured', async () => {
    await attemptEnded(exited(0));
    await evaluatePolicy(evaluateState, CONTEXT);
    expect(sns).not.toHaveReceivedCommand(PublishCommand);
  });

  it('publish the job id, terminal status and reason once a decision ends the job', async () => {
    process.env[JOB_NOTIFICATIONS_TOPIC_ENV] = TOPIC_ARN;
    sns.on(PublishCommand).resolves({ MessageId: 'm-1' });
    await attemptEnded(exited(0));
    const next = await evaluatePolicy(evaluateState, CONTEXT);
    expect(sns).toHaveReceivedCommandTimes(PublishCommand, 1);
    expect(sns).toHaveReceivedCommandWith(PublishCommand, {
      TopicArn: TOPIC_ARN,
      Subject: 'relaunch job j-1 SUCCEEDED',
      MessageAttributes: {
        status: { DataType: 'String', StringValue: JobStatus.SUCCEEDED },
        jobId: { DataType: 'String', StringValue: 'j-1' },
      },
    });
    const message = JSON.parse(sns.commandCalls(PublishCommand)[0]?.args[0].input.Message ?? '{}') as unknown;
    expect(message).toEqual({
      jobId: 'j-1',
      status: JobStatus.SUCCEEDED,
      reason: next.decision?.reason,
      attempt: 1,
      // Where its time and money went (lib/accounting): the attempt had no setup report, so no run time was useful.
      goodput: 0,
      // A spot m5.large priced from the table, so marked as an estimate.
      cost: { dollars: expect.any(Number), onDemandDollars: expect.any(Number), estimate: true },
      summary: expect.stringMatching(/^goodput 0% · 0 recoveries · ~\$\d+\.\d{4,6} spot \(\$\d+\.\d{4,6} on demand\), estimated$/),
    });
  });

  it('publish nothing for a decision that relaunches', async () => {
    process.env[JOB_NOTIFICATIONS_TOPIC_ENV] = TOPIC_ARN;
    await attemptEnded(exited(29));
    await evaluatePolicy(evaluateState, CONTEXT);
    expect(sns).not.toHaveReceivedCommand(PublishCommand);
  });

  it('publish FAILED_CONTROLLER with the controller error as the reason', async () => {
    process.env[JOB_NOTIFICATIONS_TOPIC_ENV] = TOPIC_ARN;
    sns.on(PublishCommand).resolves({ MessageId: 'm-1' });
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1);
    await recordControllerFailure({ ...evaluateState, controllerError: { Error: 'Lambda.Unknown', Cause: 'out of memory' } }, CONTEXT);
    const message = JSON.parse(sns.commandCalls(PublishCommand)[0]?.args[0].input.Message ?? '{}') as Record<string, unknown>;
    expect(message).toMatchObject({ jobId: 'j-1', status: JobStatus.FAILED_CONTROLLER, reason: expect.stringContaining('Lambda.Unknown') });
  });

  it('publish and count a job the API ended because its execution could not start', async () => {
    process.env[JOB_NOTIFICATIONS_TOPIC_ENV] = TOPIC_ARN;
    sns.on(PublishCommand).resolves({ MessageId: 'm-1' });
    sfn.on(StartExecutionCommand).rejects(Object.assign(new Error('State Machine Does Not Exist'), { name: 'StateMachineDoesNotExist' }));

    const response = await api(
      { httpMethod: 'POST', path: '/jobs', headers: { 'content-type': 'application/yaml' }, body: 'name: n\nrun: echo hi\n', queryStringParameters: null },
      CONTEXT,
    );

    expect(response.statusCode).toBe(500);
    const [job] = await world.store().listJobs({ limit: 10 });
    expect(job?.status).toBe(JobStatus.FAILED_CONTROLLER);
    const message = JSON.parse(sns.commandCalls(PublishCommand)[0]?.args[0].input.Message ?? '{}') as Record<string, unknown>;
    expect(message).toEqual({
      jobId: job?.jobId,
      status: JobStatus.FAILED_CONTROLLER,
      reason: expect.stringContaining('could not start the controller'),
      // It never launched: no run time, no instance to price.
      goodput: 0,
      cost: { dollars: null, onDemandDollars: null, estimate: false },
      summary: 'goodput 0% · 0 recoveries',
    });
    expect(metric(MetricName.jobsEnded)).toEqual([expect.objectContaining({ Status: JobStatus.FAILED_CONTROLLER, jobId: job?.jobId })]);
  });

  it("publish and count a job the janitor ended by replaying an execution's end from a dead-letter queue", async () => {
    process.env[JOB_NOTIFICATIONS_TOPIC_ENV] = TOPIC_ARN;
    const queue = 'https://sqs.us-east-1.amazonaws.com/123456789012/relaunch-execution-events-undelivered';
    process.env[EnvVar.deadLetterQueues] = JSON.stringify([{ name: 'execution-events-undelivered', url: queue }]);
    sns.on(PublishCommand).resolves({ MessageId: 'm-1' });
    sqs
      .on(ReceiveMessageCommand)
      .resolvesOnce({ Messages: [{ MessageId: 'm', ReceiptHandle: 'r', Body: JSON.stringify(executionAborted('j-1')), Attributes: { ApproximateReceiveCount: '1' } }] })
      .resolves({});
    sqs.on(DeleteMessageCommand).resolves({});
    await givenJob('j-1', JobStatus.RUNNING);

    await janitor({}, CONTEXT);

    const message = JSON.parse(sns.commandCalls(PublishCommand)[0]?.args[0].input.Message ?? '{}') as Record<string, unknown>;
    expect(message).toMatchObject({ jobId: 'j-1', status: JobStatus.FAILED_CONTROLLER, reason: expect.stringContaining('ExecutionAborted') });
    expect(metric(MetricName.jobsEnded)).toEqual([expect.objectContaining({ Status: JobStatus.FAILED_CONTROLLER, jobId: 'j-1' })]);
    delete process.env[EnvVar.deadLetterQueues];
  });

  it('when SNS refuses, log and count the failure and still answer the decision', async () => {
    process.env[JOB_NOTIFICATIONS_TOPIC_ENV] = TOPIC_ARN;
    sns.on(PublishCommand).rejects(Object.assign(new Error('topic gone'), { name: 'NotFoundException' }));
    await attemptEnded(exited(0));
    const next = await evaluatePolicy(evaluateState, CONTEXT);
    expect(next.decision).toMatchObject({ action: 'SUCCEED' });
    expect(metric(MetricName.notificationFailures)).toEqual([expect.objectContaining({ NotificationFailures: 1, jobId: 'j-1' })]);
    expect(logLines().find((line) => line.message === 'job end notification failed')).toMatchObject({
      level: 'ERROR',
      jobId: 'j-1',
      topicArn: TOPIC_ARN,
      error: expect.objectContaining({ name: 'NotFoundException' }),
    });
  });
});

describe('the Lambda catalog', () => {
  // The catalog gives a function the topic's variable and sns:Publish: exactly those that notify.
  it.each(LAMBDA_NAMES)('says whether %s notifies as its handler does', (name) => {
    const notifies = /\b(notifyJobEnded\(|announceJobEnded\b)/.test(readFileSync(handlerEntry(name), 'utf8'));
    expect(notifies).toBe(LAMBDA_NEEDS[name].notifies === true);
  });
});
