// The job and attempt records: what relaunch remembers about every job, as the store holds it.

import type { AgentFailure, StopCause } from './agent/protocol.ts';
import type { JobStatus } from './status.ts';
import type { ReuseSetup, TaskSpec } from './task-file/types.ts';
import type { AwaitStateName } from './workflow/contract.ts';
import type {
  AttemptOutcome,
  Market,
  Phase,
  PolicyRule,
  RecoveryAction,
  RecoveryCounters,
} from './policy/types.ts';

/**
 * A pipeline's tasks, run in order, each with its own resources and recovery budget; the
 * job's `spec` is the one it runs now, `tasks[current]`.
 */
export interface PipelineState {
  /** The header document's `name`, if the file has one. */
  readonly name: string | null;
  readonly tasks: readonly TaskSpec[];
  /** 0-based. */
  readonly current: number;
}

/** A job: one task file, run until the policy says stop. */
export interface JobRecord {
  readonly jobId: string;
  readonly name: string | null;
  /** The task it runs (a pipeline's current task). */
  readonly spec: TaskSpec;
  /** The pipeline, when the file held several tasks; null or absent for one task. */
  readonly pipeline?: PipelineState | null;
  readonly status: JobStatus;
  readonly counters: RecoveryCounters;
  /** Number of the latest attempt (1-based); 0 before the first launch. */
  readonly attemptCount: number;
  /** The Step Functions execution (or the local run) that controls the job. */
  readonly executionArn: string | null;
  /** Why the job failed or was cancelled; null while it is live or when it succeeded. */
  readonly failureReason: string | null;
  readonly createdAt: string;
  readonly updatedAt: string;
}

/** One instance of an attempt; node rank 0 is the head. */
export interface InstanceRef {
  readonly instanceId: string;
  readonly nodeRank: number;
  readonly privateIp: string | null;
  /**
   * The local runtime's process group for this node, so a runtime that restarts can stop
   * what one that died left running. Absent on EC2.
   */
  readonly processGroupId?: number;
  /**
   * When the instance was up: locally when the node's process started (after any emulated
   * boot); on EC2 its LaunchTime, read from the DescribeInstances the launch already makes.
   * Absent on instances recorded before it was kept.
   */
  readonly runningAt?: string;
  /**
   * The attempt this node served before, when the relaunch kept it (restart in place, or a
   * survivor beside replaced nodes: docs/recovery.md); absent on a node launched for this attempt.
   */
  readonly reusedFrom?: number;
}

/** Where an attempt was placed. */
export interface Placement {
  readonly region: string;
  readonly zone: string | null;
  readonly instanceType: string;
  /**
   * The market the instances run on, when a task's candidates mix markets (`use_spot` inside
   * `any_of`) and so it may differ from the attempt's; absent: the attempt's.
   */
  readonly market?: Market;
  /** Candidates the launch asked EC2 for that it could not fill, with EC2's error code; absent: none. */
  readonly unavailable?: readonly string[];
  /** The `any_of`/`ordered` entry (its position in the file) the attempt runs as; absent without them. */
  readonly entry?: number;
  /** What an hour of one of its instances cost at launch (lib/accounting/prices.ts); absent on attempts placed before it was kept. */
  readonly price?: LaunchPrice;
}

/**
 * An instance-hour's price at launch, beside the on-demand one. On EC2 a spot attempt's is
 * EC2's spot price of its type and zone then (DescribeSpotPriceHistory); an on-demand
 * attempt's, and every local one's, comes from the package's price table, and a local one
 * is an estimate (no instance was paid for).
 */
export interface LaunchPrice {
  /** US dollars per instance-hour on the attempt's market; null when nothing said (a type the table lacks). */
  readonly hourly: number | null;
  /** US dollars per instance-hour on demand, from the price table; null for a type or region it lacks. */
  readonly onDemandHourly: number | null;
  /** Where `hourly` came from. */
  readonly source: 'spot-price-history' | 'price-table';
  /** true: a figure for the instance type the job would use on AWS, not one anybody paid. */
  readonly estimate: boolean;
  /** A local run's: the AWS instance type the estimate is for; absent on AWS (the placement's own). */
  readonly forInstanceType?: string;
}

/**
 * When one node of an attempt reached a point relaunch hears of beyond what its reports
 * say: its agent's first heartbeat (the agent is up), noted in the heartbeat's own write.
 * Absent until it happened.
 */
export interface NodeMarks {
  readonly firstHeartbeatAt?: string;
}

