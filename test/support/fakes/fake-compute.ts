// A Compute that launches nothing: it records every call, and tests script what launch does.

import type { InstanceRef, Placement } from '../../../lib/model.ts';
import type { Compute, LaunchRequest, LaunchResult } from '../../../lib/ports.ts';

/** What the next launch does: place the attempt somewhere, or throw. */
export type LaunchScript = { readonly placement: Placement } | { readonly error: Error };

/** The placement a launch gets unless a test scripts another. */
export const DEFAULT_PLACEMENT: Placement = { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm5.large' };

/**
 * Launches succeed by default, with one instance per node named
 * `i-<attempt>-<rank>-<jobId>`; `scriptLaunch` queues other results, used in order.
 * Every request (with its callback secret, which only compute ever sees) and every
 * release is kept for assertions.
 */
export class FakeCompute implements Compute {
  readonly launches: LaunchRequest[] = [];
  readonly releases: { jobId: string; attempt: number; instances: readonly InstanceRef[]; except?: readonly string[] }[] = [];
  readonly holds: { jobId: string; attempt: number; nodes: readonly InstanceRef[] }[] = [];
  readonly joins: { jobId: string; attempt: number; nodes: readonly InstanceRef[] }[] = [];
  readonly #scripts: LaunchScript[] = [];
  /** The attempt each live instance serves now (a kept node moves to the attempt that took it). */
  readonly #serving = new Map<string, number>();
  /** Instances gone (reclaimed, or released) since they were launched. */
  readonly #gone = new Set<string>();

  /** Queues what the next launches do, in order. */
  scriptLaunch(...scripts: LaunchScript[]): this {
    this.#scripts.push(...scripts);
    return this;
  }

  /**
   * With `request.keep`, the kept nodes still running serve this attempt (reusedFrom: the
   * attempt they served), and only the ranks they do not cover are launched, in the kept
   * placement; a kept node gone (`reclaim`) is launched anew. With `request.beside` (a
   * standby of the warned node alone), only the ranks those nodes do not cover are
   * launched, and they keep serving the attempt they serve until join.
   */
  async launch(request: LaunchRequest): Promise<LaunchResult> {
    this.launches.push(request);
    const script = this.#scripts.shift() ?? { placement: request.keep?.placement ?? DEFAULT_PLACEMENT };
    if ('error' in script) throw script.error;
    const kept = new Map<number, InstanceRef>();
    for (const node of request.keep?.nodes ?? []) {
      const served = this.#serving.get(node.instanceId);
      if (served === undefined || this.#gone.has(node.instanceId)) continue;
      kept.set(node.nodeRank, { instanceId: node.instanceId, nodeRank: node.nodeRank, privateIp: node.privateIp, reusedFrom: served });
    }
    const beside = new Set((request.beside?.nodes ?? []).map((node) => node.nodeRank));
    const instances = instancesFor(request)
      .filter((fresh) => !beside.has(fresh.nodeRank))
      .map((fresh) => kept.get(fresh.nodeRank) ?? fresh);
    for (const instance of instances) this.#serving.set(instance.instanceId, request.attempt);
    return { placement: script.placement, instances };
  }

  /** Records the release; the instances named go, but those in `except`. */
  async release(jobId: string, attempt: number, instances: readonly InstanceRef[], options?: { readonly except?: readonly string[] }): Promise<void> {
    this.releases.push({ jobId, attempt, instances, ...(options?.except === undefined ? {} : { except: options.except }) });
    for (const instance of instances) if (!(options?.except ?? []).includes(instance.instanceId)) this.#gone.add(instance.instanceId);
  }

  /** An instance reclaimed by EC2 (or lost): a launch that would keep it launches its rank anew. */
  reclaim(instanceId: string): void {
    this.#gone.add(instanceId);
  }

  /** Whether an instance this fake launched is still running (neither released nor reclaimed). */
  isRunning(instanceId: string): boolean {
    return this.#serving.has(instanceId) && !this.#gone.has(instanceId);
  }

  async hold(jobId: string, attempt: number, keep: { readonly nodes: readonly InstanceRef[] }): Promise<void> {
    this.holds.push({ jobId, attempt, nodes: keep.nodes });
  }

  /** Records the join; the kept nodes among `nodes` serve `attempt` from now. */
  async join(jobId: string, attempt: number, _placement: Placement, nodes: readonly InstanceRef[]): Promise<void> {
    this.joins.push({ jobId, attempt, nodes });
    for (const node of nodes) if (node.reusedFrom !== undefined) this.#serving.set(node.instanceId, attempt);
  }

  /** The callback secret the agent of that attempt was given. */
  secretFor(jobId: string, attempt: number): string {
    const request = this.launches.find((launch) => launch.jobId === jobId && launch.attempt === attempt);
    if (request === undefined) throw new Error(`attempt ${attempt} of ${jobId} was never launched`);
    return request.callbackSecret;
  }
}

/** The instance ids the fake gives an attempt's nodes. */
export function fakeInstanceId(jobId: string, attempt: number, rank: number): string {
  return `i-${attempt}-${rank}-${jobId}`;
}

function instancesFor(request: LaunchRequest): InstanceRef[] {
  return Array.from({ length: request.spec.numNodes }, (_, rank) => ({
    instanceId: fakeInstanceId(request.jobId, request.attempt, rank),
    nodeRank: rank,
    privateIp: `10.0.0.${rank + 1}`,
  }));
}
