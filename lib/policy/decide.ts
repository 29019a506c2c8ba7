// The recovery policy: after an attempt ends, what the job does next and why (DESIGN.md section 1).

import { JobStatus } from '../status.ts';
import type { RecoveryPolicy, RestartBackoff } from '../spec/types.ts';
import { describeExitCode } from './signals.ts';
import {
  OutcomeKind,
  RecoveryAction,
  type AttemptOutcome,
  type Market,
  type NodeExit,
  type Phase,
  type PolicyRule,
  type RecoveryCounters,
  type RecoveryDecision,
} from './types.ts';

/** The inputs of one decision. Nothing else is read: no clock, no storage, no environment. */
export interface DecideRecoveryInput {
  readonly policy: RecoveryPolicy;
  /** The counters as persisted after the previous decision (or `initialCounters`). */
  readonly counters: RecoveryCounters;
  readonly outcome: AttemptOutcome;
  /** A draw in [0, 1) for backoff jitter: `Math.random` in production, a constant in tests. */
  readonly random: () => number;
}

/** The counters of a job that has not been launched yet. */
export function initialCounters(useSpot: boolean): RecoveryCounters {
  return {
    restartsOnErrors: 0,
    restartsOnExitCodes: 0,
    recoveryCount: 0,
    consecutivePreemptions: 0,
    market: useSpot ? 'spot' : 'on-demand',
  };
}

/*
 * The decision table, first match wins. n = restartsOnErrors, M = maxRestartsOnErrors.
 *
 * | outcome                                | action  | status                    | counters                                     |
 * |----------------------------------------|---------|---------------------------|----------------------------------------------|
 * | 1. EXITED, every node 0                | SUCCEED | SUCCEEDED                 | -                                            |
 * | 2. PREEMPTED or LOST                   | RECOVER | RECOVERING                | recoveryCount+1 (no limit); n unchanged      |
 * | F. EXITED, a root-cause code in        | FAIL    | FAILED / FAILED_SETUP     | - (budget left does not matter)              |
 * |    fail_on_exit_codes                  |         |                           |                                              |
 * | 3. EXITED, a root-cause code in        | RESTART | RECOVERING                | restartsOnExitCodes+1, recoveryCount+1;      |
 * |    recover_on_exit_codes, under the    |         |                           | n unchanged                                  |
 * |    max_restarts_on_exit_codes cap      |         |                           |                                              |
 * | 4. EXITED otherwise (non-zero or       | RESTART | RECOVERING                | n+1, recoveryCount+1     when n+1 <= M       |
 * |    unknown code, setup or run)         | FAIL    | FAILED / FAILED_SETUP     | n+1                      when n+1 >  M       |
 * | LAUNCH_FAILED                          | FAIL    | FAILED_NO_RESOURCE or     | -                                            |
 * |                                        |         | FAILED_PRECHECKS (cause)  |                                              |
 * | CANCELLED                              | FAIL    | CANCELLED                 | -                                            |
 *
 * Root cause: a node the controller killed because a peer failed never decides while a
 * node it did not kill has failed (its 137 says nothing about the job). Among root causes,
 * a known code decides before an unknown one; then the lowest rank.
 *
 * Every row: consecutivePreemptions+1 on PREEMPTED, else 0. LOST resets it too: the
 * on-demand fallback answers spot capacity reclaimed by AWS, and a lost heartbeat is not
 * evidence of that. When on_demand_fallback_after is set and consecutivePreemptions
 * reaches it, market becomes on-demand and stays so (sticky).
 *
 * Delay, for RESTART and RECOVER only: with restart_backoff, base = min(max_seconds,
 * initial_seconds * factor^k), k = recoveryCount before this relaunch; jitter full draws
 * uniformly in [0, base]. Always whole seconds in [0, max_seconds] (a Step Functions Wait
 * takes integers). Without restart_backoff, 0.
 */

/** Decides what to do after an attempt ended. Pure: the inputs are never modified. */
export function decideRecovery(input: DecideRecoveryInput): RecoveryDecision {
  const { outcome } = input;
  switch (outcome.kind) {
    case OutcomeKind.EXITED:
      return decideExited(input, outcome.phase, outcome.nodes);
    case OutcomeKind.PREEMPTED:
      return decidePreemptedOrLost(input, 'spot preemption');
    case OutcomeKind.LOST:
      return decidePreemptedOrLost(input, `instance lost (${outcome.reason})`);
    case OutcomeKind.LAUNCH_FAILED:
      return outcome.cause === 'NO_RESOURCE'
        ? finish(input.counters, RecoveryAction.FAIL, JobStatus.FAILED_NO_RESOURCE, 'LAUNCH_FAILED', `no capacity: ${outcome.reason}`)
        : finish(input.counters, RecoveryAction.FAIL, JobStatus.FAILED_PRECHECKS, 'LAUNCH_FAILED', `prechecks failed: ${outcome.reason}`);
    case OutcomeKind.CANCELLED:
      return finish(input.counters, RecoveryAction.FAIL, JobStatus.CANCELLED, 'CANCELLED', 'cancelled by the user; no restart');
  }
}