/**
 * The last step a job wrote to its progress file (RELAUNCH_PROGRESS_FILE), as a node's
 * heartbeat carried it: the step, and when the file was written (the heartbeat's time less
 * the file's age), so work lost to an attempt's end is counted from there.
 */
export interface ProgressMark {
  readonly step: number;
  readonly at: string;
  readonly nodeRank: number;
}

/**
 * One node's report of one phase: exactly what the agent sent. Either the phase's exit
 * code, or, in setup's place, the failure of one of the agent's own steps before setup, or
 * the phase stopped by the node's end before it exited (its last lines, no code).
 */
export type NodeReport = PhaseReport | AgentFailureReport | StoppedReport;

/** What every report holds. */
interface ReportBase {
  readonly nodeRank: number;
  readonly phase: Phase;
  /** The last lines of the phase's output (the agent's own, for a failure of its step), for `status` and the console. */
  readonly outputTail: string;
  readonly reportedAt: string;
}

/** A phase that ran, and its exit code. */
export interface PhaseReport extends ReportBase {
  readonly exitCode: number;
  /**
   * Setup's only: how long the task's setup itself ran on the node, in ms, as its agent
   * measured it (0: skipped on a node kept from the attempt before). Absent from an
   * agent's report from before it was sent.
   */
  readonly setupMs?: number;
  readonly agentFailure?: undefined;
  readonly stopped?: undefined;
}

/** The node's agent failed one of its own steps before setup: neither setup nor run ran. */
export interface AgentFailureReport extends ReportBase {
  readonly phase: 'setup';
  /** Never set: no phase ran, so there is no code (read it only after `isAgentFailure`). */
  readonly exitCode?: undefined;
  readonly agentFailure: AgentFailure;
  readonly stopped?: undefined;
}

/**
 * The phase was running when its node's agent stopped it (a spot interruption notice, or
 * the node shutting down: a cancel, a release, a signal): its last lines, and no exit
 * code, since the code it would give is relaunch's doing. It decides nothing (the
 * controller learns the attempt's end from EC2's events or the cancel), and it is kept even
 * when it arrives after the attempt ended, so a preempted, lost or cancelled attempt still
 * shows the phase it was in and how far it got.
 */
export interface StoppedReport extends ReportBase {
  readonly exitCode?: undefined;
  readonly agentFailure?: undefined;
  readonly stopped: StopCause;
}

/** Whether a report is an agent's failure rather than a phase's exit code. */
export function isAgentFailure(report: NodeReport): report is AgentFailureReport {
  return report.agentFailure !== undefined;
}

/** Whether a report is a phase stopped before it exited (its tail, no code). */
export function isStopped(report: NodeReport): report is StoppedReport {
  return report.stopped !== undefined;
}

/** Whether a report says how its node's phase ended: an exit code, or its agent's failure. */
export function isPhaseEnd(report: NodeReport): report is PhaseReport | AgentFailureReport {
  return !isStopped(report);
}

/** The policy's decision as stored on the attempt it concerns. */
export interface StoredDecision {
  readonly action: RecoveryAction;
  readonly rule: PolicyRule;
  readonly status: JobStatus;
  readonly reason: string;
  readonly delaySeconds: number;
  readonly decidedAt: string;
  /** The job's counters once the decision was applied; absent on decisions stored before they were kept. */
  readonly counters?: RecoveryCounters;
  /**
   * The nodes a relaunch keeps for the next attempt (lib/reuse-rules.ts), decided with the
   * decision and written in its write; absent: the next attempt runs on fresh nodes.
   */
  readonly keep?: KeptNodes;
}

/**
 * The nodes of a decided attempt that its relaunch runs on again, and how: their job was
 * stopped and each node's agent asks what to do next instead of shutting down. The next
 * attempt launches only the ranks not in `nodes`, in `placement` (the survivors' zone and
 * type), and runs setup on the kept nodes again or not, as `setup` says.
 */
export interface KeptNodes {
  /** The kept nodes, as the decided attempt recorded them (same ranks, same instances). */
  readonly nodes: readonly InstanceRef[];
  /** Where they run: the next attempt's placement. */
  readonly placement: Placement;
  /** `rerun`: setup runs again on kept nodes (SkyPilot's FAILOVER); `skip`: it ran there already. */
  readonly setup: ReuseSetup;
  /** The ranks the next attempt launches anew, each with why its node is not kept. */
  readonly replace: readonly { readonly nodeRank: number; readonly why: string }[];
}

/**
 * EC2's two warnings that a spot instance may go: the interruption warning (two minutes
 * before), and the rebalance recommendation (an elevated risk, often earlier).
 */
