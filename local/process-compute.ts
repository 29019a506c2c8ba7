// LocalProcessCompute: EC2 with the machines swapped for process groups. Each node of an
// attempt is a local "instance": the real agent script (the user data EC2 runs) in a
// process group and a folder of its own, reaching the local API over HTTP through its
// own network path, with stand-ins for IMDS and for `shutdown`. The compute emits what
// EventBridge delivers about an instance, and injects the chaos plan's faults, the
// emulated boot of a new node among them. A node an attempt keeps from the one before
// (restart in place) is the same running agent, moved to the new attempt.

import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { localPriceOf } from '../lib/accounting/prices.ts';
import { agentMounts } from '../lib/agent/mounts.ts';
import { renderAgentScript, shellQuote } from '../lib/agent/script.ts';
import { agentSecretName, agentSecretPath, agentSecretValue, instanceArn } from '../lib/agent/secret-parameter.ts';
import { NODE_IPS_TAG_PREFIX, nodeIpsTags, TagKey } from '../lib/agent/tags.ts';
import { NoCapacityError, PrecheckError } from '../lib/errors.ts';
import type { InstanceRef, Placement } from '../lib/model.ts';
import { resourceChoices } from '../lib/launch-plan.ts';
import type { Compute, LaunchRequest, LaunchResult } from '../lib/ports.ts';
import { errorMessage } from '../lib/usecases/deps.ts';
import { INSTANCE_GONE_STATES, type InstanceEvent } from '../lib/usecases/instance-event.ts';
import { HEARTBEAT_TIMEOUT_SECONDS } from '../lib/workflow/contract.ts';
import type { ChaosFault, ChaosPlan } from '../lib/chaos-file/types.ts';
import { faultsOfAttempt, NO_CHAOS } from './chaos.ts';
import { jobWorkDir, linkNodeDir, nodeDir, nodeDiskDir, sourcesDir } from './paths.ts';
import { localMountPlaces } from './mounts.ts';
import { INSTANCE_MARK, killMarked, makeNodeCgroup, markedProcesses, processGroupOf, removeNodeCgroup, signalGroup, signalMarked } from './process-groups.ts';
import { removeContainer } from './docker.ts';
import { LocalSecretParameters, newNodeCredentials } from './secret-parameters.ts';
import type { Credentials } from './sigv4.ts';

/** Where a local instance's news goes: the use case EventBridge's rule invokes on AWS. */
export type InstanceEventSink = (event: InstanceEvent) => Promise<void>;

/** Options of the local compute. */
export interface LocalProcessComputeOptions {
  /** Holds each node's folder (`nodes/<job>/<attempt>/<rank>`) and each job's working folder. */
  readonly dataDir: string;
  /** The local API's base URL, known once its server listens. */
  readonly apiUrl: () => string;
  /** Delivers EC2's events about the instances. */
  readonly events: InstanceEventSink;
  /** The faults to inject into a job's attempts. @default no faults */
  readonly chaos?: (jobId: string) => ChaosPlan;
  /** Heartbeat period of the agents. @default 30000 */
  readonly heartbeatIntervalMs?: number;
  /**
   * The controller's heartbeat timeout (the local workflow's): an agent keeps trying a
   * report its runtime does not acknowledge for twice this long (localReportRetrySeconds).
   * @default HEARTBEAT_TIMEOUT_SECONDS * 1000
   */
  readonly heartbeatTimeoutMs?: number;
  /** Reports a failure no caller waits for (an event the use case could not apply). */
  readonly onError?: (error: unknown) => void;
}

/** An instance's life, as EC2 names its states: `pending` while its emulated boot lasts. */
export type LocalInstanceState = 'pending' | 'running' | 'shutting-down' | 'terminated';

