// The conditional-write builder: what each clause renders to, in both forms, and the named
// conditions as DynamoDB reads them.

import { describe, expect, it } from 'vitest';
import * as when from '../../../../../lib/adapters/dynamo-job-store/conditions.ts';
import { allOf, anyOf, equals, ExpressionRefs, notExists, type Condition } from '../../../../../lib/adapters/dynamo-job-store/expression.ts';
import { keys } from '../../../../../lib/adapters/dynamo-job-store/items.ts';
import { TableWrites, type ConditionalWrite } from '../../../../../lib/adapters/dynamo-job-store/write.ts';

const writes = new TableWrites('jobs');
const key = keys.attempt('job-1', 2);

describe('TableWrites.update: one clause at a time', () => {
  it.each<[string, Omit<ConditionalWrite, 'key' | 'condition'>, string, Record<string, string>, Record<string, unknown>]>([
    ['set', { set: { taskToken: 'tok', attempt: 3 } }, 'SET #taskToken = :v0, #attempt = :v1', { '#taskToken': 'taskToken', '#attempt': 'attempt' }, { ':v0': { S: 'tok' }, ':v1': { N: '3' } }],
    ['set of a nested field', { set: { 'standby.adoptedAt': 't1' } }, 'SET #standby.#adoptedAt = :v0', { '#standby': 'standby', '#adoptedAt': 'adoptedAt' }, { ':v0': { S: 't1' } }],
    ['set of a map, nulls and empty strings kept inside it', { set: { outcome: { kind: 'EXITED', code: null, note: '' } } }, 'SET #outcome = :v0', { '#outcome': 'outcome' }, { ':v0': { M: { kind: { S: 'EXITED' }, code: { NULL: true }, note: { S: '' } } } }],
    ['set of a map whose keys are named like Object\'s own (a user\'s envs)', { set: { envs: { constructor: 'c', prototype: 'p', toString: 't' } } }, 'SET #envs = :v0', { '#envs': 'envs' }, { ':v0': { M: { constructor: { S: 'c' }, prototype: { S: 'p' }, toString: { S: 't' } } } }],
    ['setIfAbsent', { setIfAbsent: { endedAt: 't2' } }, 'SET #endedAt = if_not_exists(#endedAt, :v0)', { '#endedAt': 'endedAt' }, { ':v0': { S: 't2' } }],
    ['append', { append: { reports: [{ nodeRank: 0 }] } }, 'SET #reports = list_append(#reports, :v0)', { '#reports': 'reports' }, { ':v0': { L: [{ M: { nodeRank: { N: '0' } } }] } }],
    ['add of a number set', { add: { nodesHeardFrom: new Set([1]) } }, 'ADD #nodesHeardFrom :v0', { '#nodesHeardFrom': 'nodesHeardFrom' }, { ':v0': { NS: ['1'] } }],
    ['add of a string set', { add: { reportKeys: new Set(['0:run']) } }, 'ADD #reportKeys :v0', { '#reportKeys': 'reportKeys' }, { ':v0': { SS: ['0:run'] } }],
    ['add of a number', { add: { eventCount: 1 } }, 'ADD #eventCount :v0', { '#eventCount': 'eventCount' }, { ':v0': { N: '1' } }],
  ])('renders %s', (_clause, clauses, expression, names, values) => {
    const input = writes.update({ key, ...clauses, condition: when.ITEM_EXISTS });
    expect(input).toEqual({
      TableName: 'jobs',
      Key: { pk: { S: 'JOB#job-1' }, sk: { S: 'ATTEMPT#0002' } },
      UpdateExpression: expression,
      ConditionExpression: 'attribute_exists(#pk)',
      ExpressionAttributeNames: { ...names, '#pk': 'pk' },
      ExpressionAttributeValues: values,
      ReturnValues: 'ALL_NEW',
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    });
  });

  it('renders remove, and leaves out the values when nothing uses one (DynamoDB refuses an empty map)', () => {
    const input = writes.update({ key, remove: ['gsi3pk', 'gsi3sk'], condition: when.ITEM_EXISTS });
    expect(input.UpdateExpression).toBe('REMOVE #gsi3pk, #gsi3sk');
    expect(input.ExpressionAttributeNames).toEqual({ '#gsi3pk': 'gsi3pk', '#gsi3sk': 'gsi3sk', '#pk': 'pk' });
    expect(input).not.toHaveProperty('ExpressionAttributeValues');
  });
});

