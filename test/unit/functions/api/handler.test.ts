// functions/api: API Gateway proxy events through lib/http to DynamoDB (dynalite) and a
// mocked Step Functions, asserting what was stored and what was sent.

import {
  ExecutionDoesNotExist,
  GetExecutionHistoryCommand,
  SendTaskFailureCommand,
  SendTaskSuccessCommand,
  StartExecutionCommand,
  StopExecutionCommand,
  type HistoryEventType,
} from '@aws-sdk/client-sfn';
import { DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import 'aws-sdk-client-mock-vitest/extend';
import { describe, expect, it } from 'vitest';
import { handler } from '../../../../functions/api/handler.ts';
import { TTL_ATTRIBUTE } from '../../../../lib/workflow/job-table.ts';
import { EnvVar } from '../../../../lib/workflow/env.ts';
import { executionArnOf } from '../../../../lib/adapters/sfn-workflow.ts';
import { authorizationHeader } from '../../../../lib/agent/protocol.ts';
import { JobStatus } from '../../../../lib/status.ts';
import { PutParameterCommand } from '@aws-sdk/client-ssm';
import { givenAttempt, givenJob, JOB_SECRETS_PATH, SECRET, sfn, ssm, STATE_MACHINE_ARN, TASK_YAML, useWorld } from '../../../support/functions-world.ts';

const world = useWorld();

/** Ids of the shape newJobId makes: the API answers any other id 404 without a look. */
const JOB = 'j-00mm8abcd-api001';
const OTHER_JOB = 'j-00mm8abcd-nope00';

function event(httpMethod: string, path: string, options: { body?: string; headers?: Record<string, string>; base64?: boolean } = {}) {
  const body = options.body === undefined ? null : options.base64 === true ? Buffer.from(options.body).toString('base64') : options.body;
  return { httpMethod, path, headers: options.headers ?? null, queryStringParameters: null, body, isBase64Encoded: options.base64 ?? false };
}

async function call(e: ReturnType<typeof event>) {
  const response = await handler(e);
  return { statusCode: response.statusCode, json: JSON.parse(response.body) as Record<string, unknown> };
}

const report = (jobId: string, attempt: number, body: object, secret = SECRET) =>
  event('POST', `/jobs/${jobId}/attempts/${attempt}/report`, {
    headers: { authorization: authorizationHeader(secret), 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

describe('POST /jobs', () => {
  it('stores a good task file PENDING and starts its execution, named by the job id', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: 'arn:exec:1', startDate: new Date() });
    const res = await call(event('POST', '/jobs', { body: TASK_YAML, headers: { 'Content-Type': 'application/yaml' }, base64: true }));
    expect(res.statusCode).toBe(202);
    const jobId = res.json.jobId as string;
    expect(sfn).toHaveReceivedCommandTimes(StartExecutionCommand, 1);
    expect(sfn).toHaveReceivedCommandWith(StartExecutionCommand, {
      stateMachineArn: STATE_MACHINE_ARN,
      name: jobId,
      input: JSON.stringify({ jobId, attempt: 0, attemptsInExecution: 0 }),
    });
    expect(await world.store().getJob(jobId)).toMatchObject({ status: JobStatus.PENDING, executionArn: 'arn:exec:1', name: 'train' });
  });

  it("stores the task's secrets as an SSM SecureString, and no answer or record holds a value", async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: 'arn:exec:1', startDate: new Date() });
    ssm.on(PutParameterCommand).resolves({ Version: 1 });
    const body = 'name: s\nrun: train\nsecrets:\n  HF_TOKEN: planted-API-value\n';

    const res = await call(event('POST', '/jobs', { body, headers: { 'content-type': 'application/yaml' } }));

    expect(res.statusCode).toBe(202);
    const jobId = res.json.jobId as string;
    expect(ssm).toHaveReceivedCommandWith(PutParameterCommand, {
      Name: `${JOB_SECRETS_PATH}/${jobId}`,
      Value: JSON.stringify({ HF_TOKEN: 'planted-API-value' }),
      Type: 'SecureString',
    });
    const view = await handler(event('GET', `/jobs/${jobId}`));
    const table = await new DynamoDBClient({}).send(new ScanCommand({ TableName: process.env[EnvVar.tableName] }));
    expect(JSON.stringify([res.json, view, table.Items])).not.toContain('planted-API-value');
    expect((await world.store().getJob(jobId)).spec.secretNames).toEqual(['HF_TOKEN']);
  });

  it('takes a pipeline as one job, its tasks shown in order, and a task EC2 cannot run as a 400 under task N', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: 'arn:exec:1', startDate: new Date() });
    const pipeline = 'name: p\n---\nname: a\nrun: x\n---\nname: b\nrun: y\n';

    const res = await call(event('POST', '/jobs', { body: pipeline, headers: { 'content-type': 'application/yaml' } }));
    const refused = await call(event('POST', '/jobs', { body: 'run: x\n---\nworkdir: .\nrun: y\n' }));

    expect(res.statusCode).toBe(202);
    const view = await call(event('GET', `/jobs/${res.json.jobId as string}`));
    expect(view.json).toMatchObject({ name: 'p', status: JobStatus.PENDING, tasks: [{ task: 0, name: 'a', status: JobStatus.PENDING }, { task: 1, name: 'b', status: JobStatus.PENDING }] });
    expect(sfn).toHaveReceivedCommandTimes(StartExecutionCommand, 1);
    expect(refused.statusCode).toBe(400);
    expect(refused.json.issues).toEqual([expect.objectContaining({ path: 'task 2: workdir' })]);
  });

  it('answers 400 naming a secret the file leaves null, storing nothing', async () => {
    const res = await call(event('POST', '/jobs', { body: 'run: x\nsecrets:\n  HF_TOKEN: null\n' }));

    expect(res.statusCode).toBe(400);
    expect(res.json.issues).toEqual([expect.objectContaining({ path: 'secrets.HF_TOKEN', message: expect.stringContaining('expected a value at submit') })]);
    expect(ssm).not.toHaveReceivedCommand(PutParameterCommand);
    expect(await world.store().listJobs()).toEqual([]);
  });

  it('answers 400 with located issues for a bad file, storing and starting nothing', async () => {
    const res = await call(event('POST', '/jobs', { body: 'run: x\nresources:\n  cloud: gcp\n' }));
    expect(res.statusCode).toBe(400);
    expect(res.json.issues).toContainEqual(expect.objectContaining({ path: 'resources.cloud', line: 3 }));
    expect(sfn).not.toHaveReceivedCommand(StartExecutionCommand);
    expect(await world.store().listJobs()).toEqual([]);
  });

  it('answers 400 for what EC2 cannot run (a workdir), at submit rather than at the first launch, storing nothing', async () => {
    const res = await call(event('POST', '/jobs', { body: 'workdir: .\nrun: python train.py\n' }));
    expect(res.statusCode).toBe(400);
    expect(res.json.issues).toEqual([expect.objectContaining({ path: 'workdir', message: expect.stringContaining('uploaded into relaunch\'s store first: submit the file with relaunch run') })]);
    expect(sfn).not.toHaveReceivedCommand(StartExecutionCommand);
    expect(await world.store().listJobs()).toEqual([]);
  });

  it('answers 400 for ports the instances do not open (OPEN_PORTS), at submit, storing nothing', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: 'arn:exec:1', startDate: new Date() });
    process.env[EnvVar.openPorts] = JSON.stringify([{ from: 8000, to: 8100 }]);
    try {
      const refused = await call(event('POST', '/jobs', { body: 'resources:\n  ports: [8080, 9000]\nrun: serve\n' }));
      expect(refused.statusCode).toBe(400);
      expect(refused.json.issues).toEqual([
        {
          path: 'resources.ports',
          message: "8080, 9000 are not open on relaunch's job instances (this deployment opens 8000-8100; see the relaunch:jobPorts context key)",
        },
      ]);
      expect(await world.store().listJobs()).toEqual([]);

      const accepted = await call(event('POST', '/jobs', { body: 'resources:\n  ports: 8080\nrun: serve\n' }));
      expect(accepted.statusCode).toBe(202);
    } finally {
      delete process.env[EnvVar.openPorts];
    }
    // Unset: no port is open, so any ports are refused.
    const none = await call(event('POST', '/jobs', { body: 'resources:\n  ports: 8080\nrun: serve\n' }));
    expect(none.json.issues).toEqual([expect.objectContaining({ message: expect.stringContaining('this deployment opens none') })]);
  });

  it('answers a generic 500 when Step Functions fails, and marks the job FAILED_CONTROLLER', async () => {
    sfn.on(StartExecutionCommand).rejects(new Error('AccessDenied: internal detail'));
    const res = await call(event('POST', '/jobs', { body: TASK_YAML }));
    expect(res.statusCode).toBe(500);
    expect(JSON.stringify(res.json)).not.toContain('internal detail');
    const [job] = await world.store().listJobs();
    expect(job?.status).toBe(JobStatus.FAILED_CONTROLLER);
  });
});

