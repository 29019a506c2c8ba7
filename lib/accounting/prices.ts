// The package's price table: EC2 on-demand Linux prices per instance type and region, and
// the list prices of the services the controller runs on, with where they come from.
//
// A table and not the AWS Price List API: the API answers only from us-east-1, ap-south-1
// and eu-central-1 endpoints, needs credentials and a pricing:GetProducts grant every
// deployment would carry, and returns pages of several MB per service that a status or a
// local run would read for one number; the local runtime has no AWS at all. The table is
// small, dated, and the same everywhere, and the spot price (the one that moves by the
// hour) is read from EC2 itself at launch (DescribeSpotPriceHistory). Its cost: a price
// AWS changes after `date` is wrong here until the table is updated.

import { instanceTypesFor } from '../launch-plan.ts';
import type { LaunchPrice } from '../model.ts';
import type { Market } from '../policy/types.ts';
import type { Resources } from '../task-file/types.ts';

/**
 * Where the on-demand prices come from, and when they were entered. They were entered from
 * AWS's published list prices without a live read of the page (the machine that wrote them
 * reaches no AWS site); types whose price AWS cut in 2025 (P4d, P5) are left out rather
 * than guessed. Check a figure against the page before relying on it for a bill.
 */
export const PRICE_TABLE_SOURCE = {
  date: '2026-12-06',
  source: 'aws.amazon.com/ec2/pricing/on-demand: Linux, shared tenancy, per hour, us-east-1',
  checked: 'not against the live page',
} as const;

/**
 * On-demand Linux prices in US dollars per hour, us-east-1, for the types relaunch picks by
 * itself (lib/instance-types.ts) and the ones its tests and benchmarks name.
 */
const US_EAST_1: Readonly<Record<string, number>> = {
  'm5.large': 0.096,
  'm5.xlarge': 0.192,
  'm6i.large': 0.096,
  'm6i.xlarge': 0.192,
  'm6i.2xlarge': 0.384,
  'm7i.large': 0.1008,
  'm7i.xlarge': 0.2016,
  'm7i.2xlarge': 0.4032,
  'c6i.xlarge': 0.17,
  'c7i.large': 0.0893,
  'c7i.xlarge': 0.1785,
  'r6i.large': 0.126,
  'r6i.xlarge': 0.252,
  'r7i.large': 0.1323,
  'r7i.xlarge': 0.2646,
  't3.micro': 0.0104,
  't3.medium': 0.0416,
  'g4dn.xlarge': 0.526,
  'g4dn.2xlarge': 0.752,
  'g4dn.12xlarge': 3.912,
  'g5.xlarge': 1.006,
  'g5.2xlarge': 1.212,
  'g5.12xlarge': 5.672,
  'g5.48xlarge': 16.288,
  'g6.xlarge': 0.8048,
  'g6.12xlarge': 4.6016,
  'p3.2xlarge': 3.06,
  'p3.8xlarge': 12.24,
};

/**
 * The regions whose on-demand prices for these types are us-east-1's. Any other region has
 * no figure: left out, not guessed.
 */
const SAME_AS_US_EAST_1: ReadonlySet<string> = new Set(['us-east-1', 'us-east-2', 'us-west-2']);

/**
 * The on-demand price of `instanceType` in `region`, in US dollars per hour; null when the
 * table has neither.
 */
export function onDemandHourly(instanceType: string, region: string): number | null {
  if (!SAME_AS_US_EAST_1.has(region)) return null;
  return US_EAST_1[instanceType] ?? null;
}

/**
 * An instance-hour's price from the table alone, marked as an estimate: on-demand, or for
 * spot the table's on-demand price times SPOT_PRICE_SHARE.
 */
export function launchPriceOf(instanceType: string, region: string, market: Market): LaunchPrice {
  const onDemand = onDemandHourly(instanceType, region);
  const hourly = onDemand === null ? null : market === 'spot' ? onDemand * SPOT_PRICE_SHARE : onDemand;
  return { hourly, onDemandHourly: onDemand, source: 'price-table', estimate: market === 'spot' };
}

/**
 * The price of a job run on this machine, estimated for the instance type it would use on
 * AWS: its `instance_type`, else the first (cheapest preferred) type that fits its
 * resources, in its region (us-east-1 when it names none). Always an estimate; `hourly`
 * null when no type fits or the table lacks it.
 */
