// Would a task launch now, and on which candidates: each `validate --json` candidate judged
// in every place the deployment launches in, from facts already read (offerings, quotas,
// images). Pure.

import type { Candidate } from '../candidates.ts';
import { regionOfZone } from '../task-file/cloud-region-zone.ts';
import type { DeploymentRegion } from './deployment.ts';
import { quotaGroupOf, quotaIncreaseCommand, type QuotaUse } from './quotas.ts';
import type { CandidatePlace, CandidateVerdict, CheckResult } from './report.ts';

/** A fact that could be read, or why it could not (a refused permission, an error). */
export type Known<T> = { readonly known: true; readonly value: T } | { readonly known: false; readonly why: string };

/** The image a type boots in a region: its AMI, or why there is none. */
export type ImageOutcome = { readonly imageId: string } | { readonly problem: string };

/** What was read for one region, for the types of one task. */
export interface RegionFacts {
  /** type -> the configured zones offering it. */
  readonly offerings: Known<ReadonlyMap<string, readonly string[]>>;
  /** The quota of a code (its limit, vCPUs in use). */
  quota(code: string): Known<QuotaUse>;
  /** The image an instance type boots here. */
  image(instanceType: string): Known<ImageOutcome>;
}

/** What a candidate is judged with. */
export interface CandidateInput {
  readonly candidate: Candidate;
  /** The task's index in a pipeline; absent for a single task. */
  readonly task?: number;
  readonly nodes: number;
  /** vCPUs of one node (the catalog's, else EC2's); null: unknown. */
  readonly vcpus: number | null;
  /** relaunch:allowedInstanceTypes; null: any. */
  readonly allowedInstanceTypes: readonly string[] | null;
  /** The deployment's regions, home first, each with its zones. */
  readonly regions: readonly DeploymentRegion[];
  facts(region: string): RegionFacts;
}

/** A reason with the step that removes it, when there is one. */
interface Reason {
  readonly message: string;
  readonly fix?: string;
}

/** One place's judgement. */
type PlaceJudgement = { readonly status: 'ok'; readonly place: CandidatePlace } | { readonly status: 'fail' | 'unknown'; readonly reasons: readonly Reason[] };

/** A candidate's verdict, with the fix of its first blocking reason (for the launch check). */
export interface JudgedCandidate {
  readonly verdict: CandidateVerdict;
  readonly fix: string | null;
}

/**
 * Judges one candidate. In each place (region) it may run in:
 *
 * - its type must be offered in one of the configured zones (all nodes share one zone);
 * - the vCPU quota of its group and market must have room for nodes x vCPUs;
 * - its image must resolve.
 *
 * Launchable when one place passes all three; not launchable (false) when every place
 * fails one; unknown (null) when no place passes and some could not be checked. A type
 * outside relaunch:allowedInstanceTypes, or a region or zone the deployment does not
 * launch in, is not launchable anywhere.
 */
export function judgeCandidate(input: CandidateInput): JudgedCandidate {
  const { candidate } = input;
  const base = {
    ...(input.task === undefined ? {} : { task: input.task }),
    instanceType: candidate.instanceType,
    market: candidate.market,
    vcpus: input.vcpus,
    nodes: input.nodes,
  };
  const refuse = (reason: Reason): JudgedCandidate => ({ verdict: { ...base, launchable: false, places: [], reasons: [reason.message] }, fix: reason.fix ?? null });
  if (input.allowedInstanceTypes !== null && !input.allowedInstanceTypes.includes(candidate.instanceType)) {
    return refuse({
      message: `${candidate.instanceType} is not among relaunch:allowedInstanceTypes (${input.allowedInstanceTypes.join(', ')})`,
      fix: `add ${candidate.instanceType} to relaunch:allowedInstanceTypes and redeploy (npx cdk deploy)`,
    });
  }
  const wantedRegion = candidate.region ?? (candidate.zone === undefined ? null : regionOfZone(candidate.zone));
  const regions = input.regions.filter((region) => wantedRegion === null || region.region === wantedRegion);
  if (regions.length === 0) {
    return refuse({ message: `the task asks for ${wantedRegion}, where relaunch does not launch (${input.regions.map(({ region }) => region).join(', ')})`, fix: `add ${wantedRegion} to relaunch:otherRegions and redeploy` });
  }
  const judged = regions.map((region) => judgePlace(input, region));
  const places = judged.flatMap((judgement) => (judgement.status === 'ok' ? [judgement.place] : []));
  const reasons = judged.flatMap((judgement, index) => (judgement.status === 'ok' ? [] : judgement.reasons.map((reason) => ({ ...reason, message: `${regions[index]?.region}: ${reason.message}` }))));
  const launchable = places.length > 0 ? true : judged.some((judgement) => judgement.status === 'unknown') ? null : false;
  const firstFix = reasons.find((reason) => reason.fix !== undefined)?.fix ?? null;
  return { verdict: { ...base, launchable, places, reasons: reasons.map((reason) => reason.message) }, fix: launchable === true ? null : firstFix };
}

