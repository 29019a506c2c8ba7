// The recovery policy: after an attempt ends, what the job does next and why (DESIGN.md section 1).

import { JobStatus } from '../status.ts';
import { DEFAULT_MAX_BOOT_FAILURES, formatDuration } from '../task-file/bounds.ts';
import type { RecoveryPolicy, RestartBackoff } from '../task-file/types.ts';
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
  /**
   * Whole seconds since the current wait for capacity began: since the end of the first
   * relaunch launch of the current run that found no capacity. Read only for a LAUNCH_FAILED
   * NO_RESOURCE outcome while `counters.capacityWaits` > 0 (the first such launch starts the
   * wait, at 0 s); absent counts as 0, so launch_timeout then never ends the wait.
   */
  readonly capacityWaitSeconds?: number;
}

/** The first gap of a wait for capacity, in seconds (SkyPilot's recovery starts at 60 s too). */
export const CAPACITY_WAIT_INITIAL_SECONDS = 60;
/** How much each gap of a wait for capacity grows over the previous one (SkyPilot's factor). */
export const CAPACITY_WAIT_FACTOR = 1.6;
/**
 * The longest gap of a wait for capacity, in seconds: 10 minutes. SkyPilot stops growing
 * at 300 s and jitters each gap by up to 40%; relaunch waits exactly (a Wait state takes
 * whole seconds, and simulate repeats itself) and twice as long at most, which halves the
 * launch attempts (each one stored, and a few state transitions) over a wait of hours.
 */
export const CAPACITY_WAIT_MAX_SECONDS = 600;

/**
 * How the reason of a job whose instances never reached relaunch, max_boot_failures times
 * in a row (FAILED_NO_RESOURCE), begins; the decision adds the count and the last reason.
 */
export const NEVER_REACHED = "the instances never reached relaunch: check the subnet's route to the API endpoint";

/** The counters of a job that has not been launched yet. */
export function initialCounters(useSpot: boolean): RecoveryCounters {
  return {
    restartsOnErrors: 0,
    restartsOnExitCodes: 0,
    recoveryCount: 0,
    consecutivePreemptions: 0,
    market: useSpot ? 'spot' : 'on-demand',
    recoverDecisions: 0,
    bootFailuresInARow: 0,
    capacityWaits: 0,
  };
}

/*
 * The decision table, first match wins. n = restartsOnErrors, M = maxRestartsOnErrors.
 *
 * | outcome                                | action  | status                    | counters                                     |
 * |----------------------------------------|---------|---------------------------|----------------------------------------------|
 * | 1. EXITED, every node 0                | SUCCEED | SUCCEEDED                 | -                                            |
 * | B. LOST, never booted, the             | FAIL    | FAILED_NO_RESOURCE        | bootFailuresInARow+1                         |
 * |    max_boot_failures-th in a row       |         |                           |                                              |
 * | A. AGENT_FAILED, the                   | FAIL    | FAILED_SETUP              | bootFailuresInARow+1                         |
 * |    max_boot_failures-th in a row       |         |                           |                                              |
 * | 2. PREEMPTED, LOST or AGENT_FAILED     | RECOVER | RECOVERING                | recoveryCount+1, recoverDecisions+1;         |
 * |                                        |         |                           | n unchanged                                  |
 * |    ... past max_recoveries             | FAIL    | FAILED                    | -                                            |
 * | F. EXITED, a matching code in          | FAIL    | FAILED / FAILED_SETUP     | - (budget left does not matter)              |
 * |    fail_on_exit_codes                  |         |                           |                                              |
 * | 3. EXITED, a matching code in          | RESTART | RECOVERING                | restartsOnExitCodes+1, recoveryCount+1;      |
 * |    recover_on_exit_codes, under the    |         |                           | n unchanged                                  |
 * |    max_restarts_on_exit_codes cap      |         |                           |                                              |
 * | 4. EXITED otherwise (non-zero or       | RESTART | RECOVERING                | n+1, recoveryCount+1     when n+1 <= M       |
 * |    unknown code, setup or run)         | FAIL    | FAILED / FAILED_SETUP     | n+1                      when n+1 >  M       |
 * | LAUNCH_FAILED NO_RESOURCE, first       | FAIL    | FAILED_NO_RESOURCE        | -                                            |
 * |    launch (recoveryCount 0)            |         |                           |                                              |
 * | C. LAUNCH_FAILED NO_RESOURCE, a        | RECOVER | RECOVERING                | capacityWaits+1; recoveryCount unchanged     |
 * |    relaunch, within launch_timeout     |         | ("waiting for capacity")  |                                              |
 * |    ... launch_timeout passed           | FAIL    | FAILED_NO_RESOURCE        | -                                            |
 * | LAUNCH_FAILED PRECHECKS                | FAIL    | FAILED_PRECHECKS          | -                                            |
 * | CANCELLED                              | FAIL    | CANCELLED                 | -                                            |
 *
 * Matching codes (rules F and 3): every node's code, 0 included (as SkyPilot matches
 * them), except a node the controller killed because a peer failed (its 137 says nothing
 * about the job); a failing node's code is tried before a 0, then rank order. Rule 1 comes
 * first, so a code 0 in a list only matters beside a node that failed. In rule 4 the root
 * cause decides: a node the controller did not kill, a known code before an unknown one,
 * then the lowest rank.
 *
 * Streaks, before any row: bootFailuresInARow +1 on a never-booted LOST and on
 * AGENT_FAILED (neither ran the job: rows B and A share the streak), 0 on any other EXITED,
 * PREEMPTED or LOST, kept on LAUNCH_FAILED and CANCELLED. capacityWaits is kept on
 * LAUNCH_FAILED and CANCELLED and 0 otherwise (row C adds 1). max_recoveries counts rule-2
 * RECOVERs only (never-booted and agent-failed ones included), not row C's waits, which
 * launch_timeout bounds.
 *
 * AGENT_FAILED is relaunch's own failure (a pull, a mount, an install, the data
 * credentials), never the job's: it is never charged to max_restarts_on_errors, and its
 * step and error are in the reason.
 *
 * Every row but C: consecutivePreemptions+1 on PREEMPTED, else 0. LOST resets it too: the
 * on-demand fallback answers spot capacity reclaimed by AWS, and a lost heartbeat is not
 * evidence of that. Row C keeps it: no instance ran. When on_demand_fallback_after is set
 * and consecutivePreemptions reaches it, market becomes on-demand and stays so (sticky).
 *
 * Delay, for RESTART and rule-2 RECOVER: with restart_backoff, base = min(max_seconds,
 * initial_seconds * factor^k), k = recoveryCount before this relaunch; jitter full draws
 * uniformly in [0, base]. Always whole seconds in [0, max_seconds] (a Step Functions Wait
 * takes integers). Without restart_backoff, 0. Row C instead waits min(600, 60 * 1.6^w) s,
 * w = capacityWaits before it, rounded, and never past launch_timeout (the last try falls
 * on it); restart_backoff does not apply.
 */