/** One node of one attempt. */
export interface LocalInstance {
  readonly instanceId: string;
  readonly jobId: string;
  /** The attempt it serves: a node kept for the next attempt moves to it (launch with `keep`). */
  attempt: number;
  /**
   * The attempt it served before this one, when it was kept (its `next` route stays open
   * to it: the agent may ask again once it has moved); null for a node launched for it.
   */
  servedBefore: number | null;
  readonly rank: number;
  /** The node's folder (of the attempt it was launched for): the agent's root, with its scripts, logs and reports. */
  readonly rootDir: string;
  /** Instance tags, as IMDS serves them under `tags/instance/` (a hold adds one, as CreateTags would). */
  readonly tags: Map<string, string>;
  /** IMDSv2 session tokens handed out to this instance. */
  readonly imdsTokens: Set<string>;
  /** The credential in the path of the node's routes (node-network.ts): only its agent has it. */
  readonly routeToken: string;
  /** Its ARN, as a request signed with its credentials names it (ec2:SourceInstanceARN). */
  readonly arn: string;
  /** Its instance role's credentials, as IMDS hands them out. */
  readonly credentials: Required<Credentials>;
  /** Whether its agent runs the task in a Docker container, which outlives the node's group. */
  readonly container: boolean;
  state: LocalInstanceState;
  /** Set when the node's network is cut (a `silence` fault): the API does not answer it. */
  networkCut: boolean;
  /**
   * The spot interruption notice its instance metadata serves (`spot/instance-action`, as
   * EC2 writes it), once a `preempt` fault has warned; null before.
   */
  interruptionNotice: string | null;
  /**
   * Looks at `spot/instance-action` held open (node-network.ts) until a notice comes or the
   * instance stops running: each is woken by calling it.
   */
  readonly heldNoticeLooks: Set<() => void>;
  /**
   * The node's launcher, leader of its process group: it runs the agent at once, or once
   * its emulated boot is over (it waits on a pipe the compute writes to then).
   */
  readonly child: ChildProcess;
  /** The group's id (the agent's pid); 0 when the process could not be started. */
  readonly pgid: number;
  readonly timers: Set<NodeJS.Timeout>;
  /** Resolves once the instance is terminated and its processes are gone. */
  readonly terminated: Promise<void>;
  markTerminated(): void;
}

/** Launch tries per attempt: a local "region" has this many places to look for capacity. */
export const LOCAL_LAUNCH_TRIES = 3;
/** The pause between two launch tries that found no capacity. */
const LAUNCH_TRY_GAP_MS = 100;
/**
 * A local job's grace period between SIGTERM and SIGKILL when its node stops (a cancel, a
 * release, a spot interruption): shorter than EC2's, as nothing local waits on it.
 */
export const LOCAL_STOP_GRACE_SECONDS = 10;
/**
 * How long an instance's agent gets to end once it is told to (SIGTERM to its group): the
 * job's grace period, which the agent runs in full, then time for it to clean up and end.
 */
const SHUTDOWN_GRACE_MS = (LOCAL_STOP_GRACE_SECONDS + 5) * 1000;
/**
 * Once the agent has ended, how long what is left of the node (a daemon that left the job's
 * session) gets between the operating system's SIGTERM and SIGKILL.
 */
const OS_SHUTDOWN_GRACE_MS = 5_000;
/**
 * How long a local agent pauses between two looks at its instance metadata for a spot
 * interruption notice (each look is held up to NOTICE_HOLD_MS while there is none).
 */
const LOCAL_INTERRUPTION_POLL_SECONDS = 0.5;
/** How often a local standby asks whether to go on to run: the local API costs nothing to ask. */
export const LOCAL_HOLD_POLL_SECONDS = 0.2;
/**
 * With launch_on_warning, how long before the instance goes a local job's grace period
 * must have ended: the local agent's cleanup takes well under this.
 */
export const LOCAL_WARNING_STOP_MARGIN_SECONDS = 2;
/**
 * How long a local agent tries a report its runtime does not acknowledge, in whole seconds:
 * twice the controller's heartbeat timeout, the rule REPORT_RETRY_SECONDS follows on EC2.
 * An agent that gave up sooner would shut its node down while the controller still waits
 * for its report, and the node's end would make the attempt LOST: a healthy job relaunched
 * because its runtime was busy (200 jobs at once on two cores answered some reports only
 * after a minute). Past this, the controller has ended the attempt on its own clock.
 */
export function localReportRetrySeconds(heartbeatTimeoutMs: number): number {
  return Math.max(1, Math.ceil((2 * heartbeatTimeoutMs) / 1000));
}
/** How long a local agent waits before its second pull of an image (its own machine's docker). */
const LOCAL_PULL_RETRY_SECONDS = 1;
/**
 * How often a shutting-down group is looked at: every 25 ms at first, each pause twice the
 * last up to half a second. A look reads every process's environment in /proc, in the
 * event loop: at 25 ms throughout, nodes slow to end (200 at once on a busy machine) kept
 * the runtime reading /proc most of the time, and its agents' calls waited.
 */
const GROUP_POLL_FIRST_MS = 25;
const GROUP_POLL_MAX_MS = 500;
/** How many emitted events the compute keeps. */
const EMITTED_KEPT = 10_000;
/** The instance type local placements report. */
export const LOCAL_INSTANCE_TYPE = 'local-process';
/** Where local placements are, and the account local ARNs name. */
export const LOCAL_REGION = 'local';
const LOCAL_ACCOUNT = '000000000000';
/** The folder of local agents' secrets, as agentSecretPath names it on AWS. */
export const LOCAL_SECRET_PATH = agentSecretPath('relaunch-local');

/** Ends every held look at an instance's `spot/instance-action`: a notice came, or the instance is going. */
export function wakeHeldNoticeLooks(instance: LocalInstance): void {
  for (const wake of [...instance.heldNoticeLooks]) wake();
}

