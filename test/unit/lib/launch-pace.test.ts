// The launch pace's model and its two stores: the same slots from the same reservations,
// whether the bucket is held in memory or as one item on DynamoDB (dynalite).

import { ConditionalCheckFailedException, DynamoDBClient, GetItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { describe, expect, it } from 'vitest';
import { DynamoLaunchPace, LAUNCH_PACE_KEY } from '../../../lib/adapters/dynamo-launch-pace.ts';
import { TransientError } from '../../../lib/errors.ts';
import { EC2_LAUNCH_PACE, MemoryLaunchPace, reserveSlot, secondsUntil, type LaunchPaceConfig } from '../../../lib/launch-pace.ts';
import type { LaunchPace } from '../../../lib/ports.ts';
import { useDynalite } from '../../support/fixtures/dynalite.ts';

const T0 = Date.parse('2026-06-01T00:00:00Z');
/** 10 at once, then 2 a second: one instance every 500 ms. */
const SMALL: LaunchPaceConfig = { burst: 10, perSecond: 2 };

describe('reserveSlot', () => {
  it('lets a burst go at once, then gives each instance a slot 1/perSecond later', () => {
    let paidOffAt = 0;
    const slots: number[] = [];
    for (let i = 0; i < 13; i += 1) {
      const slot = reserveSlot(paidOffAt, T0, 1, SMALL);
      paidOffAt = slot.paidOffAt;
      slots.push(slot.launchAt - T0);
    }
    expect(slots.slice(0, 10).every((at) => at <= 0)).toBe(true);
    expect(slots.slice(10)).toEqual([500, 1000, 1500]);
  });

  it('charges a launch for all its nodes: an 8-node launch after a full burst waits 4 s', () => {
    const full = reserveSlot(0, T0, 10, SMALL);
    expect(full.launchAt).toBe(T0);
    expect(reserveSlot(full.paidOffAt, T0, 8, SMALL).launchAt - T0).toBe(4000);
  });

  it('refills while idle, never beyond the burst', () => {
    const drained = reserveSlot(0, T0, 10, SMALL);
    // 2 s later 4 instances are back: 4 go at once, the fifth waits 500 ms.
    expect(reserveSlot(drained.paidOffAt, T0 + 2000, 4, SMALL).launchAt).toBe(T0 + 2000);
    expect(reserveSlot(drained.paidOffAt, T0 + 2000, 5, SMALL).launchAt).toBe(T0 + 2500);
    // An hour idle is still only a burst of 10.
    expect(reserveSlot(drained.paidOffAt, T0 + 3_600_000, 11, SMALL).launchAt).toBe(T0 + 3_600_000 + 500);
  });

  it('waits whole seconds, rounding up, and not at all for a slot that is due', () => {
    expect(secondsUntil(T0, T0)).toBe(0);
    expect(secondsUntil(T0 - 1, T0)).toBe(0);
    expect(secondsUntil(T0 + 1, T0)).toBe(1);
    expect(secondsUntil(T0 + 1000, T0)).toBe(1);
    expect(secondsUntil(T0 + 1001, T0)).toBe(2);
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

describe.each(stores)('%s', (_name, make) => {
  it('gives the same slots as the model, in order', async () => {
    const pace = await make(SMALL);
    const got = [];
    for (const nodes of [4, 4, 4, 8, 1]) got.push((await pace.reserve(nodes, T0)) - T0);
    expect(got).toEqual([-3000, -1000, 1000, 5000, 5500]);
  });

  it('starts a fresh bucket full, and refills it from the clock', async () => {
    const pace = await make(SMALL);
    expect(await pace.reserve(10, T0)).toBe(T0);
    expect(await pace.reserve(1, T0)).toBe(T0 + 500);
    // 10 s later the bucket is full again: 10 go at once.
    expect(await pace.reserve(10, T0 + 10_000)).toBeLessThanOrEqual(T0 + 10_000);
  });

  it("gives a later slot back for its holder once, so the next launch goes sooner; a slot that is due, or no one's, gives nothing", async () => {
    const pace = await make(SMALL);
    expect(await pace.reserve(10, T0, 'job-a')).toBe(T0);
    expect(await pace.reserve(4, T0, 'job-b')).toBe(T0 + 2000);
    expect(await pace.release('job-a', T0)).toBe(false);
    expect(await pace.release('job-nobody', T0)).toBe(false);
    expect(await pace.release('job-b', T0 + 500)).toBe(true);
    expect(await pace.release('job-b', T0 + 500)).toBe(false);
    // job-b's 4 are back: the next instance goes where the first after the burst would have.
    expect(await pace.reserve(1, T0 + 500, 'job-c')).toBe(T0 + 500);
  });

  it('gives back a launch larger than the burst, cancelled before its slot: the next launch goes at once', async () => {
    const pace = await make({ burst: 1, perSecond: 2 });
    expect(await pace.reserve(4, T0, 'job-big')).toBe(T0 + 1500);
    expect(await pace.release('job-big', T0 + 1000)).toBe(true);
    expect(await pace.reserve(1, T0 + 1000)).toBe(T0 + 1000);
  });

  it('hands every one of many reservations made at once its own slot', async () => {
    const pace = await make(SMALL);
    const slots = await Promise.all(Array.from({ length: 60 }, () => pace.reserve(1, T0)));
    const sorted = [...slots].sort((a, b) => a - b);
    // 60 instances: 10 in the burst, the other 50 one every 500 ms, none sharing a slot.
    expect(sorted.filter((at) => at <= T0)).toHaveLength(10);
    expect(sorted.slice(10).map((at) => at - T0)).toEqual(Array.from({ length: 50 }, (_, i) => (i + 1) * 500));
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

  it('tries again when the clock passes the stored time between its two writes, and gives up after four rounds', async () => {
    const mock = mockClient(DynamoDBClient);
    const refused = new ConditionalCheckFailedException({ message: 'refused', $metadata: {} });
    mock.on(UpdateItemCommand).rejectsOnce(refused).rejectsOnce(refused).resolves({ Attributes: { paidOffAt: { N: String(T0 + 6000) } } });
    const pace = new DynamoLaunchPace({ client: new DynamoDBClient({}), tableName: 'jobs', config: SMALL });
    expect(await pace.reserve(12, T0)).toBe(T0 + 1000);
    expect(mock.commandCalls(UpdateItemCommand)).toHaveLength(3);

    mock.reset();
    mock.on(UpdateItemCommand).rejects(refused);
    await expect(pace.reserve(1, T0)).rejects.toThrow(TransientError);
    expect(mock.commandCalls(UpdateItemCommand)).toHaveLength(8);
    mock.restore();
  });

  it('gives a slot back among many reservations made at the same moment, with nothing lost or counted twice', async () => {
    const tableName = await dynalite.freshTable('pace');
    const pace = new DynamoLaunchPace({ client: dynalite.client(), tableName, config: SMALL });
    await pace.reserve(10, T0);
    expect(await pace.reserve(4, T0, 'job-b')).toBe(T0 + 2000);
    const [given] = await Promise.all([pace.release('job-b', T0), ...Array.from({ length: 20 }, () => pace.reserve(1, T0))]);
    expect(given).toBe(true);
    // 10 + 4 + 20 instances taken, 4 given back: 30 at 500 ms each from T0.
    const { Item } = await dynalite.client().send(new GetItemCommand({ TableName: tableName, Key: LAUNCH_PACE_KEY }));
    expect(Item?.paidOffAt).toEqual({ N: String(T0 + 30 * 500) });
  });

  it('reports a throttled table as a TransientError, which the machine retries', async () => {
    const mock = mockClient(DynamoDBClient);
    mock.on(UpdateItemCommand).rejects(Object.assign(new Error('slow down'), { name: 'ProvisionedThroughputExceededException' }));
    const pace = new DynamoLaunchPace({ client: new DynamoDBClient({}), tableName: 'jobs', config: SMALL });
    await expect(pace.reserve(1, T0)).rejects.toThrow(TransientError);
    mock.restore();
  });
});
