// What `relaunch check` knows of a deployment: where its instances launch, what they may
// be, which buckets they may use. A deployed stack says it in its `Deployment` output (a
// JSON record written at synth, with relaunch's version); before the first deploy, the
// same settings come from cdk.json's context.

import packageJson from '../../package.json' with { type: 'json' };
import * as z from '../zod.ts';
import { issuePath } from '../zod-issues.ts';

/** The version of relaunch this code is: the CLI's, and the one a stack synthesized from it records. */
export const RELAUNCH_VERSION: string = packageJson.version;

/** The construct id of the stack output holding the record (its OutputKey is this, prefixed and hashed by the CDK). */
export const DEPLOYMENT_OUTPUT_ID = 'Deployment';

/** One region instances launch in, with its subnet per zone (preferred first). */
export interface DeploymentRegion {
  readonly region: string;
  readonly subnetsByZone: Readonly<Record<string, string>>;
}

/** The settings check judges an account against. */
export interface DeploymentSettings {
  readonly namePrefix: string;
  /** The VPC of the home region's subnets. */
  readonly vpcId: string;
  /** The home region first, then the failover regions. */
  readonly regions: readonly DeploymentRegion[];
  /** null: any instance type. */
  readonly allowedInstanceTypes: readonly string[] | null;
  /** relaunch:dataBuckets: names, or prefixes ending in `*`. */
  readonly dataBuckets: readonly string[];
  /** The stack's own bucket; null before the first deploy. */
  readonly dataBucket: string | null;
}

/** What the stack's `Deployment` output holds. */
export interface DeploymentRecord {
  readonly version: string;
  readonly apiUrl: string;
  readonly namePrefix: string;
  readonly vpcId: string;
  readonly subnetsByZone: Readonly<Record<string, string>>;
  readonly otherRegions: readonly DeploymentRegion[];
  readonly allowedInstanceTypes: readonly string[] | null;
  readonly dataBuckets: readonly string[];
  readonly dataBucket: string;
}

/** What the infra knows at synth: its configuration, and the tokens of the API's URL and the bucket's name. */
export interface DeploymentRecordInput {
  readonly namePrefix: string;
  readonly vpcId: string;
  readonly subnetsByZone: Readonly<Record<string, string>>;
  readonly otherRegions?: readonly DeploymentRegion[];
  readonly allowedInstanceTypes?: readonly string[];
  readonly dataBuckets?: readonly string[];
  readonly apiUrl: string;
  readonly dataBucket: string;
}

/**
 * The record a stack outputs, at this code's version. Only what check reads goes in: a
 * failover region's security groups stay out.
 */
export function deploymentRecord(input: DeploymentRecordInput): DeploymentRecord {
  return {
    version: RELAUNCH_VERSION,
    apiUrl: input.apiUrl,
    namePrefix: input.namePrefix,
    vpcId: input.vpcId,
    subnetsByZone: input.subnetsByZone,
    otherRegions: (input.otherRegions ?? []).map(({ region, subnetsByZone }) => ({ region, subnetsByZone })),
    allowedInstanceTypes: input.allowedInstanceTypes ?? null,
    dataBuckets: input.dataBuckets ?? [],
    dataBucket: input.dataBucket,
  };
}

const text = z.string().check(z.minLength(1));
const subnets = z.record(text, text);
const RecordSchema = z.object({
  version: text,
  apiUrl: text,
  namePrefix: text,
  vpcId: text,
  subnetsByZone: subnets,
  otherRegions: z.array(z.object({ region: text, subnetsByZone: subnets })),
  allowedInstanceTypes: z.nullable(z.array(text)),
  dataBuckets: z.array(text),
  dataBucket: text,
});

/**
 * Reads the output's value. A value this code cannot read (a stack of another version
 * whose record differs) is an Error naming what is wrong.
 */
export function parseDeploymentRecord(value: string): DeploymentRecord {
  let raw: unknown;
  try {
    raw = JSON.parse(value) as unknown;
  } catch {
    throw new Error(`expected a JSON object, got ${JSON.stringify(value.slice(0, 60))}`);
  }
  const parsed = RecordSchema.safeParse(raw);
  if (!parsed.success) {
    const [issue] = parsed.error.issues;
    throw new Error(`${issuePath(issue?.path ?? [], 'the record')}: ${issue?.message ?? 'not readable'}`);
  }
  return parsed.data;
}

/** The output holding the record among a stack's outputs: its key is the construct path, `…Deployment` and a hash. */
export function findDeploymentOutput(outputs: readonly { readonly key: string; readonly value: string }[]): string | null {
  const pattern = new RegExp(`${DEPLOYMENT_OUTPUT_ID}[0-9A-F]{8}$`);
  return outputs.find((output) => pattern.test(output.key))?.value ?? null;
}

/** The settings a deployed stack in `region` records. */
export function settingsOfRecord(record: DeploymentRecord, region: string): DeploymentSettings {
  return {
    namePrefix: record.namePrefix,
    vpcId: record.vpcId,
    regions: [{ region, subnetsByZone: record.subnetsByZone }, ...record.otherRegions],
    allowedInstanceTypes: record.allowedInstanceTypes,
    dataBuckets: record.dataBuckets,
    dataBucket: record.dataBucket,
  };
}

/**
 * `a` against `b`, as dotted numbers (`0.10.0` is after `0.9.2`): negative when `a` is
 * older. A part that is not a number compares as text.
 */
export function compareVersions(a: string, b: string): number {
  const left = a.split('.');
  const right = b.split('.');
  for (let index = 0; index < Math.max(left.length, right.length); index += 1) {
    const x = left[index] ?? '0';
    const y = right[index] ?? '0';
    const difference = /^\d+$/.test(x) && /^\d+$/.test(y) ? Number(x) - Number(y) : x.localeCompare(y);
    if (difference !== 0) return Math.sign(difference);
  }
  return 0;
}