/**
 * The agent's `shutdown -h now`, locally: leave a mark in the node's folder ($1) and end
 * the agent. The instance then goes away: the compute terminates what is left of it.
 */
function shutdownStandIn(rootDir: string): string {
  return `: >${shellQuote(path.join(rootDir, 'shutdown'))}; exit 0`;
}

/**
 * cloud-init's part, locally: the node's launcher joins the node's cgroup ($2, when it has
 * one) before anything starts, then runs the agent ($1) as its child, in the launcher's own
 * process group and session, as cloud-init runs user data. The runtime holds a pipe on fd 3:
 * when the runtime dies, even by SIGKILL, the pipe closes and the watcher kills the node's
 * cgroup, the job's process group (the agent writes its id and its leader's start time to
 * phase.group while the group lives; a leader with another start time is a process that
 * took the id since, and is left alone) and its own group; what still got away is found by its mark when the next runtime opens the folder.
 * The agent's own log (its stderr; cloud-init-output.log on EC2) goes to agent.log. The
 * agent's command is not the launcher's last, so the launcher waits for it rather than
 * becoming it.
 */
const NODE_LAUNCHER = [
  'if [ -n "$2" ]; then echo "$$" >"$2/cgroup.procs"; fi',
  '( cat <&3 >/dev/null; if [ -n "$2" ]; then echo 1 >"$2/cgroup.kill"; fi; if read -r g t <phase.group; then s=; if read -r s </proc/"$g"/stat; then read -r -a s <<<"${s##*) }"; s=${s[19]}; fi; if [ -z "$s" ] || [ -z "$t" ] || [ "$s" = "$t" ]; then kill -KILL -- "-$g"; fi; fi; kill -KILL -- "-$$" ) 3<&3 4<&- >/dev/null 2>&1 &',
  'exec 3<&-',
  // A booting node ($3): the agent starts once the runtime writes a line on fd 4 (its boot
  // is over); a runtime gone first closes the pipe, and the node ends without running it.
  'if [ "$3" = booting ]; then read -r _ <&4 || exit 0; exec 4<&-; fi',
  'bash "$1" 2>>agent.log',
  'exit "$?"',
].join('\n');

/** The instance id of a local node. */
export function localInstanceId(jobId: string, attempt: number, rank: number): string {
  return `local-${jobId}-${attempt}-${rank}`;
}

/** Local attempts as process groups running the agent. */
export class LocalProcessCompute implements Compute {
  private readonly instances = new Map<string, LocalInstance>();
  /** Every instance this compute started: a record of one it no longer holds is gone, not orphaned. */
  private readonly started = new Set<string>();
  /**
   * The events the instances emitted, delivered or not, oldest first: the last
   * EMITTED_KEPT of them, for tests and for a look at what a runtime did.
   */
  readonly emitted: { readonly event: InstanceEvent; readonly delivered: boolean }[] = [];
  private readonly pending = new Set<Promise<void>>();
  /** The agents' secrets, as SSM holds them on AWS; each node reads its own over its network. */
  readonly secretParameters = new LocalSecretParameters();
  /** Set by releaseAll: the runtime is going, so nothing launches and no event is delivered. */
  private closing = false;

  constructor(private readonly options: LocalProcessComputeOptions) {}

