// DynamoLaunchPace: the launch pace's bucket as one item of the jobs table, so every
// execution in the account and region draws on it. See lib/launch-pace.ts for the model.
//
// A reservation is one conditional UpdateItem, with no read before it: while launches
// queue (the bucket's paid-off time is ahead of the caller's clock) it adds the launch's
// time to the stored one, which any number of writers can do at once; when the bucket has
// room (the time is behind the clock) it sets the time from the clock instead. That second
// write is refused when another writer moved the stored time past the caller's clock in
// between; since the time only moves forward, the first write then succeeds on the next
// round, so more than two rounds do not happen in practice (ROUNDS bounds them anyway).

import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  PutItemCommand,
  UpdateItemCommand,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { TransientError } from '../errors.ts';
import { launchAtFor, paceMs, type LaunchPaceConfig } from '../launch-pace.ts';
import type { LaunchPace } from '../ports.ts';
import { sendAws } from './aws-errors.ts';
import { TABLE_KEY, TTL_ATTRIBUTE } from '../workflow/job-table.ts';

/** The bucket's item: one per table, beside the jobs. */
export const LAUNCH_PACE_KEY = { [TABLE_KEY.partitionKey]: { S: 'PACE#launch' }, [TABLE_KEY.sortKey]: { S: 'PACE' } };
const PAID_OFF_AT = 'paidOffAt';

/** The partition key of a later slot's item: the prefix, then its holder (a job). */
export const LAUNCH_SLOT_PREFIX = 'PACE#slot#';

/** A later slot's item, by its holder: what `release` gives back. */
function slotKey(holder: string): Record<string, { S: string }> {
  return { [TABLE_KEY.partitionKey]: { S: `${LAUNCH_SLOT_PREFIX}${holder}` }, [TABLE_KEY.sortKey]: { S: 'SLOT' } };
}
/** Rounds of the two writes before a reservation gives up, as a TransientError the machine retries. */
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

  async reserve(instances: number, now: number, holder?: string): Promise<number> {
    const launchAt = await this.#take(instances, now);
    if (holder !== undefined && launchAt > now) await this.#noteSlot(holder, instances, launchAt);
    return launchAt;
  }

  async release(holder: string, now: number): Promise<boolean> {
    // Taken out first, with a condition: of two releases, only one gives the slot back.
    const output = await this.#conditional('DynamoDB DeleteItem', () =>
      this.#options.client.send(
        new DeleteItemCommand({
          TableName: this.#options.tableName,
          Key: slotKey(holder),
          ConditionExpression: 'attribute_exists(#pk)',
          ExpressionAttributeNames: { '#pk': TABLE_KEY.partitionKey },
          ReturnValues: 'ALL_OLD',
        }),
      ),
    );
    const instances = Number(output?.Attributes?.instances?.N);
    const launchAt = Number(output?.Attributes?.launchAt?.N);
    if (output === null || !(launchAt > now) || !(instances > 0)) return false;
    // As a reservation, with no read: the launch's time taken off the stored one while that
    // leaves it at or ahead of the clock, else the stored time set to the clock (a bucket
    // with its burst: releasedSlot's floor).
    const cost = paceMs(instances, this.#options.config);
    for (let round = 0; round < ROUNDS; round += 1) {
      if ((await this.#update('SET #t = #t - :cost', '#t >= :floor', { ':cost': cost, ':floor': now + cost })) !== null) return true;
      if ((await this.#update('SET #t = :now', '#t < :floor', { ':now': now, ':floor': now + cost })) !== null) return true;
    }
    throw new TransientError(`the launch pace's bucket changed under ${ROUNDS} releases in a row`);
  }

  /** The bucket's reservation itself (see the module's comment); when the launch may go. */
  async #take(instances: number, now: number): Promise<number> {
    const cost = paceMs(instances, this.#options.config);
    for (let round = 0; round < ROUNDS; round += 1) {
      const queued = await this.#update(`SET #t = #t + :cost`, '#t >= :now', { ':cost': cost, ':now': now });
      if (queued !== null) return launchAtFor(queued, this.#options.config);
      const fresh = await this.#update('SET #t = :next', 'attribute_not_exists(#t) OR #t < :now', { ':next': now + cost, ':now': now });
      if (fresh !== null) return launchAtFor(fresh, this.#options.config);
    }
    throw new TransientError(`the launch pace's bucket changed under ${ROUNDS} reservations in a row; the step is retried`);
  }

  /** Notes a later slot for its holder, in an item of its own that TTL deletes an hour after the slot. */
  async #noteSlot(holder: string, instances: number, launchAt: number): Promise<void> {
    const item = {
      ...slotKey(holder),
      instances: { N: String(instances) },
      launchAt: { N: String(launchAt) },
      [TTL_ATTRIBUTE]: { N: String(Math.ceil(launchAt / 1000) + 3600) },
    };
    await sendAws('DynamoDB PutItem', () => this.#options.client.send(new PutItemCommand({ TableName: this.#options.tableName, Item: item })));
  }

  /** One conditional call; null when its condition was false. */
  async #conditional<T>(call: string, send: () => Promise<T>): Promise<T | null> {
    try {
      return await sendAws(call, send);
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return null;
      throw error;
    }
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
    const output = await this.#conditional('DynamoDB UpdateItem', () => this.#options.client.send(command));
    return output === null ? null : Number(output.Attributes?.[PAID_OFF_AT]?.N);
  }
}
