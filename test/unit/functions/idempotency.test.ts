// Every state-machine step run twice with the same input, as Step Functions' Retry does after
// a TransientError, a dead Lambda or a task timeout: the second run must not add an effect.
// DynamoDB is dynalite; EC2 and Step Functions are mocked with enough memory (live
// instances, started executions) to answer a repeat the way AWS would.

import {
  DynamoDBClient,
  ProvisionedThroughputExceededException,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import {
  CreateFleetCommand,
  CreateLaunchTemplateCommand,
  CreateTagsCommand,
  DeleteLaunchTemplateCommand,
  DescribeImagesCommand,
  DescribeInstancesCommand,
  EC2Client,
  EC2ServiceException,
  TerminateInstancesCommand,
  type CreateFleetCommandInput,
  type CreateLaunchTemplateCommandInput,
  type DescribeInstancesCommandInput,
  type TerminateInstancesCommandInput,
} from '@aws-sdk/client-ec2';
import {
  ExecutionAlreadyExists,
  SendTaskFailureCommand,
  SendTaskSuccessCommand,
  StartExecutionCommand,
  TaskTimedOut,
  type StartExecutionCommandInput,
} from '@aws-sdk/client-sfn';
import {
  DeleteParametersCommand,
  GetParameterCommand,
  ParameterAlreadyExists,
  PutParameterCommand,
  type DeleteParametersCommandInput,
  type PutParameterCommandInput,
} from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { handler as awaitAttempt } from '../../../functions/await-attempt/handler.ts';
import { handler as continueAsNew } from '../../../functions/continue-as-new/handler.ts';
import { handler as evaluatePolicy } from '../../../functions/evaluate-policy/handler.ts';
import { handler as launchAttempt } from '../../../functions/launch-attempt/handler.ts';
import { handler as recordControllerFailure } from '../../../functions/record-controller-failure/handler.ts';
import { handler as releaseInstances } from '../../../functions/release-instances/handler.ts';
import { TagKey } from '../../../lib/agent/tags.ts';
import { DEPLOYMENT_TAG_KEY } from '../../../lib/workflow/resources.ts';
import { TransientError } from '../../../lib/errors.ts';
import { continuationExecutionName } from '../../../lib/ids.ts';
import { JobStatus } from '../../../lib/status.ts';
import { INTERRUPTED_LAUNCH_REASON } from '../../../lib/usecases/launch-attempt.ts';
import { StateName, WorkflowError, type WorkflowState } from '../../../lib/workflow/contract.ts';
import { EnvVar } from '../../../lib/workflow/env.ts';
import { computeConfig, givenAttempt, givenJob, instance, sfn, ssm, STATE_MACHINE_ARN, useWorld } from '../../support/functions-world.ts';

const world = useWorld();
const ec2 = mockClient(EC2Client);

// A throttled EC2 call is given up on at once, so a test need not wait out the backoff.
const CONFIG = computeConfig({ throttleRetries: 0, releaseChecks: 2 });

/** EC2 as far as these steps see it: live instances with their tags, launch templates, and the ClientTokens already used. */
interface FakeEc2 {
  readonly live: Map<string, Record<string, string>>;
  readonly byToken: Map<string, string[]>;
  /** The instance tags of each launch template, by id. */
  readonly templates: Map<string, Record<string, string>>;
  launched: number;
  /** SSM's parameters by name: the agents' secrets. */
  readonly parameters: Map<string, string>;
}
let fakeEc2: FakeEc2;

/** An instance EC2 runs for the job's attempt, as one this deployment launched before the test would. */
function running(instanceId: string, jobId: string, attempt: number): void {
  fakeEc2.live.set(instanceId, { [TagKey.jobId]: jobId, [TagKey.attempt]: String(attempt), [DEPLOYMENT_TAG_KEY]: 'relaunch' });
}

function throttled(): EC2ServiceException {
  return new EC2ServiceException({ name: 'RequestLimitExceeded', $fault: 'client', $metadata: { httpStatusCode: 503 }, message: 'Request limit exceeded.' });
}

beforeEach(() => {
  ec2.reset();
  ssm.reset();
  fakeEc2 = { live: new Map(), byToken: new Map(), templates: new Map(), launched: 0, parameters: new Map() };
  process.env[EnvVar.computeConfig] = JSON.stringify(CONFIG);
  process.env[EnvVar.apiUrl] = 'https://api.example.com/v1/';
  ssm.on(GetParameterCommand).resolves({ Parameter: { Value: 'ami-0123456789abcdef0' } });
  // As SSM does: PutParameter without Overwrite refuses a name that exists.
  ssm.on(PutParameterCommand).callsFake((input: PutParameterCommandInput) => {
    if (fakeEc2.parameters.has(input.Name ?? '')) {
      throw new ParameterAlreadyExists({ message: 'The parameter already exists.', $metadata: { httpStatusCode: 400 } });
    }
    fakeEc2.parameters.set(input.Name ?? '', input.Value ?? '');
    return { Version: 1 };
  });
  ssm.on(DeleteParametersCommand).callsFake((input: DeleteParametersCommandInput) => {
    for (const name of input.Names ?? []) fakeEc2.parameters.delete(name);
    return {};
  });
  ec2.on(DescribeImagesCommand).resolves({ Images: [{ ImageId: 'ami-0123456789abcdef0', RootDeviceName: '/dev/sda1' }] });
  ec2.on(CreateTagsCommand).resolves({});
  ec2.on(CreateLaunchTemplateCommand).callsFake((input: CreateLaunchTemplateCommandInput) => {
    const id = `lt-${fakeEc2.templates.size + 1}`;
    const tags = input.LaunchTemplateData?.TagSpecifications?.find((spec) => spec.ResourceType === 'instance')?.Tags ?? [];
    fakeEc2.templates.set(id, Object.fromEntries(tags.map((tag) => [tag.Key ?? '', tag.Value ?? ''])));
    return { LaunchTemplate: { LaunchTemplateId: id } };
  });
  ec2.on(DeleteLaunchTemplateCommand).resolves({});
  // As EC2 does: a ClientToken already used returns the instances it launched, not new ones.
  ec2.on(CreateFleetCommand).callsFake((input: CreateFleetCommandInput) => {
    const token = input.ClientToken ?? '';
    let ids = fakeEc2.byToken.get(token);
    if (ids === undefined) {
      const template = input.LaunchTemplateConfigs?.[0]?.LaunchTemplateSpecification?.LaunchTemplateId ?? '';
      const tags = fakeEc2.templates.get(template) ?? {};
      ids = Array.from({ length: input.TargetCapacitySpecification?.TotalTargetCapacity ?? 0 }, () => {
        fakeEc2.launched += 1;
        const id = `i-${fakeEc2.launched}`;
        fakeEc2.live.set(id, tags);
        return id;
      });
      fakeEc2.byToken.set(token, ids);
    }
    return { Instances: [{ InstanceIds: ids }] };
  });
  ec2.on(DescribeInstancesCommand).callsFake((input: DescribeInstancesCommandInput) => {
    const matches = ([id, tags]: [string, Record<string, string>]) =>
      (input.Filters ?? []).every(({ Name = '', Values = [] }) => {
        if (Name === 'instance-id') return Values.includes(id);
        if (Name.startsWith('tag:')) return Values.includes(tags[Name.slice('tag:'.length)] ?? '');
        return true;
      });
    const listed = input.InstanceIds === undefined ? [...fakeEc2.live].filter(matches) : [...fakeEc2.live].filter(([id]) => input.InstanceIds?.includes(id));
    const Instances = listed.map(([InstanceId]) => ({ InstanceId, PrivateIpAddress: `10.0.0.${InstanceId.slice(2)}`, Placement: { AvailabilityZone: 'us-east-1a' } }));
    return { Reservations: Instances.length === 0 ? [] : [{ OwnerId: '123456789012', Instances }] };
  });
  ec2.on(TerminateInstancesCommand).callsFake((input: TerminateInstancesCommandInput) => {
    for (const id of input.InstanceIds ?? []) fakeEc2.live.delete(id);
    return {};
  });
});

afterEach(() => {
  vi.restoreAllMocks();
});

/**
 * The step's next DynamoDB call of this kind is throttled, as if the SDK's retries had
 * given up: the step fails part way, after the writes before that call.
 */
function throttleNextDynamo(kind: typeof TransactWriteItemsCommand | typeof UpdateItemCommand): void {
  const send = DynamoDBClient.prototype.send;
  let done = false;
  vi.spyOn(DynamoDBClient.prototype, 'send').mockImplementation(function (this: DynamoDBClient, ...args: unknown[]) {
    if (!done && args[0] instanceof kind) {
      done = true;
      return Promise.reject(new ProvisionedThroughputExceededException({ message: 'throughput exceeded', $metadata: { httpStatusCode: 400 } }));
    }
    return (send as (...all: unknown[]) => Promise<unknown>).apply(this, args);
  } as never);
}

const at = () => new Date().toISOString();
const state = (attempt: number, extra: Partial<WorkflowState> = {}): WorkflowState => ({
  jobId: 'j-1',
  attempt,
  attemptsInExecution: attempt,
  launched: true,
  ...extra,
});

/** The job's status changes to `to`, from its event log. */
async function changesTo(to: JobStatus): Promise<number> {
  return (await world.store().listEvents('j-1')).filter((event) => event.to === to).length;
}

/** The instance ids each TerminateInstances call named, in order. */
function terminated(): string[][] {
  return ec2.commandCalls(TerminateInstancesCommand).map((call) => call.args[0].input.InstanceIds ?? []);
}

describe('launch-attempt, as its use case documents a replayed step', () => {
  it('after a run that failed part way (tagging throttled): retires that attempt, releases its instances, and launches the next one once', async () => {
    await givenJob('j-1');
    ec2.on(CreateTagsCommand).rejectsOnce(throttled()).resolves({});
    const input = { jobId: 'j-1', attempt: 0, attemptsInExecution: 0 };

    await expect(launchAttempt(input)).rejects.toMatchObject({ name: TransientError.errorName });
    const next = await launchAttempt(input);

    expect(next).toMatchObject({ jobId: 'j-1', attempt: 2, attemptsInExecution: 2, launched: true });
    // Each attempt launched once, under its own ClientToken; only the retry's instance is left.
    const tokens = ec2.commandCalls(CreateFleetCommand).map((call) => call.args[0].input.ClientToken);
    expect(tokens).toHaveLength(2);
    expect(new Set(tokens).size).toBe(2);
    expect([...fakeEc2.live.keys()]).toEqual(['i-2']);
    // The retired attempt's instance never got a secret; the live one has its own.
    expect([...fakeEc2.parameters.keys()]).toEqual(['/relaunch/agent-secrets/i-2']);
    expect((await world.store().getAttempt('j-1', 1)).outcome).toEqual({ kind: 'LOST', reason: INTERRUPTED_LAUNCH_REASON });
    expect((await world.store().getAttempt('j-1', 2)).instances).toEqual([expect.objectContaining({ instanceId: 'i-2' })]);
    const job = await world.store().getJob('j-1');
    expect(job).toMatchObject({ status: JobStatus.STARTING, attemptCount: 2 });
    expect(await changesTo(JobStatus.STARTING)).toBe(1);
  });

  it('after a run that completed: answers the repeat as the first run did, launching and releasing nothing', async () => {
    await givenJob('j-1');
    const input = { jobId: 'j-1', attempt: 0, attemptsInExecution: 0 };

    const first = await launchAttempt(input);
    expect(await launchAttempt(input)).toEqual(first);

    expect(first).toMatchObject({ attempt: 1, launched: true });
    expect(ec2).toHaveReceivedCommandTimes(CreateFleetCommand, 1);
    expect(ec2).not.toHaveReceivedCommand(TerminateInstancesCommand);
    expect([...fakeEc2.live.keys()]).toEqual(['i-1']);
    expect(ssm).toHaveReceivedCommandTimes(PutParameterCommand, 1);
    expect([...fakeEc2.parameters.keys()]).toEqual(['/relaunch/agent-secrets/i-1']);
    expect((await world.store().getAttempt('j-1', 1)).outcome).toBeNull();
  });
});

describe('await-attempt', () => {
  const payload = (taskToken: string, extra: Record<string, unknown> = {}) => ({ jobId: 'j-1', attempt: 1, taskToken, state: StateName.AwaitAttempt, ...extra });

  /** Step Functions' answer to a second callback on a task already resumed or failed. */
  const taskEnded = () => new TaskTimedOut({ message: 'Provided task does not exist anymore', $metadata: { httpStatusCode: 400 } });

  it('stores the token of a running attempt, the same token again on a repeat, and sends nothing', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1);

    await awaitAttempt(payload('token-1'));
    await awaitAttempt(payload('token-1'));

    expect((await world.store().getAttempt('j-1', 1)).taskToken).toBe('token-1');
    expect(sfn).not.toHaveReceivedCommand(SendTaskSuccessCommand);
    expect(sfn).not.toHaveReceivedCommand(SendTaskFailureCommand);
  });

  it('resumes a task whose attempt had ended once; the repeat finds it resumed and succeeds', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1);
    await world.store().endAttempt('j-1', 1, { kind: 'PREEMPTED' }, at());
    sfn.on(SendTaskSuccessCommand).resolvesOnce({}).rejects(taskEnded());

    await awaitAttempt(payload('token-1'));
    await awaitAttempt(payload('token-1'));

    // Both runs send the same outcome to the same task; Step Functions takes the first and
    // refuses the second, which the repeat takes as done rather than as a failure.
    const sent = sfn.commandCalls(SendTaskSuccessCommand).map((call) => call.args[0].input);
    expect(sent).toEqual([
      { taskToken: 'token-1', output: JSON.stringify({ outcome: 'PREEMPTED' }) },
      { taskToken: 'token-1', output: JSON.stringify({ outcome: 'PREEMPTED' }) },
    ]);
  });

  it('fails a cancelled job\'s task once; the repeat finds it failed and succeeds', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1);
    await world.store().changeStatus('j-1', { from: JobStatus.RUNNING, to: JobStatus.CANCELLING, reason: 'cancelled by the user', attempt: 1, at: at() });
    sfn.on(SendTaskFailureCommand).resolvesOnce({}).rejects(taskEnded());

    await awaitAttempt(payload('token-1'));
    await awaitAttempt(payload('token-1'));

    expect(sfn).toHaveReceivedCommandWith(SendTaskFailureCommand, { taskToken: 'token-1', error: WorkflowError.JobCancelled });
    expect(await changesTo(JobStatus.CANCELLING)).toBe(1);
  });

  it('keeps the newest token when a retry comes with a fresh one, so the attempt resumes the task that is waiting', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1);

    await awaitAttempt(payload('token-1'));
    await awaitAttempt(payload('token-2'));

    expect((await world.store().getAttempt('j-1', 1)).taskToken).toBe('token-2');
  });
});

