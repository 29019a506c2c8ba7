// DynamoJobStore's reading of a cancelled transaction or a conflicting update, on a mocked
// client: dynalite never cancels for a conflict or throttling, so those answers are scripted.

import {
  DynamoDBClient,
  TransactionCanceledException,
  TransactionConflictException,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import { DynamoJobStore } from '../../../../lib/adapters/dynamo-job-store/index.ts';
import { ConcurrentUpdateError, TransientError } from '../../../../lib/errors.ts';
import { attemptRecord } from '../../../support/fixtures/records.ts';
import { sampleJob } from '../../../support/job-store.contract.ts';

const dynamo = mockClient(DynamoDBClient);
const store = () => new DynamoJobStore({ client: new DynamoDBClient({ region: 'us-east-1' }), tableName: 'jobs' });

function cancelled(...codes: string[]): TransactionCanceledException {
  return new TransactionCanceledException({
    message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${codes.join(', ')}]`,
    $metadata: {},
    CancellationReasons: codes.map((Code) => ({ Code })),
  });
}

beforeEach(() => dynamo.reset());

describe('DynamoJobStore on a cancelled transaction', () => {
  it('answers a TransactionConflict as ConcurrentUpdateError, so the use cases retry', async () => {
    dynamo.on(TransactWriteItemsCommand).rejects(cancelled('TransactionConflict', 'None'));
    await expect(store().createJob(sampleJob)).rejects.toThrow(ConcurrentUpdateError);
    await expect(store().putAttempt(attemptRecord('job-1', 1, '2026-01-01T00:00:01.000Z'))).rejects.toThrow(
      /write to the same items was in progress.*TransactionConflict/,
    );
  });

  it('raises throttling as TransientError: no lost race, so no read-and-retry; the state machine retries the step', async () => {
    const throttled = cancelled('ThrottlingError', 'None');
    dynamo.on(TransactWriteItemsCommand).rejects(throttled);
    const create = store().createJob(sampleJob);
    await expect(create).rejects.toBeInstanceOf(TransientError);
    await expect(create).rejects.not.toBeInstanceOf(ConcurrentUpdateError);
    await expect(create).rejects.toMatchObject({ cause: throttled });
  });

  it('still reads a refused condition as the port\'s own error, even alongside a conflict', async () => {
    dynamo.on(TransactWriteItemsCommand).rejects(cancelled('ConditionalCheckFailed', 'TransactionConflict'));
    await expect(store().createJob(sampleJob)).rejects.toThrow(`job ${sampleJob.jobId} already exists`);
  });
});

describe('DynamoJobStore on an update that met a transaction in flight', () => {
  const conflict = (): TransactionConflictException =>
    new TransactionConflictException({ message: 'Transaction is ongoing for the item', $metadata: {} });
  const report = { nodeRank: 0, phase: 'run' as const, exitCode: 0, outputTail: '', reportedAt: '2026-01-01T00:00:02.000Z' };

  it.each([
    ['addReport', (s: DynamoJobStore) => s.addReport('job-1', 1, report)],
    ['recordHeartbeat', (s: DynamoJobStore) => s.recordHeartbeat('job-1', 1, '2026-01-01T00:00:02.000Z', 0)],
    ['setExecution', (s: DynamoJobStore) => s.setExecution('job-1', 'arn:x')],
  ])('answers %s with ConcurrentUpdateError, which the agent is told to retry', async (_name, write) => {
    dynamo.on(UpdateItemCommand).rejects(conflict());
    await expect(write(store())).rejects.toThrow(ConcurrentUpdateError);
    expect(dynamo).toHaveReceivedCommand(UpdateItemCommand);
  });
});
