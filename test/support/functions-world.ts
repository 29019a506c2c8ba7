// The world handler tests run in: dynalite behind the real DynamoJobStore (reached the way a
// Lambda reaches DynamoDB: through the environment), and Step Functions, SSM and EC2 mocked.

import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SFNClient } from '@aws-sdk/client-sfn';
import { SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { resetDeps } from '../../functions/shared/deps.ts';
import { EnvVar, type ComputeEnvConfig } from '../../lib/workflow/env.ts';
import { DynamoJobStore } from '../../lib/adapters/dynamo-job-store/index.ts';
import { ensureTable, startDynalite, type LocalDynamo } from '../../local/dynalite.ts';
import type { InstanceRef, JobRecord } from '../../lib/model.ts';
import { hashSecret } from '../../lib/secrets.ts';
import { parseTaskFile } from '../../lib/task-file/parse.ts';
import { JobStatus } from '../../lib/status.ts';
import { newJobRecord } from '../../lib/usecases/submit-job.ts';
import { attemptRecord } from './fixtures/records.ts';
import { EXECUTION_STATUS_CHANGE } from '../../lib/aws-events.ts';

export const STATE_MACHINE_ARN = 'arn:aws:states:us-east-1:123456789012:stateMachine:relaunch-controller';
export const SECRET = 'the-attempt-secret';

/** A task file with a policy every evaluate test can steer: one restart on errors, code 29 recovers. */
export const TASK_YAML = `name: train
resources:
  cpus: 2
  use_spot: true
  job_recovery:
    max_restarts_on_errors: 1
    recover_on_exit_codes: [29]
run: python train.py
`;

export const sfn = mockClient(SFNClient);
/** SSM: AMI parameters, agents' and jobs' secrets. A command no test stubs answers nothing, as a delete does. */
export const ssm = mockClient(SSMClient);
/** Where the jobs' secrets are, as the stack sets it. */
export const JOB_SECRETS_PATH = '/relaunch/job-secrets';

/** COMPUTE_CONFIG as a deployment in us-east-1 with one subnet would set it, with `overrides`. */
export function computeConfig(overrides: Partial<ComputeEnvConfig> = {}): ComputeEnvConfig {
  return {
    regions: [{ region: 'us-east-1', subnetsByZone: { 'us-east-1a': 'subnet-0123456789abcdef0' }, securityGroupIds: ['sg-0123456789abcdef0'] }],
    instanceProfileArn: 'arn:aws:iam::123456789012:instance-profile/relaunch',
    namePrefix: 'relaunch',
    ...overrides,
  };
}

let dynamo: LocalDynamo;
let tableCount = 0;
let store: DynamoJobStore;

/** Starts dynalite once per file; every test gets a fresh table and fresh Lambda deps. */
export function useWorld(): { store: () => DynamoJobStore } {
  beforeAll(async () => {
    dynamo = await startDynalite();
    process.env.AWS_REGION = 'us-east-1';
    process.env.AWS_ACCESS_KEY_ID = 'test';
    process.env.AWS_SECRET_ACCESS_KEY = 'test';
    process.env.AWS_ENDPOINT_URL_DYNAMODB = dynamo.endpoint;
    process.env[EnvVar.stateMachineArn] = STATE_MACHINE_ARN;
    process.env[EnvVar.jobSecretsPath] = JOB_SECRETS_PATH;
    process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
  });
  afterAll(async () => {
    await dynamo.close();
  });
  beforeEach(async () => {
    tableCount += 1;
    const tableName = `jobs-${process.pid}-${tableCount}`;
    process.env[EnvVar.tableName] = tableName;
    const client = new DynamoDBClient({ endpoint: dynamo.endpoint });
    await ensureTable(client, tableName);
    store = new DynamoJobStore({ client, tableName });
    resetDeps();
    sfn.reset();
    ssm.reset();
  });
  return { store: () => store };
}

/** Stores a job, as submitJob would, in the given status (through legal transitions), from TASK_YAML or `yaml`. */
export async function givenJob(jobId: string, status: JobStatus = JobStatus.PENDING, yaml = TASK_YAML): Promise<JobRecord> {
  const spec = parseTaskFile(yaml).spec;
  const at = new Date().toISOString();
  await store.createJob({
    ...newJobRecord(jobId, spec, at),
    executionArn: executionArnOf(jobId),
  });
  const path: JobStatus[] = {
    [JobStatus.PENDING]: [],
    [JobStatus.STARTING]: [JobStatus.STARTING],
    [JobStatus.RUNNING]: [JobStatus.STARTING, JobStatus.RUNNING],
    [JobStatus.RECOVERING]: [JobStatus.STARTING, JobStatus.RECOVERING],
    [JobStatus.SUCCEEDED]: [JobStatus.STARTING, JobStatus.SUCCEEDED],
  }[status as string] ?? [];
  let from: JobStatus = JobStatus.PENDING;
  for (const to of path) {
    await store.changeStatus(jobId, { from, to, reason: 'test', attempt: null, at });
    from = to;
  }
  return store.getJob(jobId);
}

/** Starts attempt `attempt` with the known SECRET, on these instances, optionally waiting on a token. */
export async function givenAttempt(
  jobId: string,
  attempt: number,
  options: { instances?: readonly InstanceRef[]; taskToken?: string } = {},
): Promise<void> {
  await store.putAttempt(attemptRecord(jobId, attempt, new Date().toISOString(), { secretHash: hashSecret(SECRET) }));
  const instances = options.instances ?? [];
  if (instances.length > 0) {
    await store.setInstances(jobId, attempt, { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm5.large' }, instances);
  }
  if (options.taskToken !== undefined) await store.setTaskToken(jobId, attempt, options.taskToken, 'AwaitAttempt');
}

/** One instance, rank 0. */
export function instance(instanceId: string): InstanceRef {
  return { instanceId, nodeRank: 0, privateIp: '10.0.0.5' };
}

/** The ARN of the job's execution (named after the job), with `suffix` for a later one. */
export function executionArnOf(jobId: string, suffix = ''): string {
  return `${STATE_MACHINE_ARN.replace(':stateMachine:', ':execution:')}:${jobId}${suffix}`;
}

/** Step Functions' "Execution Status Change" event for an execution of the job, as EventBridge delivers it. */
export function executionStatusChange(jobId: string, status: string, detail: Record<string, unknown> = {}, executionArn = executionArnOf(jobId)) {
  return {
    version: '0',
    id: 'e-1',
    source: 'aws.states',
    account: '123456789012',
    region: 'us-east-1',
    time: '2026-03-01T12:00:00Z',
    resources: [executionArn],
    'detail-type': EXECUTION_STATUS_CHANGE,
    detail: {
      executionArn,
      stateMachineArn: STATE_MACHINE_ARN,
      name: jobId,
      status,
      input: JSON.stringify({ jobId, attempt: 0, attemptsInExecution: 0 }),
      error: null,
      cause: null,
      ...detail,
    },
  };
}
