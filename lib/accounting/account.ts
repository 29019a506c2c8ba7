// Where a job's time and money went: its wall time (submit to end) cut into causes that add
// up to it, its instance-seconds, goodput, and its cost, from the job's records alone.

import type { AttemptRecord, JobRecord } from '../model.ts';
import { isTerminal } from '../status.ts';
import { controllerCostOf } from './controller-cost.ts';
import { launchPriceOf, onDemandHourly } from './prices.ts';
import { attemptTimeline, ms, type AttemptTimeline } from './timeline.ts';

/**
 * What a stretch of the job's wall time went to:
 *
 * - `useful`: run time of an attempt that succeeded, and of a failed one up to its last
 *   progress (the next attempt goes on from there);
 * - `preempted`, `lost`, `restarted`, `failed`, `cancelled`: run time lost to an attempt
 *   that ended that way (spot reclaim; an instance or agent lost; a code in
 *   recover_on_exit_codes; any other failing exit; a cancel), from its last progress on;
 * - `running`: run time of the attempt still running, not yet known useful or lost;
 * - `boot`: from the launch request to every node's first heartbeat;
 * - `agent`: from there to the first node's setup start: the agent's own steps before setup
 *   (credentials, installs, mounts, the image's pull), or its going on to the next attempt
 *   on a kept node; 0 when no report says how long setup ran (then `setup` holds them);
 * - `setup`: from there to every node's setup over;
 * - `standby`: a warm relaunch's standby holding, ready, until told to run;
 * - `capacity`: launches that found no capacity, and the waits before the next try;
 * - `backoff`: restart_backoff's wait before a relaunch;
 * - `queued`: from the submit to the first launch (the launch pace included);
 * - `controller`: the controller's own steps between attempts and after the last.
 */
export const TIME_CAUSES = [
  'useful',
  'preempted',
  'lost',
  'restarted',
  'failed',
  'cancelled',
  'running',
  'boot',
  'agent',
  'setup',
  'standby',
  'capacity',
  'backoff',
  'queued',
  'controller',
] as const;
/** One of TIME_CAUSES. */
export type TimeCause = (typeof TIME_CAUSES)[number];

/** The causes that are run time lost. */
export const LOST_CAUSES: readonly TimeCause[] = ['preempted', 'lost', 'restarted', 'failed', 'cancelled'];

/** A stretch of wall time and what it went to; `attempt` null between attempts. */
export interface Segment {
  readonly from: number;
  readonly to: number;
  readonly cause: TimeCause;
  readonly attempt: number | null;
}

/** Dollars, spot (or the market used) beside on demand. */
export interface JobCost {
  /** What the instances cost on the markets they ran on; null when no price was known for any. */
  readonly dollars: number | null;
  /** What the same instance-seconds would have cost on demand; null when the table lacks a type. */
  readonly onDemandDollars: number | null;
  /** true when any price is the table's (locally, or an on-demand or unpriced launch). */
  readonly estimate: boolean;
  /** The controller's own cost for the job (Step Functions, Lambda, DynamoDB, API), estimated. */
  readonly controllerDollars: number;
  /** Instance types with no price, left out of the sums. */
  readonly unpriced: readonly string[];
}

/** One job's account. */
export interface JobAccount {
  readonly jobId: string;
  readonly submittedAt: number;
  /** The job's end, or `now` for a job still live. */
  readonly endAt: number;
  readonly ended: boolean;
  readonly wallSeconds: number;
  /** Wall seconds by cause; they add up to wallSeconds. */
  readonly seconds: Readonly<Record<TimeCause, number>>;
  /** The wall time cut into stretches, in order. */
  readonly segments: readonly Segment[];
  /** useful / wall; null for a job with no wall time. */
  readonly goodput: number | null;
  /** Seconds of every node's instance, from up to gone. */
  readonly instanceSeconds: number;
  /** Useful run seconds times the nodes that ran them. */
  readonly usefulInstanceSeconds: number;
  /** Standbys' instance-seconds while the warned attempt still ran, or all of a standby let go. */
  readonly standbyInstanceSeconds: number;
  /** instanceSeconds / usefulInstanceSeconds; null when nothing was useful. */
  readonly instanceRatio: number | null;
  readonly recoveries: number;
  readonly attempts: number;
  readonly cost: JobCost;
  readonly timelines: readonly AttemptTimeline[];
}

/** When the job ended: its terminal status's time (the record's last update), else `now`. */
function endOf(job: JobRecord, now: number): { endAt: number; ended: boolean } {
  if (isTerminal(job.status)) return { endAt: ms(job.updatedAt) ?? now, ended: true };
  return { endAt: now, ended: false };
}

