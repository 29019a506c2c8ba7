// What the API and `relaunch run --json` show of a job: pure projections of the records.

import { accountView, type AccountView } from './accounting/view.ts';
import type { AgentStep } from './agent/protocol.ts';
import { isAgentFailure, type AttemptRecord, type JobRecord, type NodeReport, type PipelineState, type Placement, type WarningKind } from './model.ts';
import type { Market, OutcomeKind, Phase, PolicyRule, RecoveryAction, RecoveryCounters } from './policy/types.ts';
import type { RecoveryPolicy, TaskSpec } from './task-file/types.ts';
import { gapBefore, runStartOf } from './standby-rules.ts';
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
  /** The decision table's row that matched; null while undecided. */
  readonly rule: PolicyRule | null;
  /** Whole seconds waited before the next launch (backoff, or a wait for capacity); null while undecided. */
  readonly delaySeconds: number | null;
  /** The job's counters right after this decision; null while undecided, and for decisions stored before they were kept. */
  readonly countersAfter: CountersView | null;
  /** The last lines each node wrote in the furthest phase it reported, rank order; [] before any report. */
  readonly outputTails: readonly OutputTailView[];
  /**
   * The first node whose agent failed one of its own steps before setup (outcome
   * AGENT_FAILED, or PREEMPTED when a spot warning came first): which step, and its error;
   * null when no agent failed.
   */
  readonly agentFailure: AgentFailureView | null;
  readonly market: Market;
  readonly placement: Placement | null;
  readonly startedAt: string;
  /** null while the attempt runs; for a standby let go unused, when it was released. */
  readonly endedAt: string | null;
  /** When the policy decided; null while undecided. */
  readonly decidedAt: string | null;
  /**
   * When its `run` started (a standby's: when a node was first told to go; any other
   * attempt's: its first setup report that exited 0); null while it has not.
   */
  readonly runStartedAt: string | null;
  /**
   * How long the job went without a running `run` before this attempt's started, in
   * seconds: from the end of the attempt before it (standbys let go unused aside) to
   * runStartedAt. null for the first attempt, or until both are known.
   */
  readonly gapSeconds: number | null;
  /** Set when the attempt was started as a standby (launch_on_warning); null for any other. */
  readonly standby: StandbyView | null;
  /** Each node's instance (an EC2 instance id, or the local runtime's stand-in), rank order; [] before the launch placed any. */
  readonly instances: readonly InstanceView[];
}

/** One node's instance, as `relaunch ssh` finds it, and whether the attempt reused it. */
export interface InstanceView {
  readonly nodeRank: number;
  readonly instanceId: string;
  /**
   * The attempt this node served before, when the relaunch kept it (restart in place, or a
   * survivor beside replaced nodes); null for a node launched for this attempt. Always set
   * by toJobView; absent from the answers of an API that predates it.
   */
  readonly reusedFrom?: number | null;
}

/**
 * An attempt started early, on a warning about the attempt before it (launch_on_warning):
 * `holding` after setup until that attempt is decided, then `adopted` as the next attempt,
 * or `released` unused (and charged to nothing), with why.
 */
export interface StandbyView {
  /** The attempt whose warning started it. */
  readonly for: number;
  /** The warning: EC2's spot interruption warning, or its rebalance recommendation. */
  readonly on: WarningKind;
  readonly state: 'holding' | 'adopted' | 'released';
  /** When the relaunch took it as the next attempt; null unless adopted. */
  readonly adoptedAt: string | null;
  /** When it was let go unused; null unless released. */
  readonly releasedAt: string | null;
  /** Why it was let go (`not needed: ...`, `not launched: ...`, `not used: ...`); null unless released. */
  readonly releaseReason: string | null;
  /**
   * For a standby of the warned node alone: the ranks of the attempt's nodes it was launched
   * beside, which join it when it is adopted; null for a standby of a whole set.
   */
  readonly beside: readonly number[] | null;
}

/** The counters a person reads after a decision (RecoveryCounters' budgets, without streaks). */
export interface CountersView {
  /** Restarts on errors used, of max_restarts_on_errors (restartsOnErrorsUsed). */
  readonly restartsOnErrors: number;
  readonly restartsOnExitCodes: number;
  readonly recoveryCount: number;
  /** The market the next attempt uses. */
  readonly market: Market;
}

/** A node's agent failing one of its own steps before setup: relaunch's failure, not the job's. */
export interface AgentFailureView {
  readonly nodeRank: number;
  readonly step: AgentStep;
  readonly error: string;
}