describe('TableWrites: every clause together, in both forms', () => {
  const write: ConditionalWrite = {
    key,
    set: { lastHeartbeatAt: 't3' },
    setIfAbsent: { endedAt: 't3' },
    append: { reports: ['r'] },
    remove: ['taskToken'],
    add: { nodesHeardFrom: new Set([0]) },
    condition: allOf(when.ATTEMPT_OPEN, equals('attempt', 2)),
  };
  const expressions = {
    UpdateExpression: 'SET #lastHeartbeatAt = :v0, #endedAt = if_not_exists(#endedAt, :v1), #reports = list_append(#reports, :v2) REMOVE #taskToken ADD #nodesHeardFrom :v3',
    // The condition's values are numbered after the update's, so the two never clash.
    ConditionExpression: 'attribute_exists(#pk) AND attribute_not_exists(#outcome) AND #attempt = :v4',
    ExpressionAttributeNames: {
      '#lastHeartbeatAt': 'lastHeartbeatAt',
      '#endedAt': 'endedAt',
      '#reports': 'reports',
      '#taskToken': 'taskToken',
      '#nodesHeardFrom': 'nodesHeardFrom',
      '#pk': 'pk',
      '#outcome': 'outcome',
      '#attempt': 'attempt',
    },
    ExpressionAttributeValues: { ':v0': { S: 't3' }, ':v1': { S: 't3' }, ':v2': { L: [{ S: 'r' }] }, ':v3': { NS: ['0'] }, ':v4': { N: '2' } },
  };

  it('as an UpdateItem: the item back as written, or as it was when refused', () => {
    expect(writes.update(write)).toEqual({ TableName: 'jobs', Key: key, ...expressions, ReturnValues: 'ALL_NEW', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' });
  });

  it('as a transaction item: the same Update, the refused item asked for, no ReturnValues (transactions have none)', () => {
    expect(writes.inTransaction(write)).toEqual({ Update: { TableName: 'jobs', Key: key, ...expressions, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' } });
  });

  it('a write of nothing is a ConditionCheck in a transaction, and no UpdateItem at all (that would create the item)', () => {
    const check: ConditionalWrite = { key: keys.job('job-1'), condition: when.liveAttemptIs(4) };
    expect(writes.inTransaction(check)).toEqual({
      ConditionCheck: {
        TableName: 'jobs',
        Key: { pk: { S: 'JOB#job-1' }, sk: { S: 'JOB' } },
        ConditionExpression: '#attemptCount = :v0',
        ExpressionAttributeNames: { '#attemptCount': 'attemptCount' },
        ExpressionAttributeValues: { ':v0': { N: '4' } },
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      },
    });
    expect(() => writes.update(check)).toThrow(/nothing to write/);
  });
});

describe('TableWrites.put', () => {
  const item = { ...keys.event('job-1', 't', 3), reason: { S: 'x' } };

  it('puts a new item under its condition, asking for the refused item', () => {
    expect(writes.put(item, when.ITEM_IS_NEW)).toEqual({
      Put: {
        TableName: 'jobs',
        Item: item,
        ConditionExpression: 'attribute_not_exists(#pk)',
        ExpressionAttributeNames: { '#pk': 'pk' },
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      },
    });
  });

  it('with no condition, replaces whatever is there', () => {
    expect(writes.put(item)).toEqual({ Put: { TableName: 'jobs', Item: item } });
  });
});

describe('the named conditions, as DynamoDB reads them', () => {
  const rendered = (condition: Condition) => {
    const refs = new ExpressionRefs();
    return { expression: condition.render(refs), names: refs.names, values: refs.values };
  };

  it.each<[string, Condition, string]>([
    ['ITEM_EXISTS', when.ITEM_EXISTS, 'attribute_exists(#pk)'],
    ['ITEM_IS_NEW', when.ITEM_IS_NEW, 'attribute_not_exists(#pk)'],
    ['ATTEMPT_OPEN', when.ATTEMPT_OPEN, 'attribute_exists(#pk) AND attribute_not_exists(#outcome)'],
    ['NOT_RELEASED', when.NOT_RELEASED, 'attribute_not_exists(#standby.#releasedAt)'],
    ['TAKES_HEARTBEAT', when.TAKES_HEARTBEAT, 'attribute_exists(#pk) AND attribute_not_exists(#outcome) AND attribute_not_exists(#standby.#releasedAt)'],
    ['reportIsNew', when.reportIsNew('0:run'), 'attribute_exists(#pk) AND attribute_not_exists(#outcome) AND attribute_not_exists(#standby.#releasedAt) AND NOT contains(#reportKeys, :v0)'],
    ['stoppedTailIsNew', when.stoppedTailIsNew('0:run'), 'attribute_exists(#pk) AND attribute_not_exists(#standby.#releasedAt) AND NOT contains(#reportKeys, :v0)'],
    ['firstNotice', when.firstNotice('rebalanceNoticedAt'), 'attribute_exists(#pk) AND attribute_not_exists(#outcome) AND attribute_not_exists(#rebalanceNoticedAt)'],
    ['endsOnce with no basis', when.endsOnce(), 'attribute_exists(#pk) AND attribute_not_exists(#outcome)'],
    ['endsOnce on a basis with a warning', when.endsOnce({ reports: 2, interruptionNoticed: true }), 'attribute_exists(#pk) AND attribute_not_exists(#outcome) AND size(#reports) = :v0 AND attribute_exists(#interruptionNoticedAt)'],
    ['endsOnce on a basis without one', when.endsOnce({ reports: 0, interruptionNoticed: false }), 'attribute_exists(#pk) AND attribute_not_exists(#outcome) AND size(#reports) = :v0 AND attribute_not_exists(#interruptionNoticedAt)'],
    ['claimFree', when.claimFree('t0'), '(attribute_not_exists(#pk) OR #expiresAt <= :v0)'],
    ['jobAsRead', when.jobAsRead('RUNNING', 5), '#status = :v0 AND #eventCount = :v1'],
    ['STANDBY_UNSETTLED', when.STANDBY_UNSETTLED, 'attribute_exists(#standby) AND attribute_not_exists(#standby.#adoptedAt) AND attribute_not_exists(#standby.#releasedAt)'],
    ['STANDBY_RELEASED', when.STANDBY_RELEASED, 'attribute_exists(#standby.#releasedAt)'],
  ])('%s', (_name, condition, expression) => {
    expect(rendered(condition).expression).toBe(expression);
  });

  it('registers every name and value a condition uses, and no other', () => {
    expect(rendered(when.jobAsRead('RUNNING', 5))).toEqual({
      expression: '#status = :v0 AND #eventCount = :v1',
      names: { '#status': 'status', '#eventCount': 'eventCount' },
      values: { ':v0': { S: 'RUNNING' }, ':v1': { N: '5' } },
    });
  });

  it('parenthesizes anyOf inside allOf, so OR never swallows a neighbour', () => {
    expect(rendered(allOf(notExists('a'), anyOf(notExists('b'), notExists('c')))).expression).toBe('attribute_not_exists(#a) AND (attribute_not_exists(#b) OR attribute_not_exists(#c))');
  });

  it('refuses an attribute name that is not a plain word rather than alias it wrongly', () => {
    expect(() => rendered(notExists('a-b'))).toThrow(/not a plain word/);
  });
});
