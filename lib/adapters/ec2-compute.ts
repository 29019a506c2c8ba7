// The Compute port over EC2: one EC2 Fleet request (type `instant`) at a time, each over
// every candidate (instance type, zone) of one region and market, until one has capacity.
//
// Why CreateFleet: a task with candidates (`any_of`, `ordered`, an accelerator set, or just
// several types fitting `cpus: 8+`) lets EC2 choose among all of them in one call, by price
// and capacity (spot: `price-capacity-optimized`) or in the file's order (`ordered`:
// `prioritized`, or `capacity-optimized-prioritized` on spot), instead of a RunInstances
// call per candidate. SingleAvailabilityZone and SingleInstanceType with MinTargetCapacity =
// num_nodes make it all or nothing: every node on one type in one zone (multi-node jobs
// must be homogeneous), or no instance at all. Each candidate EC2 could not fill comes back
// in the response's Errors[], and goes into the NoCapacityError message or, when a later
// candidate launched, the placement's `unavailable`.
//
// The launch template problem: CreateFleet takes its instance settings (image, user data,
// IMDSv2, tags, volumes, network) only from a launch template. The launcher creates one
// per attempt and kind of node (image, user data, EFA), named after the job and attempt,
// with a ClientToken (a retried create returns the same template) and the job's tags; it
// deletes them once the fleet requests are answered, whatever their outcome: an instant
// fleet's instances do not need their template afterwards. A Lambda that dies in between
// leaves a template behind; nothing runs from it, and the janitor deletes relaunch-tagged
// templates made more than 15 minutes before (sweepLaunchTemplates). The fleet request itself keeps
// nothing alive: an instant fleet is a record.
//
// Where the candidates and the order come from: planFleets (lib/placement.ts). Regions
// fail over as before (EAGER_NEXT_REGION and FAILOVER rank zones; differently ranked
// zones go in separate requests), and a mix of markets (`use_spot` inside `any_of`) is a
// spot request, then an on-demand one, as a fleet has one market for all its nodes.
//
// How nodes learn their rank and the IPs: a fleet does not number its instances 0..n-1,
// so once they exist the launcher describes them (their private IPs), orders them by
// instance id, and tags every instance with `relaunch:node-rank` and the IP list
// (`relaunch:node-ips:*`, see lib/agent/tags.ts); the instances launch with
// InstanceMetadataTags enabled and the agent polls its tags from IMDS.
//
// The callback secret is not in the user data: once the instances exist, the launcher
// puts one SSM SecureString per instance, tagged with its ARN, which only that instance's
// credentials may read (lib/agent/secret-parameter.ts). A release deletes them.
//
// Ports (`resources.ports`) are opened by the stack, not here (infra/constructs/
// job-instances.ts): a task asking for a port the deployment does not open is refused
// before anything launches.
//
// Errors: capacity errors move on to the next request; throttling and EC2's own faults
// (5xx) retry the same call with exponential backoff (same ClientToken), then propagate
// as TransientError (the state machine retries the step); a bad AMI or instance type is a
// PrecheckError; anything else (permissions, a missing subnet) is relaunch's own fault
// and propagates as is.

