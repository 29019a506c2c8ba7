// How DynamoJobStore explains a refused write, on a mocked client: from the item DynamoDB
// hands back with the refusal (ALL_OLD) when there is one, and from a read when there is
// none (a missing item, or a service that gives none).

import {
  ConditionalCheckFailedException,
  DynamoDBClient,
  GetItemCommand,
  TransactionCanceledException,
  TransactWriteItemsCommand,
  UpdateItemCommand,
  type AttributeValue,
} from '@aws-sdk/client-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import { DynamoJobStore } from '../../../../../lib/adapters/dynamo-job-store/index.ts';
import { attemptItem, jobItem } from '../../../../../lib/adapters/dynamo-job-store/items.ts';
import { StaleAttemptError } from '../../../../../lib/errors.ts';
import { attemptRecord } from '../../../../support/fixtures/records.ts';
import { sampleJob } from '../../../../support/job-store.contract.ts';

const dynamo = mockClient(DynamoDBClient);
const store = () => new DynamoJobStore({ client: new DynamoDBClient({ region: 'us-east-1' }), tableName: 'jobs' });
const meta = { $metadata: { httpStatusCode: 400 } };

/** Attempt 1 of job-1, ended: a heartbeat for it changes nothing. */
const ended = attemptItem(attemptRecord('job-1', 1, '2026-01-01T00:00:01.000Z', { outcome: { kind: 'PREEMPTED' }, endedAt: '2026-01-01T00:00:09.000Z' }));
/** job-1 with three attempts. */
const jobAtThree = jobItem({ ...sampleJob, attemptCount: 3 });

function refusedUpdate(item?: Record<string, AttributeValue>): ConditionalCheckFailedException {
  return new ConditionalCheckFailedException({ message: 'The conditional request failed', ...meta, ...(item === undefined ? {} : { Item: item }) });
}

function cancelled(reasons: { Code: string; Item?: Record<string, AttributeValue> }[]): TransactionCanceledException {
  return new TransactionCanceledException({ message: 'Transaction cancelled', ...meta, CancellationReasons: reasons });
}

beforeEach(() => dynamo.reset());

describe('DynamoJobStore: a refused UpdateItem', () => {
  it('asks for the refused item in the request itself', async () => {
    dynamo.on(UpdateItemCommand).rejects(refusedUpdate(ended));
    await expect(store().recordHeartbeat('job-1', 1, '2026-01-01T00:00:10.000Z', 0)).rejects.toThrow(StaleAttemptError);
    expect(dynamo).toHaveReceivedCommandWith(UpdateItemCommand, { ReturnValuesOnConditionCheckFailure: 'ALL_OLD', ReturnValues: 'ALL_NEW' });
  });

  it('explains the refusal from the item that came back, reading nothing', async () => {
    dynamo.on(UpdateItemCommand).rejects(refusedUpdate(ended));
    await expect(store().recordHeartbeat('job-1', 1, '2026-01-01T00:00:10.000Z', 0)).rejects.toThrow('attempt 1 of job job-1 has already ended; a heartbeat changes nothing');
    await expect(store().endAttempt('job-1', 1, { kind: 'PREEMPTED' }, '2026-01-01T00:00:10.000Z')).resolves.toMatchObject({ won: false, attempt: { endedAt: '2026-01-01T00:00:09.000Z' } });
    expect(dynamo).not.toHaveReceivedCommand(GetItemCommand);
  });

  it('reads the attempt when no item came back, and answers the same', async () => {
    dynamo.on(UpdateItemCommand).rejects(refusedUpdate());
    dynamo.on(GetItemCommand).resolves({ Item: ended });
    await expect(store().recordHeartbeat('job-1', 1, '2026-01-01T00:00:10.000Z', 0)).rejects.toThrow('attempt 1 of job job-1 has already ended; a heartbeat changes nothing');
    expect(dynamo).toHaveReceivedCommandTimes(GetItemCommand, 1);
    expect(dynamo).toHaveReceivedCommandWith(GetItemCommand, { Key: { pk: { S: 'JOB#job-1' }, sk: { S: 'ATTEMPT#0001' } }, ConsistentRead: true });
  });
});

describe('DynamoJobStore: a refused transaction', () => {
  it('explains an out-of-sequence attempt from the job that came back with the refusal', async () => {
    dynamo.on(TransactWriteItemsCommand).rejects(cancelled([{ Code: 'ConditionalCheckFailed', Item: jobAtThree }, { Code: 'None' }]));
    await expect(store().putAttempt(attemptRecord('job-1', 2, '2026-01-01T00:00:01.000Z'))).rejects.toThrow('job job-1 has 3 attempt(s); attempt 2 cannot start');
    const sent = dynamo.commandCalls(TransactWriteItemsCommand)[0]?.args[0].input.TransactItems;
    expect(sent?.[0]?.Update).toMatchObject({ ConditionExpression: '#attemptCount = :v1', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' });
    expect(dynamo).not.toHaveReceivedCommand(GetItemCommand);
  });

  it('reads the job when the refused item is another one, whose item says nothing of the job', async () => {
    dynamo.on(TransactWriteItemsCommand).rejects(cancelled([{ Code: 'None' }, { Code: 'ConditionalCheckFailed', Item: ended }]));
    dynamo.on(GetItemCommand).resolves({ Item: jobAtThree });
    await expect(store().putAttempt(attemptRecord('job-1', 1, '2026-01-01T00:00:01.000Z'))).rejects.toThrow('job job-1 has 3 attempt(s); attempt 1 cannot start');
    expect(dynamo).toHaveReceivedCommandWith(GetItemCommand, { Key: { pk: { S: 'JOB#job-1' }, sk: { S: 'JOB' } } });
  });
});
