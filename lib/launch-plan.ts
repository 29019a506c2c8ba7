// Where to launch an attempt: the ordered (region, zone, instance types) to try, per strategy,
// and the same as fleets: the (instance type, market, zone) candidates of `any_of`,
// `ordered` and accelerator sets, grouped into the EC2 Fleet requests to send in turn.
//
// Pure: compute adapters call it with the regions and zones they can reach and try the
// candidates in order, failing over on capacity errors. The instance types of one
// candidate are alternatives for one launch (any one will do), cheapest first.

import { PrecheckError } from './errors.ts';
import type { Market } from './policy/types.ts';
import { cpuInstanceTypes, gpuInstanceTypes, instanceTypeInfo, knownAccelerators, type InstanceTypeInfo } from './instance-types.ts';
import type { Placement } from './model.ts';
import type { LaunchRequest } from './ports.ts';
import type { Quantity, ResourceOption, Resources, TaskSpec } from './task-file/types.ts';

/** One place to try, with the instance types acceptable there, preferred first. */
export interface PlacementCandidate {
  readonly region: string;
  /** null: the region has no zones listed, so EC2 picks one. */
  readonly zone: string | null;
  readonly instanceTypes: readonly string[];
}

/** What placement needs to know. */
export interface PlacementInput {
  readonly spec: TaskSpec;
  /** Earlier attempts' placements, newest first, with how each ended (LaunchRequest's). */
  readonly history: LaunchRequest['history'];
  /** The regions relaunch may launch in, in order of preference. */
  readonly regions: readonly string[];
  /** The usable zones of each region, in order of preference. */
  readonly zonesByRegion: Readonly<Record<string, readonly string[]>>;
  /** When set, only these instance types may be launched. */
  readonly allowedInstanceTypes?: readonly string[];
}

/**
 * SkyPilot's default for a task that names no cpus, memory or accelerator: 8 vCPUs or
 * more (m6i.2xlarge first).
 */
const DEFAULT_CPUS: Quantity = { value: 8, orMore: true };
/**
 * SkyPilot's default memory for a CPU-only task that does not name it: 4 GiB per vCPU or
 * more, so `cpus: 4` gets a general-purpose m6i.xlarge rather than a 8 GiB c7i.xlarge.
 */
const DEFAULT_GIB_PER_VCPU = 4;

/**
 * The candidates for this attempt, in the order to try them.
 *
 * - `resources.region`/`zone`, when set, are the only places tried; a region or zone the
 *   compute cannot reach is a PrecheckError.
 * - EAGER_NEXT_REGION, after a preemption, a lost instance or an agent that failed before
 *   setup (`history[0]`): other regions first, then other zones of the same region, the
 *   zone just lost last. Otherwise the configured order.
 * - FAILOVER, after any earlier attempt: the same zone, then the rest of its region, then
 *   the other regions.
 *
 * Instance types come from `instanceTypesFor`, the same for every candidate.
 */
export function planPlacements(input: PlacementInput): PlacementCandidate[] {
  const instanceTypes = instanceTypesFor(input.spec.resources, input.allowedInstanceTypes);
  return rankedPlaces(input, input.spec.resources).map(({ place }) => ({ ...place, instanceTypes }));
}

/** The task's places, most preferred first, each with its strategy rank (lower first). */
function rankedPlaces(input: PlacementInput, resources: Resources): { place: Place; rank: number }[] {
  const places = allowedPlaces(input, resources);
  const last = input.history[0]?.placement;
  const rank = last === undefined ? () => 0 : preference(input.spec.resources.jobRecovery.strategy, last, input.history[0]?.outcome ?? null);
  return places
    .map((place, index) => ({ place, index, rank: rank(place) }))
    .sort((a, b) => a.rank - b.rank || a.index - b.index)
    .map(({ place, rank: placeRank }) => ({ place, rank: placeRank }));
}

/** One way to run the task: the outer resources with one `any_of`/`ordered` entry applied, and its market. */
export interface ResourceChoice {
  /** Without `alternatives`: this choice's own. */
  readonly resources: Resources;
  readonly market: Market;
  /** The entry's position in the file's `any_of`/`ordered`; null without alternatives. */
  readonly entry: number | null;
}