/** Rules 1, F, 3 and 4: the attempt's command ended on every node (or stopped reporting). */
function decideExited(input: DecideRecoveryInput, phase: Phase, nodes: readonly NodeExit[]): RecoveryDecision {
  const { policy, counters } = input;
  const failing = nodes.filter((node) => node.exitCode !== 0);
  const multiNode = nodes.length > 1;

  // Rule 1. An attempt with no node at all reported nothing: that is unknown, not success.
  if (nodes.length > 0 && failing.length === 0) {
    const what = multiNode ? `all ${nodes.length} nodes exited 0` : 'exit code 0';
    return finish(counters, RecoveryAction.SUCCEED, JobStatus.SUCCEEDED, 'ALL_EXITED_ZERO', `${what} (${phase}); job succeeded`, 0);
  }

  const rootCauses = failing.filter((node) => node.killedByController !== true);
  const failedStatus = phase === 'setup' ? JobStatus.FAILED_SETUP : JobStatus.FAILED;

  // Rule F (relaunch's extension): checked before rule 3, whatever budget is left.
  const failHit = rootCauses.find((node) => inList(node.exitCode, policy.failOnExitCodes));
  if (failHit !== undefined) {
    const subject = describeNode(failHit, phase, multiNode);
    return finish(counters, RecoveryAction.FAIL, failedStatus, 'FAIL_ON_EXIT_CODE', `${subject} is in fail_on_exit_codes; failing at once, no restart`, failHit.exitCode);
  }

  // Rule 3: unlimited as in SkyPilot, unless max_restarts_on_exit_codes caps it.
  const recoverHit = rootCauses.find((node) => inList(node.exitCode, policy.recoverOnExitCodes));
  const cap = policy.maxRestartsOnExitCodes;
  if (recoverHit !== undefined) {
    const subject = `${describeNode(recoverHit, phase, multiNode)} is in recover_on_exit_codes`;
    const used = counters.restartsOnExitCodes + 1;
    if (cap === null || used <= cap) {
      const budget = cap === null ? `restart ${used}, unlimited` : `restart ${used} of ${cap} on exit codes, ${cap - used} left`;
      return relaunch(input, RecoveryAction.RESTART, 'RECOVER_ON_EXIT_CODE', { ...counters, restartsOnExitCodes: used }, `${subject}; ${budget}`, recoverHit.exitCode);
    }
  }

  // Rule 4: an ordinary failure (or a rule-3 code past its cap) charges the shared budget.
  const decider = recoverHit ?? rootCause(rootCauses) ?? rootCause(failing);
  const subject =
    recoverHit !== undefined
      ? `${describeNode(recoverHit, phase, multiNode)} is in recover_on_exit_codes, but max_restarts_on_exit_codes (${String(cap)}) is used up`
      : decider === undefined
        ? `no exit code was reported (${phase})`
        : describeNode(decider, phase, multiNode);
  const code = decider?.exitCode ?? null;
  const max = policy.maxRestartsOnErrors;
  const charged = counters.restartsOnErrors + 1;
  if (charged <= max) {
    const budget = `restart ${charged} of ${max} on errors, ${max - charged} left`;
    return relaunch(input, RecoveryAction.RESTART, 'RESTART_ON_ERROR', { ...counters, restartsOnErrors: charged }, `${subject}; ${budget}`, code);
  }
  const spent = max === 0 ? 'max_restarts_on_errors is 0, so no restart' : `max_restarts_on_errors (${max}) used up`;
  return finish({ ...counters, restartsOnErrors: charged }, RecoveryAction.FAIL, failedStatus, 'ERROR_BUDGET_EXHAUSTED', `${subject}; ${spent}`, code);
}

