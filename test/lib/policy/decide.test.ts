// The recovery policy's decision table, rule by rule and boundary by boundary.

import { describe, expect, it } from 'vitest';
import { decideRecovery, initialCounters } from '../../../lib/policy/decide.ts';
import type { AttemptOutcome, NodeExit, Phase, RecoveryCounters, RecoveryDecision } from '../../../lib/policy/types.ts';
import type { RecoveryPolicy, RestartBackoff } from '../../../lib/spec/types.ts';
import { recoveryPolicy } from '../../fixtures/specs.ts';

function counters(overrides: Partial<RecoveryCounters> = {}): RecoveryCounters {
  return { ...initialCounters(true), ...overrides };
}

/** One node per code, ranks 0, 1, ... */
function exited(phase: Phase, ...codes: (number | null)[]): AttemptOutcome {
  return { kind: 'EXITED', phase, nodes: codes.map((exitCode, rank) => ({ rank, exitCode })) };
}

function nodes(phase: Phase, ...list: NodeExit[]): AttemptOutcome {
  return { kind: 'EXITED', phase, nodes: list };
}

const PREEMPTED: AttemptOutcome = { kind: 'PREEMPTED' };
const LOST: AttemptOutcome = { kind: 'LOST', reason: 'no heartbeat for 300 s' };

function decide(p: RecoveryPolicy, c: RecoveryCounters, outcome: AttemptOutcome, random = () => 0.5): RecoveryDecision {
  return decideRecovery({ policy: p, counters: c, outcome, random });
}

/** Feeds outcomes one after another, as the controller would, from fresh counters. */
function sequence(p: RecoveryPolicy, outcomes: AttemptOutcome[], useSpot = true): RecoveryDecision[] {
  let current = initialCounters(useSpot);
  return outcomes.map((outcome) => {
    const decision = decide(p, current, outcome);
    current = decision.counters;
    return decision;
  });
}

const CODES_64_TO_78 = Array.from({ length: 15 }, (_, i) => 64 + i);

describe('initialCounters', () => {
  it.each([
    ['a spot job starts on spot', true, 'spot'],
    ['an on-demand job starts on-demand', false, 'on-demand'],
  ] as const)('%s, with every count at 0', (_name, useSpot, market) => {
    expect(initialCounters(useSpot)).toEqual({
      restartsOnErrors: 0,
      restartsOnExitCodes: 0,
      recoveryCount: 0,
      consecutivePreemptions: 0,
      market,
    });
  });
});