  /**
   * Starts the nodes of the attempt as process groups. With candidates (`any_of`,
   * `ordered`, several markets) a local machine is none of them: the attempt runs as the
   * first one (resourceChoices' preference: its accelerators count as the node's GPUs),
   * and the placement records its market and entry.
   *
   * With `keep`, the kept nodes still running are the same agents, moved to this attempt
   * (moveToAttempt: no boot, their secret rewritten, reusedFrom set), and only the ranks
   * they do not cover are started, in the kept placement; a kept node that is gone, going
   * or warned is started anew. No capacity (the chaos plan's) leaves the kept nodes as
   * they were, for the caller to release. A new node's emulated boot (the plan's bootMs)
   * makes it `pending` that long, and its runningAt is the boot's end; the launch does not
   * wait for it, as RunInstances does not (AwaitBoot waits, on boot_timeout's clock).
   *
   * With `beside` (a standby of the warned node alone), only the ranks its nodes do not
   * cover are started, in its placement; those nodes keep serving the attempt they serve
   * (join moves them), and their secret parameters get this attempt's secret now, as EC2's
   * launcher rewrites them.
   */
  async launch(request: LaunchRequest): Promise<LaunchResult> {
    const { jobId, attempt } = request;
    const choice = resourceChoices(request.spec.resources, request.market)[0];
    const spec = choice === undefined ? request.spec : { ...request.spec, resources: choice.resources };
    if (this.closing) throw new Error('the local runtime is shutting down');
    const kept = this.keptInstances(request);
    const beside = new Set((request.beside?.nodes ?? []).map((node) => node.nodeRank));
    const missing = Array.from({ length: spec.numNodes }, (_, rank) => rank).filter((rank) => !kept.has(rank) && !beside.has(rank));
    const plan = this.chaosOf(jobId);
    // A relaunch that keeps every node launches nothing, so it asks EC2 for no capacity.
    if (missing.length > 0) await this.findCapacity(request, faultsOfAttempt(plan, attempt));
    if (this.closing) throw new Error('the local runtime is shutting down');
    const workDir = jobWorkDir(this.options.dataDir, jobId);
    mkdirSync(workDir, { recursive: true });
    const ips = Array.from({ length: spec.numNodes }, () => '127.0.0.1');
    const bootMs = plan.bootMs ?? 0;
    const started: LocalInstance[] = [];
    try {
      for (const rank of missing) started.push(this.startNode({ ...request, spec }, rank, workDir, ips, bootMs));
      await Promise.all(started.map((instance) => spawned(instance.child)));
    } catch (error) {
      await Promise.all(started.map((instance) => this.terminate(instance)));
      throw new PrecheckError(`could not start the nodes of attempt ${attempt}: ${errorMessage(error)}`);
    }
    // Every new node's process is up: the local instance is running (lib/accounting counts
    // from here), or it will be once its boot is over. A kept node serves this attempt from now.
    const now = Date.now();
    const secret = agentSecretValue(request.callbackSecret, request.secrets);
    const reusedFrom = new Map([...kept].map(([rank, instance]) => [rank, this.moveToAttempt(instance, request, ips, secret)]));
    for (const node of request.beside?.nodes ?? []) {
      const instance = this.instances.get(node.instanceId);
      if (instance?.jobId !== jobId || instance.state !== 'running') continue;
      this.secretParameters.put(agentSecretName(LOCAL_SECRET_PATH, instance.instanceId), secret, instance.arn);
    }
    const nodes = [...started, ...kept.values()].sort((a, b) => a.rank - b.rank);
    return {
      placement: request.keep?.placement ?? request.beside?.placement ?? {
        region: LOCAL_REGION,
        zone: null,
        instanceType: LOCAL_INSTANCE_TYPE,
        ...(choice?.entry == null ? {} : { market: choice.market, entry: choice.entry }),
        price: localPriceOf(spec.resources, choice?.market ?? request.market),
      },
      instances: nodes.map((instance) => {
        const from = reusedFrom.get(instance.rank);
        return {
          instanceId: instance.instanceId,
          nodeRank: instance.rank,
          privateIp: '127.0.0.1',
          processGroupId: instance.pgid,
          runningAt: new Date(from === undefined ? now + bootMs : now).toISOString(),
          ...(from === undefined ? {} : { reusedFrom: from }),
        };
      }),
    };
  }

  /**
   * The request's kept nodes this attempt can run on, by rank: this job's, running, not
   * warned of an interruption (it goes soon), of an earlier attempt (or moved to this one
   * by a launch that is being tried again), one per rank of the task. Any other is
   * launched anew.
   */
  private keptInstances(request: LaunchRequest): Map<number, LocalInstance> {
    const kept = new Map<number, LocalInstance>();
    for (const node of request.keep?.nodes ?? []) {
      const instance = this.instances.get(node.instanceId);
      if (instance === undefined || instance.jobId !== request.jobId || instance.state !== 'running') continue;
      const movedHere = instance.attempt === request.attempt && instance.servedBefore !== null;
      if (instance.interruptionNotice !== null || (instance.attempt >= request.attempt && !movedHere)) continue;
      if (instance.rank !== node.nodeRank || node.nodeRank >= request.spec.numNodes || kept.has(node.nodeRank)) continue;
      kept.set(node.nodeRank, instance);
    }
    return kept;
  }

  /**
   * The kept nodes among `nodes` (reusedFrom set) serve `attempt` from now, an adopted
   * standby launched beside them: moved as a launch with `keep` moves them, but for their
   * secret, which that standby's launch wrote. A node gone, or not this job's, is left.
   */
  async join(jobId: string, attempt: number, _placement: Placement, nodes: readonly InstanceRef[]): Promise<void> {
    const ips = nodes.map(() => '127.0.0.1');
    for (const node of nodes) {
      const instance = this.instances.get(node.instanceId);
      if (node.reusedFrom === undefined || instance?.jobId !== jobId || instance.state !== 'running' || instance.attempt > attempt) continue;
      this.moveToAttempt(instance, { jobId, attempt }, ips, null);
    }
  }