export function localPriceOf(resources: Resources, market: Market): LaunchPrice {
  let types: string[];
  try {
    types = instanceTypesFor(resources);
  } catch {
    // No type fits (the launch says why on AWS): the local run has no price to show.
    types = [];
  }
  const region = resources.region ?? 'us-east-1';
  const instanceType = types.find((type) => onDemandHourly(type, region) !== null) ?? types[0] ?? null;
  const price = instanceType === null ? launchPriceOf('', region, market) : launchPriceOf(instanceType, region, market);
  return { ...price, estimate: true, ...(instanceType === null ? {} : { forInstanceType: instanceType }) };
}

/**
 * The share of the on-demand price a spot instance is assumed to cost where EC2 was not
 * asked (the local runtime, the scale benchmark): spot prices move by zone and hour; an
 * assumption, not a list price.
 */
export const SPOT_PRICE_SHARE = 0.35;

/**
 * The list prices of what the controller uses, us-east-1, as the scale benchmark
 * (bench/scale/) prices a run with them, and the job accounting prices one job.
 */
export const CONTROLLER_PRICES = {
  /** Step Functions', Lambda's and DynamoDB's checked that day against stored copies of their pages; the rest are long-standing list prices. */
  date: '2026-12-03',
  sfnPerStateTransition: 0.025 / 1000,
  lambdaPerRequest: 0.2 / 1_000_000,
  lambdaPerGbSecondX86: 0.0000166667,
  dynamoPerWriteUnit: 0.625 / 1_000_000,
  dynamoPerReadUnit: 0.125 / 1_000_000,
  apiGatewayRestPerRequest: 3.5 / 1_000_000,
  eventBridgeCustomPerEvent: 1 / 1_000_000,
  /** AWS service events (EC2 state changes, Step Functions status changes) on the default bus. */
  eventBridgeAwsServiceEvent: 0,
  /** Standard parameters with standard throughput: API interactions are free. */
  ssmStandardPerCall: 0,
  /** Advanced parameters, or higher throughput: $0.05 per 10,000 API interactions. */
  ssmHigherThroughputPerCall: 0.05 / 10_000,
  sources: [
    'aws.amazon.com/step-functions/pricing: standard workflows, $0.025 per 1,000 state transitions',
    'aws.amazon.com/lambda/pricing: x86, $0.20 per 1M requests, $0.0000166667 per GB-second',
    'aws.amazon.com/dynamodb/pricing/on-demand: $0.625 per million write request units, $0.125 per million read request units',
    'aws.amazon.com/api-gateway/pricing: REST APIs, $3.50 per million requests (first 333 million)',
    'aws.amazon.com/eventbridge/pricing: custom events $1.00 per million; AWS service events on the default bus free',
    'aws.amazon.com/systems-manager/pricing: Parameter Store, standard throughput free; higher throughput $0.05 per 10,000 API interactions',
    'aws.amazon.com/ec2/pricing/on-demand: Linux on-demand hourly, us-east-1',
  ],
} as const;

/** What the controller did, counted: the scale benchmark's counts for a run, or one job's estimate. */
export interface ControllerCounts {
  readonly transitions: number;
  readonly lambdaInvocations: number;
  readonly lambdaGbSeconds: number;
  readonly writeUnits: number;
  readonly readUnits: number;
  readonly apiRequests: number;
  readonly awsEvents: number;
  readonly ssmCalls: number;
}

/** One priced count. */
export interface CostLine {
  readonly item: string;
  readonly count: number;
  readonly dollars: number;
}

/** The controller's counts priced, one line per service. */
export function controllerCostLines(counts: ControllerCounts): CostLine[] {
  const p = CONTROLLER_PRICES;
  return [
    { item: 'Step Functions state transitions', count: counts.transitions, dollars: counts.transitions * p.sfnPerStateTransition },
    { item: 'Lambda requests', count: counts.lambdaInvocations, dollars: counts.lambdaInvocations * p.lambdaPerRequest },
    { item: 'Lambda GB-seconds', count: counts.lambdaGbSeconds, dollars: counts.lambdaGbSeconds * p.lambdaPerGbSecondX86 },
    { item: 'DynamoDB write request units', count: counts.writeUnits, dollars: counts.writeUnits * p.dynamoPerWriteUnit },
    { item: 'DynamoDB read request units', count: counts.readUnits, dollars: counts.readUnits * p.dynamoPerReadUnit },
    { item: 'API Gateway REST requests', count: counts.apiRequests, dollars: counts.apiRequests * p.apiGatewayRestPerRequest },
    { item: 'EventBridge AWS service events (default bus)', count: counts.awsEvents, dollars: counts.awsEvents * p.eventBridgeAwsServiceEvent },
    { item: 'SSM Parameter Store calls (standard)', count: counts.ssmCalls, dollars: counts.ssmCalls * p.ssmStandardPerCall },
  ];
}
