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
// What it uses, each a provider of its own: Ec2Images (ec2-images.ts) resolves each
// candidate's AMI; AttemptLaunchTemplates (ec2-launch-templates.ts) makes the attempt's launch
// templates, from which CreateFleet takes every instance setting (image, user data, IMDSv2,
// volumes, network), and deletes them once the fleet requests are answered; the agent in
// the user data comes from ec2-user-data.ts. Ec2Compute builds its providers from its own
// clients and hands them its one retry policy (ec2-calls.ts); it keeps the fleets, the
// nodes' tags and secrets, and the release.
//
// Where the candidates and the order come from: planFleets (lib/launch-plan.ts). Regions
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
// Nodes kept from the attempt before (request.keep: restart in place, or survivors of a
// partial loss, docs/recovery.md): the launch checks which still run, launches only the
// ranks they do not cover in one fleet in their zone, type, market and placement group,
// and moves every kept node to the new attempt (its attempt, rank and IP tags; the
// held-after mark removed; its secret parameter overwritten with the new attempt's). A
// release with `except` leaves those nodes and their secrets alone.
//
// A standby of the warned node alone (request.beside, launch_on_warning with node reuse):
// the live attempt's other nodes still run its job, so the launch places only the ranks
// they do not cover, as beside kept nodes, and writes the standby's secret to their
// parameters (their agents read it only once told to run the standby), but leaves their
// tags alone: the janitor, EC2's events and the held-after mark read those for the attempt
// they serve. A node of theirs found gone is skipped, neither replaced nor given up (its
// attempt's release takes it). `join`, at the standby's adoption, moves their tags.
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

import {
  CreateFleetCommand,
  CreateTagsCommand,
  DescribeInstancesCommand,
  TerminateInstancesCommand,
  type CreateFleetCommandInput,
  type CreateFleetError,
  type EC2Client,
  type FleetLaunchTemplateOverridesRequest,
  type Instance,
  type RequestLaunchTemplateData,
} from '@aws-sdk/client-ec2';
import { agentSecretName, agentSecretPath, agentSecretValue, instanceArn, SECRET_OWNER_TAG } from '../agent/secret-parameter.ts';
import { nodeIpsTags, TagKey } from '../agent/tags.ts';
import { errorMessage, InstancesStillRunningError, InvalidInputError, NoCapacityError, PrecheckError, UnexpectedCloudResponseError } from '../errors.ts';
import type { InstanceRef, Placement } from '../model.ts';
import { planFleets, type FleetOverride, type FleetPlan } from '../launch-plan.ts';
import type { Market } from '../policy/types.ts';
import type { Compute, LaunchRequest, LaunchResult } from '../ports.ts';
import { portProblems } from '../task-file/network-ports.ts';
import type { PortRange, TaskSpec } from '../task-file/types.ts';
import { HEARTBEAT_INTERVAL_SECONDS } from '../workflow/contract.ts';
import { DEPLOYMENT_TAG_KEY, SPOT_SERVICE_LINKED_ROLE, type Ec2ComputeConfig } from '../workflow/resources.ts';
import { awsErrorCode } from './aws-errors.ts';
import { attemptTags, boundedToken, CAPACITY_ERRORS, ec2Retrying, LIVE_STATES, tagFilter, type Ec2Retrying } from './ec2-calls.ts';
import { assertImageSomewhere, Ec2Images, imageKind, type Image } from './ec2-images.ts';
import { AttemptLaunchTemplates, launchTemplateData } from './ec2-launch-templates.ts';
import { nodeTrafficProblems } from './ec2-network.ts';
import { Ec2SpotPrices } from './ec2-spot-prices.ts';
import { launchUserData } from './ec2-user-data.ts';
import type { Ec2Parameters } from './ssm-parameters.ts';


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

/** EC2's answer to a spot launch in an account without the role, by a caller who may not create it. */
export const SPOT_ROLE_MISSING_ERROR = 'AuthFailure.ServiceLinkedRoleCreationNotPermitted';

