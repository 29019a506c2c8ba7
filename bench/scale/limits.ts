// The AWS limits and list prices the scale simulation uses, each with where it comes from.
// BENCHMARKS.md lists the same numbers; the simulation reads them only from here.

import { CONTROLLER_PRICES, onDemandHourly, SPOT_PRICE_SHARE } from '../../lib/accounting/prices.ts';
import { EC2_LAUNCH_PACE } from '../../lib/launch-pace.ts';

/** A token bucket's size and refill. */
export interface BucketLimit {
  readonly burst: number;
  readonly perSecond: number;
  readonly source: string;
}

const EC2_THROTTLING = 'Request throttling for the Amazon EC2 API (docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html)';
const SFN_QUOTAS = 'Step Functions service quotas (docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html), us-east-1';

/** The account's limits in us-east-1, as published defaults unless the source says otherwise. */
export const AWS_LIMITS = {
  /** CreateFleet's request bucket: counted as a resource-intensive action, the stricter of the two it could be. */
  ec2CreateFleetRequests: { burst: 50, perSecond: 5, source: `${EC2_THROTTLING}, request tokens, resource-intensive actions` },
  /** TerminateInstances' request bucket (a mutating action). */
  ec2TerminateRequests: { burst: 200, perSecond: 5, source: `${EC2_THROTTLING}, request tokens, mutating actions` },
  /** Instances launched (RunInstances' resource bucket; an instant fleet's instances draw on it too). */
  ec2InstanceLaunches: { ...EC2_LAUNCH_PACE, source: `${EC2_THROTTLING}, resource tokens, RunInstances` },
  /** Instances terminated (TerminateInstances' resource bucket). */
  ec2InstanceTerminations: { burst: 1000, perSecond: 20, source: `${EC2_THROTTLING}, resource tokens, TerminateInstances` },
  /** StartExecution, standard workflows. */
  sfnStartExecution: { burst: 1300, perSecond: 300, source: `${SFN_QUOTAS}, API action throttling: StartExecution` },
  /** State transitions, standard workflows. */
  sfnStateTransitions: { burst: 5000, perSecond: 5000, source: `${SFN_QUOTAS}, state throttling: StateTransition` },
  /** API Gateway REST: the account's (and a stage's default) throttle. */
  apiGateway: {
    burst: 5000,
    perSecond: 10_000,
    source: 'Amazon API Gateway quotas (docs.aws.amazon.com/apigateway/latest/developerguide/limits.html): throttle quota per account per Region, 10,000 rps, burst 5,000',
  },
} as const satisfies Record<string, BucketLimit>;

/** Lambda's concurrent executions per account and region. */
export const LAMBDA_CONCURRENCY = {
  limit: 1000,
  source: 'Lambda quotas (docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html): concurrent executions, 1,000',
} as const;

/** What one partition of a DynamoDB table or index serves per second. */
export const DYNAMODB_PARTITION = {
  writeUnitsPerSecond: 1000,
  readUnitsPerSecond: 3000,
  source:
    'DynamoDB: partitions and data distribution (docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.Partitions.html) and burst and adaptive capacity: 1,000 WCU and 3,000 RCU per partition',
} as const;

/**
 * vCPUs the simulated account may run per market. The published defaults are far lower
 * (and raised on request); these are a stated assumption, sized for a sweep like this one.
 */
export const VCPU_QUOTAS = {
  'on-demand': 40_000,
  spot: 40_000,
  source: 'assumed: the account raised Running On-Demand Standard and All Standard Spot Instance Requests to 40,000 vCPUs each (Service Quotas, EC2)',
} as const;

/**
 * us-east-1 list prices: the controller's services from the package's own table
 * (lib/accounting/prices.ts, which prices each job's controller cost with the same lines),
 * and the on-demand prices of the instance types the simulation launches. Spot prices move
 * by the hour and zone: SPOT_PRICE_SHARE is an assumption, not a list price.
 */
export const PRICES = {
  ...CONTROLLER_PRICES,
  /** CloudWatch's, X-Ray's and Lambda's Arm price checked that day against stored copies of their pages (for the stack's cost in docs/aws.md). */
  observabilityDate: '2026-12-06',
  /** arm64 functions (the stack's): Lambda's duration price is a fifth lower than x86's. */
  lambdaPerGbSecondArm: 0.0000133334,
  /** CloudWatch: a standard-resolution metric alarm (period 60 s or more), a high-resolution one, and a custom dashboard, each a month. */
  cloudWatchAlarmMonth: 0.1,
  cloudWatchHighResolutionAlarmMonth: 0.3,
  cloudWatchDashboardMonth: 3,
  /** CloudWatch Logs, standard class: ingestion per GB, and storage per GB-month. */
  logsIngestionPerGb: 0.5,
  logsStoragePerGbMonth: 0.03,
  /** X-Ray: traces recorded (retrieval and scans, $0.50 per million, only when someone looks). */
  xrayPerTraceRecorded: 5 / 1_000_000,
  /** A KMS customer managed key, a Secrets Manager secret, an advanced SSM parameter, a WAF web ACL and one rule in it: each a month. */
  kmsKeyMonth: 1,
  secretsManagerSecretMonth: 0.4,
  ssmAdvancedParameterMonth: 0.05,
  wafWebAclMonth: 5,
  wafRuleMonth: 1,
  /** On-demand Linux, per hour. */
  onDemandHourly: Object.fromEntries(
    ['m6i.large', 'm6i.xlarge', 'c6i.xlarge', 'r6i.large', 'r6i.xlarge'].map((type) => [type, onDemandHourly(type, 'us-east-1') ?? Number.NaN]),
  ) as Readonly<Record<string, number>>,
  sources: [
    ...CONTROLLER_PRICES.sources,
    'aws.amazon.com/lambda/pricing: Arm, $0.0000133334 per GB-second (first 7.5 billion GB-seconds a month)',
    'aws.amazon.com/cloudwatch/pricing: alarms $0.10 (standard resolution) and $0.30 (high resolution) per alarm metric a month; $3.00 per dashboard a month; Logs, standard class, $0.50 per GB ingested, $0.03 per GB-month stored',
    'aws.amazon.com/xray/pricing: $5.00 per million traces recorded, $0.50 per million retrieved or scanned',
    'aws.amazon.com/kms/pricing: $1.00 per customer managed key a month',
    'aws.amazon.com/secrets-manager/pricing: $0.40 per secret a month',
    'aws.amazon.com/systems-manager/pricing: Parameter Store, $0.05 per advanced parameter a month',
    'aws.amazon.com/waf/pricing: $5.00 per web ACL and $1.00 per rule, each a month',
  ],
} as const;

export { SPOT_PRICE_SHARE };

/** SkyPilot's managed-jobs controller VM, always on. */
export const SKYPILOT_CONTROLLER = { instanceType: 'r6i.xlarge', hoursPerMonth: 730 } as const;
