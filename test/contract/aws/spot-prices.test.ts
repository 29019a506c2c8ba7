// Ec2SpotPrices on moto's EC2: the spot price in effect for a type in a zone, from
// DescribeSpotPriceHistory as moto serves it (its offerings per zone, each at its one
// price, $0.00001), and the table's figures where EC2 gives none.

import { EC2Client } from '@aws-sdk/client-ec2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ec2Retrying } from '../../../lib/adapters/ec2-calls.ts';
import { Ec2SpotPrices } from '../../../lib/adapters/ec2-spot-prices.ts';
import { startMoto, useMotoEnvironment, type Moto } from './moto.ts';

/** moto's price for every spot offering (moto/ec2/responses/spot_instances.py). */
const MOTO_SPOT_PRICE = 0.00001;

let moto: Moto;
let restoreEnv: () => void;

beforeAll(async () => {
  moto = await startMoto();
  restoreEnv = useMotoEnvironment(moto);
});
afterAll(async () => {
  restoreEnv?.();
  await moto?.stop();
});

function prices(): Ec2SpotPrices {
  const clients = new Map<string, EC2Client>();
  const ec2 = (region: string) => clients.get(region) ?? clients.set(region, new EC2Client({ region, endpoint: moto.endpoint })).get(region)!;
  return new Ec2SpotPrices({ ec2, retrying: ec2Retrying(2, async () => undefined) });
}

describe('the price of an instance-hour at launch, on moto', () => {
  it("is EC2's spot price of the type in the zone, beside the table's on-demand price", async () => {
    const price = await prices().priceAt('us-east-1', 'us-east-1a', 'm5.large', 'spot', new Date());

    expect(price).toEqual({ hourly: MOTO_SPOT_PRICE, onDemandHourly: 0.096, source: 'spot-price-history', estimate: false });
  });

  it("falls back to the table's estimate for a zone EC2 has no history of", async () => {
    const price = await prices().priceAt('us-east-1', 'us-east-1z', 'm5.large', 'spot', new Date());

    expect(price).toEqual({ hourly: 0.096 * 0.35, onDemandHourly: 0.096, source: 'price-table', estimate: true });
  });

  it("is the table's on-demand price for an on-demand launch, asking EC2 nothing", async () => {
    await moto.record();
    const price = await prices().priceAt('us-east-1', 'us-east-1a', 'g5.xlarge', 'on-demand', new Date());

    expect(price).toEqual({ hourly: 1.006, onDemandHourly: 1.006, source: 'price-table', estimate: false });
    expect((await moto.recorded()).filter((call) => call.operation === 'DescribeSpotPriceHistory')).toEqual([]);
  });
});