/** One node's last lines of one phase, as its agent reported them (cut to OUTPUT_TAIL_VIEW_LINES). */
export interface OutputTailView {
  readonly nodeRank: number;
  readonly phase: Phase;
  readonly text: string;
}

/**
 * Lines of each report's tail a view carries. The store keeps up to a few KiB per node and
 * phase; a view of every attempt would repeat all of it on each poll, so it keeps the end
 * a person reads at a glance (the local runtime serves the whole log apart).
 */
export const OUTPUT_TAIL_VIEW_LINES = 20;

/** A job with its attempts: `GET /jobs/{id}` and `relaunch run --json`. */
export interface JobView {
  readonly jobId: string;
  readonly name: string | null;
  readonly status: JobStatus;
  readonly recoveryCount: number;
  /** Restarts on errors used, never more than recoveryPolicy.maxRestartsOnErrors (restartsOnErrorsUsed). */
  readonly restartsOnErrors: number;
  /** Why the job failed or was cancelled; null otherwise. */
  readonly failureReason: string | null;
  /** The recovery policy of the task it runs (a pipeline's current task), normalized. */
  readonly recoveryPolicy: RecoveryPolicy;
  /** num_nodes of the task it runs: the rows of its timeline. */
  readonly numNodes: number;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly attempts: readonly AttemptView[];
  /** A pipeline's tasks, in order, each with its status; absent for a one-task job. */
  readonly tasks?: readonly TaskView[];
  /** Where its time and money went (lib/accounting/). */
  readonly account?: AccountView;
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
  /** max_restarts_on_errors of the task it runs: the budget restartsOnErrors draws on. */
  readonly maxRestartsOnErrors: number;
  /** Attempts launched so far. */
  readonly attemptCount: number;
  readonly createdAt: string;
  readonly updatedAt: string;
}

/** The job and its attempts (any order; shown oldest first) as one object. */
export function toJobView(job: JobRecord, attempts: readonly AttemptRecord[]): JobView {
  return {
    ...headline(job),
    failureReason: job.failureReason,
    recoveryPolicy: job.spec.resources.jobRecovery,
    numNodes: job.spec.numNodes,
    createdAt: job.createdAt,
    updatedAt: job.updatedAt,
    attempts: [...attempts]
      .sort((a, b) => a.attempt - b.attempt)
      .map((attempt) => toAttemptView(attempt, job.pipeline?.tasks[attempt.task ?? -1] ?? job.spec, attempts)),
    ...(job.pipeline === null || job.pipeline === undefined ? {} : { tasks: taskViews(job, job.pipeline) }),
    account: accountView(job, attempts),
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
    maxRestartsOnErrors: job.spec.resources.jobRecovery.maxRestartsOnErrors,
    attemptCount: job.attemptCount,
    createdAt: job.createdAt,
    updatedAt: job.updatedAt,
  };
}

/**
 * Restarts on errors used, of `max` allowed. The stored count charges every failure (rule 4
 * of the policy), the one that ended the job included, so a job failed with
 * `max_restarts_on_errors: 1` has a count of 2 after one restart; a person reads the
 * restarts it had: never more than allowed.
 */
export function restartsOnErrorsUsed(charged: number, max: number): number {
  return Math.min(charged, max);
}

/** What every view of a job starts with: who it is, where it is, what it has used. */
function headline(job: JobRecord): Pick<JobSummary, 'jobId' | 'name' | 'status' | 'recoveryCount' | 'restartsOnErrors'> {
  return {
    jobId: job.jobId,
    name: job.name,
    status: job.status,
    recoveryCount: job.counters.recoveryCount,
    restartsOnErrors: restartsOnErrorsUsed(job.counters.restartsOnErrors, job.spec.resources.jobRecovery.maxRestartsOnErrors),
  };
}

