// The state machine's Lambdas that reach EC2 (launch, release, controller failure), built
// from COMPUTE_CONFIG and API_URL as deployed, against dynalite and a mocked EC2/SSM.

import {
  CreateFleetCommand,
  CreateLaunchTemplateCommand,
  CreateTagsCommand,
  DeleteLaunchTemplateCommand,
  DescribeImagesCommand,
  DescribeInstancesCommand,
  EC2Client,
  TerminateInstancesCommand,
} from '@aws-sdk/client-ec2';
import { GetParameterCommand } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { Ec2Compute } from '../../../lib/adapters/ec2-compute.ts';
import { handler as launchAttempt } from '../../../functions/launch-attempt/handler.ts';
import { handler as onExecutionEnded } from '../../../functions/on-execution-ended/handler.ts';
import { handler as recordControllerFailure } from '../../../functions/record-controller-failure/handler.ts';
import { handler as releaseInstances } from '../../../functions/release-instances/handler.ts';
import { EnvVar } from '../../../lib/workflow/env.ts';
import { TagKey } from '../../../lib/agent/tags.ts';
import { ConfigurationError } from '../../../lib/errors.ts';
import { JobStatus } from '../../../lib/status.ts';
import { computeConfig, executionArnOf, executionStatusChange, givenAttempt, givenJob, instance, ssm, useWorld } from '../../support/functions-world.ts';

const world = useWorld();
const ec2 = mockClient(EC2Client);

const CONFIG = computeConfig({ releaseChecks: 1 });

beforeEach(() => {
  ec2.reset();
  ssm.reset();
  process.env[EnvVar.computeConfig] = JSON.stringify(CONFIG);
  process.env[EnvVar.apiUrl] = 'https://api.example.com/v1/';
  ssm.on(GetParameterCommand).resolves({ Parameter: { Value: 'ami-0123456789abcdef0' } });
  ec2.on(DescribeImagesCommand).resolves({ Images: [{ ImageId: 'ami-0123456789abcdef0', RootDeviceName: '/dev/sda1' }] });
  ec2.on(CreateTagsCommand).resolves({});
  ec2.on(TerminateInstancesCommand).resolves({});
  ec2.on(DescribeInstancesCommand).resolves({ Reservations: [] });
  ec2.on(CreateLaunchTemplateCommand).resolves({ LaunchTemplate: { LaunchTemplateId: 'lt-0123456789abcdef0' } });
  ec2.on(DeleteLaunchTemplateCommand).resolves({});
});

describe('launch-attempt', () => {
  it('launches tagged spot instances in the configured subnet and records them on the attempt', async () => {
    ec2.on(CreateFleetCommand).resolves({ Instances: [{ InstanceIds: ['i-0abc'], InstanceType: 'm6i.2xlarge' }] });
    ec2.on(DescribeInstancesCommand, { InstanceIds: ['i-0abc'] }).resolves({
      Reservations: [{ OwnerId: '123456789012', Instances: [{ InstanceId: 'i-0abc', PrivateIpAddress: '10.0.0.5', Placement: { AvailabilityZone: 'us-east-1a' } }] }],
    });
    await givenJob('j-1');
    const next = await launchAttempt({ jobId: 'j-1', attempt: 0, attemptsInExecution: 0 });
    expect(next).toEqual({ jobId: 'j-1', attempt: 1, attemptsInExecution: 1, launched: true, bootTimeoutSeconds: 600 });
    expect(ec2).toHaveReceivedCommandWith(CreateLaunchTemplateCommand, {
      LaunchTemplateData: expect.objectContaining({ SecurityGroupIds: ['sg-0123456789abcdef0'], IamInstanceProfile: { Arn: CONFIG.instanceProfileArn } }),
    });
    const sent = ec2.commandCalls(CreateFleetCommand)[0]?.args[0].input;
    expect(sent).toMatchObject({ Type: 'instant', TargetCapacitySpecification: { DefaultTargetCapacityType: 'spot' } });
    expect(sent?.LaunchTemplateConfigs?.[0]?.Overrides?.[0]).toMatchObject({ SubnetId: 'subnet-0123456789abcdef0' });
    expect(sent?.TagSpecifications?.[0]?.Tags).toContainEqual({ Key: TagKey.jobId, Value: 'j-1' });
    expect(ec2).toHaveReceivedCommandWith(DeleteLaunchTemplateCommand, { LaunchTemplateId: 'lt-0123456789abcdef0' });
    const attempt = await world.store().getAttempt('j-1', 1);
    expect(attempt.instances).toEqual([instance('i-0abc')]);
    expect(attempt.placement).toMatchObject({ zone: 'us-east-1a', market: 'spot' });
    expect((await world.store().findAttemptByInstance('i-0abc'))?.attempt).toBe(1);
    expect((await world.store().getJob('j-1')).status).toBe(JobStatus.STARTING);
  });

  it('answers launched: false (no instances) when no zone has capacity', async () => {
    ec2.on(CreateFleetCommand).resolves({ Instances: [], Errors: [{ ErrorCode: 'InsufficientInstanceCapacity', LaunchTemplateAndOverrides: { Overrides: { InstanceType: 'm6i.2xlarge' } } }] });
    await givenJob('j-1');
    const next = await launchAttempt({ jobId: 'j-1', attempt: 0, attemptsInExecution: 0 });
    expect(next.launched).toBe(false);
    expect((await world.store().getAttempt('j-1', 1)).outcome).toMatchObject({ kind: 'LAUNCH_FAILED', cause: 'NO_RESOURCE', reason: expect.stringContaining('InsufficientInstanceCapacity') });
  });

  it('names the missing variable when the function is misconfigured', async () => {
    delete process.env[EnvVar.apiUrl];
    await givenJob('j-1');
    const launch = launchAttempt({ jobId: 'j-1', attempt: 0, attemptsInExecution: 0 });
    await expect(launch).rejects.toThrow(/API_URL is not set/);
    await expect(launch).rejects.toMatchObject({ name: new ConfigurationError('').name });
  });

  it.each([
    ['not JSON', '{regions:', /COMPUTE_CONFIG: expected JSON/],
    ['without regions', JSON.stringify({ ...CONFIG, regions: [] }), /COMPUTE_CONFIG is not a valid compute configuration: COMPUTE_CONFIG\.regions:/],
    ['with a mistyped field', JSON.stringify({ ...CONFIG, releaseChecks: 'three' }), /COMPUTE_CONFIG\.releaseChecks:/],
  ])('names COMPUTE_CONFIG and the field when it is %s', async (_case, value, message) => {
    process.env[EnvVar.computeConfig] = value;
    await givenJob('j-1');
    const launch = launchAttempt({ jobId: 'j-1', attempt: 0, attemptsInExecution: 0 });
    await expect(launch).rejects.toThrow(message);
    await expect(launch).rejects.toBeInstanceOf(ConfigurationError);
  });
});