  /**
   * Moves a kept node to `to`'s attempt, as EC2's launcher does with CreateTags and
   * PutParameter: its tags name the new attempt and peers (held-after removed), its secret
   * parameter holds `secret` (the new attempt's callback secret and the job's secrets;
   * null: written already), and the faults of the attempt it served are called off (the
   * new attempt's apply to it). Returns the attempt it served.
   */
  private moveToAttempt(instance: LocalInstance, to: { readonly jobId: string; readonly attempt: number }, ips: readonly string[], secret: string | null): number {
    const saySecret = (): void => {
      if (secret !== null) this.secretParameters.put(agentSecretName(LOCAL_SECRET_PATH, instance.instanceId), secret, instance.arn);
    };
    // The new attempt's folder of this rank is the node's own folder (the agent's root, where
    // it keeps writing): readers find the attempt's files through it (paths.ts attemptFile).
    linkNodeDir(this.options.dataDir, to.jobId, to.attempt, instance.rank, instance.rootDir);
    // Moved already (the launch is tried again): its secret is said again, the rest stands.
    if (instance.attempt === to.attempt && instance.servedBefore !== null) {
      saySecret();
      return instance.servedBefore;
    }
    const previous = instance.attempt;
    for (const timer of instance.timers) clearTimeout(timer);
    instance.timers.clear();
    instance.networkCut = false;
    instance.servedBefore = previous;
    instance.attempt = to.attempt;
    for (const key of [...instance.tags.keys()]) if (key.startsWith(NODE_IPS_TAG_PREFIX)) instance.tags.delete(key);
    // The held-after tag stays, as on EC2: it names the attempt that ended, which the agent
    // may not have seen yet (a launch can follow the hold within milliseconds).
    instance.tags.set(TagKey.attempt, String(to.attempt));
    instance.tags.set(TagKey.nodeRank, String(instance.rank));
    for (const tag of nodeIpsTags(ips)) instance.tags.set(tag.Key, tag.Value);
    saySecret();
    // It is up already: the new attempt's faults that count from a node's start count from now.
    this.scheduleFaults(instance, 'boot');
    return previous;
  }

  /**
   * Tags the kept nodes with the attempt that ended (TagKey.heldAfter), as EC2 would; their
   * agents poll it. A node that serves another attempt by now (a hold said again after the
   * next attempt took it) is left alone: the tag would stop that attempt's job.
   */
  async hold(jobId: string, attempt: number, keep: { readonly nodes: readonly InstanceRef[] }): Promise<void> {
    for (const node of keep.nodes) {
      const instance = this.instances.get(node.instanceId);
      if (instance === undefined || instance.jobId !== jobId || instance.attempt !== attempt || instance.state === 'terminated') continue;
      instance.tags.set(TagKey.heldAfter, String(attempt));
    }
  }

  /**
   * Terminates the attempt's instances but those in `except` (kept for the next attempt);
   * a node kept and moved to a later attempt is that attempt's, not this one's.
   */
  async release(jobId: string, attempt: number, recorded: readonly InstanceRef[], options: { readonly except?: readonly string[] } = {}): Promise<void> {
    const except = new Set(options.except ?? []);
    const known = [...this.instances.values()].filter((i) => i.jobId === jobId && i.attempt === attempt && !except.has(i.instanceId));
    await Promise.all(known.map((instance) => this.terminate(instance)));
    // Instances a runtime that is gone started: found by their mark, and their containers by name.
    for (const ref of recorded) {
      if (this.started.has(ref.instanceId) || ref.processGroupId === undefined || except.has(ref.instanceId)) continue;
      killMarked(ref.instanceId, ref.processGroupId);
      removeNodeCgroup(ref.instanceId);
      await removeContainer(ref.instanceId);
    }
  }

  /**
   * Terminates every instance (shutdown of the runtime) and waits for pending events. The
   * runtime's API goes with it, so the nodes are cut off first and a job stopped now sends
   * nothing: its logs stay in its node's folder, and an exit code a node wrote there before
   * is read by the next runtime on the data folder (left-reports.ts).
   */
  async releaseAll(): Promise<void> {
    this.closing = true;
    for (const instance of this.instances.values()) instance.networkCut = true;
    await Promise.all([...this.instances.values()].map((instance) => this.terminate(instance)));
    await Promise.all([...this.pending]);
  }

  /** The instance with this id, while the runtime knows it. */
  instance(instanceId: string): LocalInstance | undefined {
    return this.instances.get(instanceId);
  }

  /** Process group ids of instances not yet terminated. */
  liveGroups(): number[] {
    return [...this.instances.values()].filter((i) => i.state !== 'terminated').map((i) => i.pgid);
  }

  /**
   * The node's `run` phase started (its setup report was acknowledged with exit 0): the
   * chaos plan's clocks for that node start now.
   */
  runStarted(instanceId: string): void {
    const instance = this.instances.get(instanceId);
    if (instance === undefined || instance.state !== 'running') return;
    this.scheduleFaults(instance, 'run');
  }

  /** Starts the clocks of the node's faults that count from `from` (its start, or its run's). */
  private scheduleFaults(instance: LocalInstance, from: 'boot' | 'run'): void {
    for (const fault of faultsOfAttempt(this.chaosOf(instance.jobId), instance.attempt)) {
      if (!('node' in fault) || fault.node !== instance.rank) continue;
      if ((fault.kind === 'silence' && fault.from === 'boot' ? 'boot' : 'run') !== from) continue;
      this.schedule(instance, fault.afterMs, () => this.strike(instance, fault));
    }
  }