/** Decides what to do after an attempt ended. Pure: the inputs are never modified. */
export function decideRecovery(input: DecideRecoveryInput): RecoveryDecision {
  const { outcome } = input;
  const next: Normalized = { ...input, counters: withStreaks(input.counters, outcome) };
  switch (outcome.kind) {
    case OutcomeKind.EXITED:
      return decideExited(next, outcome.phase, outcome.nodes);
    case OutcomeKind.PREEMPTED:
      return decidePreemptedOrLost(next, 'spot preemption');
    case OutcomeKind.LOST:
      return outcome.neverBooted === true
        ? decideNeverBooted(next, outcome.reason)
        : decidePreemptedOrLost(next, `instance lost (${outcome.reason})`);
    case OutcomeKind.AGENT_FAILED:
      return decideAgentFailed(next, `the agent failed on node ${outcome.nodeRank} at ${outcome.step}: ${outcome.error}`);
    case OutcomeKind.LAUNCH_FAILED:
      return outcome.cause === 'NO_RESOURCE'
        ? decideNoCapacity(next, outcome.reason)
        : finish(next.counters, RecoveryAction.FAIL, JobStatus.FAILED_PRECHECKS, 'LAUNCH_FAILED', `prechecks failed: ${outcome.reason}`);
    case OutcomeKind.CANCELLED:
      return finish(next.counters, RecoveryAction.FAIL, JobStatus.CANCELLED, 'CANCELLED', `${outcome.reason ?? 'cancelled by the user'}; no restart`);
  }
}

/** The input as the rules read it: counters with every field present (absent ones are 0). */
interface Normalized extends DecideRecoveryInput {
  readonly counters: Required<RecoveryCounters>;
}

/** The counters with every field present and the streaks this outcome moves (see the table). */
function withStreaks(counters: RecoveryCounters, outcome: AttemptOutcome): Required<RecoveryCounters> {
  const launched = outcome.kind !== OutcomeKind.LAUNCH_FAILED && outcome.kind !== OutcomeKind.CANCELLED;
  const bootFailures = counters.bootFailuresInARow ?? 0;
  const neverRan = (outcome.kind === OutcomeKind.LOST && outcome.neverBooted === true) || outcome.kind === OutcomeKind.AGENT_FAILED;
  return {
    ...counters,
    recoverDecisions: counters.recoverDecisions ?? 0,
    bootFailuresInARow: neverRan ? bootFailures + 1 : launched ? 0 : bootFailures,
    capacityWaits: launched ? 0 : (counters.capacityWaits ?? 0),
  };
}