function toAttemptView(attempt: AttemptRecord, spec: TaskSpec, attempts: readonly AttemptRecord[]): AttemptView {
  const { phase, exitCodes } = codesOf(attempt, spec.numNodes);
  return {
    attempt: attempt.attempt,
    ...(attempt.task === null || attempt.task === undefined ? {} : { task: attempt.task }),
    outcome: attempt.outcome?.kind ?? null,
    phase,
    exitCodes,
    decision: attempt.decision?.action ?? null,
    reason: attempt.decision?.reason ?? null,
    rule: attempt.decision?.rule ?? null,
    delaySeconds: attempt.decision?.delaySeconds ?? null,
    countersAfter: countersView(attempt.decision?.counters, spec.resources.jobRecovery.maxRestartsOnErrors),
    outputTails: outputTails(attempt.reports),
    agentFailure: agentFailureOf(attempt.reports),
    // With candidates on both markets the instances' own (the placement's) is the one that ran.
    market: attempt.placement?.market ?? attempt.market,
    placement: attempt.placement,
    startedAt: attempt.startedAt,
    endedAt: attempt.endedAt,
    decidedAt: attempt.decision?.decidedAt ?? null,
    runStartedAt: runStartOf(attempt),
    gapSeconds: gapBefore(attempt, attempts),
    standby: standbyView(attempt),
    instances: [...attempt.instances]
      .sort((a, b) => a.nodeRank - b.nodeRank)
      .map(({ nodeRank, instanceId, reusedFrom }) => ({ nodeRank, instanceId, reusedFrom: reusedFrom ?? null })),
  };
}

function standbyView(attempt: AttemptRecord): StandbyView | null {
  const mark = attempt.standby;
  if (mark === null || mark === undefined) return null;
  const state = mark.releasedAt !== undefined ? 'released' : mark.adoptedAt !== undefined ? 'adopted' : 'holding';
  return {
    for: mark.for,
    on: mark.on,
    state,
    adoptedAt: mark.adoptedAt ?? null,
    releasedAt: mark.releasedAt ?? null,
    releaseReason: mark.releaseReason ?? null,
    beside: mark.beside === undefined ? null : mark.beside.map((node) => node.nodeRank).sort((a, b) => a - b),
  };
}

/** The first agent failure the nodes reported (reports are kept in arrival order). */
function agentFailureOf(reports: readonly NodeReport[]): AgentFailureView | null {
  const failed = reports.find(isAgentFailure);
  return failed === undefined ? null : { nodeRank: failed.nodeRank, step: failed.agentFailure.step, error: failed.agentFailure.error };
}

function countersView(counters: RecoveryCounters | undefined, maxRestartsOnErrors: number): CountersView | null {
  if (counters === undefined) return null;
  const { restartsOnErrors, restartsOnExitCodes, recoveryCount, market } = counters;
  return { restartsOnErrors: restartsOnErrorsUsed(restartsOnErrors, maxRestartsOnErrors), restartsOnExitCodes, recoveryCount, market };
}

/** Each node's tail of the furthest phase it reported (run over setup), by rank. */
function outputTails(reports: readonly NodeReport[]): OutputTailView[] {
  const latest = new Map<number, NodeReport>();
  for (const report of reports) {
    const seen = latest.get(report.nodeRank);
    if (seen === undefined || (seen.phase === 'setup' && report.phase === 'run')) latest.set(report.nodeRank, report);
  }
  return [...latest.values()]
    .sort((a, b) => a.nodeRank - b.nodeRank)
    .map((report) => ({ nodeRank: report.nodeRank, phase: report.phase, text: lastLines(report.outputTail, OUTPUT_TAIL_VIEW_LINES) }));
}

function lastLines(text: string, count: number): string {
  const lines = text.replace(/\n$/, '').split('\n');
  return lines.slice(-count).join('\n');
}

/**
 * The codes to show. An attempt that EXITED shows its outcome's codes (a killed node is
 * null). Any other attempt (running, preempted, lost, cancelled) shows the furthest phase
 * it reached, `run` once any node reported run or went on to it after setup, and what its
 * nodes reported for that phase: null, unknown, for a node with no code for it (one still
 * running, stopped by the node's end, or gone), never setup's 0.
 */
function codesOf(attempt: AttemptRecord, numNodes: number): { phase: Phase | null; exitCodes: (number | null)[] } {
  const { outcome } = attempt;
  if (outcome?.kind === 'EXITED') {
    const byRank = [...outcome.nodes].sort((a, b) => a.rank - b.rank);
    return { phase: outcome.phase, exitCodes: byRank.map((node) => node.exitCode) };
  }
  if (attempt.reports.length === 0) return { phase: null, exitCodes: [] };
  const phase: Phase = attempt.reports.some((report) => report.phase === 'run') || runStartOf(attempt) !== null ? 'run' : 'setup';
  // A node whose agent failed before setup has no code.
  const codeOf = (rank: number): number | null =>
    attempt.reports.find((report: NodeReport) => report.nodeRank === rank && report.phase === phase)?.exitCode ?? null;
  return { phase, exitCodes: Array.from({ length: numNodes }, (_, rank) => codeOf(rank)) };
}