/** The cause of an attempt's run time once it ended, by its outcome and decision. */
export function runCause(attempt: AttemptRecord): TimeCause {
  const outcome = attempt.outcome;
  if (outcome === null) return 'running';
  switch (outcome.kind) {
    case 'PREEMPTED':
      return 'preempted';
    case 'LOST':
    case 'AGENT_FAILED':
      return 'lost';
    case 'CANCELLED':
      return 'cancelled';
    case 'LAUNCH_FAILED':
      return 'capacity';
    case 'EXITED':
      if (outcome.nodes.every((node) => node.exitCode === 0)) return 'useful';
      return attempt.decision?.rule === 'RECOVER_ON_EXIT_CODE' ? 'restarted' : 'failed';
  }
}

/** Whether the attempt was a standby let go without running. */
function releasedStandby(attempt: AttemptRecord): boolean {
  return attempt.standby?.releasedAt !== undefined;
}

/** `value` within [low, high]. */
function clamp(value: number, low: number, high: number): number {
  return Math.min(high, Math.max(low, value));
}

/** The stretches of one attempt from `from` (the end of what came before) to its end. */
function attemptSegments(attempt: AttemptRecord, timeline: AttemptTimeline, from: number, until: number): Segment[] {
  const end = clamp(timeline.endedAt ?? until, from, until);
  const at = attempt.attempt;
  const start = clamp(timeline.launchRequestedAt, from, end);
  const kind = attempt.outcome?.kind;
  if (kind === 'LAUNCH_FAILED') return [{ from: start, to: end, cause: 'capacity', attempt: at }];
  if (attempt.placement === null) return [{ from: start, to: end, cause: 'controller', attempt: at }];
  const up = clamp(timeline.upAt ?? end, start, end);
  const setupEnd = clamp(timeline.setupEndAt ?? end, up, end);
  const setupStart = clamp(timeline.setupStartAt ?? up, up, setupEnd);
  const runStart = clamp(timeline.runStartAt ?? end, setupEnd, end);
  const cause = runCause(attempt);
  const segments: Segment[] = [
    { from: start, to: up, cause: 'boot', attempt: at },
    { from: up, to: setupStart, cause: 'agent', attempt: at },
    { from: setupStart, to: setupEnd, cause: 'setup', attempt: at },
    { from: setupEnd, to: runStart, cause: attempt.standby ? 'standby' : 'setup', attempt: at },
  ];
  const progress = ms(attempt.progress?.at);
  if (cause !== 'useful' && cause !== 'running' && progress !== null && progress > runStart && progress < end) {
    segments.push({ from: runStart, to: progress, cause: 'useful', attempt: at }, { from: progress, to: end, cause, attempt: at });
  } else {
    segments.push({ from: runStart, to: end, cause, attempt: at });
  }
  return segments;
}

/** The cause of the wait after `previous` until the next attempt's launch, of `seconds`. */
function gapSegments(previous: AttemptRecord | null, from: number, to: number): Segment[] {
  if (to <= from) return [];
  if (previous === null) return [{ from, to, cause: 'queued', attempt: null }];
  const decision = previous.decision;
  if (previous.outcome?.kind === 'LAUNCH_FAILED' || decision?.rule === 'WAITING_FOR_CAPACITY') {
    return [{ from, to, cause: 'capacity', attempt: null }];
  }
  const delay = (decision?.delaySeconds ?? 0) * 1000;
  if (delay <= 0) return [{ from, to, cause: 'controller', attempt: null }];
  // The controller decides and releases first, then waits out the backoff just before the launch.
  const waitFrom = Math.max(from, to - delay);
  const segments: Segment[] = [
    { from, to: waitFrom, cause: 'controller', attempt: null },
    { from: waitFrom, to, cause: 'backoff', attempt: null },
  ];
  return segments.filter((segment) => segment.to > segment.from);
}

/** A node's seconds from its instance up to gone (or the attempt's end, or `now`). */
function nodeSpans(timeline: AttemptTimeline, attemptEnd: number | null, now: number): { from: number; to: number }[] {
  return timeline.nodes.map((node) => {
    const to = node.goneAt ?? attemptEnd ?? now;
    return { from: node.runningAt, to: Math.max(node.runningAt, to) };
  });
}

/**
 * The job's account at `now` (ms; used for a job still live). Pure: the same records give
 * the same account.
 */