  private chaosOf(jobId: string): ChaosPlan {
    return this.options.chaos?.(jobId) ?? NO_CHAOS;
  }

  /** EC2's capacity, as the chaos plan allows: `no_capacity: N` fails the first N tries. */
  private async findCapacity(request: LaunchRequest, faults: readonly ChaosFault[]): Promise<void> {
    const refusals = faults.reduce((n, fault) => (fault.kind === 'no_capacity' ? n + fault.tries : n), 0);
    if (refusals === 0) return;
    const tried: string[] = [];
    for (let attemptNo = 1; attemptNo <= LOCAL_LAUNCH_TRIES; attemptNo += 1) {
      if (attemptNo > refusals) return;
      tried.push(`${LOCAL_INSTANCE_TYPE} try ${attemptNo}: InsufficientInstanceCapacity (chaos file)`);
      if (attemptNo < LOCAL_LAUNCH_TRIES) await sleep(LAUNCH_TRY_GAP_MS);
    }
    throw new NoCapacityError(
      `no capacity for job ${request.jobId} attempt ${request.attempt} (${request.market}, ${request.spec.numNodes} node(s)): tried ${tried.join(', ')}`,
    );
  }

  private startNode(request: LaunchRequest, rank: number, workDir: string, ips: readonly string[], bootMs: number): LocalInstance {
    const { jobId, attempt, spec } = request;
    const instanceId = localInstanceId(jobId, attempt, rank);
    const rootDir = nodeDir(this.options.dataDir, jobId, attempt, rank);
    mkdirSync(rootDir, { recursive: true });
    // The node's routes answer only a caller with this in the path, as IMDS answers only its instance.
    const routeToken = randomBytes(32).toString('base64url');
    const network = `${this.options.apiUrl()}/_node/${encodeURIComponent(instanceId)}/${routeToken}`;
    const arn = instanceArn(LOCAL_REGION, LOCAL_ACCOUNT, instanceId);
    // Written before the node starts: on EC2 the launcher writes it once the instance
    // exists, and an agent that asks first is refused and asks again.
    this.secretParameters.put(agentSecretName(LOCAL_SECRET_PATH, instanceId), agentSecretValue(request.callbackSecret, request.secrets), arn);
    // A task with a workdir or mounts gets a disk per node, as each instance has its own.
    const disk = spec.workdir !== null || spec.gitWorkdir !== undefined || spec.fileMounts !== undefined ? nodeDiskDir(this.options.dataDir, jobId, attempt, rank) : null;
    const script = renderAgentScript({
      apiUrl: network,
      imdsUrl: `${network}/imds`,
      jobId,
      attempt,
      secretSource: { path: LOCAL_SECRET_PATH, region: LOCAL_REGION, endpoint: `${network}/ssm` },
      spec,
      heartbeatSeconds: (this.options.heartbeatIntervalMs ?? 30_000) / 1000,
      rootDir,
      workDir,
      mounts: agentMounts(spec, jobId, localMountPlaces(this.options.dataDir)),
      sourcesUrl: sourcesDir(this.options.dataDir),
      ...(disk === null ? {} : { jobHome: path.join(disk, 'home'), mountRoot: path.join(disk, 'root') }),
      shutdownCommand: shutdownStandIn(rootDir),
      // A busy local runtime answers late, never refuses (agent-calls.ts): a report is retried soon.
      reportBackoff: { initialMs: 200, maxMs: 5_000 },
      reportRetrySeconds: localReportRetrySeconds(this.options.heartbeatTimeoutMs ?? HEARTBEAT_TIMEOUT_SECONDS * 1000),
      // Its rank, peers and secret come from the runtime (IMDS and SSM stand-ins), which a
      // busy machine may answer late: the agent waits for them as long as on EC2 (the
      // script's default), not less, for the same reason as its reports.
      stopGraceSeconds: LOCAL_STOP_GRACE_SECONDS,
      interruptionPollSeconds: LOCAL_INTERRUPTION_POLL_SECONDS,
      holdPollSeconds: LOCAL_HOLD_POLL_SECONDS,
      warningStopMarginSeconds: LOCAL_WARNING_STOP_MARGIN_SECONDS,
      pullRetrySeconds: LOCAL_PULL_RETRY_SECONDS,
    });
    const scriptFile = path.join(rootDir, 'user-data.sh');
    writeFileSync(scriptFile, script, { mode: 0o700 });
    const tags = new Map<string, string>([
      [TagKey.jobId, jobId],
      [TagKey.attempt, String(attempt)],
      [TagKey.nodeRank, String(rank)],
      ...nodeIpsTags(ips).map((tag): [string, string] => [tag.Key, tag.Value]),
    ]);
    const cgroup = makeNodeCgroup(instanceId);
    const booting = bootMs > 0;
    const child = spawn('bash', ['-c', NODE_LAUNCHER, 'relaunch-node', scriptFile, cgroup ?? '', booting ? 'booting' : ''], {
      cwd: rootDir,
      env: { ...process.env, [INSTANCE_MARK]: instanceId },
      detached: true,
      stdio: booting ? ['ignore', 'ignore', 'ignore', 'pipe', 'pipe'] : ['ignore', 'ignore', 'ignore', 'pipe'],
    });
    let markTerminated = (): void => undefined;
    const terminated = new Promise<void>((resolve) => {
      markTerminated = resolve;
    });
    const instance: LocalInstance = {
      instanceId,
      jobId,
      attempt,
      servedBefore: null,
      rank,
      rootDir,
      tags,
      imdsTokens: new Set(),
      routeToken,
      arn,
      credentials: newNodeCredentials(),
      container: spec.resources.containerImage !== undefined,
      state: booting ? 'pending' : 'running',
      networkCut: false,
      interruptionNotice: null,
      heldNoticeLooks: new Set(),
      child,
      pgid: child.pid ?? 0,
      timers: new Set(),
      terminated,
      markTerminated,
    };
    this.instances.set(instanceId, instance);
    this.started.add(instanceId);
    if (booting) {
      // Cleared with the instance's other timers when it ends during its boot.
      this.schedule(instance, bootMs, () => this.bootOver(instance));
    } else {
      child.once('spawn', () => void this.emit(instance, { kind: 'STATE_CHANGE', state: 'running' }));
      this.scheduleFaults(instance, 'boot');
    }
    // The agent ended: it shut the instance down, or it died. Either way the instance goes.
    child.once('exit', () => void this.terminate(instance));
    child.once('error', () => undefined);
    return instance;
  }

