// The janitor's view of EC2: every live instance, and every launch template, that carries
// relaunch's job tag, in every region relaunch launches in.

import {
  DeleteLaunchTemplateCommand,
  DescribeInstancesCommand,
  DescribeLaunchTemplatesCommand,
  type EC2Client,
  type Instance,
  type LaunchTemplate,
} from '@aws-sdk/client-ec2';
import { TagKey } from '../agent/tags.ts';
import type { InstanceInventory, LaunchTemplateInventory, TaggedInstance, TaggedLaunchTemplate } from '../ports.ts';
import { awsErrorCode, sendAws } from './aws-errors.ts';

/** States in which an instance still costs money or may come back. */
const LIVE_STATES = ['pending', 'running', 'stopping', 'stopped'];

/** What Ec2Inventory needs: the regions, and a client per region. */
export interface Ec2InventoryOptions {
  readonly regions: readonly string[];
  readonly ec2: (region: string) => EC2Client;
}

/** InstanceInventory over DescribeInstances, filtered by the job tag, all pages. */
export class Ec2Inventory implements InstanceInventory {
  constructor(private readonly options: Ec2InventoryOptions) {}

  async listTagged(): Promise<TaggedInstance[]> {
    const found: TaggedInstance[] = [];
    for (const region of this.options.regions) {
      let NextToken: string | undefined;
      do {
        const request = new DescribeInstancesCommand({
          Filters: [
            { Name: 'tag-key', Values: [TagKey.jobId] },
            { Name: 'instance-state-name', Values: LIVE_STATES },
          ],
          NextToken,
        });
        const page = await sendAws(`EC2 DescribeInstances in ${region}`, () => this.options.ec2(region).send(request));
        for (const reservation of page.Reservations ?? []) {
          for (const instance of reservation.Instances ?? []) {
            const tagged = taggedInstance(instance, region);
            if (tagged !== null) found.push(tagged);
          }
        }
        NextToken = page.NextToken;
      } while (NextToken !== undefined);
    }
    return found;
  }
}

/** LaunchTemplateInventory over DescribeLaunchTemplates (filtered by the job tag, all pages) and DeleteLaunchTemplate. */
export class Ec2LaunchTemplates implements LaunchTemplateInventory {
  constructor(private readonly options: Ec2InventoryOptions) {}

  async listTagged(): Promise<TaggedLaunchTemplate[]> {
    const found: TaggedLaunchTemplate[] = [];
    for (const region of this.options.regions) {
      let NextToken: string | undefined;
      do {
        const request = new DescribeLaunchTemplatesCommand({ Filters: [{ Name: 'tag-key', Values: [TagKey.jobId] }], NextToken });
        const page = await sendAws(`EC2 DescribeLaunchTemplates in ${region}`, () => this.options.ec2(region).send(request));
        for (const template of page.LaunchTemplates ?? []) {
          const tagged = taggedTemplate(template, region);
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

function taggedTemplate(template: LaunchTemplate, region: string): TaggedLaunchTemplate | null {
  const jobId = template.Tags?.find((tag) => tag.Key === TagKey.jobId)?.Value;
  if (template.LaunchTemplateId === undefined || jobId === undefined || jobId === '') return null;
  return {
    templateId: template.LaunchTemplateId,
    region,
    jobId,
    createdAt: template.CreateTime === undefined ? null : template.CreateTime.toISOString(),
  };
}

/** The instance as the sweep reads it; null without an id or a job tag (not relaunch's). */
function taggedInstance(instance: Instance, region: string): TaggedInstance | null {
  const tag = (key: string): string | undefined => instance.Tags?.find((t) => t.Key === key)?.Value;
  const jobId = tag(TagKey.jobId);
  if (instance.InstanceId === undefined || jobId === undefined || jobId === '') return null;
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
