// Launch templates: what each kind of node boots with, the templates of one attempt, and the
// janitor's sweep of those a launch left behind.
//
// Why templates at all: CreateFleet takes its instance settings (image, user data, IMDSv2,
// tags, volumes, network) only from a launch template. A launch makes one per region and
// content (image, user data, EFA), named after the job, attempt and a digest of the content,
// with a ClientToken (a retried create returns the same template) and the attempt's tags; it
// deletes them once the fleet requests are answered, whatever their outcome: an instant
// fleet's instances do not need their template afterwards. A Lambda that dies in between
// leaves a template behind; nothing runs from it, and the janitor deletes relaunch-tagged
// templates of this deployment made more than 15 minutes before (sweepLaunchTemplates, with
// listTagged and delete here).

import {
  CreateLaunchTemplateCommand,
  DeleteLaunchTemplateCommand,
  DescribeLaunchTemplatesCommand,
  type CreateLaunchTemplateCommandInput,
  type EbsBlockDevice,
  type EC2Client,
  type LaunchTemplate,
  type RequestLaunchTemplateData,
} from '@aws-sdk/client-ec2';
import { createHash } from 'node:crypto';
import { TagKey } from '../agent/tags.ts';
import { UnexpectedCloudResponseError } from '../errors.ts';
import { hasEfa, networkCards } from '../instance-types.ts';
import type { LaunchRequest, LaunchTemplateInventory, TaggedLaunchTemplate } from '../ports.ts';
import type { DiskTier, TaskSpec } from '../task-file/types.ts';
import { DEPLOYMENT_TAG_KEY } from '../workflow/resources.ts';
import { awsErrorCode, sendAws } from './aws-errors.ts';
import { attemptTags, boundedToken, ownedFilters, type Ec2Retrying } from './ec2-calls.ts';
import type { Image } from './ec2-images.ts';

/** Root volume size when neither the task (`disk_size`) nor the deployment gives one (SkyPilot's default). */
export const DEFAULT_DISK_SIZE_GB = 256;

/** What every instance of one kind boots with. */
export interface LaunchTemplateInput {
  /** The deployment's name prefix, for the attempt's tags. */
  readonly namePrefix: string;
  readonly request: Pick<LaunchRequest, 'jobId' | 'attempt'> & { readonly spec: TaskSpec };
  readonly instanceType: string;
  readonly image: Image;
  /** The agent, gzipped and base64-encoded (launchUserData). */
  readonly userData: string;
  readonly instanceProfileArn: string;
  readonly securityGroupIds: readonly string[];
  /** @default DEFAULT_DISK_SIZE_GB */
  readonly defaultDiskSizeGb?: number;
}

/** A template's content: image, agent, IMDSv2, tags, root volume, network (EFA with network_tier: best). */
export function launchTemplateData(input: LaunchTemplateInput): RequestLaunchTemplateData {
  const { spec } = input.request;
  const tags = attemptTags(input.namePrefix, input.request);
  const efa = spec.resources.networkTier === 'best' && hasEfa(input.instanceType);
  return {
    ImageId: input.image.imageId,
    IamInstanceProfile: { Arn: input.instanceProfileArn },
    UserData: input.userData,
    // Hop limit 1: a container on a bridge network (one more hop) cannot reach IMDS and the
    // role. The task's own container shares the host's network (agent.sh), so it can.
    MetadataOptions: { HttpTokens: 'required', HttpEndpoint: 'enabled', InstanceMetadataTags: 'enabled', HttpPutResponseHopLimit: 1 },
    InstanceInitiatedShutdownBehavior: 'terminate',
    BlockDeviceMappings: [
      {
        DeviceName: input.image.rootDeviceName,
        Ebs: {
          ...rootVolume(spec.resources.diskTier, spec.resources.diskSizeGb ?? input.defaultDiskSizeGb ?? DEFAULT_DISK_SIZE_GB),
          DeleteOnTermination: true,
          // With the account's default EBS key: checkpoints and data at rest are encrypted.
          Encrypted: true,
        },
      },
    ],
    // With EFA the interfaces are described here, and the fleet's override gives their subnet.
    ...(efa ? { NetworkInterfaces: efaInterfaces(input.instanceType, input.securityGroupIds) } : { SecurityGroupIds: [...input.securityGroupIds] }),
    TagSpecifications: [
      { ResourceType: 'instance', Tags: tags },
      { ResourceType: 'volume', Tags: tags },
    ],
  };
}

