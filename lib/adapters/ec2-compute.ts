// The Compute port over EC2: RunInstances per (zone, instance type) until one has capacity.
//
// Why RunInstances and not CreateFleet: CreateFleet needs a launch template, which would
// be created and deleted around every attempt (two more calls, and a template leaked when
// a Lambda dies in between). RunInstances takes everything inline (user data, IMDSv2,
// tags on instances and volumes, the spot market, the shutdown behaviour), and with
// MinCount = MaxCount = num_nodes EC2 launches all the nodes of an attempt or none, so
// a multi-node job never starts half-placed. Failover across instance types, zones and
// regions is a loop over planPlacements' candidates, as SkyPilot's provisioner does.
//
// How nodes learn their rank and the IPs: one RunInstances call numbers its instances
// 0..n-1 (AmiLaunchIndex, which the agent reads from instance metadata), so the rank is
// that index. Private IPs exist only after the launch, so the launcher then tags every
// instance with `relaunch:node-rank` and the IP list (`relaunch:node-ips:*`, see
// lib/agent/tags.ts); the instances launch with InstanceMetadataTags enabled and the
// agent polls its tags from IMDS. No API round trip, nothing to store first.
//
// The callback secret is not in the user data: once the instances exist, the launcher
// puts one SSM SecureString per instance, tagged with its ARN, which only that instance's
// credentials may read (lib/agent/secret-parameter.ts). A release deletes them.
//
// Errors: capacity errors move on to the next candidate; throttling and EC2's own faults
// (5xx) retry the same call with exponential backoff, then propagate as TransientError
// (the state machine retries the step); a bad AMI or instance type is a PrecheckError;
// anything else (permissions, a missing subnet) is relaunch's own fault and propagates as is.

import { createHash } from 'node:crypto';
import {
  CreateTagsCommand,
  DescribeImagesCommand,
  DescribeInstancesCommand,
  RunInstancesCommand,
  TerminateInstancesCommand,
  type EC2Client,
  type Instance,
  type RunInstancesCommandInput,
  type EbsBlockDevice,
  type Tag,
} from '@aws-sdk/client-ec2';
import { agentSecretName, agentSecretPath, agentSecretValue, instanceArn, SECRET_OWNER_TAG, ssmEndpoint } from '../agent/secret-parameter.ts';
import { nodeIpsTags, TagKey } from '../agent/tags.ts';
import { InstancesStillRunningError, NoCapacityError, PrecheckError, UnexpectedCloudResponseError } from '../errors.ts';
import { architectureOf, hasGpus, instanceTypeInfo, type Architecture } from '../instance-types.ts';
import type { InstanceRef, Placement } from '../model.ts';
import { planPlacements, type PlacementCandidate } from '../placement.ts';
import type { Compute, LaunchRequest, LaunchResult } from '../ports.ts';
import { awsErrorCode, isTransientAwsError, transientError } from './aws-errors.ts';
import type { ImageAlias } from '../spec/image-id.ts';
import type { DiskTier, TaskSpec } from '../spec/types.ts';
import type { Ec2Parameters } from './ssm-parameters.ts';
import { packedAgent, tooLargeForUserData, USER_DATA_MAX_BYTES } from './ec2-user-data.ts';
import { s3AgentMounts, type DataConfig } from './s3-data.ts';
import { HEARTBEAT_INTERVAL_SECONDS } from '../workflow/contract.ts';

/** One region relaunch launches in: its subnets (one per zone) and security groups. */
export interface Ec2RegionConfig {
  readonly region: string;
  /** A subnet per availability zone, in order of preference; the zones are these keys. */
  readonly subnetsByZone: Readonly<Record<string, string>>;
  /** Security groups of the subnets' VPC; they must allow HTTPS out to the API. */
  readonly securityGroupIds: readonly string[];
}

/** The kinds of default image: CPU architecture, and NVIDIA drivers for GPU types. */
export type ImageKind = 'x86_64' | 'arm64' | 'x86_64-gpu' | 'arm64-gpu';

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

