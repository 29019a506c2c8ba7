// resources.image_id: one AMI for every region, or one per region; Docker images are not run.

import type { ImageId } from './types.ts';
import { fromParser, isMapping, validOrUndefined, type Report } from './fields.ts';
import { describe, expectedGot, type Problem } from './messages.ts';
import { isAwsRegion, regionOf } from './placement.ts';

/** An AMI id: `ami-` and 8 or 17 hex digits. */
const AMI = /^ami-[0-9a-f]{8}(?:[0-9a-f]{9})?$/;
const AMI_EXAMPLE = 'an AMI id such as ami-0123456789abcdef0';

function amiOf(value: unknown, report: Report): string | undefined {
  if (typeof value === 'string' && AMI.test(value)) return value;
  if (typeof value === 'string' && value.startsWith('docker:')) {
    return report(
      `expected ${AMI_EXAMPLE}, got the Docker image ${value} (Docker images are not supported by relaunch yet)`,
    );
  }
  return report(expectedGot(AMI_EXAMPLE, value));
}

/**
 * `resources.image_id`: an AMI id, or a mapping of AWS region to AMI id. SkyPilot's
 * `docker:` images and its `docker` key are rejected by name; so are SkyPilot's own image
 * tags (`skypilot:gpu-ubuntu-2204`), which only SkyPilot's catalog can resolve.
 */
export const imageIdSchema = fromParser<ImageId>((value, report) => {
  if (!isMapping(value)) {
    if (typeof value === 'string') {
      const imageId = amiOf(value, report);
      return imageId === undefined ? undefined : { kind: 'ami', imageId };
    }
    return report(expectedGot(`${AMI_EXAMPLE}, or a mapping of region to AMI id`, value));
  }
  const entries = Object.entries(value);
  if (entries.length === 0) return report(expectedGot('a mapping of region to AMI id', value));
  let failed = false;
  const byRegion: [string, string][] = [];
  for (const [region, ami] of entries) {
    const at: Report = (message) => {
      failed = true;
      return report(message, [region]);
    };
    if (region === 'docker') {
      at('not supported by relaunch yet (a SkyPilot key: a Docker image to run in)');
    } else if (!isAwsRegion(region)) {
      at(`expected an AWS region such as us-east-1 as the key, got ${describe(region)}`);
    } else {
      const imageId = amiOf(ami, at);
      if (imageId !== undefined) byRegion.push([region, imageId]);
    }
  }
  return failed ? undefined : { kind: 'per-region', byRegion: Object.fromEntries(byRegion) };
});

/**
 * Cross-field check of a `resources` mapping: an AMI per region must include the region
 * the task asks for, or the task could never launch.
 */
export function imageProblems(resources: Readonly<Record<string, unknown>>): Problem[] {
  const image = validOrUndefined(imageIdSchema, resources.image_id);
  const region = regionOf(resources);
  if (image?.kind !== 'per-region' || region === null || Object.hasOwn(image.byRegion, region)) return [];
  const offered = Object.keys(image.byRegion).join(', ');
  return [{ path: ['image_id'], message: `expected an AMI for ${region} (the task's region), got AMIs for ${offered}` }];
}
