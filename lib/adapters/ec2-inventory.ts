// The janitor's view of EC2: every live instance, and every launch template, that carries
// relaunch's job tag and this deployment's tag, in every region relaunch launches in. Another
// deployment's (another name prefix in the same account) are not this janitor's to judge.

import {
  DeleteLaunchTemplateCommand,
  DescribeInstancesCommand,
  DescribeLaunchTemplatesCommand,
  type EC2Client,
  type Instance,
  type LaunchTemplate,
} from '@aws-sdk/client-ec2';
import { TagKey } from '../agent/tags.ts';
import { DEPLOYMENT_TAG_KEY } from './ec2-compute.ts';
import type { InstanceInventory, LaunchTemplateInventory, TaggedInstance, TaggedLaunchTemplate } from '../ports.ts';
import { awsErrorCode, sendAws } from './aws-errors.ts';

/** States in which an instance still costs money or may come back. */
const LIVE_STATES = ['pending', 'running', 'stopping', 'stopped'];

/** What Ec2Inventory needs: the regions, a client per region, and whose resources to list. */
export interface Ec2InventoryOptions {
  readonly regions: readonly string[];
  readonly ec2: (region: string) => EC2Client;
  /** The deployment's name prefix: only resources with this DEPLOYMENT_TAG_KEY are listed. */
  readonly deployment: string;
}

/** The filters of a deployment's job resources. */
function ownedFilters(deployment: string): { Name: string; Values: string[] }[] {
  return [
    { Name: 'tag-key', Values: [TagKey.jobId] },
    { Name: `tag:${DEPLOYMENT_TAG_KEY}`, Values: [deployment] },
  ];
}

/** InstanceInventory over DescribeInstances, filtered by the job and deployment tags, all pages. */
export class Ec2Inventory implements InstanceInventory {
  constructor(private readonly options: Ec2InventoryOptions) {}

  async listTagged(): Promise<TaggedInstance[]> {
    const found: TaggedInstance[] = [];
    for (const region of this.options.regions) {
      let NextToken: string | undefined;
      do {
        const request = new DescribeInstancesCommand({
          Filters: [...ownedFilters(this.options.deployment), { Name: 'instance-state-name', Values: LIVE_STATES }],
          NextToken,
        });
        const page = await sendAws(`EC2 DescribeInstances in ${region}`, () => this.options.ec2(region).send(request));
        for (const reservation of page.Reservations ?? []) {
          for (const instance of reservation.Instances ?? []) {
            const tagged = taggedInstance(instance, region, this.options.deployment);
            if (tagged !== null) found.push(tagged);
          }
        }
        NextToken = page.NextToken;
      } while (NextToken !== undefined);
    }
    return found;
  }
}

/** LaunchTemplateInventory over DescribeLaunchTemplates (filtered by the job and deployment tags, all pages) and DeleteLaunchTemplate. */
export class Ec2LaunchTemplates implements LaunchTemplateInventory {
  constructor(private readonly options: Ec2InventoryOptions) {}

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

  async delete(template: TaggedLaunchTemplate): Promise<void> {
    const request = new DeleteLaunchTemplateCommand({ LaunchTemplateId: template.templateId });
    try {
      await sendAws(`EC2 DeleteLaunchTemplate in ${template.region}`, () => this.options.ec2(template.region).send(request));
    } catch (error) {
      if (!awsErrorCode(error).startsWith('InvalidLaunchTemplateId.')) throw error;
    }
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

/**
 * The instance as the sweep reads it; null without an id, a job tag, or this deployment's
 * tag (not this deployment's: the filter asked for none such, and the check does not rely on it).
 */
function taggedInstance(instance: Instance, region: string, deployment: string): TaggedInstance | null {
  const tag = (key: string): string | undefined => instance.Tags?.find((t) => t.Key === key)?.Value;
  const jobId = tag(TagKey.jobId);
  if (instance.InstanceId === undefined || jobId === undefined || jobId === '' || tag(DEPLOYMENT_TAG_KEY) !== deployment) return null;
  const attemptTag = tag(TagKey.attempt);
  const attempt = attemptTag !== undefined && /^[1-9][0-9]{0,8}$/.test(attemptTag) ? Number(attemptTag) : null;
  return {
    instanceId: instance.InstanceId,
    region,
    jobId,
    attempt,
    launchedAt: instance.LaunchTime === undefined ? null : instance.LaunchTime.toISOString(),
  };
}