describe('release-instances', () => {
  it('terminates the attempt instances and hands the state on unchanged', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1, { instances: [instance('i-0abc')] });
    ec2.on(DescribeInstancesCommand).resolvesOnce({ Reservations: [{ Instances: [{ InstanceId: 'i-0abc' }] }] }).resolves({ Reservations: [] });
    const state = { jobId: 'j-1', attempt: 1, attemptsInExecution: 1, launched: true };
    expect(await releaseInstances(state)).toEqual(state);
    expect(ec2).toHaveReceivedCommandWith(TerminateInstancesCommand, { InstanceIds: ['i-0abc'] });
  });
});

describe('release-instances with nodes kept for the relaunch', () => {
  it('tags the kept node held and releases the attempt with it excepted, in the function that only releases', async () => {
    // The deployed release function has RELEASE_CONFIG, not COMPUTE_CONFIG.
    delete process.env[EnvVar.computeConfig];
    process.env[EnvVar.releaseConfig] = JSON.stringify({ namePrefix: 'relaunch', regions: ['us-east-1'], releaseChecks: 1 });
    const release = vi.spyOn(Ec2Compute.prototype, 'release').mockResolvedValue(undefined);
    try {
      await givenJob('j-1', JobStatus.RUNNING);
      await givenAttempt('j-1', 1, { instances: [instance('i-0kept'), { ...instance('i-0gone'), nodeRank: 1 }] });
      const store = world.store();
      const at = new Date().toISOString();
      await store.endAttempt('j-1', 1, { kind: 'LOST', reason: 'instance i-0gone was terminated', nodes: [1] }, at);
      const placement = { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm5.large' };
      const keep = { nodes: [instance('i-0kept')], placement, setup: 'rerun' as const, replace: [{ nodeRank: 1, why: 'lost' }] };
      const decision = { action: 'RECOVER' as const, rule: 'PREEMPTED_OR_LOST' as const, status: JobStatus.RECOVERING, reason: 'lost', delaySeconds: 0, decidedAt: at, keep };
      await store.recordDecision('j-1', 1, decision, (await store.getJob('j-1')).counters, { from: JobStatus.RUNNING, to: JobStatus.RECOVERING, reason: 'lost', attempt: 1, at });

      await releaseInstances({ jobId: 'j-1', attempt: 1, attemptsInExecution: 1, launched: true });

      expect(ec2).toHaveReceivedCommandWith(CreateTagsCommand, { Resources: ['i-0kept'], Tags: [{ Key: TagKey.heldAfter, Value: '1' }] });
      expect(release).toHaveBeenCalledWith('j-1', 1, [expect.objectContaining({ instanceId: 'i-0gone' })], { except: ['i-0kept'] });
    } finally {
      release.mockRestore();
      delete process.env[EnvVar.releaseConfig];
    }
  });
});

describe('record-controller-failure', () => {
  it('releases the instances, marks the job FAILED_CONTROLLER, and answers a FAIL decision with the reason', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1, { instances: [instance('i-0abc')] });
    ec2.on(DescribeInstancesCommand).resolvesOnce({ Reservations: [{ Instances: [{ InstanceId: 'i-0abc' }] }] }).resolves({ Reservations: [] });
    const cause = JSON.stringify({ errorType: 'Error', errorMessage: 'table missing', trace: ['at x'] });
    const next = await recordControllerFailure({
      jobId: 'j-1',
      attempt: 1,
      attemptsInExecution: 1,
      controllerError: { Error: 'Error', Cause: cause },
    });
    expect(next.decision).toMatchObject({ action: 'FAIL', status: JobStatus.FAILED_CONTROLLER, reason: expect.stringContaining('table missing') });
    expect(next.decision?.reason).not.toContain('at x');
    expect(ec2).toHaveReceivedCommandWith(TerminateInstancesCommand, { InstanceIds: ['i-0abc'] });
    expect((await world.store().getJob('j-1')).status).toBe(JobStatus.FAILED_CONTROLLER);
  });
});

