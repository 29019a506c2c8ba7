// The janitor's sweep: instances relaunch tagged whose attempt is over, or whose job it
// does not know, are terminated. ReleaseInstances does this for every attempt the machine
// decides; the sweep catches what it could not (an execution that ended mid-step, a
// release that ran out of retries, a launch whose result was never recorded).

import { JobNotFoundError, StaleAttemptError } from '../errors.ts';
import type { AttemptRecord, JobRecord } from '../model.ts';
import type { Clock, Compute, InstanceInventory, JobStore, TaggedInstance } from '../ports.ts';
import { isReleased } from '../standby-rules.ts';
import { isTerminal } from '../status.ts';
import { errorMessage } from './deps.ts';

/**
 * How long after its launch an instance, and after its end an attempt, is left to the
 * machine: ReleaseInstances runs seconds after a decision and retries for a few minutes.
 */
export const SWEEP_GRACE_SECONDS = 15 * 60;

/** One attempt whose instances the sweep released, and why. */
export interface SweptAttempt {
  readonly jobId: string;
  readonly attempt: number;
  readonly instanceIds: readonly string[];
  readonly reason: string;
}

/** What one sweep did. */
export interface SweepResult {
  /** Tagged live instances found. */
  readonly checked: number;
  readonly released: readonly SweptAttempt[];
  /** Releases that failed (the next sweep tries again), with the error. */
  readonly failed: readonly (SweptAttempt & { readonly error: string })[];
  /** Instances left running: their attempt is live, or too recent to judge. */
  readonly kept: number;
  /** Attempts left for the next sweep once this one's time budget was spent. */
  readonly deferred: number;
}

/**
 * How long one sweep may spend releasing: a release waits for its instances to go, so
 * many stale attempts would outlast the janitor's Lambda; the rest wait for the next run.
 */
export const SWEEP_BUDGET_SECONDS = 180;

/**
 * Finds relaunch's live instances and releases, attempt by attempt, those that:
 *
 * - belong to a job the table does not hold (deleted, or another deployment's table);
 * - belong to an attempt the job never recorded, or to a job that has ended;
 * - belong to an attempt that ended more than SWEEP_GRACE_SECONDS ago;
 * - were held for a relaunch (the attempt's decision kept them) whose job has ended, or
 *   whose next attempt was placed (or failed to launch) without them: at once. A held node
 *   whose next attempt is not placed yet is never taken within the grace.
 *
 * Instances launched less than SWEEP_GRACE_SECONDS ago are kept whatever they belong to
 * (their launch may not be recorded yet), and so is one with no attempt tag (it cannot be
 * released by tag; it is reported as kept). A failed release is reported and left to the
 * next sweep, and so are the attempts left once SWEEP_BUDGET_SECONDS have passed.
 * Idempotent: a second sweep finds the released instances going or gone.
 */
export async function sweepInstances(deps: {
  readonly store: JobStore;
  readonly compute: Compute;
  readonly inventory: InstanceInventory;
  readonly clock: Clock;
}): Promise<SweepResult> {
  const { store, compute, inventory, clock } = deps;
  const now = clock.now().getTime();
  const instances = await inventory.listTagged();
  const groups = new Map<string, { jobId: string; attempt: number; instances: TaggedInstance[] }>();
  let kept = 0;
  for (const instance of instances) {
    const young = instance.launchedAt !== null && now - Date.parse(instance.launchedAt) < SWEEP_GRACE_SECONDS * 1000;
    if (young || instance.attempt === null) {
      kept += 1;
      continue;
    }
    const key = `${instance.jobId}#${instance.attempt}`;
    const group = groups.get(key) ?? { jobId: instance.jobId, attempt: instance.attempt, instances: [] };
    group.instances.push(instance);
    groups.set(key, group);
  }

  const released: SweptAttempt[] = [];
  const failed: (SweptAttempt & { error: string })[] = [];
  let deferred = 0;
  for (const group of groups.values()) {
    if (clock.now().getTime() - now >= SWEEP_BUDGET_SECONDS * 1000) {
      deferred += 1;
      continue;
    }
    const reason = await whyRelease(store, group.jobId, group.attempt, now);
    if (reason === null) {
      kept += group.instances.length;
      continue;
    }
    const swept: SweptAttempt = {
      jobId: group.jobId,
      attempt: group.attempt,
      instanceIds: group.instances.map((i) => i.instanceId),
      reason,
    };
    try {
      await compute.release(group.jobId, group.attempt, []);
      released.push(swept);
    } catch (error) {
      // One attempt's release (throttled, still running) must not stop the rest of the sweep.
      failed.push({ ...swept, error: errorMessage(error) });
    }
  }
  return { checked: instances.length, released, failed, kept, deferred };
}

/** Why the attempt's instances should go, or null when they may run on. */
async function whyRelease(store: JobStore, jobId: string, attempt: number, now: number): Promise<string | null> {
  let job: JobRecord;
  try {
    job = await store.getJob(jobId);
  } catch (error) {
    if (error instanceof JobNotFoundError) return `job ${jobId} is not in the table`;
    throw error;
  }
  // One past the live attempt may be its standby (launch_on_warning), which holds until used.
  if (attempt < 1 || attempt > job.attemptCount + 1) return `attempt ${attempt} of job ${jobId} was never recorded`;
  let record: AttemptRecord;
  try {
    record = await store.getAttempt(jobId, attempt);
  } catch (error) {
    if (error instanceof StaleAttemptError) return `attempt ${attempt} of job ${jobId} was never recorded`;
    throw error;
  }
  const held = await whyReleaseHeld(store, job, record);
  if (held !== undefined) return held;
  if (record.outcome !== null || isReleased(record)) {
    const endedAt = record.endedAt === null ? now : Date.parse(record.endedAt);
    const seconds = Math.floor((now - endedAt) / 1000);
    if (seconds < SWEEP_GRACE_SECONDS) return null;
    const how = record.outcome === null ? 'was released unused, as a standby,' : `ended ${record.outcome.kind}`;
    return `attempt ${attempt} of job ${jobId} ${how} ${seconds} s ago`;
  }
  if (isTerminal(job.status)) return `job ${jobId} has ended (${job.status})`;
  return null;
}

/**
 * For an ended attempt whose decision kept nodes for the relaunch (they stay tagged with it
 * while held): why they go at once, null to leave them held, undefined to judge them as any
 * ended attempt's (the grace). A held node goes once its job has ended, or once the next
 * attempt was placed (or failed to launch) without it; while that attempt is not placed
 * yet the node is held, within the grace.
 */
async function whyReleaseHeld(store: JobStore, job: JobRecord, record: AttemptRecord): Promise<string | null | undefined> {
  if (record.decision?.keep === undefined || record.outcome === null) return undefined;
  const which = `the nodes attempt ${record.attempt} of job ${job.jobId} kept for its relaunch`;
  if (isTerminal(job.status)) return `${which} are not needed: the job has ended (${job.status})`;
  if (job.attemptCount <= record.attempt) return undefined;
  const latest = await store.getAttempt(job.jobId, job.attemptCount);
  if (latest.placement === null && latest.outcome === null) return null;
  return `${which} were left out of attempt ${latest.attempt}, which ${latest.placement === null ? `ended ${latest.outcome?.kind ?? ''} unplaced` : 'was placed'} without them`;
}