describe('POST /jobs with an Idempotency-Key, on DynamoDB', () => {
  const submit = (key: string, caller: string | null) => ({
    ...event('POST', '/jobs', { body: TASK_YAML, headers: { 'content-type': 'application/yaml', 'Idempotency-Key': key } }),
    requestContext: { identity: { userArn: caller, sourceIp: '198.51.100.7' } },
  });
  const ALICE = 'arn:aws:sts::123456789012:assumed-role/dev/alice';

  it('makes one job of two submits with one key sent at once, and answers both with it', async () => {
    sfn.on(StartExecutionCommand).callsFake((input: { name: string }) => ({ executionArn: `arn:exec:${input.name}`, startDate: new Date() }));

    const answers = await Promise.all([handler(submit('retry-me-1', ALICE)), handler(submit('retry-me-1', ALICE))]);
    const [a, b] = answers.map((answer) => ({ ...answer, json: JSON.parse(answer.body) as Record<string, unknown> }));

    expect([a?.statusCode, b?.statusCode]).toEqual([202, 202]);
    expect(a?.json.jobId).toBe(b?.json.jobId);
    // One made the job, the other was answered with it.
    expect(answers.map((answer) => answer.headers['idempotent-replayed'] ?? 'made').sort()).toEqual(['made', 'true']);
    const jobs = await world.store().listJobs();
    expect(jobs.map((job) => job.jobId)).toEqual([a?.json.jobId]);
    // Each start (a repeat may start a job it finds PENDING) names that one job: Step Functions makes one execution of it.
    const starts = sfn.commandCalls(StartExecutionCommand).map((c) => c.args[0].input.name);
    expect(new Set(starts)).toEqual(new Set([a?.json.jobId]));
  });

  it('stores the claim under a digest, never the key itself, with a TTL a day out', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: 'arn:exec:1', startDate: new Date() });
    const key = 'my-own-key-|#JOB';
    const res = await call(submit(key, ALICE));

    const client = new DynamoDBClient({ endpoint: process.env.AWS_ENDPOINT_URL_DYNAMODB });
    const { Items = [] } = await client.send(new ScanCommand({ TableName: process.env[EnvVar.tableName] }));
    const claims = Items.filter((item) => item.pk?.S?.startsWith('IDEMPOTENCY#'));
    expect(claims).toHaveLength(1);
    expect(claims[0]?.pk?.S).toMatch(/^IDEMPOTENCY#[0-9a-f]{64}$/);
    expect(JSON.stringify(Items)).not.toContain(key);
    expect(claims[0]?.jobId?.S).toBe(res.json.jobId);
    const ttl = Number(claims[0]?.[TTL_ATTRIBUTE]?.N) * 1000;
    expect(Math.abs(ttl - (Date.now() + 24 * 3600 * 1000))).toBeLessThan(60_000);
    client.destroy();
  });

  it('keeps the keys of the IAM callers API Gateway names apart', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: 'arn:exec:1', startDate: new Date() });

    const alice = await call(submit('shared-key', ALICE));
    const bob = await call(submit('shared-key', 'arn:aws:sts::123456789012:assumed-role/dev/bob'));
    const aliceAgain = await call(submit('shared-key', ALICE));

    expect(bob.json.jobId).not.toBe(alice.json.jobId);
    expect(aliceAgain.json.jobId).toBe(alice.json.jobId);
    expect(await world.store().listJobs()).toHaveLength(2);
  });

  it('answers 422 naming the header for another task under a used key, and 400 for a key that is not one', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: 'arn:exec:1', startDate: new Date() });
    await call(submit('k-1', ALICE));

    const other = await call({ ...submit('k-1', ALICE), body: TASK_YAML.replace('python train.py', 'python eval.py') });
    const bad = await call(submit('k'.repeat(5000), ALICE));

    expect(other).toMatchObject({ statusCode: 422, json: { issues: [{ path: 'Idempotency-Key' }] } });
    expect(bad).toMatchObject({ statusCode: 400, json: { issues: [{ path: 'Idempotency-Key' }] } });
    expect(await world.store().listJobs()).toHaveLength(1);
  });
});

