// Which AWS failures the DynamoDB and Step Functions adapters raise as TransientError (the
// state machine retries those steps) and which they leave as they are, on mocked clients.
// EC2's, which retries first and keeps capacity apart, are in ec2-compute.test.ts.

import {
  ConditionalCheckFailedException,
  DynamoDBClient,
  DynamoDBServiceException,
  GetItemCommand,
  InternalServerError,
  ProvisionedThroughputExceededException,
  QueryCommand,
  RequestLimitExceeded,
  ThrottlingException,
  TransactionCanceledException,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import {
  InvalidToken,
  SendTaskSuccessCommand,
  SFNClient,
  SFNServiceException,
  StartExecutionCommand,
  StopExecutionCommand,
  GetExecutionHistoryCommand,
  ValidationException,
} from '@aws-sdk/client-sfn';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import { isTransientAwsError } from '../../../../lib/adapters/aws-errors.ts';
import { DynamoJobStore } from '../../../../lib/adapters/dynamo-job-store/index.ts';
import { SfnWorkflow } from '../../../../lib/adapters/sfn-workflow.ts';
import { JobNotFoundError, StaleAttemptError, TransientError } from '../../../../lib/errors.ts';
import { sampleJob } from '../../../support/job-store.contract.ts';

const dynamo = mockClient(DynamoDBClient);
const sfn = mockClient(SFNClient);
const store = () => new DynamoJobStore({ client: new DynamoDBClient({ region: 'us-east-1' }), tableName: 'jobs' });
const MACHINE = 'arn:aws:states:us-east-1:123456789012:stateMachine:relaunch-controller';
const workflow = () => new SfnWorkflow({ client: new SFNClient({ region: 'us-east-1' }), stateMachineArn: MACHINE });
const INPUT = { jobId: 'job-1', attempt: 0, attemptsInExecution: 0 } as const;

/** An error the way the SDK builds one from a response it has no class for. */
function unmodeled(name: string, httpStatusCode: number, make = (o: ConstructorParameters<typeof SFNServiceException>[0]) => new SFNServiceException(o)) {
  return make({ name, $fault: httpStatusCode >= 500 ? 'server' : 'client', $metadata: { httpStatusCode }, message: `${name} (from the test)` });
}
const unmodeledDynamo = (name: string, httpStatusCode: number) =>
  unmodeled(name, httpStatusCode, (o) => new DynamoDBServiceException(o));

beforeEach(() => {
  dynamo.reset();
  sfn.reset();
});

describe('isTransientAwsError', () => {
  it.each([
    ['throttled by its code alone (a 400)', unmodeled('ThrottlingException', 400), true],
    ['EC2 slowing a caller down', unmodeled('RequestLimitExceeded', 503), true],
    ['any 5xx, whatever its code', unmodeled('SomethingNew', 502), true],
    ['an error the SDK marks as throttling', Object.assign(unmodeled('Custom', 400), { $retryable: { throttling: true } }), true],
    ['a refused condition', new ConditionalCheckFailedException({ message: 'refused', $metadata: { httpStatusCode: 400 } }), false],
    ['a validation error', new ValidationException({ message: 'bad input', $metadata: { httpStatusCode: 400 } }), false],
    ['a denied permission', unmodeled('AccessDeniedException', 403), false],
    ['an error that is not from AWS', new Error('boom'), false],
    ['not an error at all', 'boom', false],
  ])('judges %s: %s', (_case, error, transient) => {
    expect(isTransientAwsError(error)).toBe(transient);
  });
});

describe('DynamoJobStore', () => {
  const meta = { $metadata: { httpStatusCode: 400 } };
  it.each([
    ['ProvisionedThroughputExceededException', new ProvisionedThroughputExceededException({ message: 'over capacity', ...meta })],
    ['ThrottlingException', new ThrottlingException({ message: 'slow down', ...meta })],
    ['RequestLimitExceeded', new RequestLimitExceeded({ message: 'account limit', ...meta })],
    ['InternalServerError', new InternalServerError({ message: 'oops', $metadata: { httpStatusCode: 500 } })],
    ['ServiceUnavailable', unmodeledDynamo('ServiceUnavailable', 503)],
  ])('raises %s on a read as TransientError, naming the call and keeping the SDK error as cause', async (code, sdkError) => {
    dynamo.on(GetItemCommand).rejects(sdkError);
    const read = store().getJob('job-1');
    await expect(read).rejects.toBeInstanceOf(TransientError);
    await expect(read).rejects.toMatchObject({ name: TransientError.errorName, message: expect.stringContaining(`DynamoDB GetItem: throttled or failed on AWS's side`), cause: sdkError });
    await expect(read).rejects.toThrow(code);
  });

  it('raises a throttled query, update and transaction as TransientError', async () => {
    const throttled = new ProvisionedThroughputExceededException({ message: 'over capacity', ...meta });
    dynamo.on(QueryCommand).rejects(throttled);
    dynamo.on(UpdateItemCommand).rejects(throttled);
    dynamo.on(TransactWriteItemsCommand).rejects(throttled);
    await expect(store().listJobs()).rejects.toThrow(/^DynamoDB Query: /);
    await expect(store().setExecution('job-1', 'arn:x')).rejects.toThrow(/^DynamoDB UpdateItem: /);
    await expect(store().createJob(sampleJob)).rejects.toThrow(/^DynamoDB TransactWriteItems: /);
  });

  it('raises a transaction cancelled because an item was throttled as TransientError', async () => {
    const cancelled = new TransactionCanceledException({
      message: 'Transaction cancelled [None, ThrottlingError]',
      ...meta,
      CancellationReasons: [{ Code: 'None' }, { Code: 'ThrottlingError' }],
    });
    dynamo.on(TransactWriteItemsCommand).rejects(cancelled);
    await expect(store().createJob(sampleJob)).rejects.toMatchObject({ name: TransientError.errorName, cause: cancelled });
  });

  it('still answers a refused condition as the port error, never as transient', async () => {
    dynamo.on(UpdateItemCommand).rejects(new ConditionalCheckFailedException({ message: 'refused', ...meta }));
    await expect(store().setExecution('job-1', 'arn:x')).rejects.toBeInstanceOf(JobNotFoundError);
  });

  it('lets a validation error through as it is: a bad request does not get better by waiting', async () => {
    const invalid = unmodeledDynamo('ValidationException', 400);
    dynamo.on(GetItemCommand).rejects(invalid);
    await expect(store().getJob('job-1')).rejects.toBe(invalid);
  });
});

describe('SfnWorkflow', () => {
  it.each([
    ['ThrottlingException', unmodeled('ThrottlingException', 400)],
    ['a 500', unmodeled('InternalFailure', 500)],
    ['a 503 with no code it knows', unmodeled('ServiceUnavailable', 503)],
  ])('raises %s on StartExecution as TransientError', async (_case, sdkError) => {
    sfn.on(StartExecutionCommand).rejects(sdkError);
    const start = workflow().start('job-1', INPUT);
    await expect(start).rejects.toBeInstanceOf(TransientError);
    await expect(start).rejects.toMatchObject({ message: expect.stringMatching(/^Step Functions StartExecution: /), cause: sdkError });
  });

  it('raises a throttled task callback and stop as TransientError', async () => {
    const throttled = unmodeled('ThrottlingException', 400);
    sfn.on(SendTaskSuccessCommand).rejects(throttled);
    sfn.on(GetExecutionHistoryCommand).resolves({ events: [{ type: 'WaitStateEntered', id: 1, timestamp: new Date() }] });
    sfn.on(StopExecutionCommand).rejects(throttled);
    await expect(workflow().resume('tok', { outcome: 'EXITED' })).rejects.toThrow(/^Step Functions SendTaskSuccess: .*ThrottlingException/);
    await expect(workflow().stopBetweenSteps('arn:exec', 'cancelled')).rejects.toThrow(/^Step Functions StopExecution: /);
  });

  it('still answers an ended task as StaleAttemptError, never as transient', async () => {
    sfn.on(SendTaskSuccessCommand).rejects(new InvalidToken({ message: 'bad token', $metadata: { httpStatusCode: 400 } }));
    await expect(workflow().resume('tok', { outcome: 'EXITED' })).rejects.toBeInstanceOf(StaleAttemptError);
  });

  it('lets a validation error through as it is', async () => {
    const invalid = new ValidationException({ message: 'bad name', $metadata: { httpStatusCode: 400 } });
    sfn.on(StartExecutionCommand).rejects(invalid);
    await expect(workflow().start('job-1', INPUT)).rejects.toBe(invalid);
  });
});
