// Where a task runs: resources.cloud, region, zone, and SkyPilot's newer infra; AWS only.

import { fromParser, isMapping, validOrUndefined } from '../located-yaml/fields.ts';
import { describe, expectedGot, type Problem } from '../located-yaml/messages.ts';

/** An AWS region name: `us-east-1`, `ap-northeast-1`, `us-gov-west-1`. */
const AWS_REGION = /^[a-z]{2}(?:-[a-z]+)+-\d+$/;
/** An AWS zone: its region, then a letter (`us-east-1a`) or a local zone (`us-west-2-lax-1a`). */
const AWS_ZONE = /^([a-z]{2}(?:-[a-z]+)+-\d+)(?:-[a-z0-9]+)*[a-z]$/;

const REGION_EXAMPLE = 'an AWS region such as us-east-1';
const ZONE_EXAMPLE = 'an AWS availability zone such as us-east-1a';
const INFRA_FORMS = 'aws, aws/REGION or aws/REGION/ZONE';

/** Region and zone as `resources.infra` names them; null where it leaves them open. */
export interface Placement {
  readonly region: string | null;
  readonly zone: string | null;
}

/** Whether a name is an AWS region's (`us-east-1`), as the form goes; not checked against a list. */
export function isAwsRegion(name: string): boolean {
  return AWS_REGION.test(name);
}

/** Whether a name is an AWS availability zone's (`us-east-1a`), as the form goes. */
export function isAwsZone(name: string): boolean {
  return AWS_ZONE.test(name);
}

/** The region an AWS zone belongs to: `us-east-1a` is in `us-east-1`. */
export function regionOfZone(zone: string): string {
  return (AWS_ZONE.exec(zone) as RegExpExecArray)[1] as string;
}

function awsOnly(cloud: string): string {
  return `relaunch runs on AWS only, got ${cloud}`;
}

/** `resources.cloud`: `aws` in any case; any other cloud is named in the error. */
export const cloudSchema = fromParser<'aws'>((value, report) => {
  if (typeof value !== 'string') return report(expectedGot('aws', value));
  if (value.toLowerCase() !== 'aws') return report(awsOnly(value));
  return 'aws';
});

/** `resources.region`: an AWS region name. */
export const regionSchema = fromParser<string>((value, report) => {
  if (typeof value === 'string' && AWS_REGION.test(value)) return value;
  return report(expectedGot(REGION_EXAMPLE, value));
});

/** `resources.zone`: an AWS availability zone name. */
export const zoneSchema = fromParser<string>((value, report) => {
  if (typeof value === 'string' && AWS_ZONE.test(value)) return value;
  return report(expectedGot(ZONE_EXAMPLE, value));
});

/**
 * `resources.infra`: `aws`, `aws/REGION` or `aws/REGION/ZONE` (SkyPilot's `*` wildcard
 * stands for "any", and AWS is the only cloud relaunch has). Another cloud is named.
 */
export const infraSchema = fromParser<Placement>((value, report) => {
  if (typeof value !== 'string') return report(expectedGot(INFRA_FORMS, value));
  const [cloud = '', region, zone, ...rest] = value.split('/');
  const lowered = cloud.toLowerCase();
  if (lowered !== 'aws' && lowered !== '*' && cloud !== '') return report(awsOnly(cloud));
  if (cloud === '' || rest.length > 0 || region === '' || zone === '') {
    return report(expectedGot(INFRA_FORMS, value));
  }
  const placedRegion = region === undefined || region === '*' ? null : region;
  if (placedRegion !== null && !AWS_REGION.test(placedRegion)) {
    return report(expectedGot(`${REGION_EXAMPLE} after aws/`, value));
  }
  if (zone === undefined) return { region: placedRegion, zone: null };
  if (!isAwsZone(zone) || (placedRegion !== null && regionOfZone(zone) !== placedRegion)) {
    const where = placedRegion === null ? 'an AWS availability zone' : `a zone of ${placedRegion}`;
    return report(expectedGot(`${where} after the region, such as aws/us-east-1/us-east-1a`, value));
  }
  return { region: regionOfZone(zone), zone };
});

/** The region and zone a task asks for, from infra, region and zone (each valid on its own). */
export function place(given: {
  readonly infra?: Placement | null;
  readonly region?: string | null;
  readonly zone?: string | null;
}): Placement {
  const zone = given.infra?.zone ?? given.zone ?? null;
  const region = given.infra?.region ?? given.region ?? (zone === null ? null : regionOfZone(zone));
  return { region, zone };
}

/** The region of a raw `resources` mapping, from whichever of its fields are valid. */
export function regionOf(resources: Readonly<Record<string, unknown>>): string | null {
  return place({
    infra: validOrUndefined(infraSchema, resources.infra),
    region: validOrUndefined(regionSchema, resources.region),
    zone: validOrUndefined(zoneSchema, resources.zone),
  }).region;
}

/**
 * Cross-field checks of a `resources` mapping: `infra` and `region`/`zone` may both be
 * given only when they agree, and a zone must lie in the region. Fields that are invalid on
 * their own are skipped here (their schemas report them).
 */
export function placementProblems(resources: Readonly<Record<string, unknown>>): Problem[] {
  const problems: Problem[] = [];
  const infra = validOrUndefined(infraSchema, resources.infra);
  const region = validOrUndefined(regionSchema, resources.region);
  const zone = validOrUndefined(zoneSchema, resources.zone);
  if (infra?.region != null && region !== undefined && region !== infra.region) {
    problems.push({
      path: ['region'],
      message: `expected ${infra.region} (the region resources.infra names), got ${describe(region)}`,
    });
  }
  if (infra?.zone != null && zone !== undefined && zone !== infra.zone) {
    problems.push({
      path: ['zone'],
      message: `expected ${infra.zone} (the zone resources.infra names), got ${describe(zone)}`,
    });
    return problems;
  }
  const inRegion = infra?.region ?? region;
  if (inRegion != null && zone !== undefined && regionOfZone(zone) !== inRegion) {
    problems.push({ path: ['zone'], message: expectedGot(`a zone of ${inRegion}`, zone) });
  }
  return problems;
}

/**
 * The cloud other than AWS a raw `resources` mapping names by `cloud` or `infra`
 * (`gcp`, `kubernetes/ctx`), as written; null when it names AWS, a wildcard or none, or is
 * not a mapping. An `any_of` or `ordered` entry naming one is left out of the candidates.
 */
export function otherCloudOf(resources: unknown): string | null {
  if (!isMapping(resources)) return null;
  const { cloud, infra } = resources;
  if (typeof cloud === 'string' && cloud !== '' && cloud.toLowerCase() !== 'aws') return cloud;
  if (typeof infra !== 'string') return null;
  const named = infra.split('/', 1).join('');
  return named !== '' && named !== '*' && named.toLowerCase() !== 'aws' ? named : null;
}