/**
 * The ways to run the task on `market` (the job's counters'), in preference order. Without
 * `any_of`/`ordered`, the resources themselves. With them, one choice per entry: `ordered`
 * in its order; `any_of` spot entries first (cheaper), then the file's order, within each region:
 * the region's rank comes before the market. On the
 * on-demand market (a task without spot, or one the on_demand_fallback_after moved there)
 * every choice is on-demand; on spot each keeps its entry's own market.
 */
export function resourceChoices(resources: Resources, market: Market): ResourceChoice[] {
  const { alternatives, ...outer } = resources;
  if (alternatives === undefined) return [{ resources: outer, market, entry: null }];
  const choices = alternatives.options.map((option, position): ResourceChoice => ({
    resources: applyOption(outer, option),
    market: market === 'spot' && (option.useSpot ?? outer.useSpot) ? 'spot' : 'on-demand',
    entry: option.index ?? position,
  }));
  if (alternatives.mode === 'ordered') return choices;
  return [...choices].sort((a, b) => marketOrder(a.market) - marketOrder(b.market) || (a.entry ?? 0) - (b.entry ?? 0));
}

function marketOrder(market: Market): number {
  return market === 'spot' ? 0 : 1;
}

/** The outer resources with an entry's fields put over them; a placed entry replaces region and zone together. */
function applyOption(outer: Resources, option: ResourceOption): Resources {
  // `index` says where the entry was written, nothing about the machine.
  const placed = option.region !== undefined || option.zone !== undefined;
  const namesMachine = option.cpus !== undefined || option.memoryGb !== undefined || option.accelerators !== undefined;
  return {
    ...outer,
    ...(placed ? { region: option.region ?? null, zone: option.zone ?? null } : {}),
    // An entry that names its machine by cpus, memory or accelerators drops the outer instance_type.
    instanceType: option.instanceType ?? (namesMachine ? null : outer.instanceType),
    cpus: option.cpus ?? outer.cpus,
    memoryGb: option.memoryGb ?? outer.memoryGb,
    accelerators: option.accelerators ?? outer.accelerators,
    useSpot: option.useSpot ?? outer.useSpot,
  };
}

/** One (zone, instance type) of a fleet request. */
export interface FleetOverride {
  /** null: the region has no zones listed, so EC2 picks one. */
  readonly zone: string | null;
  readonly instanceType: string;
  /** The `any_of`/`ordered` entry (its position in the file) it comes from; null without them. */
  readonly entry: number | null;
}

/**
 * One EC2 Fleet request: every candidate of one region and market that the strategy ranks
 * alike. EC2 puts all the nodes in one of its zones and on one of its types.
 */
export interface FleetPlan {
  readonly region: string;
  readonly market: Market;
  /** Preferred first: EC2's priorities when `prioritized`. */
  readonly overrides: readonly FleetOverride[];
  /** `ordered`: EC2 takes the overrides in order; otherwise it picks by price and capacity. */
  readonly prioritized: boolean;
}

interface Candidate {
  readonly region: string;
  readonly zone: string | null;
  readonly instanceType: string;
  readonly market: Market;
  readonly rank: number;
  readonly choice: number;
  readonly entry: number | null;
  readonly regionIndex: number;
  /** In relaunch's catalog: a type it does not know (a typo, or one newer) is asked for apart, last. */
  readonly known: boolean;
}

/**
 * The fleet requests of an attempt on `market`, in the order to send them: every
 * (instance type, market, zone) candidate of every resource choice (resourceChoices),
 * grouped by region, market and the strategy's rank (planPlacements' order: after a
 * preemption, EAGER_NEXT_REGION puts the zone just lost in a later request, FAILOVER the
 * zone just used in the first). Requests go by rank, then (with `ordered`) the earliest
 * entry they hold, then the configured region order, spot before on-demand, and types
 * relaunch's catalog knows before those it does not (each such group its own request).
 *
 * A choice that cannot run anywhere here (its region not configured, no type fitting) is
 * left out; when no choice can run, PrecheckError says why for each.
 */