export type WarningKind = 'interruption' | 'rebalance';

/**
 * What makes an attempt a standby: launched early by a warning on the attempt before it
 * (`launch_on_warning`), its nodes run setup and hold before run. It becomes the job's live
 * attempt (adopted) once the attempt before it has ended and the policy relaunched the
 * job; otherwise it is let go without running run (released), and charged to nothing.
 * The optional fields are absent, never null, until they happen.
 */
export interface StandbyMark {
  /** The attempt whose warning launched it (this attempt's number minus one). */
  readonly for: number;
  /** The warning that launched it. */
  readonly on: WarningKind;
  /** When the relaunch after `for` made it the job's live attempt. */
  readonly adoptedAt?: string;
  /** When it was let go without running run. */
  readonly releasedAt?: string;
  /** Why it was let go: not needed (the attempt before it succeeded, the job was cancelled), or not launched. */
  readonly releaseReason?: string;
  /**
   * A standby of the warned node alone (`reuse_nodes` on, docs/recovery.md): the nodes of
   * attempt `for` it was launched beside, which join it when it is adopted, the relaunch
   * keeping exactly them; it launched only the ranks they do not cover. Absent: a whole set.
   */
  readonly beside?: readonly InstanceRef[];
}

/** One launch of a job, from placement to outcome and decision. */
export interface AttemptRecord {
  readonly jobId: string;
  /** 1-based. */
  readonly attempt: number;
  /** A pipeline's task (0-based) the attempt ran; null or absent for a one-task job. */
  readonly task?: number | null;
  readonly market: Market;
  readonly placement: Placement | null;
  readonly instances: readonly InstanceRef[];
  /** The Step Functions task token the machine waits on; null until it is waiting. */
  readonly taskToken: string | null;
  /**
   * The state `taskToken` belongs to: AwaitBoot until every node is up, then AwaitAttempt.
   * null with no token, and on attempts stored before AwaitBoot existed (AwaitAttempt's).
   */
  readonly tokenState: AwaitStateName | null;
  /** SHA-256 (hex) of the per-attempt callback secret; the secret itself is never stored. */
  readonly secretHash: string;
  /** Every report received, once per node and phase. */
  readonly reports: readonly NodeReport[];
  /** Set once, when the attempt ends; never overwritten. */
  readonly outcome: AttemptOutcome | null;
  readonly decision: StoredDecision | null;
  readonly startedAt: string;
  readonly lastHeartbeatAt: string | null;
  /** The ranks of the nodes a heartbeat has come from, ascending. */
  readonly nodesHeardFrom: readonly number[];
  /** When EC2 warned that a spot instance of this attempt will be reclaimed. */
  readonly interruptionNoticedAt: string | null;
  /** The rank of the node that warning named; absent when none did (or before it was kept). */
  readonly interruptionNode?: number;
  /**
   * When EC2 recommended rebalancing away from an instance of this attempt; noted only for
   * a job with `launch_on_warning: rebalance` (it asks for a standby, and decides nothing).
   * null or absent: none.
   */
  readonly rebalanceNoticedAt?: string | null;
  /** The rank of the node that recommendation named; absent when none did. */
  readonly rebalanceNode?: number;
  /** Set when this attempt is a standby (launch_on_warning); null or absent for any other. */
  readonly standby?: StandbyMark | null;
  /**
   * When a node of this standby was first told to go on to run, once adopted; null or
   * absent otherwise (an attempt that never held starts run as its setup report is taken).
   */
  readonly runStartedAt?: string | null;
  /** When the attempt ended; for a standby let go unused, when it was released. */
  readonly endedAt: string | null;
  /** Per node rank (as a string key), the points of its timeline relaunch noted; absent: none. */
  readonly nodeMarks?: Readonly<Record<string, NodeMarks>>;
  /** When the controller first asked the attempt's instances to stop (its release); absent: never. */
  readonly stopAskedAt?: string;
  /**
   * When the release of the attempt's instances (all but the nodes its decision keeps)
   * resolved: they were gone or going. Noted once; absent: not released yet, every node
   * kept, or an attempt recorded before it was noted.
   */
  readonly instancesGoneAt?: string;
  /** The job's last progress, as a heartbeat brought it; absent: the job wrote none. */
  readonly progress?: ProgressMark;
}

/** An audit row: one status change of a job. */
export interface JobEvent {
  readonly jobId: string;
  readonly at: string;
  readonly from: JobStatus | null;
  readonly to: JobStatus;
  readonly attempt: number | null;
  readonly reason: string;
}
