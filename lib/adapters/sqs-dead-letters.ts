// Dead-letter queues over SQS: the events relaunch's deliveries gave up on, read back for
// the janitor to apply again.

import { DeleteMessageCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { ConfigurationError } from '../errors.ts';
import type { DeadLetter, DeadLetters } from '../ports.ts';
import { sendAws } from './aws-errors.ts';

/** SQS hands out at most 10 messages per receive. */
const SQS_BATCH = 10;

/**
 * How long a received letter stays hidden from other readers: longer than a replay takes,
 * so two janitors never apply the same letter at once.
 */
const HIDDEN_SECONDS = 300;

/** What SqsDeadLetters reads: the queues by name, each through a client of its region. */
export interface SqsDeadLettersOptions {
  readonly client: (region: string) => SQSClient;
  /** Each queue's name (as letters report it) and URL (`https://sqs.<region>.amazonaws.com/...`). */
  readonly queues: readonly { readonly name: string; readonly url: string }[];
}

/** DeadLetters over SQS queues, read in order, each until empty or the batch is full. */
export class SqsDeadLetters implements DeadLetters {
  constructor(private readonly options: SqsDeadLettersOptions) {}

  async receive(max: number): Promise<DeadLetter[]> {
    const letters: DeadLetter[] = [];
    for (const queue of this.options.queues) {
      while (letters.length < max) {
        const request = new ReceiveMessageCommand({
          QueueUrl: queue.url,
          MaxNumberOfMessages: Math.min(SQS_BATCH, max - letters.length),
          VisibilityTimeout: HIDDEN_SECONDS,
          MessageSystemAttributeNames: ['ApproximateReceiveCount'],
        });
        const { Messages = [] } = await sendAws('SQS ReceiveMessage', () => this.clientFor(queue.url).send(request));
        for (const message of Messages) {
          if (message.ReceiptHandle === undefined) continue;
          letters.push({
            queue: queue.name,
            body: message.Body ?? '',
            receiveCount: Number(message.Attributes?.ApproximateReceiveCount ?? '1'),
            receipt: message.ReceiptHandle,
          });
        }
        if (Messages.length === 0) break;
      }
    }
    return letters;
  }

  async remove(letter: DeadLetter): Promise<void> {
    const queue = this.options.queues.find((q) => q.name === letter.queue);
    if (queue === undefined) throw new ConfigurationError(`no dead-letter queue is named ${letter.queue}`);
    const request = new DeleteMessageCommand({ QueueUrl: queue.url, ReceiptHandle: letter.receipt });
    await sendAws('SQS DeleteMessage', () => this.clientFor(queue.url).send(request));
  }

  private clientFor(url: string): SQSClient {
    const region = /^https:\/\/sqs\.([a-z0-9-]+)\./.exec(url)?.[1];
    if (region === undefined) throw new ConfigurationError(`expected an SQS queue URL (https://sqs.<region>.amazonaws.com/...), got ${url}`);
    return this.options.client(region);
  }
}
