// SqsDeadLetters: letters from every queue, each through a client of its queue's region,
// hidden while replayed, deleted by receipt.

import { DeleteMessageCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import { SqsDeadLetters } from '../../../../lib/adapters/sqs-dead-letters.ts';
import { ConfigurationError } from '../../../../lib/errors.ts';

const sqs = mockClient(SQSClient);
beforeEach(() => sqs.reset());

const EAST = 'https://sqs.us-east-1.amazonaws.com/123456789012/relaunch-ec2-undelivered';
const WEST = 'https://sqs.eu-west-1.amazonaws.com/123456789012/relaunch-exec-undelivered';
const message = (n: number) => ({ MessageId: `m${n}`, ReceiptHandle: `r${n}`, Body: `{"n":${n}}`, Attributes: { ApproximateReceiveCount: String(n) } });

function letters(regions: string[] = []) {
  return new SqsDeadLetters({
    queues: [
      { name: 'east', url: EAST },
      { name: 'west', url: WEST },
    ],
    client: (region) => {
      regions.push(region);
      return new SQSClient({ region });
    },
  });
}

describe('SqsDeadLetters', () => {
  it('reads each queue until it is empty or the batch is full, hiding each letter while it is replayed', async () => {
    sqs
      .on(ReceiveMessageCommand, { QueueUrl: EAST })
      .resolvesOnce({ Messages: [message(1), message(2)] })
      .resolves({});
    sqs.on(ReceiveMessageCommand, { QueueUrl: WEST }).resolvesOnce({ Messages: [message(3)] }).resolves({ Messages: [] });
    const regions: string[] = [];

    const got = await letters(regions).receive(50);

    expect(got).toEqual([
      { queue: 'east', body: '{"n":1}', receiveCount: 1, receipt: 'r1' },
      { queue: 'east', body: '{"n":2}', receiveCount: 2, receipt: 'r2' },
      { queue: 'west', body: '{"n":3}', receiveCount: 3, receipt: 'r3' },
    ]);
    expect(regions).toEqual(['us-east-1', 'us-east-1', 'eu-west-1', 'eu-west-1']);
    expect(sqs).toHaveReceivedCommandWith(ReceiveMessageCommand, {
      QueueUrl: EAST,
      MaxNumberOfMessages: 10,
      VisibilityTimeout: 300,
      MessageSystemAttributeNames: ['ApproximateReceiveCount'],
    });
  });

  it('asks for no more than the batch has room for, and stops there', async () => {
    sqs.on(ReceiveMessageCommand).resolves({ Messages: [message(1), message(2)] });
    const got = await letters().receive(3);
    expect(got).toHaveLength(4);
    expect(sqs).toHaveReceivedNthCommandWith(ReceiveMessageCommand, 2, { MaxNumberOfMessages: 1 });
    expect(sqs).toHaveReceivedCommandTimes(ReceiveMessageCommand, 2);
  });

  it('skips a message without a receipt, and reads a missing body and count as empty and 1', async () => {
    sqs.on(ReceiveMessageCommand).resolvesOnce({ Messages: [{ MessageId: 'x' }, { ReceiptHandle: 'r9' }] }).resolves({});
    expect(await letters().receive(10)).toEqual([{ queue: 'east', body: '', receiveCount: 1, receipt: 'r9' }]);
  });

  it('deletes a letter from its own queue by receipt; a queue it does not know is a ConfigurationError', async () => {
    sqs.on(DeleteMessageCommand).resolves({});
    await letters().remove({ queue: 'west', body: '', receiveCount: 1, receipt: 'r3' });
    expect(sqs).toHaveReceivedCommandWith(DeleteMessageCommand, { QueueUrl: WEST, ReceiptHandle: 'r3' });
    await expect(letters().remove({ queue: 'north', body: '', receiveCount: 1, receipt: 'r' })).rejects.toBeInstanceOf(ConfigurationError);
  });

  it('refuses a queue URL that names no region', async () => {
    const odd = new SqsDeadLetters({ queues: [{ name: 'odd', url: 'https://example.com/q' }], client: () => new SQSClient({}) });
    await expect(odd.receive(1)).rejects.toThrow(/expected an SQS queue URL/);
  });
});
