// The launch pace's model and its two stores: the same slots (and the same refusals past
// the horizon) from the same reservations, whether the bucket is held in memory or as one
// item on DynamoDB (dynalite).

import { ConditionalCheckFailedException, DynamoDBClient, GetItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { describe, expect, it } from 'vitest';
import { DynamoLaunchPace, LAUNCH_PACE_KEY } from '../../lib/adapters/dynamo-launch-pace.ts';
import { TransientError } from '../../lib/errors.ts';
import {
  askAgainSeconds,
  EC2_LAUNCH_PACE,
  MemoryLaunchPace,
  PACE_HORIZON_SECONDS,
  reserveSlot,
  secondsUntil,
  type LaunchPaceConfig,
  type PaceSlot,
} from '../../lib/launch-pace.ts';
import type { LaunchPace } from '../../lib/ports.ts';
import { useDynalite } from '../fixtures/dynalite.ts';

const T0 = Date.parse('2026-06-01T00:00:00Z');
/** 10 at once, then 2 a second: one instance every 500 ms. */
const SMALL: LaunchPaceConfig = { burst: 10, perSecond: 2 };

/** The launch's slot, failing the test when none was given. */
function slotOf(result: { readonly slot: PaceSlot }): number {
  if (!result.slot.reserved) throw new Error(`expected a slot, got none until ${result.slot.askAgainAt}`);
  return result.slot.launchAt;
}

/** One instance at once, then one every 100 s: the horizon (1,800 s) holds 18 more. */
const SLOW: LaunchPaceConfig = { burst: 1, perSecond: 0.01 };

describe('reserveSlot', () => {
  it('lets a burst go at once, then gives each instance a slot 1/perSecond later', () => {
    let paidOffAt = 0;
    const slots: number[] = [];
    for (let i = 0; i < 13; i += 1) {
      const result = reserveSlot(paidOffAt, T0, 1, SMALL);
      paidOffAt = result.paidOffAt;
      slots.push(slotOf(result) - T0);
    }
    expect(slots.slice(0, 10).every((at) => at <= 0)).toBe(true);
    expect(slots.slice(10)).toEqual([500, 1000, 1500]);
  });

  it('charges a launch for all its nodes: an 8-node launch after a full burst waits 4 s', () => {
    const full = reserveSlot(0, T0, 10, SMALL);
    expect(slotOf(full)).toBe(T0);
    expect(slotOf(reserveSlot(full.paidOffAt, T0, 8, SMALL)) - T0).toBe(4000);
  });

  it('refills while idle, never beyond the burst', () => {
    const drained = reserveSlot(0, T0, 10, SMALL);
    // 2 s later 4 instances are back: 4 go at once, the fifth waits 500 ms.
    expect(slotOf(reserveSlot(drained.paidOffAt, T0 + 2000, 4, SMALL))).toBe(T0 + 2000);
    expect(slotOf(reserveSlot(drained.paidOffAt, T0 + 2000, 5, SMALL))).toBe(T0 + 2500);
    // An hour idle is still only a burst of 10.
    expect(slotOf(reserveSlot(drained.paidOffAt, T0 + 3_600_000, 11, SMALL))).toBe(T0 + 3_600_000 + 500);
  });

  it('gives no slot beyond the horizon, leaving the bucket as it was, and says when one would be within it', () => {
    let paidOffAt = 0;
    for (let i = 0; i < 19; i += 1) paidOffAt = reserveSlot(paidOffAt, T0, 1, SLOW).paidOffAt;
    // 19 instances: the burst, then 18 slots 100 s apart, the last at 1,800 s: the horizon.
    expect(paidOffAt).toBe(T0 + 1_900_000);
    const beyond = reserveSlot(paidOffAt, T0, 1, SLOW);
    expect(beyond).toEqual({ paidOffAt, slot: { reserved: false, askAgainAt: T0 + 100_000 } });
    // At that time the slot (1,900 s) is within the horizon again.
    expect(slotOf(reserveSlot(paidOffAt, T0 + 100_000, 1, SLOW))).toBe(T0 + 1_900_000);
  });

  it("gives an idle bucket's slot to a launch larger than the horizon holds, rather than none ever", () => {
    const large = reserveSlot(0, T0, 40, SLOW);
    expect(slotOf(large)).toBe(T0 + 3_900_000);
    expect(reserveSlot(large.paidOffAt, T0, 1, SLOW).slot).toMatchObject({ reserved: false });
  });

  it('waits whole seconds, rounding up, and not at all for a slot that is due', () => {
    expect(secondsUntil(T0, T0)).toBe(0);
    expect(secondsUntil(T0 - 1, T0)).toBe(0);
    expect(secondsUntil(T0 + 1, T0)).toBe(1);
    expect(secondsUntil(T0 + 1000, T0)).toBe(1);
    expect(secondsUntil(T0 + 1001, T0)).toBe(2);
  });

  it('spreads the asking again of waiting launches over one horizon, and never asks at once', () => {
    expect(askAgainSeconds(T0 + 10_000, T0, 0)).toBe(10);
    expect(askAgainSeconds(T0 + 10_000, T0, 0.5)).toBe(10 + PACE_HORIZON_SECONDS / 2);
    expect(askAgainSeconds(T0 + 10_000, T0, 0.9999)).toBe(10 + PACE_HORIZON_SECONDS - 1);
    expect(askAgainSeconds(T0 - 5000, T0, 0)).toBe(1);
  });

  it("defaults to EC2's instance-launch bucket: 1,000 at once, then 2 a second", () => {
    expect(EC2_LAUNCH_PACE).toEqual({ burst: 1000, perSecond: 2 });
  });
});

const dynalite = useDynalite();

/** Both stores, each on a fresh bucket. */
const stores: ReadonlyArray<[string, (config: LaunchPaceConfig) => Promise<LaunchPace>]> = [
  ['MemoryLaunchPace', (config) => Promise.resolve(new MemoryLaunchPace(config))],
  [
    'DynamoLaunchPace on dynalite',
    async (config) => new DynamoLaunchPace({ client: dynalite.client(), tableName: await dynalite.freshTable('pace'), config }),
  ],
];

/** The slot a store gave, failing the test when it gave none. */
async function reserved(pace: LaunchPace, instances: number, now: number): Promise<number> {
  return slotOf({ slot: await pace.reserve(instances, now) });
}

describe.each(stores)('%s', (_name, make) => {
  it('gives the same slots as the model, in order', async () => {
    const pace = await make(SMALL);
    const got = [];
    for (const nodes of [4, 4, 4, 8, 1]) got.push((await reserved(pace, nodes, T0)) - T0);
    expect(got).toEqual([-3000, -1000, 1000, 5000, 5500]);
  });

  it('starts a fresh bucket full, and refills it from the clock', async () => {
    const pace = await make(SMALL);
    expect(await reserved(pace, 10, T0)).toBe(T0);
    expect(await reserved(pace, 1, T0)).toBe(T0 + 500);
    // 10 s later the bucket is full again: 10 go at once.
    expect(await reserved(pace, 10, T0 + 10_000)).toBeLessThanOrEqual(T0 + 10_000);
  });

  it('hands every one of many reservations made at once its own slot', async () => {
    const pace = await make(SMALL);
    const slots = await Promise.all(Array.from({ length: 60 }, () => reserved(pace, 1, T0)));
    const sorted = [...slots].sort((a, b) => a - b);
    // 60 instances: 10 in the burst, the other 50 one every 500 ms, none sharing a slot.
    expect(sorted.filter((at) => at <= T0)).toHaveLength(10);
    expect(sorted.slice(10).map((at) => at - T0)).toEqual(Array.from({ length: 50 }, (_, i) => (i + 1) * 500));
  });

  it("gives at most the horizon's slots to many asking at once; the rest are told when to ask again, and take nothing", async () => {
    const pace = await make(SLOW);
    const answers = await Promise.all(Array.from({ length: 30 }, () => pace.reserve(1, T0)));
    const slots = answers.flatMap((answer) => (answer.reserved ? [answer.launchAt - T0] : [])).sort((a, b) => a - b);
    expect(slots).toEqual([0, ...Array.from({ length: 18 }, (_, i) => (i + 1) * 100_000)]);
    expect(answers.filter((answer) => !answer.reserved)).toEqual(Array.from({ length: 11 }, () => ({ reserved: false, askAgainAt: T0 + 100_000 })));
    // Asked again then, one gets the next slot.
    expect(await reserved(pace, 1, T0 + 100_000)).toBe(T0 + 1_900_000);
  });
});

describe('DynamoLaunchPace', () => {
  it('keeps the bucket as one item, PACE#launch, holding when its debt is paid off', async () => {
    const tableName = await dynalite.freshTable('pace');
    const pace = new DynamoLaunchPace({ client: dynalite.client(), tableName, config: SMALL });
    await pace.reserve(12, T0);
    const { Item } = await dynalite.client().send(new GetItemCommand({ TableName: tableName, Key: LAUNCH_PACE_KEY }));
    expect(Item).toEqual({ ...LAUNCH_PACE_KEY, paidOffAt: { N: String(T0 + 6000) } });
  });

  it('goes round again when another writer moved the bucket between its write and its read, and gives up after four rounds', async () => {
    const mock = mockClient(DynamoDBClient);
    const refused = new ConditionalCheckFailedException({ message: 'refused', $metadata: {} });
    // Refused while the bucket was behind the clock; read after another writer queued a launch.
    mock.on(UpdateItemCommand).rejectsOnce(refused).resolves({ Attributes: { paidOffAt: { N: String(T0 + 6000) } } });
    mock.on(GetItemCommand).resolves({ Item: { ...LAUNCH_PACE_KEY, paidOffAt: { N: String(T0 + 100) } } });
    const pace = new DynamoLaunchPace({ client: new DynamoDBClient({}), tableName: 'jobs', config: SMALL });
    expect(await pace.reserve(12, T0)).toEqual({ reserved: true, launchAt: T0 + 1000 });
    expect(mock.commandCalls(UpdateItemCommand).map((call) => call.args[0].input.UpdateExpression)).toEqual(['SET #t = #t + :cost', 'SET #t = #t + :cost']);
    expect(mock.commandCalls(GetItemCommand)[0]?.args[0].input.ConsistentRead).toBe(true);

    mock.reset();
    mock.on(UpdateItemCommand).rejects(refused);
    mock.on(GetItemCommand).resolves({ Item: { ...LAUNCH_PACE_KEY, paidOffAt: { N: String(T0 + 100) } } });
    await expect(pace.reserve(1, T0)).rejects.toThrow(TransientError);
    expect(mock.commandCalls(UpdateItemCommand)).toHaveLength(4);
    mock.restore();
  });

  it('writes nothing when the queue is past the horizon: one refused update and one read', async () => {
    const tableName = await dynalite.freshTable('pace');
    const pace = new DynamoLaunchPace({ client: dynalite.client(), tableName, config: SLOW });
    for (let i = 0; i < 19; i += 1) await pace.reserve(1, T0);
    expect(await pace.reserve(1, T0)).toEqual({ reserved: false, askAgainAt: T0 + 100_000 });
    const { Item } = await dynalite.client().send(new GetItemCommand({ TableName: tableName, Key: LAUNCH_PACE_KEY }));
    expect(Item?.paidOffAt).toEqual({ N: String(T0 + 1_900_000) });
  });

  it('reports a throttled table as a TransientError, which the machine retries', async () => {
    const mock = mockClient(DynamoDBClient);
    mock.on(UpdateItemCommand).rejects(Object.assign(new Error('slow down'), { name: 'ProvisionedThroughputExceededException' }));
    const pace = new DynamoLaunchPace({ client: new DynamoDBClient({}), tableName: 'jobs', config: SMALL });
    await expect(pace.reserve(1, T0)).rejects.toThrow(TransientError);
    mock.restore();
  });
});
