// The image an instance boots: the task's AMI (one id, one per region, or one of SkyPilot's
// `skypilot:` aliases read from its public SSM parameter), else the default kind's for the
// instance type (Ubuntu 24.04 by architecture, the Deep Learning Base AMI for GPU types),
// and the root device whose volume `disk_size` sizes. Ec2Compute asks it once per region and
// kind of instance in a launch; `relaunch check` names the same parameters.

import { DescribeImagesCommand, type EC2Client } from '@aws-sdk/client-ec2';
import { errorMessage, PrecheckError } from '../errors.ts';
import { architectureOf, hasGpus, type Architecture } from '../instance-types.ts';
import type { FleetPlan } from '../launch-plan.ts';
import type { ImageAlias } from '../task-file/image-id.ts';
import type { TaskSpec } from '../task-file/types.ts';
import { awsErrorCode } from './aws-errors.ts';
import type { Ec2Retrying } from './ec2-calls.ts';
import type { Ec2Parameters } from './ssm-parameters.ts';
import type { ImageKind } from '../workflow/resources.ts';


/**
 * Public SSM parameters naming the current AMI of each kind: Canonical's Ubuntu 24.04, and
 * AWS's Deep Learning Base AMI (Ubuntu 24.04, NVIDIA driver and CUDA) for GPU types.
 */
export const DEFAULT_IMAGE_PARAMETERS: Readonly<Record<ImageKind, string>> = {
  x86_64: '/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id',
  arm64: '/aws/service/canonical/ubuntu/server/24.04/stable/current/arm64/hvm/ebs-gp3/ami-id',
  'x86_64-gpu': '/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id',
  'arm64-gpu': '/aws/service/deeplearning/ami/arm64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id',
};

/** An AMI and the device name of its root volume. */
export interface Image {
  readonly imageId: string;
  readonly rootDeviceName: string;
}

/** What Ec2Images is built from. */
export interface Ec2ImagesDeps {
  readonly ec2: (region: string) => EC2Client;
  /** SSM's public parameters that name the default AMIs and the aliases'. */
  readonly parameters: Pick<Ec2Parameters, 'read'>;
  /** How each call is retried (ec2Retrying). */
  readonly retrying: Ec2Retrying;
  /** SSM parameters for the default AMIs. @default DEFAULT_IMAGE_PARAMETERS */
  readonly imageParameters?: Partial<Record<ImageKind, string>>;
}

/** Resolves the image of an instance type in a region, as a launch needs it. */
export class Ec2Images {
  constructor(private readonly deps: Ec2ImagesDeps) {}

  /**
   * The task's AMI for this region (null: its per-region map has none, or the region has
   * no image for its alias), else the default kind's. A `skypilot:` alias is read from its
   * public SSM parameter for the type's architecture.
   */
  async image(region: string, spec: TaskSpec, instanceType: string): Promise<Image | null> {
    const wanted = spec.resources.imageId;
    const given = wanted?.kind === 'ami' ? wanted.imageId : wanted?.kind === 'alias' ? `skypilot:${wanted.alias}` : wanted?.kind === 'per-region' ? (wanted.byRegion[region] ?? null) : undefined;
    let imageId: string | null;
    if (given === undefined) imageId = await this.defaultImageId(region, imageKind(instanceType));
    else if (given?.startsWith('skypilot:') === true) imageId = await this.parameterImageId(region, aliasParameter(given.slice('skypilot:'.length) as ImageAlias, architectureOf(instanceType)));
    else imageId = given;
    if (imageId === null) return null;
    return this.describeImage(region, imageId);
  }

  private async defaultImageId(region: string, kind: ImageKind): Promise<string | null> {
    return this.parameterImageId(region, this.deps.imageParameters?.[kind] ?? DEFAULT_IMAGE_PARAMETERS[kind]);
  }

  private async parameterImageId(region: string, name: string): Promise<string | null> {
    return this.deps.retrying(`SSM GetParameter ${name} in ${region}`, () => this.deps.parameters.read(region, name));
  }

  /** The AMI's root device, whose volume `disk_size` sizes. A missing AMI is a PrecheckError. */
  private async describeImage(region: string, imageId: string): Promise<Image> {
    try {
      const response = await this.deps.retrying(`EC2 DescribeImages in ${region}`, () =>
        this.deps.ec2(region).send(new DescribeImagesCommand({ ImageIds: [imageId] })),
      );
      const rootDeviceName = response.Images?.[0]?.RootDeviceName;
      if (rootDeviceName === undefined) throw new PrecheckError(`resources.image_id: ${imageId} is not an AMI this account can use in ${region}`);
      return { imageId, rootDeviceName };
    } catch (error) {
      const code = awsErrorCode(error);
      if (code.startsWith('InvalidAMIID.')) {
        throw new PrecheckError(`resources.image_id: ${imageId} cannot be used in ${region}: ${code}: ${errorMessage(error)}`);
      }
      throw error;
    }
  }
}

/** The default image's kind for an instance type: its architecture, with GPUs or not. */
export function imageKind(instanceType: string): ImageKind {
  const arch: Architecture = architectureOf(instanceType);
  return hasGpus(instanceType) ? `${arch}-gpu` : arch;
}

/**
 * The public SSM parameter of one of SkyPilot's image aliases for an architecture:
 * Canonical's Ubuntu server (`cpu-`), or AWS's Deep Learning Base AMI with the NVIDIA driver,
 * CUDA and Docker (`gpu-`).
 */
export function aliasParameter(alias: ImageAlias, arch: Architecture): string {
  const [kind, , version] = alias.split('-') as [string, string, string];
  const release = `${version.slice(0, 2)}.${version.slice(2)}`;
  if (kind === 'gpu') return `/aws/service/deeplearning/ami/${arch}/base-oss-nvidia-driver-gpu-ubuntu-${release}/latest/ami-id`;
  // Canonical publishes 24.04 on gp3 volumes, earlier releases on gp2.
  const volume = release === '24.04' ? 'ebs-gp3' : 'ebs-gp2';
  return `/aws/service/canonical/ubuntu/server/${release}/stable/current/${arch === 'x86_64' ? 'amd64' : 'arm64'}/hvm/${volume}/ami-id`;
}

/** A per-region image map that names none of the regions the plan may use cannot run anywhere. */
export function assertImageSomewhere(spec: TaskSpec, plan: readonly FleetPlan[]): void {
  const wanted = spec.resources.imageId;
  if (wanted?.kind !== 'per-region') return;
  const regions = [...new Set(plan.map((fleet) => fleet.region))];
  if (regions.some((region) => wanted.byRegion[region] !== undefined)) return;
  throw new PrecheckError(
    `resources.image_id: names AMIs for ${Object.keys(wanted.byRegion).join(', ')}, but relaunch may launch this task only in ${regions.join(', ')}`,
  );
}