/** How Ec2Compute launches. */
export interface Ec2ComputeConfig {
  /** The regions to launch in, in order of preference. */
  readonly regions: readonly Ec2RegionConfig[];
  /** The instance profile every instance gets. */
  readonly instanceProfileArn: string;
  /** The API the agents call back (heartbeat, report). */
  readonly apiUrl: string;
  /**
   * Instances are named `<namePrefix>-<jobId>-<attempt>`; agent secrets live under
   * agentSecretPath(namePrefix).
   */
  readonly namePrefix: string;
  /** @default HEARTBEAT_INTERVAL_SECONDS */
  readonly heartbeatSeconds?: number;
  /**
   * Root volume size when the task gives no `disk_size` (SkyPilot's default).
   * @default 256
   */
  readonly defaultDiskSizeGb?: number;
  /** SSM parameters for the default AMIs. @default DEFAULT_IMAGE_PARAMETERS */
  readonly imageParameters?: Partial<Record<ImageKind, string>>;
  /** When set, only these instance types are launched. */
  readonly allowedInstanceTypes?: readonly string[];
  /**
   * The stack's bucket and the buckets instances may mount: where uploads and nameless
   * mounts are. Absent (a stack from before them), a task with mounts is refused at submit.
   */
  readonly data?: DataConfig;
  /**
   * Retries of a throttled call before its error propagates, waiting 0.5 s, doubling,
   * capped at 20 s.
   * @default 8
   */
  readonly throttleRetries?: number;
  /**
   * Checks that released instances are going (1 s apart, doubling) before release fails.
   * @default 6
   */
  readonly releaseChecks?: number;
  /**
   * The most one release waits between checks, over all regions: it must end well inside
   * its Lambda's timeout, and Step Functions retries InstancesStillRunningError after it.
   * @default RELEASE_WAIT_BUDGET_MS
   */
  readonly releaseWaitBudgetMs?: number;
}

/** How long one release waits for terminated instances, in all: well under its Lambda's timeout. */
export const RELEASE_WAIT_BUDGET_MS = 40_000;

/** What Ec2Compute is built from. EC2 is regional, so clients come per region. */
export interface Ec2ComputeDeps {
  readonly ec2: (region: string) => EC2Client;
  /** SSM: the public parameters that name the default AMIs, and the agents' secrets (SsmParameters). */
  readonly parameters: Ec2Parameters;
  readonly config: Ec2ComputeConfig;
  /** Waits between retries; injected so tests do not wait. */
  readonly sleep?: (ms: number) => Promise<void>;
}

export { InstancesStillRunningError };


/** Errors that mean "no capacity here": try the next type, zone or region. */
const CAPACITY_ERRORS = new Set([
  'InsufficientInstanceCapacity',
  'InsufficientCapacity',
  'InsufficientHostCapacity',
  'InsufficientReservedInstanceCapacity',
  'InsufficientFreeAddressesInSubnet',
  'SpotMaxPriceTooLow',
  'MaxSpotInstanceCountExceeded',
  'InstanceLimitExceeded',
  'VcpuLimitExceeded',
  'Unsupported',
]);

/**
 * Errors that mean "slow down" or "EC2 failed this time": the same call is retried. With
 * any other 5xx (isTransientAwsError) but the capacity errors, which EC2 also answers
 * as server errors and which mean "try elsewhere", not "try again".
 */
const THROTTLING_ERRORS = new Set([
  'RequestLimitExceeded',
  'Throttling',
  'ThrottlingException',
  'TooManyRequestsException',
  'RequestThrottled',
  'ServiceUnavailable',
  'Unavailable',
  'InternalError',
]);

/** Whether the same EC2 call may succeed later: throttling or EC2's own fault, never capacity. */
function isTransientEc2Error(error: unknown): boolean {
  const code = awsErrorCode(error);
  if (CAPACITY_ERRORS.has(code) || code.startsWith('Insufficient')) return false;
  return THROTTLING_ERRORS.has(code) || isTransientAwsError(error);
}

/** Errors that mean the task asks for something EC2 cannot run at all. */
function isPrecheckError(code: string): boolean {
  return (
    code.startsWith('InvalidAMIID.') ||
    code === 'InvalidParameterValue' ||
    code === 'InvalidParameterCombination' ||
    code === 'InvalidBlockDeviceMapping'
  );
}

const LIVE_STATES = ['pending', 'running', 'stopping', 'stopped'];

