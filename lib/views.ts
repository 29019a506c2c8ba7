// What the API and `relaunch run --json` show of a job: pure projections of the records.

import type { AttemptRecord, JobRecord, NodeReport, PipelineState, Placement } from './model.ts';
import type { Market, OutcomeKind, Phase, RecoveryAction } from './policy/types.ts';
import { isTerminal, JobStatus } from './status.ts';

/** One attempt as shown: how it ended, each node's code, and what the policy decided. */
export interface AttemptView {
  readonly attempt: number;
  /** A pipeline's task (0-based) the attempt ran; absent for a one-task job. */
  readonly task?: number;
  /** null while the attempt runs. */
  readonly outcome: OutcomeKind | null;
  /** The phase the codes belong to; null when no node has reported. */
  readonly phase: Phase | null;
  /** One code per node in rank order (null: unknown or killed); [] when none was reported. */
  readonly exitCodes: readonly (number | null)[];
  readonly decision: RecoveryAction | null;
  readonly reason: string | null;
  readonly market: Market;
  readonly placement: Placement | null;
  readonly startedAt: string;
  /** null while the attempt runs. */
  readonly endedAt: string | null;
}

/** A job with its attempts: `GET /jobs/{id}` and `relaunch run --json`. */
export interface JobView {
  readonly jobId: string;
  readonly name: string | null;
  readonly status: JobStatus;
  readonly recoveryCount: number;
  readonly restartsOnErrors: number;
  /** Why the job failed or was cancelled; null otherwise. */
  readonly failureReason: string | null;
  readonly attempts: readonly AttemptView[];
  /** A pipeline's tasks, in order, each with its status; absent for a one-task job. */
  readonly tasks?: readonly TaskView[];
}

/** One task of a pipeline as shown. */
export interface TaskView {
  /** 0-based. */
  readonly task: number;
  readonly name: string | null;
  /**
   * SUCCEEDED before the running task; the job's status for the running one; after it,
   * PENDING while the job lives, CANCELLED once it has ended.
   */
  readonly status: JobStatus;
}

/** A job in a list: `GET /jobs`. */
export interface JobSummary {
  readonly jobId: string;
  readonly name: string | null;
  readonly status: JobStatus;
  readonly recoveryCount: number;
  readonly restartsOnErrors: number;
  readonly createdAt: string;
  readonly updatedAt: string;
}

/** The job and its attempts (any order; shown oldest first) as one object. */
export function toJobView(job: JobRecord, attempts: readonly AttemptRecord[]): JobView {
  return {
    ...headline(job),
    failureReason: job.failureReason,
    attempts: [...attempts]
      .sort((a, b) => a.attempt - b.attempt)
      .map((attempt) => toAttemptView(attempt, (job.pipeline?.tasks[attempt.task ?? -1] ?? job.spec).numNodes)),
    ...(job.pipeline === null || job.pipeline === undefined ? {} : { tasks: taskViews(job, job.pipeline) }),
  };
}

function taskViews(job: JobRecord, pipeline: PipelineState): TaskView[] {
  return pipeline.tasks.map((spec, task) => {
    const after: JobStatus = isTerminal(job.status) ? JobStatus.CANCELLED : JobStatus.PENDING;
    const status = task < pipeline.current ? JobStatus.SUCCEEDED : task === pipeline.current ? job.status : after;
    return { task, name: spec.name, status };
  });
}

/** The job as one line of a list. */
export function toJobSummary(job: JobRecord): JobSummary {
  return {
    ...headline(job),
    createdAt: job.createdAt,
    updatedAt: job.updatedAt,
  };
}

/** What every view of a job starts with: who it is, where it is, what it has used. */
function headline(job: JobRecord): Pick<JobSummary, 'jobId' | 'name' | 'status' | 'recoveryCount' | 'restartsOnErrors'> {
  return {
    jobId: job.jobId,
    name: job.name,
    status: job.status,
    recoveryCount: job.counters.recoveryCount,
    restartsOnErrors: job.counters.restartsOnErrors,
  };
}

function toAttemptView(attempt: AttemptRecord, numNodes: number): AttemptView {
  const { phase, exitCodes } = codesOf(attempt, numNodes);
  return {
    attempt: attempt.attempt,
    ...(attempt.task === null || attempt.task === undefined ? {} : { task: attempt.task }),
    outcome: attempt.outcome?.kind ?? null,
    phase,
    exitCodes,
    decision: attempt.decision?.action ?? null,
    reason: attempt.decision?.reason ?? null,
    // With candidates on both markets the instances' own (the placement's) is the one that ran.
    market: attempt.placement?.market ?? attempt.market,
    placement: attempt.placement,
    startedAt: attempt.startedAt,
    endedAt: attempt.endedAt,
  };
}

/**
 * The codes to show. An attempt that EXITED shows its outcome's codes (a killed node is
 * null). Any other attempt (running, preempted, lost) shows what its nodes reported for
 * the furthest phase any node reached, null for a node that has not reported that phase.
 */
function codesOf(attempt: AttemptRecord, numNodes: number): { phase: Phase | null; exitCodes: (number | null)[] } {
  const { outcome } = attempt;
  if (outcome?.kind === 'EXITED') {
    const byRank = [...outcome.nodes].sort((a, b) => a.rank - b.rank);
    return { phase: outcome.phase, exitCodes: byRank.map((node) => node.exitCode) };
  }
  if (attempt.reports.length === 0) return { phase: null, exitCodes: [] };
  const phase: Phase = attempt.reports.some((report) => report.phase === 'run') ? 'run' : 'setup';
  const codeOf = (rank: number): number | null =>
    attempt.reports.find((report: NodeReport) => report.nodeRank === rank && report.phase === phase)?.exitCode ?? null;
  return { phase, exitCodes: Array.from({ length: numNodes }, (_, rank) => codeOf(rank)) };
}
