// The one way the job store writes under a condition: a ConditionalWrite names the item's
// key, what it sets, adds, appends and removes, and the condition (conditions.ts), and
// yields it either as an UpdateItem or as one item of a TransactWriteItems. Both forms ask
// DynamoDB for the refused item (ReturnValuesOnConditionCheckFailure: ALL_OLD), so a
// refusal can be explained without reading the item again.

import type { AttributeValue, TransactWriteItem, UpdateItemCommandInput } from '@aws-sdk/client-dynamodb';
import type { NativeAttributeValue } from '@aws-sdk/util-dynamodb';
import { ExpressionRefs, type Condition } from './expression.ts';
import type { Item } from './items.ts';

/** What a conditional write does to one item. Paths may name a nested field (`standby.adoptedAt`). */
export interface ConditionalWrite {
  /** The item's key (items.ts `keys`). */
  readonly key: Item;
  /** `SET path = value`. */
  readonly set?: Readonly<Record<string, NativeAttributeValue>>;
  /** `SET path = if_not_exists(path, value)`: set unless already there. */
  readonly setIfAbsent?: Readonly<Record<string, NativeAttributeValue>>;
  /** `ADD path value`: a number added to a number, or a set's elements added to a set. */
  readonly add?: Readonly<Record<string, number | ReadonlySet<number> | ReadonlySet<string>>>;
  /** `SET path = list_append(path, values)`: the values appended to a list. */
  readonly append?: Readonly<Record<string, readonly NativeAttributeValue[]>>;
  /** `REMOVE path`. */
  readonly remove?: readonly string[];
  /** What the item must be for the write to happen; a write under no condition is not one of these. */
  readonly condition: Condition;
}

/** The expressions of a write, rendered with one set of aliases. */
interface Rendered {
  readonly update: string;
  readonly ConditionExpression: string;
  readonly ExpressionAttributeNames: Record<string, string>;
  readonly ExpressionAttributeValues?: Record<string, AttributeValue>;
}

function render(write: ConditionalWrite): Rendered {
  const refs = new ExpressionRefs();
  const sets: string[] = [];
  for (const [path, value] of Object.entries(write.set ?? {})) sets.push(`${refs.path(path)} = ${refs.value(value)}`);
  for (const [path, value] of Object.entries(write.setIfAbsent ?? {})) {
    const alias = refs.path(path);
    sets.push(`${alias} = if_not_exists(${alias}, ${refs.value(value)})`);
  }
  for (const [path, values] of Object.entries(write.append ?? {})) {
    const alias = refs.path(path);
    sets.push(`${alias} = list_append(${alias}, ${refs.value([...values])})`);
  }
  const removes = (write.remove ?? []).map((path) => refs.path(path));
  const adds = Object.entries(write.add ?? {}).map(([path, value]) => `${refs.path(path)} ${refs.value(value as NativeAttributeValue)}`);
  const update = [
    sets.length > 0 ? `SET ${sets.join(', ')}` : '',
    removes.length > 0 ? `REMOVE ${removes.join(', ')}` : '',
    adds.length > 0 ? `ADD ${adds.join(', ')}` : '',
  ]
    .filter(Boolean)
    .join(' ');
  const condition = write.condition.render(refs);
  return { update, ConditionExpression: condition, ExpressionAttributeNames: refs.names, ...valuesOf(refs) };
}

/** The values an expression uses; none at all leaves the map out, as DynamoDB refuses an empty one. */
function valuesOf(refs: ExpressionRefs): { ExpressionAttributeValues?: Record<string, AttributeValue> } {
  return Object.keys(refs.values).length > 0 ? { ExpressionAttributeValues: refs.values } : {};
}

/** Writes to one table: the only place the store's writes name it. */
export class TableWrites {
  constructor(readonly tableName: string) {}

  /**
   * The write as one UpdateItem, which answers the item as written (ALL_NEW) and, refused,
   * the item as it was (ALL_OLD) where the service gives it. A write that writes nothing
   * is only a check, which only a transaction can make.
   */
  update(write: ConditionalWrite): UpdateItemCommandInput {
    const { update, ...expressions } = render(write);
    if (update === '') throw new Error('a conditional write with nothing to write is a check: use it in a transaction');
    return {
      TableName: this.tableName,
      Key: write.key,
      UpdateExpression: update,
      ...expressions,
      ReturnValues: 'ALL_NEW',
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    };
  }

  /**
   * The write as one item of a transaction: an Update, or a ConditionCheck when it writes
   * nothing. Refused, the transaction's cancellation reason for it carries the item as it
   * was (ALL_OLD) where the service gives it.
   */
  inTransaction(write: ConditionalWrite): TransactWriteItem {
    const { update, ...expressions } = render(write);
    const common = { TableName: this.tableName, Key: write.key, ...expressions, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const };
    return update === '' ? { ConditionCheck: common } : { Update: { ...common, UpdateExpression: update } };
  }

  /**
   * A whole item put by a transaction, under a condition when one is given (refused, its
   * reason carries the item that was there); with none, a put that replaces whatever is
   * there (the instance index's items, where a repeat overwrites).
   */
  put(item: Item, condition?: Condition): TransactWriteItem {
    if (condition === undefined) return { Put: { TableName: this.tableName, Item: item } };
    const refs = new ExpressionRefs();
    const expression = condition.render(refs);
    return {
      Put: {
        TableName: this.tableName,
        Item: item,
        ConditionExpression: expression,
        ExpressionAttributeNames: refs.names,
        ...valuesOf(refs),
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      },
    };
  }
}

/** The cancellation code of a transaction item whose condition refused it. */
export const CONDITION_FAILED = 'ConditionalCheckFailed';

/** A cancelled transaction: each item's cancellation code, and the refused items DynamoDB gave back. */
export class TransactionRefusal {
  constructor(
    readonly codes: readonly string[],
    private readonly items: readonly (Item | undefined)[],
  ) {}

  /** Whether the transaction's item at `index` was refused by its condition. */
  refused(index: number): boolean {
    return this.codes[index] === CONDITION_FAILED;
  }

  /** The item at `index` as it was when its condition refused it, where DynamoDB gave it. */
  item(index: number): Item | undefined {
    return this.refused(index) ? this.items[index] : undefined;
  }
}
