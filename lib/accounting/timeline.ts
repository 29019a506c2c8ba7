// One attempt's timeline, per node and as a whole, from what its record holds: the points
// relaunch was told of (launch, instance up, first heartbeat, reports, run start, stop,
// instance gone), none read from a clock.

import { isAgentFailure, isPhaseEnd, isStopped, type AttemptRecord, type NodeReport } from '../model.ts';

/** One node's points, in milliseconds since the epoch; null where it never happened or was not recorded. */
export interface NodeTimeline {
  readonly nodeRank: number;
  readonly instanceId: string;
  /** The instance up (local: the process started; EC2: LaunchTime); the launch request when not recorded. */
  readonly runningAt: number;
  readonly firstHeartbeatAt: number | null;
  /**
   * Setup's start: the setup report's time less how long setup itself ran (its `setupMs`,
   * measured by the agent), no earlier than the node's first heartbeat (else its instance
   * up); what came before it on the node was the agent's own steps. An agent's failure
   * before setup: its report's time (no setup ran). null without a duration (an agent from
   * before it sent one) or a setup report.
   */
  readonly setupStartAt: number | null;
  /** Setup's end: the node's setup report (its exit code, or its agent's failure). */
  readonly setupEndAt: number | null;
  /** Run's start: the standby's go, else the node's setup report, when setup exited 0. */
  readonly runStartAt: number | null;
  /** Run's end: the node's run report (an exit code, or stopped). */
  readonly runEndAt: number | null;
  /**
   * The instance gone: the earliest the record knows it by. The node's final report (its
   * agent shuts the instance down at once after it); the attempt's end for a node its
   * outcome names preempted or lost (that going ended it); else the attempt's
   * instancesGoneAt, when the release of its instances resolved (one write per attempt, not
   * per node), for every node the decision did not keep. null otherwise: a kept node (it
   * goes with a later attempt), or an attempt recorded before instancesGoneAt was noted
   * (the attempt's end then stands for it).
   */
  readonly goneAt: number | null;
}

/** An attempt's timeline: its own points and its nodes'. */
export interface AttemptTimeline {
  readonly attempt: number;
  readonly launchRequestedAt: number;
  /** Every node's first heartbeat in (the attempt's boot over); null while one is missing. */
  readonly upAt: number | null;
  /**
   * The first node's setup started (until then every node was booting or in its agent's
   * own steps); null while one node's start is unknown (no report yet, or no duration in it).
   */
  readonly setupStartAt: number | null;
  /** Every node's setup over; null while one is missing. */
  readonly setupEndAt: number | null;
  /**
   * Run started on the attempt: the standby's go, else every node's setup over with exit 0
   * (a multi-node job runs once all its nodes do); null when it never did.
   */
  readonly runStartAt: number | null;
  readonly stopAskedAt: number | null;
  readonly interruptionNoticedAt: number | null;
  readonly endedAt: number | null;
  readonly nodes: readonly NodeTimeline[];
}

/** A time of the record in ms, or null. */
export function ms(at: string | null | undefined): number | null {
  if (at === null || at === undefined) return null;
  const parsed = Date.parse(at);
  return Number.isNaN(parsed) ? null : parsed;
}

function phaseReport(reports: readonly NodeReport[], nodeRank: number, phase: 'setup' | 'run'): NodeReport | undefined {
  return reports.find((report) => report.nodeRank === nodeRank && report.phase === phase);
}

/** The latest of the values, or null when any is null (not every node got there) or there are none. */
function latestOfAll(values: readonly (number | null)[]): number | null {
  if (values.length === 0 || values.some((value) => value === null)) return null;
  return Math.max(...(values as number[]));
}

/** The earliest of the values, or null when any is null or there are none. */
function earliestOfAll(values: readonly (number | null)[]): number | null {
  if (values.length === 0 || values.some((value) => value === null)) return null;
  return Math.min(...(values as number[]));
}

/**
 * When setup started on a node, from its setup report (ended at `endAt`): `setupMs` before
 * it, not before `floor` (the node's first heartbeat: a longer figure is a clock's error);
 * the report's own time for an agent's failure (setup never ran); null with no `setupMs`.
 */
