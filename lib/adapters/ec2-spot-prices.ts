// Ec2SpotPrices: what an hour of a spot instance costs at launch, from EC2's spot price
// history, beside the on-demand price of the package's table (lib/accounting/prices.ts).

import { DescribeSpotPriceHistoryCommand, type EC2Client } from '@aws-sdk/client-ec2';
import { launchPriceOf } from '../accounting/prices.ts';
import type { LaunchPrice } from '../model.ts';
import type { Market } from '../policy/types.ts';
import type { Ec2Retrying } from './ec2-calls.ts';

/** The product whose spot price relaunch's instances pay: Linux, as every AMI relaunch boots is. */
const PRODUCT = 'Linux/UNIX';

/** Reads the spot price in effect for a type in a zone; one provider per resource, as Ec2Images. */
export class Ec2SpotPrices {
  constructor(private readonly options: { readonly ec2: (region: string) => EC2Client; readonly retrying: Ec2Retrying }) {}

  /**
   * The price of one instance-hour of `instanceType` on `market` in `region` and `zone` at
   * `at`: for spot, EC2's price in effect then (the newest record of the zone's history at
   * or before `at`); for on-demand, the table's. A spot price EC2 does not give (no history
   * for the zone, or the call refused) falls back to the table's estimate, so a launch never
   * fails for want of a price; the record says which it is.
   */
  async priceAt(region: string, zone: string | null, instanceType: string, market: Market, at: Date): Promise<LaunchPrice> {
    const table = launchPriceOf(instanceType, region, market);
    if (market !== 'spot' || zone === null) return table;
    const spot = await this.spotPrice(region, zone, instanceType, at);
    if (spot === null) return table;
    return { hourly: spot, onDemandHourly: table.onDemandHourly, source: 'spot-price-history', estimate: false };
  }

  private async spotPrice(region: string, zone: string, instanceType: string, at: Date): Promise<number | null> {
    const request = new DescribeSpotPriceHistoryCommand({
      // A filter rather than AvailabilityZone: both EC2 and moto apply it.
      Filters: [{ Name: 'availability-zone', Values: [zone] }],
      InstanceTypes: [instanceType as never],
      ProductDescriptions: [PRODUCT],
      StartTime: at,
      EndTime: at,
    });
    let history;
    try {
      history = await this.options.retrying(`EC2 DescribeSpotPriceHistory in ${region}`, () => this.options.ec2(region).send(request));
    } catch {
      // The price is for the user's accounting only: the table's estimate stands in for it.
      return null;
    }
    const newest = (history?.SpotPriceHistory ?? [])
      .filter((entry) => entry.AvailabilityZone === zone && entry.SpotPrice !== undefined && (entry.Timestamp === undefined || entry.Timestamp <= at))
      .sort((a, b) => (b.Timestamp?.getTime() ?? 0) - (a.Timestamp?.getTime() ?? 0))[0];
    const price = Number(newest?.SpotPrice);
    return newest === undefined || !Number.isFinite(price) ? null : price;
  }
}