function judgePlace(input: CandidateInput, region: DeploymentRegion): PlaceJudgement {
  const { candidate } = input;
  const type = candidate.instanceType;
  const facts = input.facts(region.region);
  const configured = Object.keys(region.subnetsByZone);
  // No subnets known (nothing deployed, no cdk.json): judged in every zone of the region.
  const zones = configured.length === 0 ? null : configured.filter((zone) => candidate.zone === undefined || zone === candidate.zone);
  if (zones !== null && zones.length === 0) {
    return { status: 'fail', reasons: [{ message: `the task asks for ${candidate.zone}, which has no subnet in relaunch:subnets`, fix: `add a subnet of ${candidate.zone} to relaunch:subnets and redeploy` }] };
  }
  const fails: Reason[] = [];
  const unknowns: Reason[] = [];
  let offeredZones: readonly string[] = [];
  if (!facts.offerings.known) unknowns.push({ message: `offerings of ${type} not checked: ${facts.offerings.why}` });
  else {
    const offering = facts.offerings.value.get(type) ?? [];
    offeredZones = zones === null ? offering.filter((zone) => candidate.zone === undefined || zone === candidate.zone) : zones.filter((zone) => offering.includes(zone));
    if (offeredZones.length === 0) {
      fails.push({
        message: `${type} is not offered in ${zones === null ? (candidate.zone ?? `any zone of ${region.region}`) : zones.join(', ')}`,
        fix: `add subnets of zones that offer it (aws ec2 describe-instance-type-offerings --region ${region.region} --location-type availability-zone --filters Name=instance-type,Values=${type}), or ask for another type`,
      });
    }
  }
  const group = quotaGroupOf(type);
  if (group === null) unknowns.push({ message: `relaunch does not know which vCPU quota limits ${type.split('.')[0]}` });
  else if (input.vcpus === null) unknowns.push({ message: `the vCPUs of ${type} are unknown` });
  else {
    const code = group.codes[candidate.market];
    const quota = facts.quota(code);
    const needed = input.nodes * input.vcpus;
    if (!quota.known) unknowns.push({ message: `quota ${code} not checked: ${quota.why}` });
    else if (quota.value.limit === null) unknowns.push({ message: `Service Quotas has no quota ${code} here` });
    else if (quota.value.limit - quota.value.used < needed) {
      const free = Math.max(quota.value.limit - quota.value.used, 0);
      fails.push({
        message: `needs ${needed} ${group.name} ${candidate.market} vCPUs (${input.nodes} x ${input.vcpus}), ${free} free (quota ${code}: ${quota.value.limit}, ${quota.value.used} in use)`,
        fix: quotaIncreaseCommand(region.region, code, quota.value.used + needed),
      });
    }
  }
  const image = facts.image(type);
  if (!image.known) unknowns.push({ message: `image not checked: ${image.why}` });
  else if ('problem' in image.value) fails.push({ message: image.value.problem, fix: 'set resources.image_id to an AMI this account can use in the region' });
  if (fails.length > 0) return { status: 'fail', reasons: [...fails, ...unknowns] };
  if (unknowns.length > 0) return { status: 'unknown', reasons: unknowns };
  return { status: 'ok', place: { region: region.region, zones: offeredZones } };
}

/**
 * The launch check of one task: ok naming the first launchable candidate; fail when every
 * candidate is refused, with the first refusal's fix; warn when none is known to launch and
 * some could not be checked.
 */
export function launchCheck(id: string, judged: readonly JudgedCandidate[]): CheckResult {
  const launchable = judged.filter(({ verdict }) => verdict.launchable === true);
  const first = launchable[0]?.verdict;
  if (first !== undefined) {
    const where = first.places.map((place) => `${place.region} (${place.zones.join(', ')})`).join('; ');
    const more = launchable.length > 1 ? `, and ${launchable.length - 1} more candidate${launchable.length > 2 ? 's' : ''}` : '';
    return { id, status: 'ok', message: `would launch now: ${first.instanceType} ${first.market} in ${where}${more}` };
  }
  if (judged.length === 0) return { id, status: 'fail', message: 'the task has no candidate instance type (relaunch validate says why)', fix: 'relaunch validate TASK.yaml' };
  const unknown = judged.filter(({ verdict }) => verdict.launchable === null).length;
  if (unknown > 0) {
    return { id, status: 'warn', message: `no candidate is known to launch now: ${unknown} of ${judged.length} could not be checked (see the verdict's reasons)` };
  }
  const fix = judged.find((candidate) => candidate.fix !== null)?.fix ?? 'see the verdict\'s reasons';
  const [firstReason] = judged[0]?.verdict.reasons ?? [];
  return { id, status: 'fail', message: `would not launch now: none of ${judged.length} candidate${judged.length === 1 ? '' : 's'} can (first: ${judged[0]?.verdict.instanceType}: ${firstReason ?? 'refused'})`, fix };
}