  /** A new node's emulated boot is over: its launcher starts the agent, and the instance runs. */
  private bootOver(instance: LocalInstance): void {
    if (instance.state !== 'pending') return;
    const gate = instance.child.stdio[4];
    if (gate === null || gate === undefined || !('write' in gate)) return;
    // A launcher gone meanwhile (killed from outside) closed its end: its exit ends the instance.
    gate.on('error', () => undefined);
    gate.end('boot\n');
    instance.state = 'running';
    void this.emit(instance, { kind: 'STATE_CHANGE', state: 'running' });
    this.scheduleFaults(instance, 'boot');
  }

  /** Applies one fault to a node whose run has started. */
  private strike(instance: LocalInstance, fault: ChaosFault): void {
    if (instance.state !== 'running') return;
    switch (fault.kind) {
      case 'preempt': {
        const notice = JSON.stringify({ action: 'terminate', time: new Date(Date.now() + fault.warningMs).toISOString() });
        this.schedule(instance, fault.warningMs, () => void this.terminate(instance));
        // The controller hears of the warning first, as it mostly does on AWS, where the
        // agent looks every 5 s: here a held look would answer the agent at once, and a job
        // that stops and reports before the warning is noted gets no standby.
        void this.emit(instance, { kind: 'SPOT_INTERRUPTION_WARNING' }).then(() => {
          if (instance.state !== 'running') return;
          instance.interruptionNotice = notice;
          wakeHeldNoticeLooks(instance);
        });
        return;
      }
      case 'rebalance':
        void this.emit(instance, { kind: 'REBALANCE_RECOMMENDATION' });
        return;
      case 'lose':
        void this.terminate(instance, { abrupt: true });
        return;
      case 'silence':
        instance.networkCut = true;
        // Cleared with the instance's other timers when it ends, so a gone node stays cut.
        if (fault.forMs !== undefined) this.schedule(instance, fault.forMs, () => (instance.networkCut = false));
        return;
      default:
        return;
    }
  }