describe('agent reports', () => {
  const ok = { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: '' };
  const ran = { ...ok, phase: 'run', outputTail: 'loss 0.01' };

  it('stores the exit code once and sends SendTaskSuccess once, duplicates included', async () => {
    sfn.on(SendTaskSuccessCommand).resolves({});
    await givenJob(JOB, JobStatus.STARTING);
    await givenAttempt(JOB, 1, { taskToken: 'token-1' });
    expect((await call(report(JOB, 1, ok))).json).toEqual({ status: 'accepted', run: 'go', reason: `attempt 1 of job ${JOB} is the live attempt` });
    expect((await call(report(JOB, 1, ran))).json).toEqual({ status: 'accepted' });
    expect(await call(report(JOB, 1, ran))).toEqual({ statusCode: 200, json: { status: 'duplicate' } });
    expect(sfn).toHaveReceivedCommandTimes(SendTaskSuccessCommand, 1);
    expect(sfn).toHaveReceivedCommandWith(SendTaskSuccessCommand, { taskToken: 'token-1', output: JSON.stringify({ outcome: 'EXITED' }) });
    const attempt = await world.store().getAttempt(JOB, 1);
    expect(attempt.reports.map((r) => [r.phase, r.exitCode])).toEqual([['setup', 0], ['run', 0]]);
    expect(attempt.outcome).toMatchObject({ kind: 'EXITED', phase: 'run' });
    expect((await world.store().getJob(JOB)).status).toBe(JobStatus.RUNNING);
  });

  it('answers 409 to a report from an attempt that is no longer the live one', async () => {
    await givenJob(JOB, JobStatus.STARTING);
    await givenAttempt(JOB, 1);
    await world.store().endAttempt(JOB, 1, { kind: 'PREEMPTED' }, new Date().toISOString());
    await givenAttempt(JOB, 2, { taskToken: 'token-2' });
    const stale = await call(report(JOB, 1, ran));
    expect(stale.statusCode).toBe(409);
    expect(sfn).not.toHaveReceivedCommand(SendTaskSuccessCommand);
    expect((await world.store().getAttempt(JOB, 1)).reports).toEqual([]);
  });

  it('answers 401 to a wrong secret and stores nothing', async () => {
    await givenJob(JOB, JobStatus.STARTING);
    await givenAttempt(JOB, 1, { taskToken: 'token-1' });
    const res = await call(report(JOB, 1, ran, 'guessed'));
    expect(res.statusCode).toBe(401);
    expect(sfn).not.toHaveReceivedCommand(SendTaskSuccessCommand);
    expect((await world.store().getAttempt(JOB, 1)).reports).toEqual([]);
  });

  it('stores the report but sends nothing when the token is not stored yet (AwaitAttempt will)', async () => {
    await givenJob(JOB, JobStatus.STARTING);
    await givenAttempt(JOB, 1);
    await call(report(JOB, 1, { ...ok, exitCode: 2 }));
    expect(sfn).not.toHaveReceivedCommand(SendTaskSuccessCommand);
    expect((await world.store().getAttempt(JOB, 1)).outcome).toMatchObject({ kind: 'EXITED', phase: 'setup' });
  });
});