describe('decideRecovery: action, status, rule and counters', () => {
  type Row = [
    name: string,
    policy: Partial<RecoveryPolicy>,
    counters: Partial<RecoveryCounters>,
    outcome: AttemptOutcome,
    expected: Pick<RecoveryDecision, 'action' | 'status' | 'rule' | 'decidingExitCode'> &
      Pick<RecoveryCounters, 'restartsOnErrors' | 'restartsOnExitCodes' | 'recoveryCount'>,
  ];
  const rows: Row[] = [
    // Rule 1
    ['rule 1: a single node exiting 0 succeeds', {}, {}, exited('run', 0),
      { action: 'SUCCEED', status: 'SUCCEEDED', rule: 'ALL_EXITED_ZERO', decidingExitCode: 0, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 0 }],
    ['rule 1: every node exiting 0 succeeds, counters kept', {}, { restartsOnErrors: 2, recoveryCount: 5 }, exited('run', 0, 0, 0),
      { action: 'SUCCEED', status: 'SUCCEEDED', rule: 'ALL_EXITED_ZERO', decidingExitCode: 0, restartsOnErrors: 2, restartsOnExitCodes: 0, recoveryCount: 5 }],
    ['rule 1 needs a report: no node at all is an unknown failure, never success', {}, {}, exited('run'),
      { action: 'FAIL', status: 'FAILED', rule: 'ERROR_BUDGET_EXHAUSTED', decidingExitCode: null, restartsOnErrors: 1, restartsOnExitCodes: 0, recoveryCount: 0 }],
    // Rule 2
    ['rule 2: a preemption recovers without charging n', { maxRestartsOnErrors: 3 }, { restartsOnErrors: 2, recoveryCount: 4 }, PREEMPTED,
      { action: 'RECOVER', status: 'RECOVERING', rule: 'PREEMPTED_OR_LOST', decidingExitCode: null, restartsOnErrors: 2, restartsOnExitCodes: 0, recoveryCount: 5 }],
    ['rule 2: a lost instance recovers without charging n', { maxRestartsOnErrors: 3 }, { restartsOnErrors: 2, recoveryCount: 4 }, LOST,
      { action: 'RECOVER', status: 'RECOVERING', rule: 'PREEMPTED_OR_LOST', decidingExitCode: null, restartsOnErrors: 2, restartsOnExitCodes: 0, recoveryCount: 5 }],
    ['rule 2 has no limit: recovers with the error budget spent and 1000 recoveries', {}, { restartsOnErrors: 1, recoveryCount: 1000 }, PREEMPTED,
      { action: 'RECOVER', status: 'RECOVERING', rule: 'PREEMPTED_OR_LOST', decidingExitCode: null, restartsOnErrors: 1, restartsOnExitCodes: 0, recoveryCount: 1001 }],
    // Rule 3
    ['rule 3: the one code in the list restarts without charging n', { recoverOnExitCodes: [29] }, {}, exited('run', 29),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RECOVER_ON_EXIT_CODE', decidingExitCode: 29, restartsOnErrors: 0, restartsOnExitCodes: 1, recoveryCount: 1 }],
    ['rule 3: any code of a many-code list restarts', { recoverOnExitCodes: [3, 29, 42] }, {}, exited('run', 42),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RECOVER_ON_EXIT_CODE', decidingExitCode: 42, restartsOnErrors: 0, restartsOnExitCodes: 1, recoveryCount: 1 }],
    ['rule 3: the low end of an expanded range restarts', { recoverOnExitCodes: CODES_64_TO_78 }, {}, exited('run', 64),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RECOVER_ON_EXIT_CODE', decidingExitCode: 64, restartsOnErrors: 0, restartsOnExitCodes: 1, recoveryCount: 1 }],
    ['rule 3: the high end of an expanded range restarts', { recoverOnExitCodes: CODES_64_TO_78 }, {}, exited('run', 78),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RECOVER_ON_EXIT_CODE', decidingExitCode: 78, restartsOnErrors: 0, restartsOnExitCodes: 1, recoveryCount: 1 }],
    ['rule 3: just above a range is an ordinary failure', { recoverOnExitCodes: CODES_64_TO_78 }, {}, exited('run', 79),
      { action: 'FAIL', status: 'FAILED', rule: 'ERROR_BUDGET_EXHAUSTED', decidingExitCode: 79, restartsOnErrors: 1, restartsOnExitCodes: 0, recoveryCount: 0 }],
    ['rule 3: just below a range is an ordinary failure', { recoverOnExitCodes: CODES_64_TO_78 }, {}, exited('run', 63),
      { action: 'FAIL', status: 'FAILED', rule: 'ERROR_BUDGET_EXHAUSTED', decidingExitCode: 63, restartsOnErrors: 1, restartsOnExitCodes: 0, recoveryCount: 0 }],
    ['rule 3 ignores a spent error budget', { recoverOnExitCodes: [29], maxRestartsOnErrors: 1 }, { restartsOnErrors: 2 }, exited('run', 29),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RECOVER_ON_EXIT_CODE', decidingExitCode: 29, restartsOnErrors: 2, restartsOnExitCodes: 1, recoveryCount: 1 }],
    ['rule 3 is unlimited by default (restart 1001)', { recoverOnExitCodes: [29] }, { restartsOnExitCodes: 1000, recoveryCount: 1000 }, exited('run', 29),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RECOVER_ON_EXIT_CODE', decidingExitCode: 29, restartsOnErrors: 0, restartsOnExitCodes: 1001, recoveryCount: 1001 }],
    ['rule 3 applies to setup too', { recoverOnExitCodes: [29] }, {}, exited('setup', 29),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RECOVER_ON_EXIT_CODE', decidingExitCode: 29, restartsOnErrors: 0, restartsOnExitCodes: 1, recoveryCount: 1 }],
    // The rule-3 cap
    ['cap: the last restart the cap allows', { recoverOnExitCodes: [29], maxRestartsOnExitCodes: 2 }, { restartsOnExitCodes: 1, recoveryCount: 1 }, exited('run', 29),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RECOVER_ON_EXIT_CODE', decidingExitCode: 29, restartsOnErrors: 0, restartsOnExitCodes: 2, recoveryCount: 2 }],
    ['cap: past it the code charges the error budget', { recoverOnExitCodes: [29], maxRestartsOnExitCodes: 2, maxRestartsOnErrors: 1 }, { restartsOnExitCodes: 2, recoveryCount: 2 }, exited('run', 29),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RESTART_ON_ERROR', decidingExitCode: 29, restartsOnErrors: 1, restartsOnExitCodes: 2, recoveryCount: 3 }],
    ['cap: past it with no error budget the job fails', { recoverOnExitCodes: [29], maxRestartsOnExitCodes: 2 }, { restartsOnExitCodes: 2, recoveryCount: 2 }, exited('run', 29),
      { action: 'FAIL', status: 'FAILED', rule: 'ERROR_BUDGET_EXHAUSTED', decidingExitCode: 29, restartsOnErrors: 1, restartsOnExitCodes: 2, recoveryCount: 2 }],
    ['cap 0: the code is an ordinary failure from the start', { recoverOnExitCodes: [29], maxRestartsOnExitCodes: 0 }, {}, exited('run', 29),
      { action: 'FAIL', status: 'FAILED', rule: 'ERROR_BUDGET_EXHAUSTED', decidingExitCode: 29, restartsOnErrors: 1, restartsOnExitCodes: 0, recoveryCount: 0 }],
    // fail_on_exit_codes
    ['fail_on: fails at once with budget left', { failOnExitCodes: [3], maxRestartsOnErrors: 5 }, {}, exited('run', 3),
      { action: 'FAIL', status: 'FAILED', rule: 'FAIL_ON_EXIT_CODE', decidingExitCode: 3, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 0 }],
    ['fail_on: in setup it is FAILED_SETUP', { failOnExitCodes: [3], maxRestartsOnErrors: 5 }, {}, exited('setup', 3),
      { action: 'FAIL', status: 'FAILED_SETUP', rule: 'FAIL_ON_EXIT_CODE', decidingExitCode: 3, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 0 }],
    ['fail_on beats recover_on when nodes disagree', { failOnExitCodes: [3], recoverOnExitCodes: [29] }, {}, exited('run', 29, 3),
      { action: 'FAIL', status: 'FAILED', rule: 'FAIL_ON_EXIT_CODE', decidingExitCode: 3, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 0 }],
    ['fail_on ignores a node the controller killed', { failOnExitCodes: [137], maxRestartsOnErrors: 1 }, {},
      nodes('run', { rank: 0, exitCode: 1 }, { rank: 1, exitCode: 137, killedByController: true }),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RESTART_ON_ERROR', decidingExitCode: 1, restartsOnErrors: 1, restartsOnExitCodes: 0, recoveryCount: 1 }],
    // Rule 4
    ['rule 4: the first failure restarts and charges n', { maxRestartsOnErrors: 3 }, {}, exited('run', 1),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RESTART_ON_ERROR', decidingExitCode: 1, restartsOnErrors: 1, restartsOnExitCodes: 0, recoveryCount: 1 }],
    ['rule 4: n reaching M still restarts', { maxRestartsOnErrors: 3 }, { restartsOnErrors: 2, recoveryCount: 2 }, exited('run', 1),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RESTART_ON_ERROR', decidingExitCode: 1, restartsOnErrors: 3, recoveryCount: 3, restartsOnExitCodes: 0 }],
    ['rule 4: n reaching M+1 fails', { maxRestartsOnErrors: 3 }, { restartsOnErrors: 3, recoveryCount: 3 }, exited('run', 1),
      { action: 'FAIL', status: 'FAILED', rule: 'ERROR_BUDGET_EXHAUSTED', decidingExitCode: 1, restartsOnErrors: 4, recoveryCount: 3, restartsOnExitCodes: 0 }],
    ['rule 4 with M=0: the first failure fails', {}, {}, exited('run', 1),
      { action: 'FAIL', status: 'FAILED', rule: 'ERROR_BUDGET_EXHAUSTED', decidingExitCode: 1, restartsOnErrors: 1, restartsOnExitCodes: 0, recoveryCount: 0 }],
    ['rule 4: a setup failure restarts from the same budget', { maxRestartsOnErrors: 1 }, {}, exited('setup', 2),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RESTART_ON_ERROR', decidingExitCode: 2, restartsOnErrors: 1, restartsOnExitCodes: 0, recoveryCount: 1 }],
    ['rule 4: a setup failure past the budget is FAILED_SETUP', { maxRestartsOnErrors: 1 }, { restartsOnErrors: 1 }, exited('setup', 2),
      { action: 'FAIL', status: 'FAILED_SETUP', rule: 'ERROR_BUDGET_EXHAUSTED', decidingExitCode: 2, restartsOnErrors: 2, restartsOnExitCodes: 0, recoveryCount: 0 }],
    ['rule 4: an unknown exit code is a failure, never 0', { maxRestartsOnErrors: 1 }, {}, exited('run', null),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RESTART_ON_ERROR', decidingExitCode: null, restartsOnErrors: 1, restartsOnExitCodes: 0, recoveryCount: 1 }],
    ['rule 4: an unknown exit code fails once the budget is spent', {}, {}, exited('run', null),
      { action: 'FAIL', status: 'FAILED', rule: 'ERROR_BUDGET_EXHAUSTED', decidingExitCode: null, restartsOnErrors: 1, restartsOnExitCodes: 0, recoveryCount: 0 }],
    // Multi-node
    ['multi-node: one node 0 and one 29 in the list restarts by rule 3', { recoverOnExitCodes: [29] }, {}, exited('run', 0, 29),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RECOVER_ON_EXIT_CODE', decidingExitCode: 29, restartsOnErrors: 0, restartsOnExitCodes: 1, recoveryCount: 1 }],
    ['multi-node: one node 1 and another 29 in the list restarts by rule 3', { recoverOnExitCodes: [29] }, {}, exited('run', 1, 29),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RECOVER_ON_EXIT_CODE', decidingExitCode: 29, restartsOnErrors: 0, restartsOnExitCodes: 1, recoveryCount: 1 }],
    ['multi-node: a killed peer\'s 137 in the list does not match; the root cause decides', { recoverOnExitCodes: [137] }, {},
      nodes('run', { rank: 0, exitCode: 1 }, { rank: 1, exitCode: 137, killedByController: true }),
      { action: 'FAIL', status: 'FAILED', rule: 'ERROR_BUDGET_EXHAUSTED', decidingExitCode: 1, restartsOnErrors: 1, restartsOnExitCodes: 0, recoveryCount: 0 }],
    ['multi-node: the root cause\'s code in the list restarts even beside a killed peer', { recoverOnExitCodes: [29, 137] }, {},
      nodes('run', { rank: 0, exitCode: 137, killedByController: true }, { rank: 1, exitCode: 29 }),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RECOVER_ON_EXIT_CODE', decidingExitCode: 29, restartsOnErrors: 0, restartsOnExitCodes: 1, recoveryCount: 1 }],
    ['multi-node: a known code decides before an unknown one', { maxRestartsOnErrors: 1 }, {}, exited('run', null, 2),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RESTART_ON_ERROR', decidingExitCode: 2, restartsOnErrors: 1, restartsOnExitCodes: 0, recoveryCount: 1 }],
    ['multi-node: with only killed nodes failing, rule 3 still does not apply to them', { recoverOnExitCodes: [137] }, {},
      nodes('run', { rank: 0, exitCode: 0 }, { rank: 1, exitCode: 137, killedByController: true }),
      { action: 'FAIL', status: 'FAILED', rule: 'ERROR_BUDGET_EXHAUSTED', decidingExitCode: 137, restartsOnErrors: 1, restartsOnExitCodes: 0, recoveryCount: 0 }],
    // Outcomes that end the job whatever the budget
    ['launch failed for want of capacity: FAILED_NO_RESOURCE', { maxRestartsOnErrors: 5 }, {},
      { kind: 'LAUNCH_FAILED', cause: 'NO_RESOURCE', reason: 'InsufficientInstanceCapacity in 6 zones' },
      { action: 'FAIL', status: 'FAILED_NO_RESOURCE', rule: 'LAUNCH_FAILED', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 0 }],
    ['launch failed prechecks: FAILED_PRECHECKS', { maxRestartsOnErrors: 5 }, {},
      { kind: 'LAUNCH_FAILED', cause: 'PRECHECKS', reason: 'image ami-123 not found in us-east-1' },
      { action: 'FAIL', status: 'FAILED_PRECHECKS', rule: 'LAUNCH_FAILED', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 0 }],
    ['cancelled: CANCELLED with budget left', { maxRestartsOnErrors: 5 }, { recoveryCount: 2 }, { kind: 'CANCELLED' },
      { action: 'FAIL', status: 'CANCELLED', rule: 'CANCELLED', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 2 }],
  ];

  it.each(rows)('%s', (_name, p, c, outcome, expected) => {
    const decision = decide(recoveryPolicy(p), counters(c), outcome);
    expect({
      action: decision.action,
      status: decision.status,
      rule: decision.rule,
      decidingExitCode: decision.decidingExitCode,
      restartsOnErrors: decision.counters.restartsOnErrors,
      restartsOnExitCodes: decision.counters.restartsOnExitCodes,
      recoveryCount: decision.counters.recoveryCount,
    }).toEqual(expected);
  });
});

describe('decideRecovery: the reason names the rule, the budget charged and what is left', () => {
  it.each([
    ['success, one node', {}, {}, exited('run', 0), 'exit code 0 (run); job succeeded'],
    ['success, every node', {}, {}, exited('run', 0, 0), 'all 2 nodes exited 0 (run); job succeeded'],
    ['rule 3, unlimited', { recoverOnExitCodes: [29] }, { restartsOnExitCodes: 3 }, exited('run', 29),
      'exit code 29 (run) is in recover_on_exit_codes; restart 4, unlimited'],
    ['rule 3, capped', { recoverOnExitCodes: [29], maxRestartsOnExitCodes: 3 }, { restartsOnExitCodes: 1 }, exited('run', 29),
      'exit code 29 (run) is in recover_on_exit_codes; restart 2 of 3 on exit codes, 1 left'],
    ['rule 3 past its cap falls to rule 4', { recoverOnExitCodes: [29], maxRestartsOnExitCodes: 3, maxRestartsOnErrors: 3 }, { restartsOnExitCodes: 3 }, exited('run', 29),
      'exit code 29 (run) is in recover_on_exit_codes, but max_restarts_on_exit_codes (3) is used up; restart 1 of 3 on errors, 2 left'],
    ['rule 4 on a multi-node job names the node', { maxRestartsOnErrors: 3 }, { restartsOnErrors: 1 }, exited('run', 1, 0),
      'exit code 1 on node 0 (run); restart 2 of 3 on errors, 1 left'],
    ['rule 4 with the budget used up', { maxRestartsOnErrors: 3 }, { restartsOnErrors: 3 }, exited('setup', 1),
      'exit code 1 (setup); max_restarts_on_errors (3) used up'],
    ['rule 4 with M=0', {}, {}, exited('run', 1), 'exit code 1 (run); max_restarts_on_errors is 0, so no restart'],
    ['a signal is decoded', { maxRestartsOnErrors: 2 }, {}, exited('run', 137),
      'exit code 137 (SIGKILL, often out of memory) (run); restart 1 of 2 on errors, 1 left'],
    ['an unknown code says it is unknown and why', { maxRestartsOnErrors: 2 }, {},
      nodes('run', { rank: 0, exitCode: 0 }, { rank: 1, exitCode: null, unknownReason: 'the agent stopped reporting' }),
      'exit code unknown on node 1 (run; the agent stopped reporting); restart 1 of 2 on errors, 1 left'],
    ['an unknown code without a recorded reason says so', {}, {}, exited('run', null),
      'exit code unknown (run; no reason was recorded); max_restarts_on_errors is 0, so no restart'],
    ['no node reported at all', {}, {}, exited('setup'), 'no exit code was reported (setup); max_restarts_on_errors is 0, so no restart'],
    ['a killed node decides only when nothing else failed, and is named as killed', {}, {},
      nodes('run', { rank: 0, exitCode: 0 }, { rank: 1, exitCode: 137, killedByController: true }),
      'exit code 137 (SIGKILL, often out of memory) on node 1 (run), killed by relaunch after a peer failed; max_restarts_on_errors is 0, so no restart'],
    ['fail_on', { failOnExitCodes: [3], maxRestartsOnErrors: 3 }, {}, exited('run', 0, 3),
      'exit code 3 on node 1 (run) is in fail_on_exit_codes; failing at once, no restart'],
    ['spot preemption', {}, { recoveryCount: 1 }, PREEMPTED,
      'spot preemption; recovery 2, does not count toward max_restarts_on_errors'],
    ['lost instance', {}, {}, LOST,
      'instance lost (no heartbeat for 300 s); recovery 1, does not count toward max_restarts_on_errors'],
    ['no capacity', {}, {}, { kind: 'LAUNCH_FAILED', cause: 'NO_RESOURCE', reason: 'InsufficientInstanceCapacity in 6 zones' },
      'no capacity: InsufficientInstanceCapacity in 6 zones'],
    ['prechecks', {}, {}, { kind: 'LAUNCH_FAILED', cause: 'PRECHECKS', reason: 'image ami-123 not found in us-east-1' },
      'prechecks failed: image ami-123 not found in us-east-1'],
    ['cancelled', {}, {}, { kind: 'CANCELLED' }, 'cancelled by the user; no restart'],
  ] as [string, Partial<RecoveryPolicy>, Partial<RecoveryCounters>, AttemptOutcome, string][])(
    '%s',
    (_name, p, c, outcome, reason) => {
      expect(decide(recoveryPolicy(p), counters(c), outcome).reason).toBe(reason);
    },
  );
});

describe('decideRecovery: sequences', () => {
  it('max_restarts_on_errors: 3 gives 4 attempts for ordinary failures', () => {
    const decisions = sequence(recoveryPolicy({ maxRestartsOnErrors: 3 }), Array(4).fill(exited('run', 1)));
    expect(decisions.map((d) => [d.action, d.counters.restartsOnErrors, d.counters.recoveryCount])).toEqual([
      ['RESTART', 1, 1],
      ['RESTART', 2, 2],
      ['RESTART', 3, 3],
      ['FAIL', 4, 3],
    ]);
    expect(decisions[3]?.status).toBe('FAILED');
  });

  it('setup and run failures share one budget; the phase that exhausts it names the status', () => {
    const decisions = sequence(recoveryPolicy({ maxRestartsOnErrors: 2 }), [exited('setup', 1), exited('run', 1), exited('setup', 1)]);
    expect(decisions.map((d) => [d.action, d.status, d.counters.restartsOnErrors])).toEqual([
      ['RESTART', 'RECOVERING', 1],
      ['RESTART', 'RECOVERING', 2],
      ['FAIL', 'FAILED_SETUP', 3],
    ]);
  });

  it('preemptions and rule-3 restarts between failures leave the error budget alone', () => {
    const decisions = sequence(recoveryPolicy({ maxRestartsOnErrors: 1, recoverOnExitCodes: [29] }), [
      exited('run', 1),
      PREEMPTED,
      exited('run', 29),
      LOST,
      exited('run', 1),
    ]);
    expect(decisions.map((d) => d.action)).toEqual(['RESTART', 'RECOVER', 'RESTART', 'RECOVER', 'FAIL']);
    expect(decisions.at(-1)?.counters).toEqual({
      restartsOnErrors: 2,
      restartsOnExitCodes: 1,
      recoveryCount: 4,
      consecutivePreemptions: 0,
      market: 'spot',
    });
  });
});

describe('decideRecovery: restart backoff', () => {
  const exponential: RestartBackoff = { initialSeconds: 10, factor: 2, maxSeconds: 100, jitter: 'none' };

  it.each([
    ['k=0 waits initial_seconds', exponential, 0, 0.5, 10],
    ['k=1 waits initial * factor', exponential, 1, 0.5, 20],
    ['k=3 waits initial * factor^3', exponential, 3, 0.5, 80],
    ['k=4 is capped at max_seconds', exponential, 4, 0.5, 100],
    ['a huge k stays at max_seconds (factor^k overflows to Infinity)', exponential, 5000, 0.5, 100],
    ['full jitter draws random() * base', { ...exponential, jitter: 'full' }, 1, 0.25, 5],
    ['full jitter rounds to whole seconds', { ...exponential, jitter: 'full' }, 0, 0.33, 3],
    ['full jitter with random 0 waits 0', { ...exponential, jitter: 'full' }, 2, 0, 0],
    ['full jitter never exceeds max_seconds', { ...exponential, jitter: 'full' }, 10, 0.999999, 100],
    ['a negative draw never waits a negative time', { ...exponential, jitter: 'full' }, 1, -0.5, 0],
    ['a fractional max is never exceeded after rounding', { initialSeconds: 1.5, factor: 1, maxSeconds: 1.5, jitter: 'none' }, 0, 0.5, 1],
    ['initial 0 waits 0 even when factor^k overflows', { ...exponential, initialSeconds: 0 }, 5000, 0.5, 0],
  ] as [string, RestartBackoff, number, number, number][])('%s', (_name, backoff, k, draw, seconds) => {
    const decision = decide(
      recoveryPolicy({ restartBackoff: backoff, maxRestartsOnErrors: 1 }),
      counters({ recoveryCount: k }),
      exited('run', 1),
      () => draw,
    );
    expect(decision.delaySeconds).toBe(seconds);
    expect(Number.isInteger(decision.delaySeconds)).toBe(true);
  });

  it('without restart_backoff a relaunch waits 0 and the reason says nothing of waiting', () => {
    const decision = decide(recoveryPolicy({ maxRestartsOnErrors: 1 }), counters({ recoveryCount: 7 }), exited('run', 1));
    expect(decision.delaySeconds).toBe(0);
    expect(decision.reason).not.toMatch(/next attempt/);
  });

  it('a recovery after preemption waits too, and k counts every earlier relaunch', () => {
    const decision = decide(recoveryPolicy({ restartBackoff: exponential }), counters({ recoveryCount: 2 }), PREEMPTED);
    expect(decision.delaySeconds).toBe(40);
    expect(decision.reason).toBe('spot preemption; recovery 3, does not count toward max_restarts_on_errors; next attempt in 40 s');
  });

  it('with full jitter the reason gives the draw and its upper bound', () => {
    const decision = decide(
      recoveryPolicy({ restartBackoff: { ...exponential, jitter: 'full' }, recoverOnExitCodes: [29] }),
      counters({ recoveryCount: 1 }),
      exited('run', 29),
      () => 0.25,
    );
    expect(decision.reason).toBe('exit code 29 (run) is in recover_on_exit_codes; restart 1, unlimited; next attempt in 5 s (full jitter, up to 20 s)');
  });

  it.each([
    ['SUCCEED', exited('run', 0)],
    ['FAIL', exited('run', 1)],
    ['FAIL (cancelled)', { kind: 'CANCELLED' }],
  ] as [string, AttemptOutcome][])('%s never waits', (_name, outcome) => {
    const decision = decide(recoveryPolicy({ restartBackoff: exponential }), counters({ recoveryCount: 3 }), outcome);
    expect(decision.delaySeconds).toBe(0);
    expect(decision.reason).not.toMatch(/next attempt/);
  });
});

describe('decideRecovery: on-demand fallback', () => {
  const fallbackAfter3 = recoveryPolicy({ onDemandFallbackAfter: 3, maxRestartsOnErrors: 5, recoverOnExitCodes: [29] });

  it('after 3 preemptions in a row the next attempt is on-demand, and the reason says so', () => {
    const decisions = sequence(fallbackAfter3, [PREEMPTED, PREEMPTED, PREEMPTED]);
    expect(decisions.map((d) => [d.market, d.counters.market, d.counters.consecutivePreemptions])).toEqual([
      ['spot', 'spot', 1],
      ['spot', 'spot', 2],
      ['on-demand', 'on-demand', 3],
    ]);
    expect(decisions[2]?.reason).toBe(
      'spot preemption; recovery 3, does not count toward max_restarts_on_errors; 3 preemptions in a row; relaunching on-demand',
    );
  });

  it('the fallback is sticky: later outcomes stay on-demand and the switch is announced once', () => {
    const decisions = sequence(fallbackAfter3, [PREEMPTED, PREEMPTED, PREEMPTED, exited('run', 1), PREEMPTED, LOST]);
    expect(decisions.slice(3).map((d) => d.market)).toEqual(['on-demand', 'on-demand', 'on-demand']);
    expect(decisions[4]?.reason).not.toMatch(/relaunching on-demand/);
  });

  it.each([
    ['a restart on error', exited('run', 1)],
    ['a rule-3 restart', exited('run', 29)],
    ['a lost instance (not a spot reclaim)', LOST],
  ] as [string, AttemptOutcome][])('%s resets the preemption streak', (_name, between) => {
    const decisions = sequence(fallbackAfter3, [PREEMPTED, PREEMPTED, between, PREEMPTED, PREEMPTED]);
    expect(decisions[2]?.counters.consecutivePreemptions).toBe(0);
    expect(decisions.map((d) => d.market)).toEqual(['spot', 'spot', 'spot', 'spot', 'spot']);
  });

  it('terminal decisions reset the streak too', () => {
    const decision = decide(fallbackAfter3, counters({ consecutivePreemptions: 2 }), { kind: 'CANCELLED' });
    expect(decision.counters.consecutivePreemptions).toBe(0);
  });

  it('without on_demand_fallback_after a spot job stays on spot however many preemptions', () => {
    const decisions = sequence(recoveryPolicy(), Array(20).fill(PREEMPTED));
    expect(decisions.at(-1)?.market).toBe('spot');
    expect(decisions.at(-1)?.counters.consecutivePreemptions).toBe(20);
  });

  it('a lost instance never triggers the fallback, even with a threshold of 0', () => {
    const decision = decide(recoveryPolicy({ onDemandFallbackAfter: 0 }), counters(), LOST);
    expect(decision.market).toBe('spot');
  });

  it('an on-demand job is never announced as switching', () => {
    const decisions = sequence(fallbackAfter3, [PREEMPTED, PREEMPTED, PREEMPTED], false);
    expect(decisions.map((d) => d.market)).toEqual(['on-demand', 'on-demand', 'on-demand']);
    expect(decisions[2]?.reason).not.toMatch(/relaunching on-demand/);
  });
});

describe('decideRecovery: purity', () => {
  function deepFreeze<T>(value: T): T {
    if (typeof value === 'object' && value !== null) {
      for (const inner of Object.values(value)) deepFreeze(inner);
      Object.freeze(value);
    }
    return value;
  }

  it.each([
    ['a restart on error', exited('run', 1, 0)],
    ['a rule-3 restart', exited('run', 29)],
    ['a preemption that triggers the fallback', PREEMPTED],
    ['a success', exited('run', 0)],
  ] as [string, AttemptOutcome][])('%s leaves its (frozen) inputs as they were and repeats exactly', (_name, outcome) => {
    const p = recoveryPolicy({
      maxRestartsOnErrors: 2,
      recoverOnExitCodes: [29],
      restartBackoff: { initialSeconds: 1, factor: 2, maxSeconds: 8, jitter: 'full' },
      onDemandFallbackAfter: 1,
    });
    const c = counters({ recoveryCount: 2 });
    const input = deepFreeze({ policy: p, counters: c, outcome, random: () => 0.5 });
    const before = structuredClone({ policy: p, counters: c, outcome });

    const first = decideRecovery(input);
    const second = decideRecovery(input);

    expect({ policy: input.policy, counters: input.counters, outcome: input.outcome }).toEqual(before);
    expect(second).toEqual(first);
    expect(first.counters).not.toBe(input.counters);
  });
});