import { createHash } from 'node:crypto';
import {
  CreateFleetCommand,
  CreateLaunchTemplateCommand,
  CreateTagsCommand,
  DeleteLaunchTemplateCommand,
  DescribeImagesCommand,
  DescribeInstancesCommand,
  TerminateInstancesCommand,
  type CreateFleetCommandInput,
  type CreateFleetError,
  type CreateLaunchTemplateCommandInput,
  type EC2Client,
  type EbsBlockDevice,
  type FleetLaunchTemplateOverridesRequest,
  type Instance,
  type RequestLaunchTemplateData,
  type Tag,
} from '@aws-sdk/client-ec2';
import { agentSecretName, agentSecretPath, agentSecretValue, instanceArn, SECRET_OWNER_TAG, ssmEndpoint } from '../agent/secret-parameter.ts';
import { nodeIpsTags, TagKey } from '../agent/tags.ts';
import { InstancesStillRunningError, NoCapacityError, PrecheckError, UnexpectedCloudResponseError } from '../errors.ts';
import { architectureOf, hasEfa, hasGpus, instanceTypeInfo, networkCards, type Architecture } from '../instance-types.ts';
import type { InstanceRef, Placement } from '../model.ts';
import { planFleets, type FleetOverride, type FleetPlan } from '../placement.ts';
import type { Market } from '../policy/types.ts';
import type { Compute, LaunchRequest, LaunchResult } from '../ports.ts';
import { awsErrorCode, isTransientAwsError, transientError } from './aws-errors.ts';
import type { ImageAlias } from '../spec/image-id.ts';
import { portProblems } from '../spec/ports.ts';
import type { DiskTier, PortRange, TaskSpec } from '../spec/types.ts';
import type { Ec2Parameters } from './ssm-parameters.ts';
import { nodeTrafficProblems } from './ec2-network.ts';
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
   * The ports the instances' security group opens (in the stack's region; other regions'
   * groups are given as they are). A task asking for others is refused.
   * @default - none: a task with `ports` is refused
   */
  readonly openPorts?: readonly PortRange[];
  /**
   * Whether the instances' security group admits its own members (the stack's
   * relaunch:nodeToNodeTraffic): false refuses a multi-node task before anything launches.
   * @default true
   */
  readonly nodeToNodeTraffic?: boolean;
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


/**
 * EC2's service-linked role for spot instances, which an account that never ran spot does
 * not have. The launch function may create it (infra/permissions.ts), which is what EC2
 * needs to create it during a spot launch; AWS's documentation asks API callers to create
 * it beforehand. A launch refused for want of it answers SPOT_ROLE_MISSING_ERROR.
 */
export const SPOT_SERVICE_LINKED_ROLE = { name: 'AWSServiceRoleForEC2Spot', service: 'spot.amazonaws.com' } as const;

/** EC2's answer to a spot launch in an account without the role, by a caller who may not create it. */
export const SPOT_ROLE_MISSING_ERROR = 'AuthFailure.ServiceLinkedRoleCreationNotPermitted';

/** The reason a job ends with when spot cannot launch for want of the role: what to run once. */
export function spotRoleMissingReason(region: string, detail: string): string {
  return (
    `EC2 refused a spot launch in ${region}: the account has no ${SPOT_SERVICE_LINKED_ROLE.name} service-linked role and it could not be created ` +
    `(${SPOT_ROLE_MISSING_ERROR}: ${detail}); create it once with \`aws iam create-service-linked-role --aws-service-name ${SPOT_SERVICE_LINKED_ROLE.service}\` and submit the job again`
  );
}

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

type Attempted = { readonly launched: LaunchResult } | { readonly failures: readonly string[] };

/** An override with the image its instance type boots. */
interface Candidate {
  readonly override: FleetOverride;
  readonly image: Image;
}

/** A launch template of this launch: created once per region and content, deleted at the end. */
interface LaunchTemplate {
  readonly region: string;
  readonly id: Promise<string>;
}

/**
 * The tag naming the deployment (its name prefix) that made an instance, volume, fleet or
 * launch template. Two deployments in one account and region (staging and prod) share the
 * job tags' keys, which the agent reads: this one keeps them apart in releases, the
 * janitor's sweeps and the IAM conditions.
 */
export const DEPLOYMENT_TAG_KEY = 'relaunch:deployment';