  /**
   * The instance goes away: `shutting-down` (SIGTERM to the group, SIGKILL after a grace
   * period; its network still up, as an EC2 instance's is while its OS shuts down, so its
   * agent can send the stopped phase's last lines), then `terminated`. An abrupt end (a
   * lost instance) cuts its network and kills at once, and emits only `terminated`. Idempotent: resolves when the instance is gone.
   */
  private terminate(instance: LocalInstance, options: { abrupt?: boolean } = {}): Promise<void> {
    if (instance.state === 'shutting-down' || instance.state === 'terminated') return instance.terminated;
    for (const timer of instance.timers) clearTimeout(timer);
    instance.timers.clear();
    // A node still booting: its launcher reads the end of its pipe and ends without the agent.
    if (instance.state === 'pending') instance.child.stdio[4]?.destroy();
    const work = (async () => {
      if (options.abrupt === true) {
        instance.networkCut = true;
        instance.state = 'terminated';
        wakeHeldNoticeLooks(instance);
        signalGroup(instance.pgid, 'SIGKILL');
        killMarked(instance.instanceId, instance.pgid);
      } else {
        instance.state = 'shutting-down';
        wakeHeldNoticeLooks(instance);
        void this.emit(instance, { kind: 'STATE_CHANGE', state: 'shutting-down' });
        // The agent first, alone: it gives the job (its own session) one SIGTERM and its
        // whole grace period, then SIGKILL, and shuts down. Only then does the operating
        // system's shutdown signal what is left, as on EC2: a job signalled by both would
        // run its checkpoint handler twice.
        signalGroup(instance.pgid, 'SIGTERM');
        await this.waitForAgent(instance, SHUTDOWN_GRACE_MS);
        signalMarked(instance.instanceId, instance.pgid, 'SIGTERM');
        await this.waitForGroup(instance, OS_SHUTDOWN_GRACE_MS);
        // Only a group still seen alive: an empty one's id may be someone else's by now.
        if (markedProcesses(instance.instanceId, instance.pgid).length > 0) {
          signalGroup(instance.pgid, 'SIGKILL');
          killMarked(instance.instanceId, instance.pgid);
        }
        instance.state = 'terminated';
      }
      await this.waitForGroup(instance, SHUTDOWN_GRACE_MS);
      removeNodeCgroup(instance.instanceId);
      if (instance.container) await removeContainer(instance.instanceId);
      this.secretParameters.delete(agentSecretName(LOCAL_SECRET_PATH, instance.instanceId));
      void this.emit(instance, { kind: 'STATE_CHANGE', state: 'terminated' });
      this.instances.delete(instance.instanceId);
      instance.markTerminated();
    })();
    return work;
  }

  /**
   * Waits until the node's agent has ended, at most `ms`: it has left its shutdown mark (the
   * job is stopped by then), or no process of its group is alive.
   */
  private async waitForAgent(instance: LocalInstance, ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    const agentAlive = (): boolean =>
      !existsSync(path.join(instance.rootDir, 'shutdown')) && markedProcesses(instance.instanceId, instance.pgid).some((pid) => (processGroupOf(pid) ?? pid) === instance.pgid);
    for (let pause = GROUP_POLL_FIRST_MS; agentAlive() && Date.now() < deadline; pause = Math.min(pause * 2, GROUP_POLL_MAX_MS)) {
      await sleep(Math.min(pause, Math.max(0, deadline - Date.now())));
    }
  }

  /** Waits until no process of the node is alive (zombies aside), at most `ms`. */
  private async waitForGroup(instance: LocalInstance, ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    for (let pause = GROUP_POLL_FIRST_MS; markedProcesses(instance.instanceId, instance.pgid).length > 0 && Date.now() < deadline; pause = Math.min(pause * 2, GROUP_POLL_MAX_MS)) {
      await sleep(Math.min(pause, Math.max(0, deadline - Date.now())));
    }
  }

  /**
   * EventBridge's delivery. The rules forward interruption warnings, rebalance
   * recommendations and the states in which an instance is gone, so `running` is emitted
   * and never delivered; the chaos plan may drop the rest of an attempt's events.
   */
  /** Records an event and delivers it unless it is dropped; resolves once it is delivered (or not to be). */
  private emit(instance: LocalInstance, event: Omit<InstanceEvent, 'instanceId' | 'time'>): Promise<void> {
    const full: InstanceEvent = { ...event, instanceId: instance.instanceId, time: new Date().toISOString() };
    const forwarded = event.kind !== 'STATE_CHANGE' || (event.state !== undefined && event.state in INSTANCE_GONE_STATES);
    const dropped = faultsOfAttempt(this.chaosOf(instance.jobId), instance.attempt).some((f) => f.kind === 'drop_events');
    const delivered = forwarded && !dropped && !this.closing;
    this.emitted.push({ event: full, delivered });
    if (this.emitted.length > EMITTED_KEPT) this.emitted.splice(0, this.emitted.length - EMITTED_KEPT);
    if (!delivered) return Promise.resolve();
    const delivery = this.options.events(full).catch((error: unknown) => this.options.onError?.(error));
    this.pending.add(delivery);
    void delivery.finally(() => this.pending.delete(delivery));
    return delivery;
  }

  private schedule(instance: LocalInstance, ms: number, action: () => void): void {
    const timer = setTimeout(() => {
      instance.timers.delete(timer);
      action();
    }, ms);
    instance.timers.add(timer);
  }
}

/** Resolves once the process started; rejects with its spawn error (ENOENT, EAGAIN, E2BIG). */
function spawned(child: ChildProcess): Promise<void> {
  if (child.pid !== undefined) return Promise.resolve();
  return new Promise((resolve, reject) => {
    child.once('spawn', () => resolve());
    child.once('error', reject);
  });
}