describe('evaluate-policy', () => {
  it('decides a lost attempt once: one outcome, one decision, one relaunch charged', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1);
    const input = state(1, { awaitError: { Error: WorkflowError.HeartbeatTimeout, Cause: '' } });

    const first = await evaluatePolicy(input);
    const attemptAfterFirst = await world.store().getAttempt('j-1', 1);
    const second = await evaluatePolicy(input);

    expect(second).toEqual(first);
    expect(first.decision).toMatchObject({ action: 'RECOVER', status: JobStatus.RECOVERING });
    const attempt = await world.store().getAttempt('j-1', 1);
    expect(attempt.outcome).toEqual(attemptAfterFirst.outcome);
    expect(attempt.decision).toEqual(attemptAfterFirst.decision);
    expect((await world.store().getJob('j-1')).counters).toMatchObject({ recoveryCount: 1, restartsOnErrors: 0 });
    expect(await changesTo(JobStatus.RECOVERING)).toBe(1);
  });

  it('after a run that ended the attempt but was throttled recording the decision: decides once', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1);
    const input = state(1, { awaitError: { Error: WorkflowError.HeartbeatTimeout, Cause: '' } });
    throttleNextDynamo(TransactWriteItemsCommand);

    await expect(evaluatePolicy(input)).rejects.toMatchObject({ name: TransientError.errorName });
    const ended = await world.store().getAttempt('j-1', 1);
    expect(ended).toMatchObject({ outcome: { kind: 'LOST' }, decision: null });
    const next = await evaluatePolicy(input);

    expect(next.decision).toMatchObject({ action: 'RECOVER', status: JobStatus.RECOVERING });
    expect((await world.store().getAttempt('j-1', 1)).outcome).toEqual(ended.outcome);
    expect((await world.store().getJob('j-1')).counters).toMatchObject({ recoveryCount: 1 });
    expect(await changesTo(JobStatus.RECOVERING)).toBe(1);
  });

  it('charges a failed run to the error budget once', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1);
    await world.store().endAttempt('j-1', 1, { kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 1 }] }, at());
    const input = state(1, { awaited: { outcome: 'EXITED' } });

    const first = await evaluatePolicy(input);
    const second = await evaluatePolicy(input);

    expect(second.decision).toEqual(first.decision);
    expect(first.decision).toMatchObject({ action: 'RESTART' });
    expect((await world.store().getJob('j-1')).counters).toMatchObject({ restartsOnErrors: 1, recoveryCount: 1 });
    expect(await changesTo(JobStatus.RECOVERING)).toBe(1);
  });
});

