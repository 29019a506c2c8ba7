// Taking a deployment down (`cdk destroy`): every instance it launched is terminated, in
// every region it launches in, and every job still live in its table ends CANCELLED, so
// the table it keeps says what happened. CloudFormation runs this after it has deleted
// the functions that launch, so nothing launches behind it.

import type { Clock, Compute, InstanceInventory, JobSecrets, JobStore, LaunchTemplateInventory, JobEnded, TaggedInstance } from '../ports.ts';
import { isTerminal, JobStatus } from '../status.ts';
import { errorMessage, nowIso } from './deps.ts';
import { retryOnConflict } from './retry.ts';

/** The reason every job the take-down ends records. */
export const TAKEN_DOWN = 'the deployment was taken down (cdk destroy) while the job ran';

/** How many attempts' instances are released at once. */
export const RELEASES_AT_ONCE = 10;

/** What a take-down did; `left` says what it could not release, and why. */
export interface TakeDownResult {
  /** The instances terminated, by job and attempt. */
  readonly released: readonly { readonly jobId: string; readonly attempt: number; readonly instanceIds: readonly string[] }[];
  /** Instances still live after it, each with why (a failed release, or no attempt tag to release it by). */
  readonly left: readonly { readonly instanceIds: readonly string[]; readonly reason: string }[];
  /** The jobs it ended. */
  readonly ended: readonly JobEnded[];
  /** Launch templates of the deployment it deleted. */
  readonly templatesDeleted: number;
}

/**
 * Releases every live instance carrying the deployment's tag (the live attempts', their
 * standbys', and any a launch left unrecorded), deletes its launch templates, and ends
 * every live job CANCELLED (the live attempt ended CANCELLED with it, its secrets
 * deleted). A failed release does not stop the rest; it is in `left`, and a second run
 * (the next `cdk destroy`) tries again: every step is idempotent.
 */
export async function takeDownDeployment(deps: {
  readonly store: JobStore;
  readonly compute: Compute;
  readonly inventory: InstanceInventory;
  readonly templates: LaunchTemplateInventory;
  readonly secrets: JobSecrets;
  readonly clock: Clock;
}): Promise<TakeDownResult> {
  const { store, compute, inventory, templates, secrets, clock } = deps;
  const released: { jobId: string; attempt: number; instanceIds: string[] }[] = [];
  const left: { instanceIds: string[]; reason: string }[] = [];
  const groups = new Map<string, { jobId: string; attempt: number; instances: TaggedInstance[] }>();
  for (const instance of await inventory.listTagged()) {
    if (instance.attempt === null) {
      left.push({ instanceIds: [instance.instanceId], reason: `instance ${instance.instanceId} (${instance.region}) of job ${instance.jobId} has no attempt tag to release it by` });
      continue;
    }
    const key = `${instance.jobId}#${instance.attempt}`;
    const group = groups.get(key) ?? { jobId: instance.jobId, attempt: instance.attempt, instances: [] };
    group.instances.push(instance);
    groups.set(key, group);
  }
  // A release waits for its instances to go (up to 40 s): RELEASES_AT_ONCE at a time keep
  // a deployment with many live attempts within the function's 15 minutes.
  const pending = [...groups.values()];
  while (pending.length > 0) {
    await Promise.all(
      pending.splice(0, RELEASES_AT_ONCE).map(async ({ jobId, attempt, instances }) => {
        const instanceIds = instances.map((instance) => instance.instanceId);
        try {
          await compute.release(jobId, attempt, []);
          released.push({ jobId, attempt, instanceIds });
        } catch (error) {
          left.push({ instanceIds, reason: `job ${jobId} attempt ${attempt}: ${errorMessage(error)}` });
        }
      }),
    );
  }

  let templatesDeleted = 0;
  for (const template of await templates.listTagged()) {
    await templates.delete(template);
    templatesDeleted += 1;
  }

  const ended: JobEnded[] = [];
  for (const job of await store.listJobs()) {
    if (isTerminal(job.status)) continue;
    const at = nowIso(clock);
    const changed = await retryOnConflict(2, async () => {
      const current = await store.getJob(job.jobId);
      if (isTerminal(current.status)) return null;
      if (current.attemptCount > 0) {
        const attempt = await store.getAttempt(job.jobId, current.attemptCount);
        if (attempt.outcome === null) await store.endAttempt(job.jobId, attempt.attempt, { kind: 'CANCELLED' }, at);
      }
      await store.changeStatus(
        job.jobId,
        { from: current.status, to: JobStatus.CANCELLED, reason: TAKEN_DOWN, attempt: current.attemptCount > 0 ? current.attemptCount : null, at },
        { failureReason: TAKEN_DOWN },
      );
      return current.attemptCount > 0 ? { attempt: current.attemptCount } : {};
    });
    await secrets.delete(job.jobId);
    if (changed !== null) ended.push({ jobId: job.jobId, status: JobStatus.CANCELLED, reason: TAKEN_DOWN, ...changed });
  }
  return { released, left, ended, templatesDeleted };
}