interface Image {
  readonly imageId: string;
  readonly rootDeviceName: string;
}

type Attempted = { readonly launched: LaunchResult } | { readonly failure: string };

/** EC2 as the Compute port. */
export class Ec2Compute implements Compute {
  private readonly deps: Ec2ComputeDeps;
  private readonly config: Ec2ComputeConfig;
  private readonly sleep: (ms: number) => Promise<void>;
  /** Where the instances this object launched are, so a release right after the launch needs no search. */
  private readonly launchedIn = new Map<string, string>();

  constructor(deps: Ec2ComputeDeps) {
    this.deps = deps;
    this.config = deps.config;
    this.sleep = deps.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  /**
   * Tries every candidate of planPlacements in order, each instance type in turn, until a
   * RunInstances call returns all `numNodes` instances; then tags the nodes with their
   * rank and the IP list and puts each node's secret. NoCapacityError lists everything tried.
   */
  async launch(request: LaunchRequest): Promise<LaunchResult> {
    const { spec } = request;
    const plan = planPlacements({
      spec,
      history: request.history,
      regions: this.config.regions.map((region) => region.region),
      zonesByRegion: Object.fromEntries(this.config.regions.map((region) => [region.region, Object.keys(region.subnetsByZone)])),
      allowedInstanceTypes: this.config.allowedInstanceTypes,
    });
    assertImageSomewhere(spec, plan);
    // One image lookup per region and kind; a region without one is noted once and skipped.
    const images = new Map<string, Promise<Image | null>>();
    const tried: string[] = [];
    for (const candidate of plan) {
      for (const instanceType of candidate.instanceTypes) {
        const key = `${candidate.region}/${imageKind(instanceType)}`;
        const known = images.has(key);
        if (!known) images.set(key, this.image(candidate.region, spec, instanceType));
        const image = await images.get(key);
        if (image === null || image === undefined) {
          if (!known) tried.push(`${instanceType} in ${candidate.region} (no image for it there)`);
          continue;
        }
        const attempted = await this.tryLaunch(request, candidate, instanceType, image);
        if ('launched' in attempted) return attempted.launched;
        tried.push(`${instanceType} in ${candidate.zone ?? candidate.region} (${attempted.failure})`);
      }
    }
    throw new NoCapacityError(
      `no capacity for job ${request.jobId} attempt ${request.attempt} (${request.market}, ${spec.numNodes} node${spec.numNodes === 1 ? '' : 's'}): tried ${tried.join(', ')}`,
    );
  }

  /**
   * Terminates the attempt's instances in every region: those this object launched, and
   * any still live that carry the attempt's tags (so an instance from a launch whose
   * result was lost goes too). Then checks until none is live. Instances already gone
   * are fine; still live after the checks, or once the wait budget is spent, is
   * InstancesStillRunningError (the controller retries the release). Then the secrets of
   * every instance found go, in every region (an id names at most one of them).
   */
  async release(jobId: string, attempt: number, instances: readonly InstanceRef[]): Promise<void> {
    const released = new Set(instances.map((instance) => instance.instanceId));
    const checks = this.config.releaseChecks ?? 6;
    let budget = this.config.releaseWaitBudgetMs ?? RELEASE_WAIT_BUDGET_MS;
    for (const { region } of this.config.regions) {
      const known = instances.filter((instance) => this.launchedIn.get(instance.instanceId) === region).map((i) => i.instanceId);
      let live = [...new Set([...known, ...(await this.liveInstances(region, [tagFilter(TagKey.jobId, jobId), tagFilter(TagKey.attempt, String(attempt))]))])];
      for (const id of live) released.add(id);
      for (let check = 0; live.length > 0; check += 1) {
        if (check >= checks || budget <= 0) {
          throw new InstancesStillRunningError(`instances of job ${jobId} attempt ${attempt} in ${region} are still running: ${live.join(', ')}`);
        }
        await this.terminate(region, live);
        const wait = Math.min(1000 * 2 ** check, 30_000, budget);
        budget -= wait;
        await this.sleep(wait);
        live = await this.liveInstances(region, [{ Name: 'instance-id', Values: live }]);
      }
    }
    const names = [...released].map((id) => agentSecretName(this.secretPath, id));
    for (const { region } of this.config.regions) {
      await this.withRetries(`SSM DeleteParameters in ${region}`, () => this.deps.parameters.delete(region, names));
    }
  }

  private get secretPath(): string {
    return agentSecretPath(this.config.namePrefix);
  }

  private async tryLaunch(request: LaunchRequest, candidate: PlacementCandidate, instanceType: string, image: Image): Promise<Attempted> {
    const { region } = candidate;
    const input = this.runInstancesInput(request, candidate, instanceType, image);
    let instances: Instance[];
    let account: string | undefined;
    try {
      const response = await this.withRetries(`EC2 RunInstances in ${region}`, () => this.deps.ec2(region).send(new RunInstancesCommand(input)));
      instances = [...(response.Instances ?? [])].sort((a, b) => (a.AmiLaunchIndex ?? 0) - (b.AmiLaunchIndex ?? 0));
      account = response.OwnerId;
    } catch (error) {
      const code = awsErrorCode(error);
      if (CAPACITY_ERRORS.has(code)) return { failure: code };
      if (isPrecheckError(code)) {
        throw new PrecheckError(`EC2 cannot launch ${instanceType} from ${image.imageId} in ${region}: ${code}: ${errorMessage(error)}`);
      }
      throw error;
    }
    const ids = instances.flatMap((instance) => (instance.InstanceId === undefined ? [] : [instance.InstanceId]));
    for (const id of ids) this.launchedIn.set(id, region);
    const numNodes = request.spec.numNodes;
    if (ids.length < numNodes) {
      await this.terminate(region, ids);
      return { failure: `only ${ids.length} of ${numNodes} instances launched` };
    }
    const nodes: InstanceRef[] = instances.map((instance, index) => ({
      instanceId: instance.InstanceId as string,
      nodeRank: instance.AmiLaunchIndex ?? index,
      privateIp: instance.PrivateIpAddress ?? null,
    }));
    try {
      await this.tagNodes(region, nodes);
      await this.putSecrets(request, region, account, nodes);
    } catch (error) {
      await this.terminate(region, ids);
      // Secrets already written go too: no release will find these instances again.
      const names = ids.map((id) => agentSecretName(this.secretPath, id));
      await this.withRetries(`SSM DeleteParameters in ${region}`, () => this.deps.parameters.delete(region, names));
      throw error;
    }
    const zone = candidate.zone ?? instances[0]?.Placement?.AvailabilityZone ?? null;
    const placement: Placement = { region, zone, instanceType };
    return { launched: { placement, instances: nodes } };
  }

  private runInstancesInput(request: LaunchRequest, candidate: PlacementCandidate, instanceType: string, image: Image): RunInstancesCommandInput {
    const { spec } = request;
    const network = this.config.regions.find((region) => region.region === candidate.region);
    const tags: Tag[] = [
      { Key: TagKey.name, Value: `${this.config.namePrefix}-${request.jobId}-${request.attempt}` },
      { Key: TagKey.jobId, Value: request.jobId },
      { Key: TagKey.attempt, Value: String(request.attempt) },
    ];
    return {
      ClientToken: clientToken(request, candidate, instanceType),
      ImageId: image.imageId,
      InstanceType: instanceType as RunInstancesCommandInput['InstanceType'],
      MinCount: spec.numNodes,
      MaxCount: spec.numNodes,
      SubnetId: candidate.zone === null ? undefined : network?.subnetsByZone[candidate.zone],
      SecurityGroupIds: network === undefined ? undefined : [...network.securityGroupIds],
      IamInstanceProfile: { Arn: this.config.instanceProfileArn },
      UserData: this.userData(request, candidate.region, instanceType),
      // Hop limit 1: a container on the node (one more hop) cannot reach IMDS and the role.
      MetadataOptions: { HttpTokens: 'required', HttpEndpoint: 'enabled', InstanceMetadataTags: 'enabled', HttpPutResponseHopLimit: 1 },
      InstanceInitiatedShutdownBehavior: 'terminate',
      InstanceMarketOptions:
        request.market === 'spot'
          ? { MarketType: 'spot', SpotOptions: { SpotInstanceType: 'one-time', InstanceInterruptionBehavior: 'terminate' } }
          : undefined,
      BlockDeviceMappings: [
        {
          DeviceName: image.rootDeviceName,
          Ebs: {
            ...rootVolume(spec.resources.diskTier, spec.resources.diskSizeGb ?? this.config.defaultDiskSizeGb ?? 256),
            DeleteOnTermination: true,
            // With the account's default EBS key: checkpoints and data at rest are encrypted.
            Encrypted: true,
          },
        },
      ],
      TagSpecifications: [
        { ResourceType: 'instance', Tags: tags },
        { ResourceType: 'volume', Tags: tags },
      ],
    };
  }

  /** The agent, gzipped and base64-encoded. Rank, IPs and secret come from IMDS and SSM at boot. */
  private userData(request: LaunchRequest, region: string, instanceType: string): string {
    const packed = packedAgent({
      apiUrl: this.config.apiUrl,
      jobId: request.jobId,
      attempt: request.attempt,
      secretSource: { path: this.secretPath, region, endpoint: ssmEndpoint(region) },
      spec: request.spec,
      heartbeatSeconds: this.config.heartbeatSeconds ?? HEARTBEAT_INTERVAL_SECONDS,
      gpusPerNode: instanceTypeInfo(instanceType)?.gpu?.count ?? request.spec.resources.accelerators[0]?.count ?? 0,
      // Whatever the count says: a GPU type boots the GPU image, and its container gets them.
      containerGpus: hasGpus(instanceType),
      ...(this.config.data === undefined ? {} : s3AgentMounts(request.spec, request.jobId, this.config.data)),
    });
    if (packed.length > USER_DATA_MAX_BYTES) throw new PrecheckError(tooLargeForUserData(packed.length));
    return packed.toString('base64');
  }

  /** Tags each node with its rank and every node's IP, which its agent reads from IMDS. */
  private async tagNodes(region: string, nodes: readonly InstanceRef[]): Promise<void> {
    const ips = nodes.map((node) => node.privateIp);
    if (ips.some((ip) => ip === null)) throw new UnexpectedCloudResponseError(`EC2 returned instances without a private IP in ${region}`);
    const ipTags = nodeIpsTags(ips as string[]);
    for (const node of nodes) {
      const Tags = [{ Key: TagKey.nodeRank, Value: String(node.nodeRank) }, ...ipTags];
      await this.withRetries(`EC2 CreateTags in ${region}`, () => this.deps.ec2(region).send(new CreateTagsCommand({ Resources: [node.instanceId], Tags })));
    }
  }

  /** Each node's secret, readable by that node alone (its ARN needs the account RunInstances answered with). */
  private async putSecrets(request: LaunchRequest, region: string, account: string | undefined, nodes: readonly InstanceRef[]): Promise<void> {
    if (account === undefined || !/^\d{12}$/.test(account)) {
      throw new UnexpectedCloudResponseError(`EC2 RunInstances in ${region} answered without the account (OwnerId): the agents' secrets cannot be scoped`);
    }
    for (const node of nodes) {
      const secret = {
        name: agentSecretName(this.secretPath, node.instanceId),
        value: agentSecretValue(request.callbackSecret, request.secrets),
        tags: {
          [SECRET_OWNER_TAG]: instanceArn(region, account, node.instanceId),
          [TagKey.jobId]: request.jobId,
          [TagKey.attempt]: String(request.attempt),
        },
      };
      await this.withRetries(`SSM PutParameter in ${region}`, () => this.deps.parameters.putSecret(region, secret));
    }
  }

  /**
   * The task's AMI for this region (null: its per-region map has none, or the region has
   * no image for its alias), else the default kind's. A `skypilot:` alias is read from its
   * public SSM parameter for the type's architecture.
   */
  private async image(region: string, spec: TaskSpec, instanceType: string): Promise<Image | null> {
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
    return this.parameterImageId(region, this.config.imageParameters?.[kind] ?? DEFAULT_IMAGE_PARAMETERS[kind]);
  }

  private async parameterImageId(region: string, name: string): Promise<string | null> {
    return this.withRetries(`SSM GetParameter ${name} in ${region}`, () => this.deps.parameters.read(region, name));
  }

  /** The AMI's root device, whose volume `disk_size` sizes. A missing AMI is a PrecheckError. */
  private async describeImage(region: string, imageId: string): Promise<Image> {
    try {
      const response = await this.withRetries(`EC2 DescribeImages in ${region}`, () => this.deps.ec2(region).send(new DescribeImagesCommand({ ImageIds: [imageId] })));
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

  private async liveInstances(region: string, filters: { Name: string; Values: string[] }[]): Promise<string[]> {
    const ids: string[] = [];
    let NextToken: string | undefined;
    do {
      const page = await this.withRetries(`EC2 DescribeInstances in ${region}`, () =>
        this.deps.ec2(region).send(
          new DescribeInstancesCommand({ Filters: [...filters, { Name: 'instance-state-name', Values: LIVE_STATES }], NextToken }),
        ),
      );
      for (const reservation of page.Reservations ?? []) {
        for (const instance of reservation.Instances ?? []) if (instance.InstanceId !== undefined) ids.push(instance.InstanceId);
      }
      NextToken = page.NextToken;
    } while (NextToken !== undefined);
    return ids;
  }

  /** TerminateInstances; ids EC2 no longer knows are already gone, so the others are terminated one by one. */
  private async terminate(region: string, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    const send = (InstanceIds: string[]) =>
      this.withRetries(`EC2 TerminateInstances in ${region}`, () => this.deps.ec2(region).send(new TerminateInstancesCommand({ InstanceIds })));
    try {
      await send([...ids]);
    } catch (error) {
      if (awsErrorCode(error) !== 'InvalidInstanceID.NotFound') throw error;
      if (ids.length === 1) return;
      for (const id of ids) await this.terminate(region, [id]);
    }
  }

  /**
   * Runs a call, retrying it with exponential backoff while AWS throttles it or fails on
   * its side; still failing after the last retry, it is a TransientError naming `what`.
   */
  private async withRetries<T>(what: string, call: () => Promise<T>): Promise<T> {
    const retries = this.config.throttleRetries ?? 8;
    for (let retry = 0; ; retry += 1) {
      try {
        return await call();
      } catch (error) {
        if (!isTransientEc2Error(error)) throw error;
        if (retry >= retries) throw transientError(what, error, `the SDK's retries and ${retries} of relaunch's own`);
        await this.sleep(Math.min(500 * 2 ** retry, 20_000));
      }
    }
  }
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

/** A per-region image map that names none of the regions the plan may use cannot run anywhere. */
function assertImageSomewhere(spec: TaskSpec, plan: readonly PlacementCandidate[]): void {
  const wanted = spec.resources.imageId;
  if (wanted?.kind !== 'per-region') return;
  const regions = [...new Set(plan.map((candidate) => candidate.region))];
  if (regions.some((region) => wanted.byRegion[region] !== undefined)) return;
  throw new PrecheckError(
    `resources.image_id: names AMIs for ${Object.keys(wanted.byRegion).join(', ')}, but relaunch may launch this task only in ${regions.join(', ')}`,
  );
}

function imageKind(instanceType: string): ImageKind {
  const arch: Architecture = architectureOf(instanceType);
  return hasGpus(instanceType) ? `${arch}-gpu` : arch;
}

/** EC2 caps a ClientToken at 64 ASCII characters. */
const CLIENT_TOKEN_MAX = 64;

/**
 * The same token for every try of one (job, attempt, zone, instance type): a RunInstances
 * retried after an InternalError whose launch went through returns those instances
 * instead of launching a second set. Too long, or not ASCII, it is hashed.
 */
export function clientToken(request: Pick<LaunchRequest, 'jobId' | 'attempt'>, candidate: Pick<PlacementCandidate, 'region' | 'zone'>, instanceType: string): string {
  const plain = `${request.jobId}-${request.attempt}-${candidate.zone ?? candidate.region}-${instanceType}`;
  if (plain.length <= CLIENT_TOKEN_MAX && /^[\x21-\x7e]*$/.test(plain)) return plain;
  return createHash('sha256').update(plain).digest('hex');
}

function tagFilter(key: string, value: string): { Name: string; Values: string[] } {
  return { Name: `tag:${key}`, Values: [value] };
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