describe('release-instances', () => {
  it('terminates each instance once and hands the same state on both times', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1, { instances: [instance('i-0abc')] });
    running('i-0abc', 'j-1', 1);
    running('i-other', 'j-2', 1);
    fakeEc2.parameters.set('/relaunch/agent-secrets/i-0abc', 'a'.repeat(64));
    fakeEc2.parameters.set('/relaunch/agent-secrets/i-other', 'b'.repeat(64));
    const input = state(1, { decision: { action: 'SUCCEED', status: JobStatus.SUCCEEDED, reason: 'done', delaySeconds: 0, continueAsNew: false } });

    expect(await releaseInstances(input)).toEqual(input);
    expect(await releaseInstances(input)).toEqual(input);

    expect(terminated()).toEqual([['i-0abc']]);
    expect([...fakeEc2.live.keys()]).toEqual(['i-other']);
    // Its secret goes with it; the other job's stays.
    expect([...fakeEc2.parameters.keys()]).toEqual(['/relaunch/agent-secrets/i-other']);
  });
});

describe('record-controller-failure', () => {
  it('releases, ends the attempt and fails the job once, and answers the same decision again', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1, { instances: [instance('i-0abc')] });
    running('i-0abc', 'j-1', 1);
    const cause = JSON.stringify({ errorType: TransientError.errorName, errorMessage: 'DynamoDB GetItem: throttled' });
    const input = { ...state(1), controllerError: { Error: TransientError.errorName, Cause: cause } };

    const first = await recordControllerFailure(input);
    const attemptAfterFirst = await world.store().getAttempt('j-1', 1);
    const second = await recordControllerFailure(input);

    expect(second).toEqual(first);
    expect(first.decision).toMatchObject({ action: 'FAIL', status: JobStatus.FAILED_CONTROLLER, reason: expect.stringContaining('DynamoDB GetItem: throttled') });
    expect(terminated()).toEqual([['i-0abc']]);
    expect(fakeEc2.live.size).toBe(0);
    expect(await world.store().getAttempt('j-1', 1)).toEqual(attemptAfterFirst);
    expect(await changesTo(JobStatus.FAILED_CONTROLLER)).toBe(1);
  });
});

