// The janitor's view of EC2's instances: every live one that carries relaunch's job tag and
// this deployment's tag, in every region relaunch launches in. Another deployment's (another
// name prefix in the same account) are not this janitor's to judge. Its view of launch
// templates is Ec2LaunchTemplates' (ec2-launch-templates.ts).

import { DescribeInstancesCommand, type EC2Client, type Instance } from '@aws-sdk/client-ec2';
import { TagKey } from '../agent/tags.ts';
import type { InstanceInventory, TaggedInstance } from '../ports.ts';
import { DEPLOYMENT_TAG_KEY } from '../workflow/resources.ts';
import { sendAws } from './aws-errors.ts';
import { LIVE_STATES, ownedFilters } from './ec2-calls.ts';

/** What Ec2Inventory needs: the regions, a client per region, and whose resources to list. */
export interface Ec2InventoryOptions {
  readonly regions: readonly string[];
  readonly ec2: (region: string) => EC2Client;
  /** The deployment's name prefix: only resources with this DEPLOYMENT_TAG_KEY are listed. */
  readonly deployment: string;
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
