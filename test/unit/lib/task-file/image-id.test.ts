// resources.image_id: AMIs, SkyPilot's image aliases, and Docker images to run the task in.

import { describe, expect, it } from 'vitest';
import { isDockerReference } from '../../../../lib/task-file/image-id.ts';
import { parseTaskObject } from '../../../../lib/task-file/parse.ts';
import type { Resources } from '../../../../lib/task-file/types.ts';
import { rejectedIssues } from '../../../support/task-file-rejection.ts';

function resourcesOf(imageId: unknown): Resources {
  return parseTaskObject({ run: 'x', resources: { image_id: imageId } }).spec.resources;
}

describe('image_id', () => {
  it('takes docker:IMAGE as a container on the default machine image', () => {
    expect(resourcesOf('docker:nvcr.io/nvidia/pytorch:24.07-py3')).toMatchObject({ imageId: null, containerImage: 'nvcr.io/nvidia/pytorch:24.07-py3' });
    expect(resourcesOf('docker:ubuntu@sha256:' + 'a'.repeat(64)).containerImage).toBe(`ubuntu@sha256:${'a'.repeat(64)}`);
    expect(resourcesOf('docker:localhost:5000/team/img:v1').containerImage).toBe('localhost:5000/team/img:v1');
  });

  it('takes a skypilot: alias, alone or per region, and a docker key beside the regions', () => {
    expect(resourcesOf('skypilot:gpu-ubuntu-2204').imageId).toEqual({ kind: 'alias', alias: 'gpu-ubuntu-2204' });
    expect(resourcesOf({ 'us-east-1': 'skypilot:cpu-ubuntu-2004', 'us-west-2': 'ami-0123456789abcdef0', docker: 'ubuntu:22.04' })).toMatchObject({
      imageId: { kind: 'per-region', byRegion: { 'us-east-1': 'skypilot:cpu-ubuntu-2004', 'us-west-2': 'ami-0123456789abcdef0' } },
      containerImage: 'ubuntu:22.04',
    });
    expect(resourcesOf({ docker: 'docker:ubuntu:22.04' })).toMatchObject({ imageId: null, containerImage: 'ubuntu:22.04' });
  });

  it('leaves containerImage out when the task has none', () => {
    expect(resourcesOf('ami-0123456789abcdef0')).not.toHaveProperty('containerImage');
  });

  it.each([
    ['an image with a space', 'docker:my image', 'expected a Docker image such as'],
    ['an image with shell in it', 'docker:ubuntu;rm -rf /', 'expected a Docker image such as'],
    ['an empty image', 'docker:', 'expected a Docker image such as'],
    ['an image name over 255 characters', `docker:${'a'.repeat(256)}`, 'expected a Docker image such as'],
    ['an alias relaunch does not resolve', 'skypilot:k80-ubuntu-2004', "expected one of SkyPilot's image aliases relaunch resolves"],
    ['a Docker image as a region value', { 'us-east-1': 'docker:ubuntu' }, 'resources.image_id.us-east-1: expected an AMI id such as ami-0123456789abcdef0 here, got the Docker image docker:ubuntu: give it under the docker key'],
  ])('refuses %s, naming the field', (_name, value, message) => {
    const issues = rejectedIssues(() => parseTaskObject({ run: 'x', resources: { image_id: value } }));
    expect(issues.some((issue) => issue.includes(message)), issues.join('\n')).toBe(true);
  });
});

describe('isDockerReference', () => {
  it.each([
    'ubuntu',
    'ubuntu:22.04',
    'library/ubuntu:latest',
    'nvcr.io/nvidia/pytorch:24.07-py3',
    'localhost:5000/team/img:v1',
    '[::1]:5000/x',
    'public.ecr.aws/hpc-cloud/nccl-tests:latest',
    '123456789012.dkr.ecr.us-west-2.amazonaws.com/team/model:1',
    'a__b/c--d/e.f',
    `ubuntu@sha256:${'a'.repeat(64)}`,
    `ubuntu@sha512:${'b'.repeat(128)}`,
    `${'n'.repeat(200)}:tag@sha256:${'c'.repeat(64)}`,
  ])('takes %s', (image) => {
    expect(isDockerReference(image)).toBe(true);
  });

  it.each(['', '-v/x', '--help', './x', 'foo-/bar', 'a..b', 'a.-b', 'a___b', 'Ubuntu', 'ubuntu:', 'ubuntu:-x', 'ubuntu@sha256:short', 'my image', 'a;b', `${'n'.repeat(256)}`])('refuses %j', (image) => {
    expect(isDockerReference(image)).toBe(false);
  });
});

describe('disk_tier', () => {
  it('takes each of SkyPilot tiers, in any case, and is left out when not given', () => {
    for (const tier of ['low', 'medium', 'high', 'ultra', 'best']) {
      expect(parseTaskObject({ run: 'x', resources: { disk_tier: tier.toUpperCase() } }).spec.resources.diskTier).toBe(tier);
    }
    expect(parseTaskObject({ run: 'x' }).spec.resources).not.toHaveProperty('diskTier');
  });

  it('refuses anything else, naming the tiers', () => {
    expect(rejectedIssues(() => parseTaskObject({ run: 'x', resources: { disk_tier: 'fast' } }))).toEqual([
      'resources.disk_tier: expected one of low, medium, high, ultra, best, got "fast"',
    ]);
  });
});