describe('record-controller-failure, after a run throttled part way', () => {
  it('releases once and fails the job once when the first run was throttled marking the job', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1, { instances: [instance('i-0abc')] });
    running('i-0abc', 'j-1', 1);
    const input = { ...state(1), controllerError: { Error: 'Error', Cause: 'boom' } };
    throttleNextDynamo(TransactWriteItemsCommand);

    await expect(recordControllerFailure(input)).rejects.toMatchObject({ name: TransientError.errorName });
    const ended = await world.store().getAttempt('j-1', 1);
    expect((await world.store().getJob('j-1')).status).toBe(JobStatus.RUNNING);
    const next = await recordControllerFailure(input);

    expect(next.decision).toMatchObject({ action: 'FAIL', status: JobStatus.FAILED_CONTROLLER });
    expect(terminated()).toEqual([['i-0abc']]);
    expect(await world.store().getAttempt('j-1', 1)).toEqual(ended);
    expect(await changesTo(JobStatus.FAILED_CONTROLLER)).toBe(1);
  });
});

describe('continue-as-new', () => {
  it('starts one execution under one name, and records it as the controller both times', async () => {
    await givenJob('j-1', JobStatus.RECOVERING);
    // As Step Functions does: the same name and input as a running execution answers that
    // execution; the same name with other input is refused.
    const executions = new Map<string, string | undefined>();
    sfn.on(StartExecutionCommand).callsFake((input: StartExecutionCommandInput) => {
      const name = input.name ?? '';
      const executionArn = `${STATE_MACHINE_ARN.replace(':stateMachine:', ':execution:')}:${name}`;
      if (executions.has(name) && executions.get(name) !== input.input) {
        throw new ExecutionAlreadyExists({ message: `Execution Already Exists: '${executionArn}'`, $metadata: { httpStatusCode: 400 } });
      }
      executions.set(name, input.input);
      return { executionArn, startDate: new Date() };
    });
    const input = state(500, { attemptsInExecution: 500 });

    expect(await continueAsNew(input)).toEqual(input);
    expect(await continueAsNew(input)).toEqual(input);

    const names = sfn.commandCalls(StartExecutionCommand).map((call) => call.args[0].input.name);
    expect(names).toEqual([continuationExecutionName('j-1', 500), continuationExecutionName('j-1', 500)]);
    expect(executions.size).toBe(1);
    expect((await world.store().getJob('j-1')).executionArn).toMatch(new RegExp(`:execution:relaunch-controller:${continuationExecutionName('j-1', 500)}$`));
  });

  it('starts no second execution when the first run started one but was throttled recording it', async () => {
    await givenJob('j-1', JobStatus.RECOVERING);
    const executionArn = `${STATE_MACHINE_ARN.replace(':stateMachine:', ':execution:')}:${continuationExecutionName('j-1', 500)}`;
    sfn.on(StartExecutionCommand).resolvesOnce({ executionArn, startDate: new Date() }).rejects(
      new ExecutionAlreadyExists({ message: `Execution Already Exists: '${executionArn}'`, $metadata: { httpStatusCode: 400 } }),
    );
    const input = state(500, { attemptsInExecution: 500 });
    throttleNextDynamo(UpdateItemCommand);

    await expect(continueAsNew(input)).rejects.toMatchObject({ name: TransientError.errorName });
    expect(await continueAsNew(input)).toEqual(input);

    const names = sfn.commandCalls(StartExecutionCommand).map((call) => call.args[0].input.name);
    expect(new Set(names)).toEqual(new Set([continuationExecutionName('j-1', 500)]));
    expect((await world.store().getJob('j-1')).executionArn).toBe(executionArn);
  });
});