/** The tags every resource of an attempt carries. */
function attemptTags(namePrefix: string, request: Pick<LaunchRequest, 'jobId' | 'attempt'>): Tag[] {
  return [
    { Key: TagKey.name, Value: `${namePrefix}-${request.jobId}-${request.attempt}` },
    { Key: TagKey.jobId, Value: request.jobId },
    { Key: TagKey.attempt, Value: String(request.attempt) },
    { Key: DEPLOYMENT_TAG_KEY, Value: namePrefix },
  ];
}

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
   * Sends planFleets' requests in order until one launches all `numNodes` instances; then
   * tags the nodes with their rank and the IP list and puts each node's secret. The
   * attempt's launch templates are deleted before it returns or throws. NoCapacityError
   * lists every candidate EC2 could not fill, and why.
   */
  async launch(request: LaunchRequest): Promise<LaunchResult> {
    const { spec } = request;
    assertPortsOpen(spec, this.config.openPorts ?? []);
    const [unreachable] = nodeTrafficProblems(spec, this.config.nodeToNodeTraffic ?? true);
    if (unreachable !== undefined) throw new PrecheckError(`${unreachable.path}: ${unreachable.message}`);
    // Ports are opened only by the stack's own security group, in its region (the first):
    // a task that asks for some is never placed where they would stay shut.
    const regions = (spec.resources.ports ?? []).length > 0 ? this.config.regions.slice(0, 1) : this.config.regions;
    const plan = planFleets({
      spec,
      history: request.history,
      regions: regions.map((region) => region.region),
      zonesByRegion: Object.fromEntries(regions.map((region) => [region.region, Object.keys(region.subnetsByZone)])),
      allowedInstanceTypes: this.config.allowedInstanceTypes,
      market: request.market,
    });
    assertImageSomewhere(spec, plan);
    const templates = new Map<string, LaunchTemplate>();
    try {
      return await this.launchFleets(request, plan, templates);
    } finally {
      await this.deleteTemplates(templates);
    }
  }

  private async launchFleets(request: LaunchRequest, plan: readonly FleetPlan[], templates: Map<string, LaunchTemplate>): Promise<LaunchResult> {
    const { spec } = request;
    // One image lookup per region and kind; a region without one is noted once and skipped.
    const images = new Map<string, Promise<Image | null>>();
    const tried: string[] = [];
    for (const [index, fleet] of plan.entries()) {
      const candidates: Candidate[] = [];
      for (const override of fleet.overrides) {
        const key = `${fleet.region}/${imageKind(override.instanceType)}`;
        const known = images.has(key);
        if (!known) images.set(key, this.image(fleet.region, spec, override.instanceType));
        const image = await images.get(key);
        if (image === null || image === undefined) {
          if (!known) tried.push(`${override.instanceType} in ${fleet.region} (no image for it there)`);
          continue;
        }
        candidates.push({ override, image });
      }
      if (candidates.length === 0) continue;
      const attempted = await this.tryFleet(request, fleet, index, candidates, templates);
      if ('launched' in attempted) return attempted.launched;
      tried.push(...attempted.failures);
    }
    throw new NoCapacityError(
      `no capacity for job ${request.jobId} attempt ${request.attempt} (${request.market}, ${spec.numNodes} node${spec.numNodes === 1 ? '' : 's'}): tried ${capped(tried).join(', ')}`,
    );
  }

  /**
   * Terminates the attempt's instances in every region: those this object launched, and
   * any still live that carry the attempt's and this deployment's tags (so an instance
   * from a launch whose result was lost goes too). Then checks until none is live.
   * Instances already gone are fine; still live after the checks, or once the wait budget
   * is spent, is InstancesStillRunningError (the controller retries the release). Then the
   * secrets of every instance found go, in every region (an id names at most one of them).
   */
  async release(jobId: string, attempt: number, instances: readonly InstanceRef[]): Promise<void> {
    const released = new Set(instances.map((instance) => instance.instanceId));
    const checks = this.config.releaseChecks ?? 6;
    let budget = this.config.releaseWaitBudgetMs ?? RELEASE_WAIT_BUDGET_MS;
    for (const { region } of this.config.regions) {
      const known = instances.filter((instance) => this.launchedIn.get(instance.instanceId) === region).map((i) => i.instanceId);
      const tagged = await this.liveInstances(region, [
        tagFilter(DEPLOYMENT_TAG_KEY, this.config.namePrefix),
        tagFilter(TagKey.jobId, jobId),
        tagFilter(TagKey.attempt, String(attempt)),
      ]);
      let live = [...new Set([...known, ...tagged])];
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

  /**
   * One CreateFleet request. Its instances (all of them, or none) are described for their
   * IPs and zone, ranked by instance id, tagged and given their secrets; fewer than
   * `numNodes` are terminated and count as no capacity.
   */
  private async tryFleet(
    request: LaunchRequest,
    fleet: FleetPlan,
    index: number,
    candidates: readonly Candidate[],
    templates: Map<string, LaunchTemplate>,
  ): Promise<Attempted> {
    const { region } = fleet;
    const input = await this.createFleetInput(request, fleet, index, candidates, templates);
    let response;
    try {
      response = await this.withRetries(`EC2 CreateFleet in ${region}`, () => this.deps.ec2(region).send(new CreateFleetCommand(input)));
    } catch (error) {
      // What EC2 refuses for the whole request: as if every candidate had answered it.
      const code = awsErrorCode(error);
      if (code === SPOT_ROLE_MISSING_ERROR) throw new PrecheckError(spotRoleMissingReason(region, errorMessage(error)));
      if (CAPACITY_ERRORS.has(code)) return { failures: [`${region} ${fleet.market} (${code})`] };
      if (isPrecheckError(code)) throw new PrecheckError(`EC2 cannot launch this task in ${region}: ${code}: ${errorMessage(error)}`);
      throw error;
    }
    const ids = [...new Set((response.Instances ?? []).flatMap((launched) => launched.InstanceIds ?? []))].sort();
    for (const id of ids) this.launchedIn.set(id, region);
    const failures = (response.Errors ?? []).map((error) => this.describeFleetError(region, fleet.market, error));
    const numNodes = request.spec.numNodes;
    if (ids.length < numNodes) {
      await this.terminate(region, ids);
      // Not "no capacity": no spot launch anywhere in the account can succeed until the role exists.
      const roleMissing = (response.Errors ?? []).find((error) => error.ErrorCode === SPOT_ROLE_MISSING_ERROR);
      if (roleMissing !== undefined) throw new PrecheckError(spotRoleMissingReason(region, roleMissing.ErrorMessage ?? 'no message'));
      const codes = (response.Errors ?? []).map((error) => error.ErrorCode ?? '');
      if (ids.length === 0 && codes.length > 0 && codes.every(isPrecheckError)) {
        throw new PrecheckError(`EC2 cannot launch this task in ${region}: ${failures.join(', ')}`);
      }
      const short = ids.length === 0 ? [] : [`${region} ${fleet.market} (only ${ids.length} of ${numNodes} instances launched)`];
      return { failures: failures.length + short.length === 0 ? [`${region} ${fleet.market} (no instance and no error from EC2)`] : [...failures, ...short] };
    }
    try {
      const { instances, account } = await this.describeLaunched(region, ids);
      const nodes: InstanceRef[] = instances.map((instance, rank) => ({
        instanceId: instance.InstanceId as string,
        nodeRank: rank,
        privateIp: instance.PrivateIpAddress ?? null,
      }));
      await this.tagNodes(region, nodes);
      await this.putSecrets(request, region, account, nodes);
      const first = instances[0];
      const zone = first?.Placement?.AvailabilityZone ?? null;
      const instanceType = first?.InstanceType ?? (candidates[0] as Candidate).override.instanceType;
      // The entry whose candidate EC2 filled: same type, same zone (or any zone when EC2 picked it).
      const entry = candidates.find(({ override }) => override.instanceType === instanceType && (override.zone === null || override.zone === zone))?.override.entry;
      const placement: Placement = {
        region,
        zone,
        instanceType,
        market: fleet.market,
        ...(failures.length === 0 ? {} : { unavailable: capped(failures) }),
        ...(entry === null || entry === undefined ? {} : { entry }),
      };
      return { launched: { placement, instances: nodes } };
    } catch (error) {
      await this.terminate(region, ids);
      // Secrets already written go too: no release will find these instances again.
      const names = ids.map((id) => agentSecretName(this.secretPath, id));
      await this.withRetries(`SSM DeleteParameters in ${region}`, () => this.deps.parameters.delete(region, names));
      throw error;
    }
  }

  /** `p4d.24xlarge in us-east-1a (spot): InsufficientInstanceCapacity`, from one of CreateFleet's Errors[]. */
  private describeFleetError(region: string, market: Market, error: CreateFleetError): string {
    const overrides = error.LaunchTemplateAndOverrides?.Overrides;
    const zone = overrides?.AvailabilityZone ?? this.zoneOfSubnet(region, overrides?.SubnetId) ?? region;
    const what = overrides?.InstanceType === undefined ? region : `${overrides.InstanceType} in ${zone}`;
    return `${what} (${market}): ${error.ErrorCode ?? 'no error code'}`;
  }

  private zoneOfSubnet(region: string, subnetId: string | undefined): string | undefined {
    const network = this.config.regions.find((config) => config.region === region);
    return Object.entries(network?.subnetsByZone ?? {}).find(([, subnet]) => subnet === subnetId)?.[0];
  }

  /**
   * The fleet request: a launch template config per kind of node (the templates are made
   * on first use), all-or-nothing capacity on one type in one zone, and the allocation
   * strategy of the market and mode.
   */
  private async createFleetInput(
    request: LaunchRequest,
    fleet: FleetPlan,
    index: number,
    candidates: readonly Candidate[],
    templates: Map<string, LaunchTemplate>,
  ): Promise<CreateFleetCommandInput> {
    const numNodes = request.spec.numNodes;
    const network = this.config.regions.find((region) => region.region === fleet.region);
    const byTemplate = new Map<string, { data: RequestLaunchTemplateData; overrides: FleetLaunchTemplateOverridesRequest[] }>();
    candidates.forEach(({ override, image }, priority) => {
      const data = this.launchTemplateData(request, fleet.region, override.instanceType, image, network?.securityGroupIds ?? []);
      const key = JSON.stringify(data);
      const entry = byTemplate.get(key) ?? { data, overrides: [] };
      entry.overrides.push({
        InstanceType: override.instanceType as FleetLaunchTemplateOverridesRequest['InstanceType'],
        ...(override.zone === null ? {} : { SubnetId: network?.subnetsByZone[override.zone] }),
        ...(fleet.prioritized ? { Priority: priority } : {}),
      });
      byTemplate.set(key, entry);
    });
    const LaunchTemplateConfigs = await Promise.all(
      [...byTemplate.values()].map(async ({ data, overrides }) => ({
        LaunchTemplateSpecification: { LaunchTemplateId: await this.launchTemplate(request, fleet.region, data, templates), Version: '$Latest' },
        Overrides: overrides,
      })),
    );
    const single = { SingleInstanceType: true, SingleAvailabilityZone: true, MinTargetCapacity: numNodes };
    return {
      ClientToken: fleetClientToken(request, fleet.region, index),
      Type: 'instant',
      LaunchTemplateConfigs,
      TargetCapacitySpecification:
        fleet.market === 'spot'
          ? { TotalTargetCapacity: numNodes, SpotTargetCapacity: numNodes, DefaultTargetCapacityType: 'spot' }
          : { TotalTargetCapacity: numNodes, OnDemandTargetCapacity: numNodes, DefaultTargetCapacityType: 'on-demand' },
      ...(fleet.market === 'spot'
        ? {
            SpotOptions: {
              AllocationStrategy: fleet.prioritized ? 'capacity-optimized-prioritized' : 'price-capacity-optimized',
              InstanceInterruptionBehavior: 'terminate',
              ...single,
            },
          }
        : { OnDemandOptions: { AllocationStrategy: fleet.prioritized ? 'prioritized' : 'lowest-price', ...single } }),
      // The instances and volumes carry these from their launch template too, but IAM is
      // not documented to count a template's tags as the request's: the launch's tag
      // conditions (aws:RequestTag) must find them in the request itself.
      TagSpecifications: (['fleet', 'instance', 'volume'] as const).map((ResourceType) => ({ ResourceType, Tags: attemptTags(this.config.namePrefix, request) })),
    };
  }

  /** The template with this content in this region: created on first use, with a ClientToken so a retried create makes one. */
  private launchTemplate(request: LaunchRequest, region: string, data: RequestLaunchTemplateData, templates: Map<string, LaunchTemplate>): Promise<string> {
    const digest = createHash('sha256').update(JSON.stringify(data)).digest('hex').slice(0, 16);
    const key = `${region}/${digest}`;
    const known = templates.get(key);
    if (known !== undefined) return known.id;
    const name = `${this.config.namePrefix}-${request.jobId}-${request.attempt}-${digest}`;
    const input: CreateLaunchTemplateCommandInput = {
      LaunchTemplateName: name,
      ClientToken: boundedToken(name),
      LaunchTemplateData: data,
      TagSpecifications: [{ ResourceType: 'launch-template', Tags: attemptTags(this.config.namePrefix, request) }],
    };
    const id = this.withRetries(`EC2 CreateLaunchTemplate in ${region}`, () => this.deps.ec2(region).send(new CreateLaunchTemplateCommand(input))).then(
      (response) => {
        const created = response.LaunchTemplate?.LaunchTemplateId;
        if (created === undefined) throw new UnexpectedCloudResponseError(`EC2 CreateLaunchTemplate in ${region} answered without the template's id`);
        return created;
      },
    );
    templates.set(key, { region, id });
    return id;
  }

  /** Deletes the launch's templates; one already gone is fine, one never created is skipped. */
  /**
   * Deletes the attempt's templates, each on its own. A delete that fails is left to the
   * janitor's sweep (sweepLaunchTemplates): never a reason to throw away instances just
   * launched, or to hide why a launch failed.
   */
  private async deleteTemplates(templates: ReadonlyMap<string, LaunchTemplate>): Promise<void> {
    await Promise.allSettled(
      [...templates.values()].map(async ({ region, id }) => {
        const created = await id;
        await this.withRetries(`EC2 DeleteLaunchTemplate in ${region}`, () => this.deps.ec2(region).send(new DeleteLaunchTemplateCommand({ LaunchTemplateId: created })));
      }),
    );
  }

  /** What every instance of one kind boots with: image, agent, IMDSv2, tags, root volume, network (EFA with network_tier: best). */
  private launchTemplateData(request: LaunchRequest, region: string, instanceType: string, image: Image, securityGroupIds: readonly string[]): RequestLaunchTemplateData {
    const { spec } = request;
    const tags = attemptTags(this.config.namePrefix, request);
    const efa = spec.resources.networkTier === 'best' && hasEfa(instanceType);
    return {
      ImageId: image.imageId,
      IamInstanceProfile: { Arn: this.config.instanceProfileArn },
      UserData: this.userData(request, region, instanceType),
      // Hop limit 1: a container on a bridge network (one more hop) cannot reach IMDS and the
      // role. The task's own container shares the host's network (agent.sh), so it can.
      MetadataOptions: { HttpTokens: 'required', HttpEndpoint: 'enabled', InstanceMetadataTags: 'enabled', HttpPutResponseHopLimit: 1 },
      InstanceInitiatedShutdownBehavior: 'terminate',
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
      // With EFA the interfaces are described here, and the fleet's override gives their subnet.
      ...(efa ? { NetworkInterfaces: efaInterfaces(instanceType, securityGroupIds) } : { SecurityGroupIds: [...securityGroupIds] }),
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
      // A type the catalog knows has its own count (0 for a CPU type, whatever the task
      // asked for); only an unknown one is taken at the task's word.
      gpusPerNode: gpusOf(instanceType, request.spec),
      // Whatever the count says: a GPU type boots the GPU image, and its container gets them.
      containerGpus: hasGpus(instanceType),
      ...(this.config.data === undefined ? {} : s3AgentMounts(request.spec, request.jobId, this.config.data)),
    });
    if (packed.length > USER_DATA_MAX_BYTES) throw new PrecheckError(tooLargeForUserData(packed.length));
    return packed.toString('base64');
  }

  /**
   * The launched instances, ordered by id (their ranks), and the account that owns them.
   * An instance EC2 does not list yet (its API is eventually consistent) or without a
   * private IP is asked about again, a few times.
   */
  private async describeLaunched(region: string, ids: readonly string[]): Promise<{ instances: Instance[]; account: string | undefined }> {
    for (let look = 0; ; look += 1) {
      let instances: Instance[] = [];
      let account: string | undefined;
      try {
        const response = await this.withRetries(`EC2 DescribeInstances in ${region}`, () =>
          this.deps.ec2(region).send(new DescribeInstancesCommand({ InstanceIds: [...ids] })),
        );
        for (const reservation of response.Reservations ?? []) {
          account ??= reservation.OwnerId;
          instances.push(...(reservation.Instances ?? []));
        }
      } catch (error) {
        if (awsErrorCode(error) !== 'InvalidInstanceID.NotFound') throw error;
        instances = [];
      }
      instances.sort((a, b) => ((a.InstanceId ?? '') < (b.InstanceId ?? '') ? -1 : 1));
      const complete = instances.length === ids.length && instances.every((instance) => instance.PrivateIpAddress !== undefined);
      if (complete) return { instances, account };
      if (look >= DESCRIBE_LOOKS) {
        throw new UnexpectedCloudResponseError(`EC2 did not describe the launched instances ${ids.join(', ')} in ${region} with their private IPs`);
      }
      await this.sleep(500 * 2 ** look);
    }
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

  /** Each node's secret, readable by that node alone (its ARN needs the account that owns the instances). */
  private async putSecrets(request: LaunchRequest, region: string, account: string | undefined, nodes: readonly InstanceRef[]): Promise<void> {
    if (account === undefined || !/^\d{12}$/.test(account)) {
      throw new UnexpectedCloudResponseError(`EC2 DescribeInstances in ${region} answered without the account (OwnerId): the agents' secrets cannot be scoped`);
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
function assertImageSomewhere(spec: TaskSpec, plan: readonly FleetPlan[]): void {
  const wanted = spec.resources.imageId;
  if (wanted?.kind !== 'per-region') return;
  const regions = [...new Set(plan.map((fleet) => fleet.region))];
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

/** How many more times launched instances are described before their IPs count as missing. */
const DESCRIBE_LOOKS = 5;

/** A token of at most 64 printable ASCII characters: `plain` itself, or its SHA-256 when it does not fit. */
function boundedToken(plain: string): string {
  if (plain.length <= CLIENT_TOKEN_MAX && /^[\x21-\x7e]*$/.test(plain)) return plain;
  return createHash('sha256').update(plain).digest('hex');
}

/**
 * The same token for every try of one (job, attempt, region, request): a CreateFleet
 * retried after an InternalError whose launch went through returns those instances
 * instead of launching a second set. Too long, or not ASCII, it is hashed.
 */
export function fleetClientToken(request: Pick<LaunchRequest, 'jobId' | 'attempt'>, region: string, index: number): string {
  return boundedToken(`${request.jobId}-${request.attempt}-${region}-${index}`);
}

/** Refuses ports the deployment does not open, before anything launches. */
/**
 * The most failed candidates a reason or a placement names: a fleet may hold 300, and
 * both are stored with the job (DynamoDB's 400 KB item).
 */
export const MAX_LISTED_FAILURES = 40;

/** The first MAX_LISTED_FAILURES, then how many more. */
function capped(failures: readonly string[]): string[] {
  if (failures.length <= MAX_LISTED_FAILURES) return [...failures];
  return [...failures.slice(0, MAX_LISTED_FAILURES), `and ${failures.length - MAX_LISTED_FAILURES} more`];
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

/** SKYPILOT_NUM_GPUS_PER_NODE for a node of this type. */
function gpusOf(instanceType: string, spec: TaskSpec): number {
  const info = instanceTypeInfo(instanceType);
  if (info !== null && info !== undefined) return info.gpu?.count ?? 0;
  return spec.resources.accelerators[0]?.count ?? 0;
}

function assertPortsOpen(spec: TaskSpec, open: readonly PortRange[]): void {
  const [problem] = portProblems(spec, open);
  if (problem !== undefined) throw new PrecheckError(`${problem.path}: ${problem.message}`);
}

function tagFilter(key: string, value: string): { Name: string; Values: string[] } {
  return { Name: `tag:${key}`, Values: [value] };
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
