// The recovery policy's inputs and output: what happened to an attempt, and what to do next.

import type { AgentStep } from '../agent/protocol.ts';
import type { JobStatus } from '../status.ts';

/** Spot or on-demand capacity. */
export type Market = 'spot' | 'on-demand';

/** The phase an attempt was in when it ended. */
export type Phase = 'setup' | 'run';

/** One node's end: its exit code, or null with the reason it is unknown. */
export interface NodeExit {
  readonly rank: number;
  /** null: the code is unknown (never silently 0); `unknownReason` says why. */
  readonly exitCode: number | null;
  readonly unknownReason?: string;
  /** The controller killed this node because a peer failed; its code never triggers rule 3. */
  readonly killedByController?: boolean;
}

/** How an attempt ended. */
export type AttemptOutcome =
  | { readonly kind: 'EXITED'; readonly phase: Phase; readonly nodes: readonly NodeExit[] }
  | {
      readonly kind: 'PREEMPTED';
      /**
       * The ranks of the nodes reclaimed or warned, when an EC2 event (or the local runtime)
       * named their instances; absent: not known which (every node is then replaced).
       */
      readonly nodes?: readonly number[];
    }
  | {
      readonly kind: 'LOST';
      readonly reason: string;
      /** The ranks of the nodes lost, when known (an instance seen gone); absent: not known which. */
      readonly nodes?: readonly number[];
      /**
       * true: no node of the attempt ever reached relaunch (no first heartbeat within the
       * heartbeat timeout). Such attempts in a row count toward max_boot_failures.
       */
      readonly neverBooted?: boolean;
    }
  | {
      /**
       * A node's agent failed one of its own steps before setup (a pull, a mount, an
       * install, the job's data credentials): relaunch's failure, recovered like a lost
       * instance and never charged to max_restarts_on_errors.
       */
      readonly kind: 'AGENT_FAILED';
      readonly nodeRank: number;
      readonly step: AgentStep;
      readonly error: string;
    }
  | { readonly kind: 'LAUNCH_FAILED'; readonly cause: 'NO_RESOURCE' | 'PRECHECKS'; readonly reason: string }
  | {
      readonly kind: 'CANCELLED';
      /** Who or what cancelled it, when not the user (`the local runtime was stopped ...`). */
      readonly reason?: string;
    };

/**
 * The kinds of attempt outcome, as stored, shown and carried to the state machine (the
 * contract's AwaitResultSchema is `z.enum(OutcomeKind)`): one value per `AttemptOutcome` kind
 * (`satisfies` fails the build if a kind is added to the union and not here, or vice versa).
 */
export const OutcomeKind = {
  EXITED: 'EXITED',
  PREEMPTED: 'PREEMPTED',
  LOST: 'LOST',
  AGENT_FAILED: 'AGENT_FAILED',
  LAUNCH_FAILED: 'LAUNCH_FAILED',
  CANCELLED: 'CANCELLED',
} as const satisfies { readonly [K in AttemptOutcome['kind']]: K };
export type OutcomeKind = (typeof OutcomeKind)[keyof typeof OutcomeKind];

/** What the job has used so far; persisted after every decision. */
export interface RecoveryCounters {
  /** n: restarts charged to max_restarts_on_errors. */
  readonly restartsOnErrors: number;
  /** Restarts caused by recover_on_exit_codes (capped by max_restarts_on_exit_codes). */
  readonly restartsOnExitCodes: number;
  /** Every relaunch, for any reason. */
  readonly recoveryCount: number;
  /** Preemptions in a row, reset by any other outcome. */
  readonly consecutivePreemptions: number;
  /** The market the next attempt uses; on-demand fallback is sticky. */
  readonly market: Market;
  /*
   * The three below are written by every decision (initialCounters sets them too); they are
   * optional only because counters stored before they existed lack them: absent means 0.
   */
  /** RECOVER decisions for preemptions and lost instances so far, capped by max_recoveries. */
  readonly recoverDecisions?: number;
  /**
   * Attempts in a row that never ran the job: instances that never reached relaunch (LOST
   * with neverBooted) or whose agent failed before setup (AGENT_FAILED), capped by
   * max_boot_failures; reset by any attempt that ran it (EXITED, PREEMPTED, or LOST after a
   * heartbeat), kept by a launch that failed.
   */
  readonly bootFailuresInARow?: number;
  /**
   * Relaunch launches in a row that found no capacity: the tries of the current wait for
   * capacity so far, which set its next gap. 0 when not waiting; reset by any attempt that
   * launched.
   */
  readonly capacityWaits?: number;
}

/**
 * The four things the controller can do after an attempt. The policy returns one, the
 * contract's schema checks it, and the state machine's Choice branches on it.
 */
export const RecoveryAction = {
  SUCCEED: 'SUCCEED',
  RESTART: 'RESTART',
  RECOVER: 'RECOVER',
  FAIL: 'FAIL',
  /** A pipeline's task succeeded and another follows: the job runs it (never from decideRecovery). */
  NEXT_TASK: 'NEXT_TASK',
} as const;
export type RecoveryAction = (typeof RecoveryAction)[keyof typeof RecoveryAction];

/** Which rule of the decision table matched. */
export type PolicyRule =
  | 'ALL_EXITED_ZERO'
  | 'PREEMPTED_OR_LOST'
  | 'FAIL_ON_EXIT_CODE'
  | 'RECOVER_ON_EXIT_CODE'
  | 'RESTART_ON_ERROR'
  | 'ERROR_BUDGET_EXHAUSTED'
  | 'LAUNCH_FAILED'
  | 'WAITING_FOR_CAPACITY'
  | 'LAUNCH_TIMEOUT'
  | 'RECOVERIES_EXHAUSTED'
  | 'BOOT_FAILURES_EXHAUSTED'
  | 'CANCELLED';

/** The policy's answer, with everything needed to carry it out and explain it. */
export interface RecoveryDecision {
  readonly action: RecoveryAction;
  /** The job's status after this decision (RECOVERING for a relaunch). */
  readonly status: JobStatus;
  readonly rule: PolicyRule;
  readonly counters: RecoveryCounters;
  /**
   * Whole seconds to wait before relaunching (0 when not relaunching): the backoff, or for
   * WAITING_FOR_CAPACITY the gap before the next try at launching.
   */
  readonly delaySeconds: number;
  /** The market for the next attempt. */
  readonly market: Market;
  /** One sentence for a person: the rule, the budget charged, what is left. */
  readonly reason: string;
  /** The exit code that decided, when one did. */
  readonly decidingExitCode: number | null;
}