/** What each disk tier asks of the root volume: gp3 at three speeds, or io2. */
export const DISK_TIER_VOLUMES: Readonly<Record<DiskTier, { readonly type: 'gp3' | 'io2'; readonly iops: number; readonly throughputMiBs?: number }>> = {
  low: { type: 'gp3', iops: 3000, throughputMiBs: 125 },
  medium: { type: 'gp3', iops: 6000, throughputMiBs: 500 },
  high: { type: 'gp3', iops: 16000, throughputMiBs: 1000 },
  ultra: { type: 'io2', iops: 64000 },
  best: { type: 'io2', iops: 64000 },
};

/**
 * The root volume for a tier and size; with no tier, gp3 at its baseline (EBS's defaults,
 * nothing provisioned). EBS allows at most 500 provisioned IOPS per GiB
 * (gp3 and io2 alike), so a small volume gets fewer than its tier names; gp3 never fewer
 * than its 3,000 baseline, io2 never fewer than 100, and gp3's throughput at most a quarter
 * of its IOPS in MiB/s.
 */
export function rootVolume(tier: DiskTier | undefined, sizeGb: number): Pick<EbsBlockDevice, 'VolumeSize' | 'VolumeType' | 'Iops' | 'Throughput'> {
  if (tier === undefined) return { VolumeSize: sizeGb, VolumeType: 'gp3' };
  const wanted = DISK_TIER_VOLUMES[tier];
  const floor = wanted.type === 'gp3' ? 3000 : 100;
  const iops = Math.max(floor, Math.min(wanted.iops, 500 * sizeGb));
  if (wanted.type === 'io2') return { VolumeSize: sizeGb, VolumeType: 'io2', Iops: iops };
  return { VolumeSize: sizeGb, VolumeType: 'gp3', Iops: iops, Throughput: Math.min(wanted.throughputMiBs ?? 125, Math.floor(iops / 4)) };
}

/**
 * One EFA interface per network card, as EC2 recommends for types with several (p4d: 4,
 * p5: 32): the primary (card 0, device 0) is an EFA with ENA, which carries the node's IP;
 * every other card's (device 1) is EFA-only, which takes no IP from the subnet (32 per p5
 * node otherwise). One card only is all a single-card type gets.
 */
export function efaInterfaces(instanceType: string, securityGroupIds: readonly string[]): NonNullable<RequestLaunchTemplateData['NetworkInterfaces']> {
  return Array.from({ length: networkCards(instanceType) }, (_, card) => ({
    NetworkCardIndex: card,
    DeviceIndex: card === 0 ? 0 : 1,
    InterfaceType: card === 0 ? 'efa' : 'efa-only',
    Groups: [...securityGroupIds],
    DeleteOnTermination: true,
  }));
}

/** What Ec2LaunchTemplates needs: the regions, a client per region, and whose templates to list. */
export interface Ec2LaunchTemplatesOptions {
  readonly regions: readonly string[];
  readonly ec2: (region: string) => EC2Client;
  /** The deployment's name prefix: only templates with this DEPLOYMENT_TAG_KEY are listed. */
  readonly deployment: string;
}

/**
 * The janitor's view of a deployment's launch templates (LaunchTemplateInventory): listed and
 * deleted one call each, a throttle or 5xx past the SDK's retries a TransientError (the next
 * run sweeps again), where a launch retries its own calls (AttemptLaunchTemplates).
 */
export class Ec2LaunchTemplates implements LaunchTemplateInventory {
  constructor(private readonly options: Ec2LaunchTemplatesOptions) {}

  /** Every template of this deployment with a job tag, in every region and page (DescribeLaunchTemplates). */
  async listTagged(): Promise<TaggedLaunchTemplate[]> {
    const found: TaggedLaunchTemplate[] = [];
    for (const region of this.options.regions) {
      let NextToken: string | undefined;
      do {
        const request = new DescribeLaunchTemplatesCommand({ Filters: ownedFilters(this.options.deployment), NextToken });
        const page = await sendAws(`EC2 DescribeLaunchTemplates in ${region}`, () => this.options.ec2(region).send(request));
        for (const template of page.LaunchTemplates ?? []) {
          const tagged = taggedTemplate(template, region, this.options.deployment);
          if (tagged !== null) found.push(tagged);
        }
        NextToken = page.NextToken;
      } while (NextToken !== undefined);
    }
    return found;
  }