describe('DELETE /jobs/{id} in each status', () => {
  it.each([
    [JobStatus.PENDING, 'LambdaFunctionScheduled'],
    [JobStatus.STARTING, 'TaskStateEntered'],
    [JobStatus.RECOVERING, 'TaskSucceeded'],
  ])('marks a %s job CANCELLING (202) and leaves its execution, between steps (%s), to end it at its next step', async (status, last) => {
    sfn.on(GetExecutionHistoryCommand).resolves({ events: [{ type: last as HistoryEventType, id: 9, timestamp: new Date() }] });
    await givenJob(JOB, status);
    if (status !== JobStatus.PENDING) await givenAttempt(JOB, 1);
    const res = await call(event('DELETE', `/jobs/${JOB}`));
    expect(res).toEqual({ statusCode: 202, json: { jobId: JOB, status: JobStatus.CANCELLING, alreadyFinished: false } });
    expect(sfn).toHaveReceivedCommandWith(GetExecutionHistoryCommand, { executionArn: executionArnOf(STATE_MACHINE_ARN, JOB), reverseOrder: true, maxResults: 1 });
    expect(sfn).not.toHaveReceivedCommand(StopExecutionCommand);
    expect(sfn).not.toHaveReceivedCommand(SendTaskFailureCommand);
    expect((await world.store().getJob(JOB)).status).toBe(JobStatus.CANCELLING);
  });

  it('stops the execution of a job in its backoff Wait at once, for the janitor to end it', async () => {
    sfn.on(GetExecutionHistoryCommand).resolves({ events: [{ type: 'WaitStateEntered', id: 9, timestamp: new Date() }] });
    sfn.on(StopExecutionCommand).resolves({});
    await givenJob(JOB, JobStatus.RECOVERING);
    await givenAttempt(JOB, 1);
    expect((await call(event('DELETE', `/jobs/${JOB}`))).statusCode).toBe(202);
    expect(sfn).toHaveReceivedCommandWith(StopExecutionCommand, {
      executionArn: executionArnOf(STATE_MACHINE_ARN, JOB),
      error: 'JobCancelled',
      cause: 'cancelled by the user',
    });
    // A second cancel stops nothing: the first one did.
    expect((await call(event('DELETE', `/jobs/${JOB}`))).statusCode).toBe(202);
    expect(sfn).toHaveReceivedCommandTimes(StopExecutionCommand, 1);
  });

  it('takes an execution that has already gone as nothing to stop', async () => {
    sfn.on(GetExecutionHistoryCommand).rejects(new ExecutionDoesNotExist({ message: 'gone', $metadata: {} }));
    await givenJob(JOB, JobStatus.RECOVERING);
    await givenAttempt(JOB, 1);
    expect((await call(event('DELETE', `/jobs/${JOB}`))).statusCode).toBe(202);
    expect(sfn).not.toHaveReceivedCommand(StopExecutionCommand);
  });

  it('fails the waiting task of a RUNNING job with JobCancelled', async () => {
    sfn.on(SendTaskFailureCommand).resolves({});
    await givenJob(JOB, JobStatus.RUNNING);
    await givenAttempt(JOB, 1, { taskToken: 'token-1' });
    expect((await call(event('DELETE', `/jobs/${JOB}`))).statusCode).toBe(202);
    expect(sfn).toHaveReceivedCommandWith(SendTaskFailureCommand, { taskToken: 'token-1', error: 'JobCancelled' });
  });

  it('answers 200 and changes nothing for a finished job; 404 for an unknown one', async () => {
    await givenJob(JOB, JobStatus.SUCCEEDED);
    expect(await call(event('DELETE', `/jobs/${JOB}`))).toEqual({
      statusCode: 200,
      json: { jobId: JOB, status: JobStatus.SUCCEEDED, alreadyFinished: true },
    });
    expect((await call(event('DELETE', `/jobs/${OTHER_JOB}`))).statusCode).toBe(404);
  });
});

describe('GET', () => {
  it('lists jobs and shows one with its attempts', async () => {
    await givenJob(JOB, JobStatus.STARTING);
    await givenAttempt(JOB, 1);
    expect((await call(event('GET', '/jobs'))).json.jobs).toEqual([expect.objectContaining({ jobId: JOB })]);
    const one = await call(event('GET', `/jobs/${JOB}`));
    expect(one.json).toMatchObject({ jobId: JOB, status: JobStatus.STARTING, attempts: [expect.objectContaining({ attempt: 1, outcome: null })] });
  });
});
