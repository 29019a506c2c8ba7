// resources.image_id: the machine image (an AMI, one per region, or one of SkyPilot's
// image aliases) and, optionally, a Docker image the task runs in (`docker:IMAGE`, or a
// `docker` key among the regions).

import type { ImageId } from './types.ts';
import { fromParser, isMapping, validOrUndefined, type Report } from '../located-yaml/fields.ts';
import { describe, expectedGot, type Problem } from '../located-yaml/messages.ts';
import { isAwsRegion, regionOf } from './cloud-region-zone.ts';

/** An AMI id: `ami-` and 8 or 17 hex digits. */
const AMI = /^ami-[0-9a-f]{8}(?:[0-9a-f]{9})?$/;
const AMI_EXAMPLE = 'an AMI id such as ami-0123456789abcdef0';

/**
 * SkyPilot's image aliases relaunch resolves, each to AWS's public SSM parameter of the
 * matching Ubuntu (cpu) or Deep Learning Base (gpu, NVIDIA driver, Docker) AMI.
 */
export const IMAGE_ALIASES = ['cpu-ubuntu-2004', 'cpu-ubuntu-2204', 'cpu-ubuntu-2404', 'gpu-ubuntu-2004', 'gpu-ubuntu-2204', 'gpu-ubuntu-2404'] as const;
/** One of them. */
export type ImageAlias = (typeof IMAGE_ALIASES)[number];

/** A registry host: DNS labels joined by dots, or an IPv6 address in brackets; then a port. */
const DOCKER_HOST = String.raw`(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(?::[0-9]{1,5})?`;
/** A path component: lowercase letters and digits, joined by `.`, `_`, `__` or dashes. */
const DOCKER_COMPONENT = String.raw`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*`;
/** Docker's reference grammar: `[host[:port]/]path[:tag][@digest]`; the name part at most 255 characters. */
const DOCKER_NAME = new RegExp(`^(?:${DOCKER_HOST}/)?${DOCKER_COMPONENT}(?:/${DOCKER_COMPONENT})*$`);
const DOCKER_TAG = /^[\w][\w.-]{0,127}$/;
const DOCKER_DIGEST = /^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$/;

/** Whether `image` is a Docker image reference Docker itself would take. */
export function isDockerReference(image: string): boolean {
  const at = image.indexOf('@');
  const beforeDigest = at < 0 ? image : image.slice(0, at);
  if (at >= 0 && !DOCKER_DIGEST.test(image.slice(at + 1))) return false;
  const colon = beforeDigest.lastIndexOf(':');
  const hasTag = colon > beforeDigest.lastIndexOf('/');
  const name = hasTag ? beforeDigest.slice(0, colon) : beforeDigest;
  if (hasTag && !DOCKER_TAG.test(beforeDigest.slice(colon + 1))) return false;
  return name.length > 0 && name.length <= 255 && DOCKER_NAME.test(name);
}
const DOCKER_EXAMPLE = 'a Docker image such as docker:ubuntu:22.04 or docker:nvcr.io/nvidia/pytorch:24.07-py3';

/** The machine image and the container of a task. */
export interface ImageChoice {
  readonly machine: ImageId | null;
  /** A Docker image to run setup and run in; null to run them on the machine. */
  readonly container: string | null;
}

function dockerImageOf(value: string, report: Report): string | undefined {
  const image = value.slice('docker:'.length);
  if (image.length <= 1024 && isDockerReference(image)) return image;
  return report(expectedGot(DOCKER_EXAMPLE, value));
}

/** An AMI id or a `skypilot:` alias, as given (a per-region value). */
function machineOf(value: unknown, report: Report): string | undefined {
  if (typeof value === 'string' && AMI.test(value)) return value;
  if (typeof value === 'string' && value.startsWith('skypilot:')) return aliasOf(value, report) === undefined ? undefined : value;
  if (typeof value === 'string' && value.startsWith('docker:')) {
    return report(`expected ${AMI_EXAMPLE} here, got the Docker image ${value}: give it under the docker key`);
  }
  return report(expectedGot(`${AMI_EXAMPLE} or a skypilot: image alias`, value));
}

function aliasOf(value: string, report: Report): ImageAlias | undefined {
  const alias = value.slice('skypilot:'.length);
  if ((IMAGE_ALIASES as readonly string[]).includes(alias)) return alias as ImageAlias;
  return report(`expected one of SkyPilot's image aliases relaunch resolves (${IMAGE_ALIASES.map((a) => `skypilot:${a}`).join(', ')}), got ${describe(value)}`);
}

/**
 * `resources.image_id`: an AMI id, `skypilot:ALIAS`, or `docker:IMAGE` (the default machine
 * image, and the task in that container); or a mapping of AWS region to AMI id or alias,
 * with an optional `docker` key naming the container.
 */
export const imageIdSchema = fromParser<ImageChoice>((value, report) => {
  if (typeof value === 'string') {
    if (value.startsWith('docker:')) {
      const container = dockerImageOf(value, report);
      return container === undefined ? undefined : { machine: null, container };
    }
    if (value.startsWith('skypilot:')) {
      const alias = aliasOf(value, report);
      return alias === undefined ? undefined : { machine: { kind: 'alias', alias }, container: null };
    }
    const imageId = machineOf(value, report);
    return imageId === undefined ? undefined : { machine: { kind: 'ami', imageId }, container: null };
  }
  if (!isMapping(value)) return report(expectedGot(`${AMI_EXAMPLE}, skypilot:ALIAS, docker:IMAGE, or a mapping of region to AMI id`, value));
  const entries = Object.entries(value);
  if (entries.length === 0) return report(expectedGot('a mapping of region to AMI id', value));
  let failed = false;
  let container: string | null = null;
  const byRegion: [string, string][] = [];
  for (const [key, given] of entries) {
    const at: Report = (message) => {
      failed = true;
      return report(message, [key]);
    };
    if (key === 'docker') {
      const image = typeof given === 'string' ? dockerImageOf(given.startsWith('docker:') ? given : `docker:${given}`, at) : at(expectedGot(DOCKER_EXAMPLE, given));
      if (image !== undefined) container = image;
    } else if (!isAwsRegion(key)) {
      at(`expected an AWS region such as us-east-1 (or docker) as the key, got ${describe(key)}`);
    } else {
      const machine = machineOf(given, at);
      if (machine !== undefined) byRegion.push([key, machine]);
    }
  }
  if (failed) return undefined;
  const machine: ImageId | null = byRegion.length === 0 ? null : { kind: 'per-region', byRegion: Object.fromEntries(byRegion) };
  return { machine, container };
});

/**
 * Cross-field check of a `resources` mapping: an AMI per region must include the region
 * the task asks for, or the task could never launch.
 */
export function imageProblems(resources: Readonly<Record<string, unknown>>): Problem[] {
  const image = validOrUndefined(imageIdSchema, resources.image_id)?.machine;
  const region = regionOf(resources);
  if (image?.kind !== 'per-region' || region === null || Object.hasOwn(image.byRegion, region)) return [];
  const offered = Object.keys(image.byRegion).join(', ');
  return [{ path: ['image_id'], message: `expected an AMI for ${region} (the task's region), got AMIs for ${offered}` }];
}