export function accountJob(job: JobRecord, attempts: readonly AttemptRecord[], now: number): JobAccount {
  const submittedAt = ms(job.createdAt) ?? now;
  const { endAt, ended } = endOf(job, now);
  const ordered = [...attempts].sort((a, b) => a.attempt - b.attempt);
  const timelines = ordered.map(attemptTimeline);
  const segments: Segment[] = [];
  let cursor = submittedAt;
  let previous: AttemptRecord | null = null;
  ordered.forEach((attempt, index) => {
    if (releasedStandby(attempt)) return;
    const timeline = timelines[index] as AttemptTimeline;
    const launch = clamp(timeline.launchRequestedAt, cursor, endAt);
    segments.push(...gapSegments(previous, cursor, launch));
    cursor = Math.max(cursor, launch);
    for (const segment of attemptSegments(attempt, timeline, cursor, endAt)) if (segment.to > segment.from) segments.push(segment);
    cursor = Math.max(cursor, clamp(timeline.endedAt ?? endAt, cursor, endAt));
    previous = attempt;
  });
  if (endAt > cursor) segments.push({ from: cursor, to: endAt, cause: previous === null ? 'queued' : 'controller', attempt: null });

  const seconds = Object.fromEntries(TIME_CAUSES.map((cause) => [cause, 0])) as Record<TimeCause, number>;
  for (const segment of segments) seconds[segment.cause] += (segment.to - segment.from) / 1000;
  const wallSeconds = Math.max(0, (endAt - submittedAt) / 1000);

  let instanceSeconds = 0;
  let usefulInstanceSeconds = 0;
  let standbyInstanceSeconds = 0;
  let dollars = 0;
  let onDemandDollars = 0;
  let anyPrice = false;
  let estimate = false;
  const unpriced = new Set<string>();
  ordered.forEach((attempt, index) => {
    const timeline = timelines[index] as AttemptTimeline;
    const spans = nodeSpans(timeline, timeline.endedAt, endAt);
    const seconds = spans.reduce((sum, span) => sum + (span.to - span.from) / 1000, 0);
    instanceSeconds += seconds;
    const useful = segments.filter((s) => s.attempt === attempt.attempt && s.cause === 'useful').reduce((sum, s) => sum + (s.to - s.from) / 1000, 0);
    usefulInstanceSeconds += useful * attempt.instances.length;
    if (attempt.standby !== null && attempt.standby !== undefined) {
      const warned = ordered.find((other) => other.attempt === attempt.standby?.for);
      const overlapEnd = releasedStandby(attempt) ? Number.POSITIVE_INFINITY : (ms(warned?.endedAt) ?? endAt);
      standbyInstanceSeconds += spans.reduce((sum, span) => sum + Math.max(0, Math.min(span.to, overlapEnd) - span.from) / 1000, 0);
    }
    const price = priceOf(attempt);
    if (price === null) {
      if (attempt.placement !== null && seconds > 0) unpriced.add(attempt.placement.instanceType);
      return;
    }
    anyPrice = true;
    estimate ||= price.estimate;
    dollars += (seconds / 3600) * price.hourly;
    onDemandDollars += (seconds / 3600) * (price.onDemandHourly ?? Number.NaN);
  });
  const useful = seconds.useful;
  return {
    jobId: job.jobId,
    submittedAt,
    endAt,
    ended,
    wallSeconds,
    seconds,
    segments,
    goodput: wallSeconds > 0 ? useful / wallSeconds : null,
    instanceSeconds,
    usefulInstanceSeconds,
    standbyInstanceSeconds,
    instanceRatio: usefulInstanceSeconds > 0 ? instanceSeconds / usefulInstanceSeconds : null,
    recoveries: job.counters.recoveryCount,
    attempts: ordered.length,
    cost: {
      dollars: anyPrice ? dollars : null,
      onDemandDollars: anyPrice && Number.isFinite(onDemandDollars) ? onDemandDollars : null,
      estimate,
      controllerDollars: controllerCostOf(ordered),
      unpriced: [...unpriced].sort(),
    },
    timelines,
  };
}

/**
 * The hourly price an attempt's instances are charged at: the one stored at launch, else
 * the table's (on-demand, or its spot share for a spot attempt, an estimate). null for
 * an attempt never placed or a type the table lacks.
 */
export function priceOf(attempt: AttemptRecord): { hourly: number; onDemandHourly: number | null; estimate: boolean } | null {
  const placement = attempt.placement;
  if (placement === null) return null;
  const stored = placement.price;
  const onDemand = stored?.onDemandHourly ?? onDemandHourly(placement.instanceType, placement.region);
  if (stored !== undefined && stored.hourly !== null) return { hourly: stored.hourly, onDemandHourly: onDemand, estimate: stored.estimate };
  const table = launchPriceOf(placement.instanceType, placement.region, placement.market ?? attempt.market);
  if (table.hourly === null) return null;
  return { hourly: table.hourly, onDemandHourly: onDemand, estimate: table.estimate };
}