  /** DeleteLaunchTemplate; a template already gone is fine. */
  async delete(template: TaggedLaunchTemplate): Promise<void> {
    const request = new DeleteLaunchTemplateCommand({ LaunchTemplateId: template.templateId });
    try {
      await sendAws(`EC2 DeleteLaunchTemplate in ${template.region}`, () => this.options.ec2(template.region).send(request));
    } catch (error) {
      if (!awsErrorCode(error).startsWith('InvalidLaunchTemplateId.')) throw error;
    }
  }
}

/** A template of this launch: created once per region and content, deleted at the end. */
interface MadeTemplate {
  readonly region: string;
  readonly id: Promise<string>;
}

/** What AttemptLaunchTemplates needs: a client per region, the launch's retry policy, and whose templates it makes. */
export interface AttemptLaunchTemplatesDeps {
  readonly ec2: (region: string) => EC2Client;
  /** How each call is retried (ec2Retrying), as every call of the launch. */
  readonly retrying: Ec2Retrying;
  /** The deployment's name prefix: templates are named after it and carry it as DEPLOYMENT_TAG_KEY. */
  readonly namePrefix: string;
}

/** The launch templates of one attempt's launch, made on first use and deleted together. */
export class AttemptLaunchTemplates {
  private readonly made = new Map<string, MadeTemplate>();

  constructor(
    private readonly deps: AttemptLaunchTemplatesDeps,
    private readonly attempt: Pick<LaunchRequest, 'jobId' | 'attempt'>,
  ) {}

  /** The template with this content in this region: created on first use, with a ClientToken so a retried create makes one. */
  ensure(region: string, data: RequestLaunchTemplateData): Promise<string> {
    const digest = createHash('sha256').update(JSON.stringify(data)).digest('hex').slice(0, 16);
    const key = `${region}/${digest}`;
    const known = this.made.get(key);
    if (known !== undefined) return known.id;
    const name = `${this.deps.namePrefix}-${this.attempt.jobId}-${this.attempt.attempt}-${digest}`;
    const input: CreateLaunchTemplateCommandInput = {
      LaunchTemplateName: name,
      ClientToken: boundedToken(name),
      LaunchTemplateData: data,
      TagSpecifications: [{ ResourceType: 'launch-template', Tags: attemptTags(this.deps.namePrefix, this.attempt) }],
    };
    const id = this.deps.retrying(`EC2 CreateLaunchTemplate in ${region}`, () => this.deps.ec2(region).send(new CreateLaunchTemplateCommand(input))).then((response) => {
      const created = response.LaunchTemplate?.LaunchTemplateId;
      if (created === undefined) throw new UnexpectedCloudResponseError(`EC2 CreateLaunchTemplate in ${region} answered without the template's id`);
      return created;
    });
    this.made.set(key, { region, id });
    return id;
  }

  /**
   * Deletes the attempt's templates, each on its own; one never created is skipped. A
   * delete that fails is left to the janitor's sweep (sweepLaunchTemplates): never a reason
   * to throw away instances just launched, or to hide why a launch failed.
   */
  async deleteAll(): Promise<void> {
    await Promise.allSettled(
      [...this.made.values()].map(async ({ region, id }) => {
        const created = await id;
        await this.deps.retrying(`EC2 DeleteLaunchTemplate in ${region}`, () => this.deps.ec2(region).send(new DeleteLaunchTemplateCommand({ LaunchTemplateId: created })));
      }),
    );
  }
}

/** The template as the sweep reads it; null without an id, a job tag, or this deployment's tag (not its to sweep). */
function taggedTemplate(template: LaunchTemplate, region: string, deployment: string): TaggedLaunchTemplate | null {
  const jobId = template.Tags?.find((tag) => tag.Key === TagKey.jobId)?.Value;
  const owner = template.Tags?.find((tag) => tag.Key === DEPLOYMENT_TAG_KEY)?.Value;
  if (template.LaunchTemplateId === undefined || jobId === undefined || jobId === '' || owner !== deployment) return null;
  return {
    templateId: template.LaunchTemplateId,
    region,
    jobId,
    createdAt: template.CreateTime === undefined ? null : template.CreateTime.toISOString(),
  };
}