export function planFleets(input: PlacementInput & { readonly market: Market }): FleetPlan[] {
  const choices = resourceChoices(input.spec.resources, input.market);
  const prioritized = input.spec.resources.alternatives?.mode === 'ordered';
  const candidates: Candidate[] = [];
  const problems: string[] = [];
  choices.forEach((choice, choiceIndex) => {
    let places: { place: Place; rank: number }[];
    let types: string[];
    try {
      places = rankedPlaces(input, choice.resources);
      types = instanceTypesFor(choice.resources, input.allowedInstanceTypes);
    } catch (error) {
      if (!(error instanceof PrecheckError)) throw error;
      const where = choice.entry === null ? '' : `resources.${input.spec.resources.alternatives?.mode}[${choice.entry}]: `;
      problems.push(`${where}${error.message}`);
      return;
    }
    for (const { place, rank } of places) {
      for (const instanceType of types) {
        const known = instanceTypeInfo(instanceType) !== null;
        candidates.push({ ...place, instanceType, market: choice.market, rank, choice: choiceIndex, entry: choice.entry, regionIndex: input.regions.indexOf(place.region), known });
      }
    }
  });
  if (candidates.length === 0) throw new PrecheckError(problems.join('; '));
  const groups = new Map<string, Candidate[]>();
  for (const candidate of candidates) {
    // A type EC2 may refuse outright goes in a request of its own: it cannot sink the others.
    const key = `${candidate.rank}|${candidate.region}|${candidate.market}|${candidate.known}`;
    groups.set(key, [...(groups.get(key) ?? []), candidate]);
  }
  const first = (group: readonly Candidate[]) => group[0] as Candidate;
  const earliest = (group: readonly Candidate[]) => Math.min(...group.map((candidate) => candidate.choice));
  return [...groups.values()]
    .sort(
      (a, b) =>
        first(a).rank - first(b).rank ||
        (prioritized ? earliest(a) - earliest(b) : 0) ||
        first(a).regionIndex - first(b).regionIndex ||
        marketOrder(first(a).market) - marketOrder(first(b).market) ||
        Number(!first(a).known) - Number(!first(b).known),
    )
    .flatMap((group): FleetPlan[] => {
      const seen = new Set<string>();
      const overrides = group.filter((candidate) => {
        const key = `${candidate.zone}|${candidate.instanceType}`;
        if (seen.has(key)) return false;
        seen.add(key);
        return true;
      });
      const plans: FleetPlan[] = [];
      for (let start = 0; start < overrides.length; start += MAX_FLEET_OVERRIDES) {
        plans.push({
          region: first(group).region,
          market: first(group).market,
          overrides: overrides.slice(start, start + MAX_FLEET_OVERRIDES).map(({ zone, instanceType, entry }) => ({ zone, instanceType, entry })),
          prioritized,
        });
      }
      return plans;
    });
}

/**
 * The most overrides one fleet request carries: EC2 documents 300 for `request` and
 * `maintain` fleets; relaunch keeps `instant` ones to it too, and sends the rest (the less
 * preferred) in the next request.
 */
export const MAX_FLEET_OVERRIDES = 300;

type Place = Pick<PlacementCandidate, 'region' | 'zone'>;

/** Lower is tried first. */
function preference(
  strategy: Resources['jobRecovery']['strategy'],
  last: Placement,
  outcome: LaunchRequest['history'][number]['outcome'],
): (place: Place) => number {
  const sameRegion = (place: Place): boolean => place.region === last.region;
  const sameZone = (place: Place): boolean => sameRegion(place) && place.zone === last.zone;
  if (strategy === 'FAILOVER') {
    return (place) => (sameZone(place) ? 0 : sameRegion(place) ? 1 : 2);
  }
  // A node that failed to set itself up (a registry or a bucket the place could not reach) may do better elsewhere too.
  if (outcome === 'PREEMPTED' || outcome === 'LOST' || outcome === 'AGENT_FAILED') {
    return (place) => (!sameRegion(place) ? 0 : !sameZone(place) ? 1 : 2);
  }
  return () => 0;
}

/** Every (region, zone) allowed by the configuration and the resources, in configured order. */
function allowedPlaces(input: PlacementInput, resources: Resources): Place[] {
  const { region: wantedRegion, zone: wantedZone } = resources;
  const region = wantedRegion ?? (wantedZone === null ? null : regionOfZone(wantedZone, input));
  if (region !== null && !input.regions.includes(region)) {
    throw new PrecheckError(`resources.region: ${region} is not one of the regions relaunch launches in (${input.regions.join(', ')})`);
  }
  const regions = region === null ? input.regions : [region];
  const places = regions.flatMap((name): Place[] => {
    const zones = input.zonesByRegion[name] ?? [];
    return zones.length === 0 ? [{ region: name, zone: null }] : zones.map((zone) => ({ region: name, zone }));
  });
  if (wantedZone === null) return places;
  const inZone = places.filter((place) => place.zone === wantedZone);
  if (inZone.length === 0) {
    const zones = input.zonesByRegion[region ?? ''] ?? [];
    const known = zones.length === 0 ? 'none' : zones.join(', ');
    throw new PrecheckError(`resources.zone: ${wantedZone} has no subnet relaunch can launch in (zones it can use: ${known})`);
  }
  return inZone;
}

