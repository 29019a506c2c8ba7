// DynamoLaunchPace: the launch pace's bucket as one item of the jobs table, so every
// execution in the account and region draws on it. See lib/launch-pace.ts for the model.
//
// A reservation is one conditional UpdateItem, with no read before it, while launches
// queue within the horizon (the bucket's paid-off time ahead of the clock, but not too
// far): it adds the launch's time to the stored one, which any number of writers can do
// at once. When that condition fails, one consistent read says why: the bucket has room
// (its time is behind the clock: a second write sets it from the clock), or the queue
// is past the horizon (no slot; the answer says when to ask again). A writer that finds
// the bucket changed in between goes round again.

import { ConditionalCheckFailedException, GetItemCommand, UpdateItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { TransientError } from '../errors.ts';
import { latestQueuedFor, launchAtFor, paceMs, reserveSlot, type LaunchPaceConfig, type PaceSlot } from '../launch-pace.ts';
import type { LaunchPace } from '../ports.ts';
import { sendAws } from './aws-errors.ts';
import { TABLE_KEY } from './dynamo-table.ts';

/** The bucket's item: one per table, beside the jobs. */
export const LAUNCH_PACE_KEY = { [TABLE_KEY.partitionKey]: { S: 'PACE#launch' }, [TABLE_KEY.sortKey]: { S: 'PACE' } };
const PAID_OFF_AT = 'paidOffAt';
/** Rounds before a reservation gives up: each means another writer moved the bucket between this one's write and read. */
const ROUNDS = 4;

export interface DynamoLaunchPaceOptions {
  readonly client: DynamoDBClient;
  readonly tableName: string;
  readonly config: LaunchPaceConfig;
}

/** A LaunchPace on the jobs table. */
export class DynamoLaunchPace implements LaunchPace {
  readonly #options: DynamoLaunchPaceOptions;

  constructor(options: DynamoLaunchPaceOptions) {
    this.#options = options;
  }

  async reserve(instances: number, now: number): Promise<PaceSlot> {
    const { config } = this.#options;
    const cost = paceMs(instances, config);
    const latest = latestQueuedFor(now, instances, config);
    for (let round = 0; round < ROUNDS; round += 1) {
      const queued = await this.#update('SET #t = #t + :cost', '#t >= :now AND #t <= :latest', { ':cost': cost, ':now': now, ':latest': latest });
      if (queued !== null) return { reserved: true, launchAt: launchAtFor(queued, config) };
      const stored = await this.#read();
      if (stored !== null && stored > latest) return reserveSlot(stored, now, instances, config).slot;
      if (stored !== null && stored >= now) continue;
      const fresh = await this.#update('SET #t = :next', 'attribute_not_exists(#t) OR #t < :now', { ':next': now + cost, ':now': now });
      if (fresh !== null) return { reserved: true, launchAt: launchAtFor(fresh, config) };
    }
    throw new TransientError(`the launch pace's bucket changed under ${ROUNDS} reservations in a row; the step is retried`);
  }

  /** The stored paid-off time, read consistently; null when the bucket has never been used. */
  async #read(): Promise<number | null> {
    const command = new GetItemCommand({ TableName: this.#options.tableName, Key: LAUNCH_PACE_KEY, ConsistentRead: true });
    const output = await sendAws('DynamoDB GetItem', () => this.#options.client.send(command));
    const value = output.Item?.[PAID_OFF_AT]?.N;
    return value === undefined ? null : Number(value);
  }

  /** One conditional update; the stored time after it, or null when the condition was false. */
  async #update(update: string, condition: string, values: Record<string, number>): Promise<number | null> {
    const command = new UpdateItemCommand({
      TableName: this.#options.tableName,
      Key: LAUNCH_PACE_KEY,
      UpdateExpression: update,
      ConditionExpression: condition,
      ExpressionAttributeNames: { '#t': PAID_OFF_AT },
      ExpressionAttributeValues: Object.fromEntries(Object.entries(values).map(([name, value]) => [name, { N: String(value) }])),
      ReturnValues: 'UPDATED_NEW',
    });
    try {
      const output = await sendAws('DynamoDB UpdateItem', () => this.#options.client.send(command));
      return Number(output.Attributes?.[PAID_OFF_AT]?.N);
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return null;
      throw error;
    }
  }
}
