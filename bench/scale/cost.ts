// relaunch's own cost from a scale run's counts, at the list prices of limits.ts, beside
// the instance-hours of the jobs themselves and SkyPilot's always-on controller VM.

import { controllerCostLines, type CostLine } from '../../lib/accounting/prices.ts';
import { PRICES, SKYPILOT_CONTROLLER, SPOT_PRICE_SHARE } from './limits.ts';
import type { ScaleResult } from './simulation.ts';

export type { CostLine };

/** What a run cost, and per 1,000 jobs. */
export interface CostModel {
  readonly relaunch: readonly CostLine[];
  readonly relaunchTotal: number;
  readonly relaunchPer1000Jobs: number;
  /** SSM's calls, were the parameters on higher throughput (or advanced). */
  readonly ssmHigherThroughput: number;
  readonly instances: readonly CostLine[];
  readonly instancesTotal: number;
  readonly instanceHours: number;
  readonly skypilotForSweep: number;
  readonly skypilotMonthly: number;
  readonly sweepHours: number;
}

/** Prices the run's counts. */
export function costOf(result: ScaleResult): CostModel {
  const invocations = [...result.lambda.invocations.values()].reduce((sum, n) => sum + n, 0);
  const apiBilled = result.api.requests - result.api.throttled;
  const awsEvents = result.eventBridge.ec2Events + result.eventBridge.executionEvents;
  const relaunch = controllerCostLines({
    transitions: result.sfn.transitions,
    lambdaInvocations: invocations,
    lambdaGbSeconds: result.lambda.gbSeconds,
    writeUnits: result.dynamo.writeUnits,
    readUnits: result.dynamo.readUnits,
    apiRequests: apiBilled,
    awsEvents,
    ssmCalls: result.ssmCalls,
  });
  const relaunchTotal = relaunch.reduce((sum, line) => sum + line.dollars, 0);
  const instances: CostLine[] = [...result.instanceHours.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([key, hours]) => {
      const [type, market] = key.split(' ') as [string, string];
      const hourly = (PRICES.onDemandHourly[type] ?? Number.NaN) * (market === 'spot' ? SPOT_PRICE_SHARE : 1);
      return { item: `${type} ${market}`, count: hours, dollars: hours * hourly };
    });
  const controllerHourly = PRICES.onDemandHourly[SKYPILOT_CONTROLLER.instanceType] ?? Number.NaN;
  const sweepHours = result.virtualSeconds / 3600;
  return {
    relaunch,
    relaunchTotal,
    relaunchPer1000Jobs: (relaunchTotal * 1000) / result.jobs,
    ssmHigherThroughput: result.ssmCalls * PRICES.ssmHigherThroughputPerCall,
    instances,
    instancesTotal: instances.reduce((sum, line) => sum + line.dollars, 0),
    instanceHours: instances.reduce((sum, line) => sum + line.count, 0),
    skypilotForSweep: sweepHours * controllerHourly,
    skypilotMonthly: SKYPILOT_CONTROLLER.hoursPerMonth * controllerHourly,
    sweepHours,
  };
}