describe('on-execution-ended (the janitor)', () => {
  /** EC2 shows the instance once (so it is terminated), then gone. */
  const stillRunning = (id: string) =>
    ec2.on(DescribeInstancesCommand).resolvesOnce({ Reservations: [{ Instances: [{ InstanceId: id }] }] }).resolves({ Reservations: [] });
  const ended = executionStatusChange;

  async function cancelledInItsBackoff(): Promise<void> {
    stillRunning('i-0abc');
    await givenJob('j-1', JobStatus.RECOVERING);
    await givenAttempt('j-1', 1, { instances: [instance('i-0abc')] });
    const at = new Date().toISOString();
    await world.store().endAttempt('j-1', 1, { kind: 'PREEMPTED' }, at);
    await world.store().changeStatus('j-1', { from: JobStatus.RECOVERING, to: JobStatus.CANCELLING, reason: 'cancelled by the user', attempt: 1, at });
  }

  it('ends a job cancelled while its execution waited CANCELLED, releasing its instances, once', async () => {
    await cancelledInItsBackoff();
    expect(await onExecutionEnded(ended('j-1', 'ABORTED', { error: 'JobCancelled', cause: 'cancelled by the user' }))).toMatchObject({
      action: 'cancelled',
    });
    expect(ec2).toHaveReceivedCommandWith(TerminateInstancesCommand, { InstanceIds: ['i-0abc'] });
    expect(await world.store().getJob('j-1')).toMatchObject({ status: JobStatus.CANCELLED, failureReason: 'cancelled by the user' });
    // EventBridge delivers at least once: the repeat changes nothing.
    expect(await onExecutionEnded(ended('j-1', 'ABORTED'))).toMatchObject({ action: 'ignored' });
    expect((await world.store().getJob('j-1')).status).toBe(JobStatus.CANCELLED);
  });

  it('ends a running job whose execution an operator stopped FAILED_CONTROLLER, with the stop in the reason', async () => {
    stillRunning('i-0abc');
    await givenJob('j-1', JobStatus.RUNNING);
    await givenAttempt('j-1', 1, { instances: [instance('i-0abc')] });
    expect(await onExecutionEnded(ended('j-1', 'ABORTED', { cause: 'stopped by the on-call engineer' }))).toMatchObject({ action: 'failed' });
    expect(ec2).toHaveReceivedCommandWith(TerminateInstancesCommand, { InstanceIds: ['i-0abc'] });
    const job = await world.store().getJob('j-1');
    expect(job.status).toBe(JobStatus.FAILED_CONTROLLER);
    expect(job.failureReason).toContain('stopped by the on-call engineer');
  });

  it('leaves a job alone whose execution is not the one that ended (it continued as a new one)', async () => {
    await givenJob('j-1', JobStatus.RUNNING);
    const event = ended('j-1', 'FAILED', {}, executionArnOf('j-1', '-older'));
    expect(await onExecutionEnded(event)).toMatchObject({ action: 'ignored' });
    expect((await world.store().getJob('j-1')).status).toBe(JobStatus.RUNNING);
  });

  it.each([
    ['an end the machine records itself', ended('j-1', 'SUCCEEDED'), 'event.detail.status'],
    ['an input that is not JSON', ended('j-1', 'ABORTED', { input: '{"jobId":' }), 'event.detail.input'],
    ['an input without a job', ended('j-1', 'ABORTED', { input: '{"attempt":0}' }), 'event.detail.input.jobId'],
    ['another kind of event', { ...ended('j-1', 'ABORTED'), 'detail-type': 'Step Functions State Machine Status Change' }, 'event.detail-type'],
    ['no detail at all', { ...ended('j-1', 'ABORTED'), detail: undefined }, 'event.detail'],
  ])('refuses %s, naming the field, and changes nothing', async (_name, event, path) => {
    await givenJob('j-1', JobStatus.RUNNING);
    await expect(onExecutionEnded(event)).rejects.toMatchObject({ name: 'InvalidInputError', issues: [expect.objectContaining({ path })] });
    expect((await world.store().getJob('j-1')).status).toBe(JobStatus.RUNNING);
    expect(ec2).not.toHaveReceivedCommand(TerminateInstancesCommand);
  });
});
