// A job's account as the API, `status --json` and the jobs page show it: times in ISO 8601,
// durations in seconds, money in US dollars.

import type { AttemptRecord, JobRecord } from '../model.ts';
import { isTerminal } from '../status.ts';
import { accountJob, TIME_CAUSES, type JobAccount, type TimeCause } from './account.ts';
import type { AttemptTimeline } from './timeline.ts';

/** One stretch of the job's wall time. */
export interface SegmentView {
  readonly cause: TimeCause;
  readonly from: string;
  readonly to: string;
  readonly seconds: number;
}

/** One node's points in an attempt's timeline (null: not recorded). */
export interface NodeTimelineView {
  readonly nodeRank: number;
  readonly instanceId: string;
  readonly runningAt: string;
  readonly firstHeartbeatAt: string | null;
  /** Setup's start: its report's time less how long setup ran, as the agent measured it. */
  readonly setupStartAt: string | null;
  readonly setupEndAt: string | null;
  readonly runStartAt: string | null;
  readonly runEndAt: string | null;
  readonly goneAt: string | null;
}

/** One attempt's timeline, and the stretches of the job's wall time it took. */
export interface AttemptTimelineView {
  readonly attempt: number;
  readonly launchRequestedAt: string;
  readonly upAt: string | null;
  /** The first node's setup started; before it, from upAt, the agent's own steps. */
  readonly setupStartAt: string | null;
  readonly setupEndAt: string | null;
  readonly runStartAt: string | null;
  readonly stopAskedAt: string | null;
  readonly endedAt: string | null;
  readonly nodes: readonly NodeTimelineView[];
  readonly segments: readonly SegmentView[];
}

/** The job's cost. */
export interface CostView {
  /** The market the instances ran on: `mixed` when attempts ran on both. */
  readonly market: 'spot' | 'on-demand' | 'mixed' | null;
  readonly dollars: number | null;
  readonly onDemandDollars: number | null;
  /** true: table prices (a local run, or no spot price from EC2), not what was billed. */
  readonly estimate: boolean;
  readonly controllerDollars: number;
  readonly unpriced: readonly string[];
}

/** Where a job's time and money went. */
export interface AccountView {
  /** The job's end, or for a live job the latest time on record. */
  readonly asOf: string;
  readonly ended: boolean;
  readonly wallSeconds: number;
  /** useful / wall, 0-1; null with no wall time. */
  readonly goodput: number | null;
  /** Wall seconds by cause, adding up to wallSeconds. */
  readonly seconds: Readonly<Record<TimeCause, number>>;
  readonly instanceHours: number;
  readonly usefulInstanceHours: number;
  readonly standbyInstanceHours: number;
  /** instance-hours used / useful; null when none was useful. */
  readonly instanceRatio: number | null;
  readonly recoveries: number;
  readonly cost: CostView;
  /** Each segment between attempts (queue, backoff, capacity, controller). */
  readonly between: readonly SegmentView[];
  readonly attempts: readonly AttemptTimelineView[];
}

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

/** The latest time the records hold: what a live job's account is as of (pure: no clock). */
export function latestOnRecord(job: JobRecord, attempts: readonly AttemptRecord[]): number {
  const times = [job.updatedAt, job.createdAt];
  for (const attempt of attempts) {
    times.push(attempt.startedAt, ...[attempt.endedAt, attempt.lastHeartbeatAt, attempt.runStartedAt, attempt.stopAskedAt].filter((at): at is string => typeof at === 'string'));
    for (const report of attempt.reports) times.push(report.reportedAt);
    for (const marks of Object.values(attempt.nodeMarks ?? {})) if (marks.firstHeartbeatAt !== undefined) times.push(marks.firstHeartbeatAt);
  }
  return Math.max(...times.map((at) => Date.parse(at)).filter((ms) => !Number.isNaN(ms)));
}

function marketOf(attempts: readonly AttemptRecord[]): CostView['market'] {
  const markets = new Set(attempts.filter((a) => a.placement !== null).map((a) => a.placement?.market ?? a.market));
  if (markets.size === 0) return null;
  return markets.size > 1 ? 'mixed' : ([...markets][0] as 'spot' | 'on-demand');
}

const round = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits;

/** The account as shown, from an account already made. */
export function toAccountView(account: JobAccount, attempts: readonly AttemptRecord[]): AccountView {
  const segment = (s: JobAccount['segments'][number]): SegmentView => ({
    cause: s.cause,
    from: new Date(s.from).toISOString(),
    to: new Date(s.to).toISOString(),
    seconds: round((s.to - s.from) / 1000, 3),
  });
  const timelineView = (t: AttemptTimeline): AttemptTimelineView => ({
    attempt: t.attempt,
    launchRequestedAt: new Date(t.launchRequestedAt).toISOString(),
    upAt: iso(t.upAt),
    setupStartAt: iso(t.setupStartAt),
    setupEndAt: iso(t.setupEndAt),
    runStartAt: iso(t.runStartAt),
    stopAskedAt: iso(t.stopAskedAt),
    endedAt: iso(t.endedAt),
    nodes: t.nodes.map((n) => ({
      nodeRank: n.nodeRank,
      instanceId: n.instanceId,
      runningAt: new Date(n.runningAt).toISOString(),
      firstHeartbeatAt: iso(n.firstHeartbeatAt),
      setupStartAt: iso(n.setupStartAt),
      setupEndAt: iso(n.setupEndAt),
      runStartAt: iso(n.runStartAt),
      runEndAt: iso(n.runEndAt),
      goneAt: iso(n.goneAt),
    })),
    segments: account.segments.filter((s) => s.attempt === t.attempt).map(segment),
  });
  return {
    asOf: new Date(account.endAt).toISOString(),
    ended: account.ended,
    wallSeconds: round(account.wallSeconds, 3),
    goodput: account.goodput === null ? null : round(account.goodput, 4),
    seconds: Object.fromEntries(TIME_CAUSES.map((cause) => [cause, round(account.seconds[cause], 3)])) as Record<TimeCause, number>,
    instanceHours: round(account.instanceSeconds / 3600, 6),
    usefulInstanceHours: round(account.usefulInstanceSeconds / 3600, 6),
    standbyInstanceHours: round(account.standbyInstanceSeconds / 3600, 6),
    instanceRatio: account.instanceRatio === null ? null : round(account.instanceRatio, 3),
    recoveries: account.recoveries,
    cost: {
      market: marketOf(attempts),
      dollars: account.cost.dollars === null ? null : round(account.cost.dollars, 8),
      onDemandDollars: account.cost.onDemandDollars === null ? null : round(account.cost.onDemandDollars, 8),
      estimate: account.cost.estimate,
      controllerDollars: round(account.cost.controllerDollars, 8),
      unpriced: account.cost.unpriced,
    },
    between: account.segments.filter((s) => s.attempt === null).map(segment),
    attempts: account.timelines.map(timelineView),
  };
}

/** The job's account as shown: as of its end, or for a live job as of the latest time on record. */
export function accountView(job: JobRecord, attempts: readonly AttemptRecord[]): AccountView {
  const asOf = isTerminal(job.status) ? Date.parse(job.updatedAt) : latestOnRecord(job, attempts);
  return toAccountView(accountJob(job, attempts, asOf), attempts);
}