/** Rule 2: capacity went away. Never charged to the error budget; counts toward the fallback. */
function decidePreemptedOrLost(input: DecideRecoveryInput, what: string): RecoveryDecision {
  const { policy, counters, outcome } = input;
  const preempted = outcome.kind === OutcomeKind.PREEMPTED;
  const inARow = preempted ? counters.consecutivePreemptions + 1 : 0;
  // Only a preemption can trigger the fallback, even if on_demand_fallback_after were 0.
  const fallBack = preempted && policy.onDemandFallbackAfter !== null && inARow >= policy.onDemandFallbackAfter;
  const market: Market = fallBack ? 'on-demand' : counters.market;
  const recovery = counters.recoveryCount + 1;
  const switched = market !== counters.market ? `; ${inARow} preemptions in a row; relaunching on-demand` : '';
  const reason = `${what}; recovery ${recovery}, does not count toward max_restarts_on_errors${switched}`;
  return relaunch(input, RecoveryAction.RECOVER, 'PREEMPTED_OR_LOST', { ...counters, consecutivePreemptions: inARow, market }, reason, null);
}

/**
 * A RESTART or RECOVER: charges one recovery, waits per restart_backoff, and resets the
 * preemption streak unless `next` already carries it (rule 2 sets it itself).
 */
function relaunch(
  input: DecideRecoveryInput,
  action: 'RESTART' | 'RECOVER',
  rule: PolicyRule,
  next: RecoveryCounters,
  reason: string,
  decidingExitCode: number | null,
): RecoveryDecision {
  const backoff = input.policy.restartBackoff;
  const wait = backoff === null ? NO_WAIT : backoffDelay(backoff, input.counters.recoveryCount, input.random);
  const counters: RecoveryCounters = {
    ...next,
    recoveryCount: input.counters.recoveryCount + 1,
    consecutivePreemptions: input.outcome.kind === OutcomeKind.PREEMPTED ? next.consecutivePreemptions : 0,
  };
  return {
    action,
    status: JobStatus.RECOVERING,
    rule,
    counters,
    delaySeconds: wait.seconds,
    market: counters.market,
    reason: `${reason}${wait.text}`,
    decidingExitCode,
  };
}

/** A wait before the next attempt, and how the reason says it ('' when there is no backoff). */
interface Wait {
  readonly seconds: number;
  readonly text: string;
}

const NO_WAIT: Wait = { seconds: 0, text: '' };

/** A terminal decision (SUCCEED or FAIL): no relaunch, no delay, the streak ends. */
function finish(
  previous: RecoveryCounters,
  action: 'SUCCEED' | 'FAIL',
  status: JobStatus,
  rule: PolicyRule,
  reason: string,
  decidingExitCode: number | null = null,
): RecoveryDecision {
  const counters: RecoveryCounters = { ...previous, consecutivePreemptions: 0 };
  return { action, status, rule, counters, delaySeconds: 0, market: counters.market, reason, decidingExitCode };
}

/**
 * The wait before relaunch number k+1: the exponential base capped at max_seconds, then
 * jittered. With full jitter the reason also gives the most the draw could have been.
 */
function backoffDelay(backoff: RestartBackoff, k: number, random: () => number): Wait {
  // initial 0 with a huge factor^k would be 0 * Infinity = NaN; 0 means no wait.
  const grown = backoff.initialSeconds <= 0 ? 0 : backoff.initialSeconds * backoff.factor ** k;
  const base = Math.min(backoff.maxSeconds, grown);
  if (backoff.jitter === 'none') {
    const seconds = wholeSeconds(base, backoff.maxSeconds);
    return { seconds, text: `; next attempt in ${seconds} s` };
  }
  const seconds = wholeSeconds(random() * base, backoff.maxSeconds);
  return { seconds, text: `; next attempt in ${seconds} s (full jitter, up to ${wholeSeconds(base, backoff.maxSeconds)} s)` };
}

/** Rounds to whole seconds within [0, max]: a Step Functions Wait takes integers only. */
function wholeSeconds(seconds: number, max: number): number {
  return Math.min(Math.floor(max), Math.max(0, Math.round(seconds)));
}

/** Whether a known exit code is in a policy list (an unknown code is in no list). */
function inList(code: number | null, list: readonly number[]): boolean {
  return code !== null && list.includes(code);
}

/** The node that decides among candidates: a known code before an unknown one, then rank order. */
function rootCause(candidates: readonly NodeExit[]): NodeExit | undefined {
  return candidates.find((node) => node.exitCode !== null) ?? candidates[0];
}

/** `exit code 1 on node 2 (run)`, `exit code unknown (setup; agent stopped reporting)`. */
function describeNode(node: NodeExit, phase: Phase, multiNode: boolean): string {
  const where = multiNode ? ` on node ${node.rank}` : '';
  const killed = node.killedByController === true ? ', killed by relaunch after a peer failed' : '';
  if (node.exitCode === null) {
    const why = node.unknownReason ?? 'no reason was recorded';
    return `exit code unknown${where} (${phase}; ${why})${killed}`;
  }
  return `${describeExitCode(node.exitCode)}${where} (${phase})${killed}`;
}
