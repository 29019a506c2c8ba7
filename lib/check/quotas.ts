// EC2's vCPU quotas: which Service Quotas code limits an instance type, per market, and what
// an account's limit and current use mean for the types a deployment allows.
//
// EC2 limits running on-demand instances and spot requests in vCPUs per region, one quota
// per group of instance families (Standard, F, G and VT, Inf, P, X), each with its own
// Service Quotas code. The codes are what the Service Quotas console lists for the `ec2`
// service; the AWS CLI user guide's `get-aws-default-service-quota` example shows
// L-1216C47A as "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", and
// the same mapping of every group is used by brennerm/aws-quota-checker
// (aws_quota/check/ec2.py). Families outside these groups (DL, Trn, HPC, high memory U,
// Mac) have quotas of their own that relaunch does not look up: it says so.

import type { Market } from '../policy/types.ts';
import type { CheckResult } from './report.ts';

/** One of EC2's vCPU quota groups. */
export interface QuotaGroup {
  /** For check ids: `standard`, `f`, `g-vt`, `inf`, `p`, `x`. */
  readonly id: string;
  /** As AWS names the group in its quotas. */
  readonly name: string;
  /** Service Quotas codes (service `ec2`) of the group's running on-demand and spot vCPUs. */
  readonly codes: Readonly<Record<Market, string>>;
}

/** The groups, with the families (leading letters of an instance type) each covers. */
const GROUPS: readonly (QuotaGroup & { readonly families: readonly string[] })[] = [
  { id: 'standard', name: 'Standard (A, C, D, H, I, M, R, T, Z)', families: ['a', 'c', 'd', 'h', 'i', 'm', 'r', 't', 'z'], codes: { 'on-demand': 'L-1216C47A', spot: 'L-34B43A08' } },
  { id: 'f', name: 'F', families: ['f'], codes: { 'on-demand': 'L-74FC7D96', spot: 'L-88CF9481' } },
  { id: 'g-vt', name: 'G and VT', families: ['g', 'vt'], codes: { 'on-demand': 'L-DB2E81BA', spot: 'L-3819A6DF' } },
  { id: 'inf', name: 'Inf', families: ['inf'], codes: { 'on-demand': 'L-1945791B', spot: 'L-B5D1601B' } },
  { id: 'p', name: 'P', families: ['p'], codes: { 'on-demand': 'L-417A185B', spot: 'L-7212CCBC' } },
  { id: 'x', name: 'X', families: ['x'], codes: { 'on-demand': 'L-7295265B', spot: 'L-E3A00192' } },
];

/**
 * The quota group of an instance type, from the letters its family starts with (`inf2`
 * is Inf, not I; `vt1` is G and VT); null for a family of none of the groups (`dl1`,
 * `trn1`, `hpc7g`, `u-6tb1`, `mac2`).
 */
export function quotaGroupOf(instanceType: string): QuotaGroup | null {
  const letters = /^[a-z]+/.exec(instanceType)?.[0] ?? '';
  const group = GROUPS.find((candidate) => candidate.families.includes(letters));
  return group === undefined ? null : { id: group.id, name: group.name, codes: group.codes };
}

/** What one quota says in one region: its value (null: AWS has no such quota there) and the vCPUs in use. */
export interface QuotaUse {
  readonly limit: number | null;
  readonly used: number;
}

/** One instance running or starting in a region, as counted against its group's quota. */
export interface InstanceInUse {
  readonly instanceType: string;
  readonly market: Market;
  /** null when neither the instance's CPU options nor the type's description said. */
  readonly vcpus: number | null;
}

/** vCPUs of a group and market in use: the running and pending instances of its families. */
export function vcpusInUse(instances: readonly InstanceInUse[], group: QuotaGroup, market: Market): { vcpus: number; unknown: string[] } {
  let vcpus = 0;
  const unknown: string[] = [];
  for (const instance of instances) {
    if (instance.market !== market || quotaGroupOf(instance.instanceType)?.id !== group.id) continue;
    if (instance.vcpus === null) unknown.push(instance.instanceType);
    else vcpus += instance.vcpus;
  }
  return { vcpus, unknown };
}

/** What a deployment allows of a group: its types (vCPUs known) and whether they were named explicitly. */
export interface AllowedInGroup {
  readonly group: QuotaGroup;
  /** The allowed types of the group with their vCPUs, smallest first. */
  readonly types: readonly { readonly instanceType: string; readonly vcpus: number }[];
  /** relaunch:allowedInstanceTypes names them (a fail, not a warn, when none can launch). */
  readonly explicit: boolean;
}

/** The families of some types, for messages, in alphabetical order: `g5, g6e`. */
export function familiesOf(types: readonly { readonly instanceType: string }[]): string {
  return [...new Set(types.map(({ instanceType }) => instanceType.split('.')[0]))].sort().join(', ');
}

/** The AWS CLI command that asks for a quota of at least `vcpus`. */
export function quotaIncreaseCommand(region: string, code: string, vcpus: number): string {
  return `aws service-quotas request-service-quota-increase --region ${region} --service-code ec2 --quota-code ${code} --desired-value ${vcpus}`;
}

/**
 * The account-level verdict on one group's quota in one market and region, for the types
 * the deployment allows:
 *
 * | quota | verdict |
 * |---|---|
 * | AWS has none in the region | warn |
 * | 0 vCPUs | fail when the types are named in relaunch:allowedInstanceTypes, else warn (relaunch's own catalog) |
 * | free vCPUs fewer than the smallest allowed type's | warn: no such instance fits until others end |
 * | otherwise | ok |
 */
export function quotaCheck(region: string, market: Market, allowed: AllowedInGroup, use: QuotaUse): CheckResult {
  const { group } = allowed;
  const code = group.codes[market];
  const id = `quota:${region}:${group.id}:${market}`;
  const what = `${group.name} ${market} vCPUs in ${region} (${code}, for ${familiesOf(allowed.types)})`;
  if (use.limit === null) {
    return { id, status: 'warn', message: `${what}: Service Quotas has no such quota in this region, so EC2 may refuse these types here` };
  }
  const smallest = allowed.types[0]?.vcpus ?? 1;
  const largest = allowed.types.at(-1)?.vcpus ?? smallest;
  const free = use.limit - use.used;
  const said = `${what}: ${use.limit} allowed, ${use.used} in use`;
  if (use.limit <= 0) {
    return {
      id,
      status: allowed.explicit ? 'fail' : 'warn',
      message: `${said}: no ${market} instance of these families can launch`,
      fix: quotaIncreaseCommand(region, code, largest),
    };
  }
  if (free < smallest) {
    return { id, status: 'warn', message: `${said}: ${Math.max(free, 0)} free, fewer than the smallest allowed type needs (${smallest})`, fix: quotaIncreaseCommand(region, code, use.used + largest) };
  }
  return { id, status: 'ok', message: said };
}