/** The configured region a zone belongs to: the one listing it, else the one it starts with. */
function regionOfZone(zone: string, input: PlacementInput): string {
  const listing = input.regions.find((region) => input.zonesByRegion[region]?.includes(zone));
  if (listing !== undefined) return listing;
  const prefixed = input.regions.find((region) => zone.startsWith(region));
  if (prefixed !== undefined) return prefixed;
  throw new PrecheckError(`resources.zone: ${zone} is in none of the regions relaunch launches in (${input.regions.join(', ')})`);
}

/**
 * The instance types that satisfy `resources`, preferred (cheapest) first:
 *
 * - `instance_type`, when set, and nothing else;
 * - with accelerators: for each candidate accelerator in order, the table's types with
 *   exactly that many of that GPU, and the asked cpus/memory;
 * - otherwise the CPU types with the asked cpus/memory (SkyPilot's defaults: 8+ vCPUs,
 *   4 GiB per vCPU or more).
 *
 * `cpus: 4` means exactly 4, `4+` at least 4 (same for memory). An unknown accelerator, no
 * type that fits, or none left by `allowed`: PrecheckError saying what was asked.
 */
export function instanceTypesFor(resources: Resources, allowed?: readonly string[]): string[] {
  const types = resources.instanceType !== null ? [resources.instanceType] : fittingTypes(resources);
  const unique = [...new Set(types)];
  if (allowed === undefined) return unique;
  const permitted = unique.filter((type) => allowed.includes(type));
  if (permitted.length === 0) {
    throw new PrecheckError(
      `resources: ${unique.join(', ')} ${unique.length === 1 ? 'is' : 'are'} not among the instance types relaunch may launch (${allowed.join(', ')})`,
    );
  }
  return permitted;
}

function fittingTypes(resources: Resources): string[] {
  const { cpus, memoryGb: memory, accelerators } = resources;
  if (accelerators.length === 0) {
    const wanted = cpus ?? (memory === null ? DEFAULT_CPUS : null);
    const fit = cpuInstanceTypes().filter(
      (type) =>
        fits(type.vcpus, wanted) &&
        (memory === null ? type.memoryGib >= type.vcpus * DEFAULT_GIB_PER_VCPU : fits(type.memoryGib, memory)),
    );
    if (fit.length === 0) throw new PrecheckError(`resources: no instance type has ${describeAsk(cpus, memory)}; name one with instance_type`);
    return fit.map((type) => type.name);
  }
  const fit: InstanceTypeInfo[] = [];
  for (const accelerator of accelerators) {
    const withGpu = gpuInstanceTypes(accelerator.name);
    if (withGpu === null) {
      throw new PrecheckError(
        `resources.accelerators: unknown accelerator ${accelerator.name}; relaunch knows ${knownAccelerators().join(', ')} (or name an EC2 type with instance_type)`,
      );
    }
    fit.push(...withGpu.filter((type) => type.gpu?.count === accelerator.count && fits(type.vcpus, cpus) && fits(type.memoryGib, memory)));
  }
  if (fit.length === 0) {
    const asked = accelerators.map((accelerator) => `${accelerator.name}:${accelerator.count}`).join(' or ');
    const extra = cpus === null && memory === null ? '' : ` with ${describeAsk(cpus, memory)}`;
    throw new PrecheckError(`resources.accelerators: no instance type has ${asked}${extra}; name one with instance_type`);
  }
  return fit.map((type) => type.name);
}

function fits(actual: number, wanted: Quantity | null): boolean {
  if (wanted === null) return true;
  return wanted.orMore ? actual >= wanted.value : actual === wanted.value;
}

function describeAsk(cpus: Quantity | null, memory: Quantity | null): string {
  const parts = [
    cpus === null ? null : `cpus ${cpus.value}${cpus.orMore ? '+' : ''}`,
    memory === null ? null : `memory ${memory.value}${memory.orMore ? '+' : ''} GiB`,
  ];
  return parts.filter((part) => part !== null).join(' and ');
}