/** The reason a job ends with when spot cannot launch for want of the role: what to run once. */
export function spotRoleMissingReason(region: string, detail: string): string {
  return (
    `EC2 refused a spot launch in ${region}: the account has no ${SPOT_SERVICE_LINKED_ROLE.name} service-linked role and it could not be created ` +
    `(${SPOT_ROLE_MISSING_ERROR}: ${detail}); create it once with \`aws iam create-service-linked-role --aws-service-name ${SPOT_SERVICE_LINKED_ROLE.service}\` and submit the job again`
  );
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

type Attempted = { readonly launched: LaunchResult } | { readonly failures: readonly string[] };

/** An override with the image its instance type boots. */
interface Candidate {
  readonly override: FleetOverride;
  readonly image: Image;
}

/** A kept node that still runs: as the new attempt records it, where it is, and its placement group. */
interface Survivor {
  readonly node: InstanceRef;
  readonly zone: string | null;
  readonly groupName: string | null;
}

/** Nodes a launch goes beside: kept ones that move to it (request.keep), or a live attempt's that stay with it until join (request.beside). */
interface Neighbours {
  readonly placement: Placement;
  readonly nodes: readonly InstanceRef[];
}

/**
 * A fleet launched beside other nodes: the ranks it fills (in instance-id order), their
 * placement group, and what makes the launched nodes and their neighbours the attempt's,
 * which answers the nodes the launch result names.
 */
interface Joining {
  readonly ranks: readonly number[];
  readonly groupName: string | null;
  readonly settle: (launched: readonly InstanceRef[], account: string | undefined) => Promise<readonly InstanceRef[]>;
}

/** EC2 as the Compute port. */
export class Ec2Compute implements Compute {
  private readonly deps: Ec2ComputeDeps;
  private readonly config: Ec2ComputeConfig;
  private readonly sleep: (ms: number) => Promise<void>;
  /** Every EC2 and SSM call of this object and its providers, retried alike. */
  private readonly withRetries: Ec2Retrying;
  private readonly images: Ec2Images;
  private readonly spotPrices: Ec2SpotPrices;
  /** Where the instances this object launched are, so a release right after the launch needs no search. */
  private readonly launchedIn = new Map<string, string>();

  constructor(deps: Ec2ComputeDeps) {
    this.deps = deps;
    this.config = deps.config;
    this.sleep = deps.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.withRetries = ec2Retrying(this.config.throttleRetries ?? 8, this.sleep);
    this.images = new Ec2Images({ ec2: deps.ec2, parameters: deps.parameters, retrying: this.withRetries, imageParameters: this.config.imageParameters });
    this.spotPrices = new Ec2SpotPrices({ ec2: deps.ec2, retrying: this.withRetries });
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
    if (request.keep !== undefined && request.beside !== undefined) {
      throw new InvalidInputError([{ path: 'beside', message: `a launch keeps nodes (keep) or goes beside a live attempt's (beside), not both; job ${request.jobId} attempt ${request.attempt} has both` }]);
    }
    if (request.keep !== undefined && request.keep.nodes.length > 0) {
      const launched = await this.launchBesideKept(request, request.keep);
      if (launched !== null) return launched;
    }
    if (request.beside !== undefined && request.beside.nodes.length > 0) return this.launchBesideLive(request, request.beside);
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
    const templates = new AttemptLaunchTemplates({ ec2: this.deps.ec2, retrying: this.withRetries, namePrefix: this.config.namePrefix }, request);
    try {
      return await this.launchFleets(request, plan, templates);
    } finally {
      await templates.deleteAll();
    }
  }

  /**
   * The launch of an attempt that keeps nodes of the one before (request.keep): the kept
   * nodes EC2 still shows pending or running stay, with their ranks; the others are given
   * up (terminated if EC2 still lists them, their secrets deleted) and their ranks launched
   * anew with the missing ones, in one fleet in the kept nodes' zone, type, market and
   * placement group, where the cluster already is. Then every node is tagged with this
   * attempt, its rank and every IP, the kept nodes lose their held-after tag, and every
   * node's parameter holds this attempt's secret. Null when no kept node still runs: the
   * launch is then an ordinary one, placed as the strategy says.
   */
  private async launchBesideKept(request: LaunchRequest, keep: Neighbours): Promise<LaunchResult | null> {
    const { region } = keep.placement;
    this.assertLaunchRegion(region, 'keep.placement.region', `the kept nodes of job ${request.jobId}`);
    const { survivors, account } = await this.survivorsOf(request, keep);
    await this.giveUpKept(region, keep.nodes.filter((node) => !survivors.some((survivor) => survivor.node.instanceId === node.instanceId)));
    if (survivors.length === 0) return null;
    const kept = survivors.map((survivor) => survivor.node);
    const joined = async (launched: readonly InstanceRef[], launchedAccount: string | undefined) => {
      const nodes = byRank([...kept, ...launched]);
      await this.joinNodes(request, region, launchedAccount ?? account, nodes);
      return nodes;
    };
    const ranks = missingRanks(request.spec.numNodes, kept);
    if (ranks.length === 0) {
      const { unavailable: _unavailable, ...placement } = keep.placement;
      return { placement, instances: await joined([], account) };
    }
    return this.launchMissing(request, keep.placement, survivors, `its ${plural(survivors.length, 'kept node')}`, { ranks, settle: joined });
  }

  /**
   * A standby of the warned node alone (request.beside): one fleet for the ranks the live
   * attempt's other nodes do not cover, beside them as a fleet beside kept nodes is, every
   * node's IP (as EC2 describes a running one, else as recorded) in the new nodes' tags.
   * The new nodes get their rank, IPs and secret; the running neighbours only this
   * attempt's secret in their parameters, their tags untouched: they serve the live attempt
   * until `join`. A neighbour EC2 no longer shows running belongs to the live attempt's
   * release: not launched anew, not terminated, its parameter left as it is. The result
   * names the new nodes alone.
   */
  private async launchBesideLive(request: LaunchRequest, beside: Neighbours): Promise<LaunchResult> {
    const { region } = beside.placement;
    this.assertLaunchRegion(region, 'beside.placement.region', `the nodes of job ${request.jobId} that attempt ${request.attempt} goes beside`);
    const { given, survivors } = await this.survivorsOf(request, beside);
    const ranks = missingRanks(request.spec.numNodes, given);
    if (ranks.length === 0) {
      throw new InvalidInputError([
        {
          path: 'beside.nodes',
          message: `expected nodes of fewer than all ${request.spec.numNodes} ranks of job ${request.jobId}, the standby launching the ranks they do not cover; got every rank`,
        },
      ]);
    }
    const running = survivors.map((survivor) => survivor.node);
    // One node a rank for the IP list: the running one, as EC2 describes it, else the first recorded.
    const neighbours = [...new Set(given.map((node) => node.nodeRank))].map(
      (rank) => running.find((node) => node.nodeRank === rank) ?? (given.find((node) => node.nodeRank === rank) as InstanceRef),
    );
    const settle = async (launched: readonly InstanceRef[], account: string | undefined) => {
      await this.tagNodes(region, launched, { ipsOf: byRank([...neighbours, ...launched]) });
      await this.putSecrets(request, region, account, [...launched, ...running]);
      return launched;
    };
    return this.launchMissing(request, beside.placement, survivors, `the live attempt's ${plural(running.length, 'running node')}`, { ranks, settle });
  }

  /**
   * One fleet for the ranks `joining` fills, beside `survivors` (the neighbours still
   * running): in their zone (else the placement's), their type, market and placement group.
   * NoCapacityError names them (`beside`) when EC2 cannot fill it; the attempt's launch
   * templates are deleted either way.
   */
  private async launchMissing(
    request: LaunchRequest,
    placement: Placement,
    survivors: readonly Survivor[],
    beside: string,
    joining: Omit<Joining, 'groupName'>,
  ): Promise<LaunchResult> {
    const { region, instanceType } = placement;
    const zone = this.configuredZone(region, survivors[0]?.zone ?? null) ?? this.configuredZone(region, placement.zone);
    const fleet: FleetPlan = {
      region,
      market: placement.market ?? request.market,
      overrides: [{ zone, instanceType, entry: placement.entry ?? null }],
      prioritized: false,
    };
    const image = await this.images.image(region, request.spec, instanceType);
    if (image === null) throw new PrecheckError(`no image for ${instanceType} in ${region}, where job ${request.jobId} attempt ${request.attempt} launches beside ${beside}`);
    const templates = new AttemptLaunchTemplates({ ec2: this.deps.ec2, retrying: this.withRetries, namePrefix: this.config.namePrefix }, request);
    try {
      const groupName = survivors.find((survivor) => survivor.groupName !== null)?.groupName ?? null;
      const attempted = await this.tryFleet(request, fleet, 0, [{ override: fleet.overrides[0] as FleetOverride, image }], templates, { ...joining, groupName });
      if ('launched' in attempted) return attempted.launched;
      throw new NoCapacityError(
        `no capacity for job ${request.jobId} attempt ${request.attempt} beside ${beside} ` +
          `(${fleet.market}, ${plural(joining.ranks.length, 'node')} of ${instanceType} in ${zone ?? region}): tried ${capped(attempted.failures).join(', ')}`,
      );
    } finally {
      await templates.deleteAll();
    }
  }

  /** Refuses nodes in a region this deployment does not launch in, naming `field` and `who` they are. */
  private assertLaunchRegion(region: string, field: string, who: string): void {
    if (this.config.regions.some((config) => config.region === region)) return;
    throw new PrecheckError(
      `${field}: ${who} run in ${region}, where this deployment does not launch (it launches in ${this.config.regions.map((config) => config.region).join(', ')})`,
    );
  }

  /**
   * The given nodes within the task's ranks, and those of them EC2 still shows pending or
   * running (one a rank) as the new attempt records them: their IP as EC2 describes it,
   * reused from the attempt their tag names; and the account that owns them.
   */
  private async survivorsOf(request: LaunchRequest, neighbours: Neighbours): Promise<{ given: InstanceRef[]; survivors: Survivor[]; account: string | undefined }> {
    const { region } = neighbours.placement;
    const given = neighbours.nodes.filter((node) => node.nodeRank >= 0 && node.nodeRank < request.spec.numNodes);
    if (given.length === 0) return { given, survivors: [], account: undefined };
    const { running, account } = await this.describeKept(region, request.jobId, given.map((node) => node.instanceId));
    const survivors: Survivor[] = [];
    for (const node of given) {
      const instance = running.get(node.instanceId);
      if (instance === undefined || survivors.some((survivor) => survivor.node.nodeRank === node.nodeRank)) continue;
      // The attempt it served, from its tag; a retried launch finds the tag already moved to this one.
      const tagged = Number(instance.Tags?.find((tag) => tag.Key === TagKey.attempt)?.Value);
      const served = Number.isInteger(tagged) && tagged >= 1 && tagged < request.attempt ? tagged : request.attempt - 1;
      this.launchedIn.set(node.instanceId, region);
      survivors.push({
        node: {
          instanceId: node.instanceId,
          nodeRank: node.nodeRank,
          privateIp: instance.PrivateIpAddress ?? node.privateIp,
          // No runningAt: its time up before belongs to the attempt it served, and a node
          // without one is counted from this attempt's launch (lib/accounting/timeline.ts).
          reusedFrom: served,
        },
        zone: instance.Placement?.AvailabilityZone ?? null,
        groupName: instance.Placement?.GroupName === undefined || instance.Placement.GroupName === '' ? null : instance.Placement.GroupName,
      });
    }
    return { given, survivors, account };
  }

  /**
   * The kept instances EC2 shows pending or running, by id, and the account that owns them;
   * only this deployment's instances of this job, whatever ids the request names.
   */
  private async describeKept(region: string, jobId: string, ids: readonly string[]): Promise<{ running: Map<string, Instance>; account: string | undefined }> {
    const running = new Map<string, Instance>();
    let account: string | undefined;
    let NextToken: string | undefined;
    do {
      const page = await this.withRetries(`EC2 DescribeInstances in ${region} (kept nodes)`, () =>
        this.deps.ec2(region).send(
          new DescribeInstancesCommand({
            Filters: [
              { Name: 'instance-id', Values: [...ids] },
              tagFilter(DEPLOYMENT_TAG_KEY, this.config.namePrefix),
              tagFilter(TagKey.jobId, jobId),
              { Name: 'instance-state-name', Values: ['pending', 'running'] },
            ],
            NextToken,
          }),
        ),
      );
      for (const reservation of page.Reservations ?? []) {
        for (const instance of reservation.Instances ?? []) {
          if (instance.InstanceId === undefined) continue;
          account ??= reservation.OwnerId;
          running.set(instance.InstanceId, instance);
        }
      }
      NextToken = page.NextToken;
    } while (NextToken !== undefined);
    return { running, account };
  }

  /** Kept nodes that no longer run: terminated where EC2 still lists them (stopping, stopped), their secrets deleted. */
  private async giveUpKept(region: string, nodes: readonly InstanceRef[]): Promise<void> {
    if (nodes.length === 0) return;
    const ids = nodes.map((node) => node.instanceId);
    await this.terminate(region, await this.liveInstances(region, [{ Name: 'instance-id', Values: ids }]));
    await this.withRetries(`SSM DeleteParameters in ${region}`, () => this.deps.parameters.delete(region, ids.map((id) => agentSecretName(this.secretPath, id))));
  }

  /** `zone` when the deployment has a subnet there, else null. */
  private configuredZone(region: string, zone: string | null): string | null {
    const network = this.config.regions.find((config) => config.region === region);
    return zone !== null && network?.subnetsByZone[zone] !== undefined ? zone : null;
  }

  /**
   * Makes `nodes` (kept and new, every rank of the attempt) this attempt's: each tagged with
   * the attempt, its rank and every IP; every node's parameter holding this attempt's secret
   * (a kept node's is rewritten). A kept node's held-after tag stays: it names the attempt
   * that ended, which its agent may not have seen yet (it polls every few seconds, and this
   * launch can come within a second of the hold), and no later attempt's number.
   */
  private async joinNodes(request: LaunchRequest, region: string, account: string | undefined, nodes: readonly InstanceRef[]): Promise<void> {
    await this.moveTags(region, request.attempt, nodes);
    await this.putSecrets(request, region, account, nodes);
  }

  /** Every node tagged with its rank and every IP, and the kept ones (reusedFrom set) with `attempt`, which they serve from now. */
  private async moveTags(region: string, attempt: number, nodes: readonly InstanceRef[]): Promise<void> {
    await this.tagNodes(region, nodes, { keptTags: [{ Key: TagKey.attempt, Value: String(attempt) }] });
  }

  private async launchFleets(request: LaunchRequest, plan: readonly FleetPlan[], templates: AttemptLaunchTemplates): Promise<LaunchResult> {
    const { spec } = request;
    // One image lookup per region and kind; a region without one is noted once and skipped.
    const images = new Map<string, Promise<Image | null>>();
    const tried: string[] = [];
    for (const [index, fleet] of plan.entries()) {
      const candidates: Candidate[] = [];
      for (const override of fleet.overrides) {
        const key = `${fleet.region}/${imageKind(override.instanceType)}`;
        const known = images.has(key);
        if (!known) images.set(key, this.images.image(fleet.region, spec, override.instanceType));
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
   * Instances in `except` (kept for the next attempt) are neither terminated nor lose
   * their secrets, though they still carry the attempt's tags.
   */
  async release(jobId: string, attempt: number, instances: readonly InstanceRef[], options: { readonly except?: readonly string[] } = {}): Promise<void> {
    const spared = new Set(options.except ?? []);
    const released = new Set(instances.map((instance) => instance.instanceId).filter((id) => !spared.has(id)));
    const checks = this.config.releaseChecks ?? 6;
    let budget = this.config.releaseWaitBudgetMs ?? RELEASE_WAIT_BUDGET_MS;
    for (const { region } of this.config.regions) {
      const known = [...released].filter((id) => this.launchedIn.get(id) === region);
      const tagged = await this.liveInstances(region, [
        tagFilter(DEPLOYMENT_TAG_KEY, this.config.namePrefix),
        tagFilter(TagKey.jobId, jobId),
        tagFilter(TagKey.attempt, String(attempt)),
      ]);
      let live = [...new Set([...known, ...tagged])].filter((id) => !spared.has(id));
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

  /**
   * Makes the kept nodes among `nodes` (reusedFrom set) serve `attempt`, an adopted standby
   * launched beside them: the attempt tag on each, and every node's rank and every IP, as
   * a launch with `keep` tags them. Their parameters hold the standby's secret already
   * (its launch wrote it), so no SSM call. Idempotent: the same tags again.
   */
  async join(jobId: string, attempt: number, placement: Placement, nodes: readonly InstanceRef[]): Promise<void> {
    const { region } = placement;
    this.assertLaunchRegion(region, 'placement.region', `the nodes joining job ${jobId} attempt ${attempt}`);
    for (const node of nodes) this.launchedIn.set(node.instanceId, region);
    await this.moveTags(region, attempt, byRank(nodes));
  }

  /** Tags the kept nodes with the attempt that ended (TagKey.heldAfter), which their agents poll. */
  async hold(jobId: string, attempt: number, keep: { readonly placement: Placement; readonly nodes: readonly InstanceRef[] }): Promise<void> {
    if (keep.nodes.length === 0) return;
    const { region } = keep.placement;
    const Resources = keep.nodes.map((node) => node.instanceId);
    const Tags = [{ Key: TagKey.heldAfter, Value: String(attempt) }];
    await this.withRetries(`EC2 CreateTags in ${region} (hold job ${jobId}'s nodes after attempt ${attempt})`, () => this.deps.ec2(region).send(new CreateTagsCommand({ Resources, Tags })));
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
    templates: AttemptLaunchTemplates,
    joining?: Joining,
  ): Promise<Attempted> {
    const { region } = fleet;
    const input = await this.createFleetInput(request, fleet, index, candidates, templates, joining);
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
    const numNodes = joining?.ranks.length ?? request.spec.numNodes;
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
      const launched: InstanceRef[] = instances.map((instance, index) => ({
        instanceId: instance.InstanceId as string,
        nodeRank: joining === undefined ? index : (joining.ranks[index] as number),
        privateIp: instance.PrivateIpAddress ?? null,
        ...(instance.LaunchTime === undefined ? {} : { runningAt: instance.LaunchTime.toISOString() }),
      }));
      let nodes: readonly InstanceRef[] = launched;
      if (joining === undefined) {
        await this.tagNodes(region, launched);
        await this.putSecrets(request, region, account, launched);
      } else {
        nodes = await joining.settle(launched, account);
      }
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
        price: await this.spotPrices.priceAt(region, zone, instanceType, fleet.market, first?.LaunchTime ?? new Date()),
      };
      return { launched: { placement, instances: nodes } };
    } catch (error) {
      // Only what this fleet launched: kept nodes stay for the release of the attempt they serve.
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
    templates: AttemptLaunchTemplates,
    joining?: Joining,
  ): Promise<CreateFleetCommandInput> {
    const numNodes = joining?.ranks.length ?? request.spec.numNodes;
    const groupName = joining?.groupName ?? null;
    const network = this.config.regions.find((region) => region.region === fleet.region);
    const byTemplate = new Map<string, { data: RequestLaunchTemplateData; overrides: FleetLaunchTemplateOverridesRequest[] }>();
    candidates.forEach(({ override, image }, priority) => {
      const data = launchTemplateData({
        namePrefix: this.config.namePrefix,
        request,
        instanceType: override.instanceType,
        image,
        userData: this.userData(request, fleet.region, override.instanceType),
        instanceProfileArn: this.config.instanceProfileArn,
        securityGroupIds: network?.securityGroupIds ?? [],
        defaultDiskSizeGb: this.config.defaultDiskSizeGb,
      });
      const key = JSON.stringify(data);
      const entry = byTemplate.get(key) ?? { data, overrides: [] };
      entry.overrides.push({
        InstanceType: override.instanceType as FleetLaunchTemplateOverridesRequest['InstanceType'],
        ...(override.zone === null ? {} : { SubnetId: network?.subnetsByZone[override.zone] }),
        ...(fleet.prioritized ? { Priority: priority } : {}),
        // Beside kept nodes in a placement group (EFA's low latency needs it): in the same one.
        ...(groupName === null ? {} : { Placement: { GroupName: groupName } }),
      });
      byTemplate.set(key, entry);
    });
    const LaunchTemplateConfigs = await Promise.all(
      [...byTemplate.values()].map(async ({ data, overrides }) => ({
        LaunchTemplateSpecification: { LaunchTemplateId: await templates.ensure(fleet.region, data), Version: '$Latest' },
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

  /** The agent for this type, region and attempt (launchUserData). */
  private userData(request: LaunchRequest, region: string, instanceType: string): string {
    const settings = {
      apiUrl: this.config.apiUrl,
      namePrefix: this.config.namePrefix,
      heartbeatSeconds: this.config.heartbeatSeconds ?? HEARTBEAT_INTERVAL_SECONDS,
      data: this.config.data,
      logs: this.config.logs,
    };
    return launchUserData(settings, request, region, instanceType);
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

  /**
   * Tags each node with its rank and the IP of every node of `ipsOf` (rank order; by
   * default `nodes` themselves), which its agent reads from IMDS; a kept node among them
   * (reusedFrom set) with `keptTags` too.
   */
  private async tagNodes(
    region: string,
    nodes: readonly InstanceRef[],
    { ipsOf = nodes, keptTags = [] }: { readonly ipsOf?: readonly InstanceRef[]; readonly keptTags?: readonly { Key: string; Value: string }[] } = {},
  ): Promise<void> {
    const ips = ipsOf.map((node) => node.privateIp);
    if (ips.some((ip) => ip === null)) throw new UnexpectedCloudResponseError(`nodes without a private IP in ${region}: ${ipsOf.filter((node) => node.privateIp === null).map((node) => node.instanceId).join(', ')}`);
    const ipTags = nodeIpsTags(ips as string[]);
    for (const node of nodes) {
      // A kept node carries the attempt it served until now: it moves to this one.
      const Tags = [...(node.reusedFrom === undefined ? [] : keptTags), { Key: TagKey.nodeRank, Value: String(node.nodeRank) }, ...ipTags];
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
      // A kept node's parameter holds the attempt it served's secret: rewritten, or its agent could not prove this one.
      if (node.reusedFrom === undefined) await this.withRetries(`SSM PutParameter in ${region}`, () => this.deps.parameters.putSecret(region, secret));
      else await this.withRetries(`SSM PutParameter in ${region} (overwrite)`, () => this.deps.parameters.rewriteSecret(region, secret));
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
}

/** How many more times launched instances are described before their IPs count as missing. */
const DESCRIBE_LOOKS = 5;

/**
 * The same token for every try of one (job, attempt, region, request): a CreateFleet
 * retried after an InternalError whose launch went through returns those instances
 * instead of launching a second set. Too long, or not ASCII, it is hashed.
 */
export function fleetClientToken(request: Pick<LaunchRequest, 'jobId' | 'attempt'>, region: string, index: number): string {
  return boundedToken(`${request.jobId}-${request.attempt}-${region}-${index}`);
}

/**
 * The most failed candidates a reason or a placement names: a fleet may hold 300, and
 * both are stored with the job (DynamoDB's 400 KB item).
 */
export const MAX_LISTED_FAILURES = 40;

/** The nodes in rank order. */
function byRank(nodes: readonly InstanceRef[]): InstanceRef[] {
  return [...nodes].sort((a, b) => a.nodeRank - b.nodeRank);
}

/** The ranks of a task of `numNodes` that none of `nodes` covers. */
function missingRanks(numNodes: number, nodes: readonly InstanceRef[]): number[] {
  return Array.from({ length: numNodes }, (_, rank) => rank).filter((rank) => !nodes.some((node) => node.nodeRank === rank));
}

/** `1 kept node`, `3 kept nodes`. */
function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

/** The first MAX_LISTED_FAILURES, then how many more. */
function capped(failures: readonly string[]): string[] {
  if (failures.length <= MAX_LISTED_FAILURES) return [...failures];
  return [...failures.slice(0, MAX_LISTED_FAILURES), `and ${failures.length - MAX_LISTED_FAILURES} more`];
}

/** Refuses ports the deployment does not open, before anything launches. */
function assertPortsOpen(spec: TaskSpec, open: readonly PortRange[]): void {
  const [problem] = portProblems(spec, open);
  if (problem !== undefined) throw new PrecheckError(`${problem.path}: ${problem.message}`);
}
