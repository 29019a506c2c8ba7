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

import { ConditionalCheckFailedException, UpdateItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { TransientError } from '../errors.ts';
import { launchAtFor, paceMs, type LaunchPaceConfig } from '../launch-pace.ts';
import type { LaunchPace } from '../ports.ts';
import { sendAws } from './aws-errors.ts';
import { TABLE_KEY } from './dynamo-table.ts';

/** The bucket's item: one per table, beside the jobs. */
export const LAUNCH_PACE_KEY = { [TABLE_KEY.partitionKey]: { S: 'PACE#launch' }, [TABLE_KEY.sortKey]: { S: 'PACE' } };
const PAID_OFF_AT = 'paidOffAt';
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

  async reserve(instances: number, now: number): Promise<number> {
    const cost = paceMs(instances, this.#options.config);
    for (let round = 0; round < ROUNDS; round += 1) {
      const queued = await this.#update(`SET #t = #t + :cost`, '#t >= :now', { ':cost': cost, ':now': now });
      if (queued !== null) return launchAtFor(queued, this.#options.config);
      const fresh = await this.#update('SET #t = :next', 'attribute_not_exists(#t) OR #t < :now', { ':next': now + cost, ':now': now });
      if (fresh !== null) return launchAtFor(fresh, this.#options.config);
    }
    throw new TransientError(`the launch pace's bucket changed under ${ROUNDS} reservations in a row; the step is retried`);
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