function setupStartOf(setup: NodeReport, endAt: number, floor: number): number | null {
  if (isAgentFailure(setup)) return endAt;
  if (isStopped(setup) || setup.setupMs === undefined) return null;
  return Math.min(endAt, Math.max(floor, endAt - setup.setupMs));
}

/** The attempt's timeline, from its record alone. */
export function attemptTimeline(attempt: AttemptRecord): AttemptTimeline {
  const launchRequestedAt = ms(attempt.startedAt) ?? 0;
  const heldRunStart = ms(attempt.runStartedAt);
  const kept = new Set((attempt.decision?.keep?.nodes ?? []).map((node) => node.instanceId));
  const released = ms(attempt.instancesGoneAt);
  const wentEarly = goneNodesOf(attempt);
  const nodes: NodeTimeline[] = attempt.instances.map((instance) => {
    const marks = attempt.nodeMarks?.[String(instance.nodeRank)];
    const setup = phaseReport(attempt.reports, instance.nodeRank, 'setup');
    const run = phaseReport(attempt.reports, instance.nodeRank, 'run');
    const setupEndAt = setup !== undefined && isPhaseEnd(setup) ? ms(setup.reportedAt) : null;
    const setupOk = setup !== undefined && setup.exitCode === 0;
    const runningAt = ms(instance.runningAt) ?? launchRequestedAt;
    const firstHeartbeatAt = ms(marks?.firstHeartbeatAt);
    const runStartAt = !setupOk ? null : attempt.standby !== null && attempt.standby !== undefined ? heldRunStart : setupEndAt;
    return {
      nodeRank: instance.nodeRank,
      instanceId: instance.instanceId,
      runningAt,
      firstHeartbeatAt,
      setupStartAt: setup === undefined || setupEndAt === null ? null : setupStartOf(setup, setupEndAt, firstHeartbeatAt ?? runningAt),
      setupEndAt,
      runStartAt,
      runEndAt: run === undefined ? null : ms(run.reportedAt),
      goneAt: earliestKnown([
        finalReportAt(attempt.reports, instance.nodeRank),
        wentEarly.has(instance.nodeRank) ? ms(attempt.endedAt) : null,
        kept.has(instance.instanceId) ? null : released,
      ]),
    };
  });
  const isStandby = attempt.standby !== null && attempt.standby !== undefined;
  const everyRunStarted = latestOfAll(nodes.map((node) => node.runStartAt));
  const runStartAt = everyRunStarted === null ? null : isStandby ? heldRunStart : everyRunStarted;
  return {
    attempt: attempt.attempt,
    launchRequestedAt,
    upAt: latestOfAll(nodes.map((node) => node.firstHeartbeatAt)),
    setupStartAt: earliestOfAll(nodes.map((node) => node.setupStartAt)),
    setupEndAt: latestOfAll(nodes.map((node) => node.setupEndAt)),
    runStartAt,
    stopAskedAt: ms(attempt.stopAskedAt),
    interruptionNoticedAt: ms(attempt.interruptionNoticedAt),
    endedAt: ms(attempt.endedAt),
    nodes,
  };
}

/** When the node sent the report its agent shuts down after (run's, a failed setup's, a stopped phase's); null if none. */
function finalReportAt(reports: readonly NodeReport[], nodeRank: number): number | null {
  const final = reports.filter((r) => r.nodeRank === nodeRank && (r.phase === 'run' || r.stopped !== undefined || (isPhaseEnd(r) && r.exitCode !== 0)));
  const times = final.map((r) => ms(r.reportedAt)).filter((at): at is number => at !== null);
  return times.length === 0 ? null : Math.min(...times);
}

/** The ranks whose instance's going (preempted, lost) ended the attempt, as its outcome names them. */
function goneNodesOf(attempt: AttemptRecord): ReadonlySet<number> {
  const outcome = attempt.outcome;
  if (outcome === null || (outcome.kind !== 'PREEMPTED' && outcome.kind !== 'LOST')) return new Set();
  return new Set(outcome.nodes ?? []);
}

/** The earliest of the values known (not null), or null when none is. */
function earliestKnown(values: readonly (number | null)[]): number | null {
  const known = values.filter((value): value is number => value !== null);
  return known.length === 0 ? null : Math.min(...known);
}
