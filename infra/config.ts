// The deployment's settings, from CDK context (cdk.json or `-c key=value`), validated before
// any construct is built: a bad value names its context key and says what was expected.

import { z } from 'zod';

/** The context keys relaunch reads. */
export const ContextKey = {
  vpcId: 'relaunch:vpcId',
  subnetIds: 'relaunch:subnetIds',
  regions: 'relaunch:regions',
  allowedInstanceTypes: 'relaunch:allowedInstanceTypes',
  namePrefix: 'relaunch:namePrefix',
} as const;

/** Where job instances run and what they may be; see ContextKey for where each comes from. */
export interface RelaunchConfig {
  /** The VPC of the job instances' security group. No lookup: it is given. */
  readonly vpcId: string;
  /** Subnets (of that VPC) instances launch in; their zones are the candidates. */
  readonly subnetIds: readonly string[];
  /**
   * Regions relaunch may launch in (IAM is scoped to them).
   * @default - the stack's own region
   */
  readonly regions?: readonly string[];
  /**
   * Instance types (IAM `StringLike` patterns such as `g5.*`) RunInstances may start.
   * @default - any type
   */
  readonly allowedInstanceTypes?: readonly string[];
  /**
   * Prefix of named resources (the state machine, log groups, instance names).
   * @default 'relaunch'
   */
  readonly namePrefix?: string;
}

/** A list given as a JSON array (cdk.json) or a comma-separated string (`-c`). */
const list = <T extends z.ZodType<string>>(item: T, min = 0) =>
  z.preprocess(
    (value) => (typeof value === 'string' ? value.split(',').map((part) => part.trim()).filter((part) => part !== '') : value),
    z.array(item).min(min, `expected at least ${min}`),
  );

const vpcId = z.string().regex(/^vpc-[0-9a-f]{8,17}$/, 'expected a VPC id like vpc-0123456789abcdef0');
const subnetId = z.string().regex(/^subnet-[0-9a-f]{8,17}$/, 'expected a subnet id like subnet-0123456789abcdef0');
const region = z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d$/, 'expected a region like us-east-1');
const instanceType = z.string().regex(/^[a-z0-9*-]+\.[a-z0-9*-]+$/, 'expected an instance type or pattern like g5.* or m5.large');
const namePrefix = z.string().regex(/^[a-zA-Z][a-zA-Z0-9-]{0,31}$/, 'expected 1-32 letters, digits or -, starting with a letter');

const ConfigSchema = z.object({
  [ContextKey.vpcId]: vpcId,
  [ContextKey.subnetIds]: list(subnetId, 1),
  [ContextKey.regions]: list(region).optional(),
  [ContextKey.allowedInstanceTypes]: list(instanceType).optional(),
  [ContextKey.namePrefix]: namePrefix.optional(),
});

/** Context is read through this, so tests can pass a plain object. */
export type ContextReader = (key: string) => unknown;

/**
 * Reads and validates the configuration. Throws one error listing every bad or missing
 * key, each with how to set it.
 */
export function configFromContext(read: ContextReader): RelaunchConfig {
  const raw = Object.fromEntries(Object.values(ContextKey).map((key) => [key, read(key)]));
  const parsed = ConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => {
      const key = String(issue.path[0]);
      const index = issue.path.length > 1 ? `[${issue.path.slice(1).join('][')}]` : '';
      const message = raw[key] === undefined ? 'is not set' : issue.message;
      return `context ${key}${index}: ${message}`;
    });
    throw new Error(
      `relaunch configuration is not valid:\n  ${problems.join('\n  ')}\n` +
        'Set each key in cdk.json "context", or pass it with -c, e.g. -c relaunch:subnetIds=subnet-aaa,subnet-bbb',
    );
  }
  const config = parsed.data;
  return {
    vpcId: config[ContextKey.vpcId],
    subnetIds: config[ContextKey.subnetIds],
    regions: config[ContextKey.regions],
    allowedInstanceTypes: config[ContextKey.allowedInstanceTypes],
    namePrefix: config[ContextKey.namePrefix],
  };
}