/** Rules 1, F, 3 and 4: the attempt's command ended on every node (or stopped reporting). */
function decideExited(input: Normalized, phase: Phase, nodes: readonly NodeExit[]): RecoveryDecision {
  const { policy, counters } = input;
  const failing = nodes.filter((node) => node.exitCode !== 0);
  const multiNode = nodes.length > 1;

  // Rule 1. An attempt with no node at all reported nothing: that is unknown, not success.
  if (nodes.length > 0 && failing.length === 0) {
    const what = multiNode ? `all ${nodes.length} nodes exited 0` : 'exit code 0';
    return finish(counters, RecoveryAction.SUCCEED, JobStatus.SUCCEEDED, 'ALL_EXITED_ZERO', `${what} (${phase}); job succeeded`, 0);
  }

  const notKilled = nodes.filter((node) => node.killedByController !== true);
  const rootCauses = notKilled.filter((node) => node.exitCode !== 0);
  // The codes the lists match: every node's but a killed peer's, failing ones before 0s.
  const matchable = [...rootCauses, ...notKilled.filter((node) => node.exitCode === 0)];
  const failedStatus = phase === 'setup' ? JobStatus.FAILED_SETUP : JobStatus.FAILED;

  // Rule F (relaunch's extension): checked before rule 3, whatever budget is left.
  const failHit = matchable.find((node) => inList(node.exitCode, policy.failOnExitCodes));
  if (failHit !== undefined) {
    const subject = describeNode(failHit, phase, multiNode);
    return finish(counters, RecoveryAction.FAIL, failedStatus, 'FAIL_ON_EXIT_CODE', `${subject} is in fail_on_exit_codes; failing at once, no restart`, failHit.exitCode);
  }

  // Rule 3: unlimited as in SkyPilot, unless max_restarts_on_exit_codes caps it.
  const recoverHit = matchable.find((node) => inList(node.exitCode, policy.recoverOnExitCodes));
  const cap = policy.maxRestartsOnExitCodes;
  if (recoverHit !== undefined) {
    const subject = `${describeNode(recoverHit, phase, multiNode)} is in recover_on_exit_codes`;
    const used = counters.restartsOnExitCodes + 1;
    if (cap === null || used <= cap) {
      const budget = cap === null ? `restart ${used}, unlimited` : `restart ${used} of ${cap} on exit codes, ${cap - used} left`;
      return relaunch(input, RecoveryAction.RESTART, 'RECOVER_ON_EXIT_CODE', { ...counters, restartsOnExitCodes: used }, `${subject}; ${budget}`, recoverHit.exitCode);
    }
  }

  // Rule 4: an ordinary failure (or a rule-3 code past its cap) charges the shared budget;
  // a failing node decides (a rule-3 hit on a 0 is named, but the failure is charged).
  const failedHit = recoverHit !== undefined && recoverHit.exitCode !== 0 ? recoverHit : undefined;
  const decider = failedHit ?? rootCause(rootCauses) ?? rootCause(failing);
  let subject = decider === undefined ? `no exit code was reported (${phase})` : describeNode(decider, phase, multiNode);
  if (recoverHit !== undefined) {
    const capped = `${describeNode(recoverHit, phase, multiNode)} is in recover_on_exit_codes, but max_restarts_on_exit_codes (${String(cap)}) is used up`;
    subject = recoverHit === decider ? capped : `${capped}; ${subject}`;
  }
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

/**
 * Rule 2: capacity went away. Never charged to the error budget; counts toward the
 * fallback and toward max_recoveries, past which the job fails.
 */
function decidePreemptedOrLost(input: Normalized, what: string): RecoveryDecision {
  const { policy, counters, outcome } = input;
  const previous = counters.recoverDecisions;
  const used = previous + 1;
  const cap = policy.maxRecoveries ?? null;
  if (cap !== null && used > cap) {
    const spent = cap === 0 ? 'max_recoveries is 0, so no recovery' : `max_recoveries (${cap}) used up by ${plural(previous, 'recovery', 'recoveries')}`;
    return finish(counters, RecoveryAction.FAIL, JobStatus.FAILED, 'RECOVERIES_EXHAUSTED', `${what}; ${spent}`);
  }
  const preempted = outcome.kind === OutcomeKind.PREEMPTED;
  const inARow = preempted ? counters.consecutivePreemptions + 1 : 0;
  // Only a preemption can trigger the fallback, even if on_demand_fallback_after were 0.
  const fallBack = preempted && policy.onDemandFallbackAfter !== null && inARow >= policy.onDemandFallbackAfter;
  const market: Market = fallBack ? 'on-demand' : counters.market;
  const recovery = counters.recoveryCount + 1;
  const capped = cap === null ? '' : `; ${used} of ${cap} under max_recoveries, ${cap - used} left`;
  const switched = market !== counters.market ? `; ${inARow} preemptions in a row; relaunching on-demand` : '';
  const reason = `${what}; recovery ${recovery}, does not count toward max_restarts_on_errors${capped}${switched}`;
  const next: RecoveryCounters = { ...counters, consecutivePreemptions: inARow, market, recoverDecisions: used };
  return relaunch(input, RecoveryAction.RECOVER, 'PREEMPTED_OR_LOST', next, reason, null);
}

/**
 * Row B: an attempt whose instances never reached relaunch. The max_boot_failures-th in a
 * row ends the job (most often the subnet has no route to the API); before that it is a
 * lost instance like any other.
 */
function decideNeverBooted(input: Normalized, reason: string): RecoveryDecision {
  const { policy, counters } = input;
  const inARow = counters.bootFailuresInARow;
  const max = policy.maxBootFailures ?? DEFAULT_MAX_BOOT_FAILURES;
  if (inARow >= max) {
    const count = `${plural(inARow, 'attempt', 'attempts')} in a row, max_boot_failures ${max}`;
    return finish(counters, RecoveryAction.FAIL, JobStatus.FAILED_NO_RESOURCE, 'BOOT_FAILURES_EXHAUSTED', `${NEVER_REACHED} (${count}; last: ${reason})`);
  }
  return decidePreemptedOrLost(input, `instance lost (${reason}); never booted, ${inARow} of ${max} in a row before the job fails`);
}

/**
 * Row A: a node's agent failed one of its own steps before setup. The max_boot_failures-th
 * attempt in a row that never ran the job ends it FAILED_SETUP (the node could never be set
 * up for it: a missing image, a bucket that is not there); before that it is recovered as a
 * lost instance is, the job's error budget untouched.
 */
function decideAgentFailed(input: Normalized, what: string): RecoveryDecision {
  const { policy, counters } = input;
  const inARow = counters.bootFailuresInARow;
  const max = policy.maxBootFailures ?? DEFAULT_MAX_BOOT_FAILURES;
  if (inARow >= max) {
    const count = `${plural(inARow, 'attempt', 'attempts')} in a row that never ran the job, max_boot_failures ${max}`;
    return finish(counters, RecoveryAction.FAIL, JobStatus.FAILED_SETUP, 'BOOT_FAILURES_EXHAUSTED', `${what} (${count})`);
  }
  return decidePreemptedOrLost(input, `${what}; relaunch's failure, not the job's, ${inARow} of ${max} in a row before the job fails`);
}

/**
 * A launch that found no capacity. The first launch gives up (FAILED_NO_RESOURCE); a
 * relaunch waits and tries again (row C), with a gap growing from 60 s by 1.6 up to
 * 10 min, until launch_timeout, if set, has passed since the wait began.
 */
function decideNoCapacity(input: Normalized, error: string): RecoveryDecision {
  const { policy, counters } = input;
  if (counters.recoveryCount === 0) {
    return finish(counters, RecoveryAction.FAIL, JobStatus.FAILED_NO_RESOURCE, 'LAUNCH_FAILED', `no capacity: ${error}`);
  }
  const tries = counters.capacityWaits;
  const waited = tries === 0 ? 0 : Math.max(0, input.capacityWaitSeconds ?? 0);
  const timeout = policy.launchTimeoutSeconds ?? null;
  if (timeout !== null && waited >= timeout) {
    const reason = `no capacity after waiting ${formatDuration(waited)} (launch_timeout ${formatDuration(timeout)}): ${error}`;
    return finish(counters, RecoveryAction.FAIL, JobStatus.FAILED_NO_RESOURCE, 'LAUNCH_TIMEOUT', reason);
  }
  const grown = Math.round(Math.min(CAPACITY_WAIT_MAX_SECONDS, CAPACITY_WAIT_INITIAL_SECONDS * CAPACITY_WAIT_FACTOR ** tries));
  const gap = timeout === null ? grown : Math.min(grown, Math.ceil(timeout - waited));
  const left = timeout === null ? '' : `; launch_timeout ${formatDuration(timeout)}, ${formatDuration(timeout - waited)} left`;
  const next: RecoveryCounters = { ...counters, capacityWaits: tries + 1 };
  return {
    action: RecoveryAction.RECOVER,
    status: JobStatus.RECOVERING,
    rule: 'WAITING_FOR_CAPACITY',
    counters: next,
    delaySeconds: gap,
    market: next.market,
    reason: `waiting for capacity: ${error}; next try in ${gap} s${left}`,
    decidingExitCode: null,
  };
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

/** `1 attempt`, `3 attempts`. */
function plural(count: number, one: string, many: string): string {
  return `${count} ${count === 1 ? one : many}`;
}
