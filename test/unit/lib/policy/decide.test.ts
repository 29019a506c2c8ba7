// The recovery policy's decision table, rule by rule and boundary by boundary.

import { describe, expect, it } from 'vitest';
import { decideRecovery, initialCounters, NEVER_REACHED } from '../../../../lib/policy/decide.ts';
import type { AttemptOutcome, NodeExit, Phase, RecoveryCounters, RecoveryDecision } from '../../../../lib/policy/types.ts';
import type { RecoveryPolicy, RestartBackoff } from '../../../../lib/task-file/types.ts';
import { recoveryPolicy } from '../../../support/fixtures/specs.ts';

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
const NEVER_BOOTED: AttemptOutcome = { kind: 'LOST', reason: 'no heartbeat since launch for 300 s', neverBooted: true };
const NO_CAPACITY: AttemptOutcome = { kind: 'LAUNCH_FAILED', cause: 'NO_RESOURCE', reason: 'InsufficientInstanceCapacity in 6 zones' };
const AGENT_FAILED: AttemptOutcome = { kind: 'AGENT_FAILED', nodeRank: 1, step: 'image-pull', error: 'toomanyrequests: You have reached your pull rate limit' };

function decide(
  p: RecoveryPolicy,
  c: RecoveryCounters,
  outcome: AttemptOutcome,
  random = () => 0.5,
  capacityWaitSeconds?: number,
): RecoveryDecision {
  return decideRecovery({ policy: p, counters: c, outcome, random, capacityWaitSeconds });
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
      recoverDecisions: 0,
      bootFailuresInARow: 0,
      capacityWaits: 0,
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
    // Every node's code is matched, 0 included, except a peer the controller killed
    ['matching: with [0], a node that exited 0 beside a failing one restarts by rule 3', { recoverOnExitCodes: [0] }, {}, exited('run', 0, 1),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RECOVER_ON_EXIT_CODE', decidingExitCode: 0, restartsOnErrors: 0, restartsOnExitCodes: 1, recoveryCount: 1 }],
    ['matching: with [0], every node exiting 0 still succeeds (rule 1 first)', { recoverOnExitCodes: [0] }, {}, exited('run', 0, 0),
      { action: 'SUCCEED', status: 'SUCCEEDED', rule: 'ALL_EXITED_ZERO', decidingExitCode: 0, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 0 }],
    ['matching: with [0], a 0 in setup beside a setup failure restarts', { recoverOnExitCodes: [0] }, {}, exited('setup', 2, 0),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RECOVER_ON_EXIT_CODE', decidingExitCode: 0, restartsOnErrors: 0, restartsOnExitCodes: 1, recoveryCount: 1 }],
    ['matching: a killed peer stays out of the match, even with code 0', { recoverOnExitCodes: [0] }, {},
      nodes('run', { rank: 0, exitCode: 1 }, { rank: 1, exitCode: 0, killedByController: true }),
      { action: 'FAIL', status: 'FAILED', rule: 'ERROR_BUDGET_EXHAUSTED', decidingExitCode: 1, restartsOnErrors: 1, restartsOnExitCodes: 0, recoveryCount: 0 }],
    ['matching: a failing code in the list decides before a listed 0', { recoverOnExitCodes: [0, 29] }, {}, exited('run', 0, 29),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RECOVER_ON_EXIT_CODE', decidingExitCode: 29, restartsOnErrors: 0, restartsOnExitCodes: 1, recoveryCount: 1 }],
    ['matching: fail_on_exit_codes matches a 0 beside a failure too', { failOnExitCodes: [0], maxRestartsOnErrors: 3 }, {}, exited('run', 1, 0),
      { action: 'FAIL', status: 'FAILED', rule: 'FAIL_ON_EXIT_CODE', decidingExitCode: 0, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 0 }],
    ['matching: a listed 0 past the cap charges the failing node\'s error', { recoverOnExitCodes: [0], maxRestartsOnExitCodes: 1, maxRestartsOnErrors: 1 }, { restartsOnExitCodes: 1, recoveryCount: 1 }, exited('run', 0, 1),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RESTART_ON_ERROR', decidingExitCode: 1, restartsOnErrors: 1, restartsOnExitCodes: 1, recoveryCount: 2 }],
    // max_recoveries
    ['max_recoveries: a recovery under the cap', { maxRecoveries: 2 }, { recoverDecisions: 1, recoveryCount: 1 }, PREEMPTED,
      { action: 'RECOVER', status: 'RECOVERING', rule: 'PREEMPTED_OR_LOST', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 2 }],
    ['max_recoveries: past the cap a preemption fails the job', { maxRecoveries: 2, maxRestartsOnErrors: 5 }, { recoverDecisions: 2, recoveryCount: 2 }, PREEMPTED,
      { action: 'FAIL', status: 'FAILED', rule: 'RECOVERIES_EXHAUSTED', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 2 }],
    ['max_recoveries: past the cap a lost instance fails the job', { maxRecoveries: 2 }, { recoverDecisions: 2, recoveryCount: 5 }, LOST,
      { action: 'FAIL', status: 'FAILED', rule: 'RECOVERIES_EXHAUSTED', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 5 }],
    ['max_recoveries 0: the first preemption fails the job', { maxRecoveries: 0 }, {}, PREEMPTED,
      { action: 'FAIL', status: 'FAILED', rule: 'RECOVERIES_EXHAUSTED', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 0 }],
    ['max_recoveries leaves restarts on exit codes alone', { maxRecoveries: 0, recoverOnExitCodes: [29] }, {}, exited('run', 29),
      { action: 'RESTART', status: 'RECOVERING', rule: 'RECOVER_ON_EXIT_CODE', decidingExitCode: 29, restartsOnErrors: 0, restartsOnExitCodes: 1, recoveryCount: 1 }],
    // Attempts that never booted
    ['never booted, the first: an ordinary recovery', {}, {}, NEVER_BOOTED,
      { action: 'RECOVER', status: 'RECOVERING', rule: 'PREEMPTED_OR_LOST', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 1 }],
    ['never booted, the 3rd in a row (default max_boot_failures 3): FAILED_NO_RESOURCE', {}, { bootFailuresInARow: 2, recoveryCount: 2 }, NEVER_BOOTED,
      { action: 'FAIL', status: 'FAILED_NO_RESOURCE', rule: 'BOOT_FAILURES_EXHAUSTED', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 2 }],
    ['never booted, under a larger max_boot_failures: recovers', { maxBootFailures: 5 }, { bootFailuresInARow: 3, recoveryCount: 3 }, NEVER_BOOTED,
      { action: 'RECOVER', status: 'RECOVERING', rule: 'PREEMPTED_OR_LOST', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 4 }],
    ['never booted with max_boot_failures 1: the first fails the job', { maxBootFailures: 1 }, {}, NEVER_BOOTED,
      { action: 'FAIL', status: 'FAILED_NO_RESOURCE', rule: 'BOOT_FAILURES_EXHAUSTED', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 0 }],
    ['never booted, under max_boot_failures but past max_recoveries: FAILED', { maxRecoveries: 1 }, { recoverDecisions: 1, recoveryCount: 1 }, NEVER_BOOTED,
      { action: 'FAIL', status: 'FAILED', rule: 'RECOVERIES_EXHAUSTED', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 1 }],
    ['a lost instance that had booted is not a boot failure', { maxBootFailures: 1 }, { bootFailuresInARow: 0 }, { kind: 'LOST', reason: 'no heartbeat for 300 s', neverBooted: false },
      { action: 'RECOVER', status: 'RECOVERING', rule: 'PREEMPTED_OR_LOST', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 1 }],
    // The agent's own failures, before setup
    ['the agent failed, with no error budget: a recovery, never charged to max_restarts_on_errors', { maxRestartsOnErrors: 0 }, {}, AGENT_FAILED,
      { action: 'RECOVER', status: 'RECOVERING', rule: 'PREEMPTED_OR_LOST', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 1 }],
    ['the agent failed, the 3rd attempt in a row that never ran the job: FAILED_SETUP', {}, { bootFailuresInARow: 2, recoveryCount: 2 }, AGENT_FAILED,
      { action: 'FAIL', status: 'FAILED_SETUP', rule: 'BOOT_FAILURES_EXHAUSTED', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 2 }],
    ['the agent failed, past max_recoveries: FAILED', { maxRecoveries: 1 }, { recoverDecisions: 1, recoveryCount: 1 }, AGENT_FAILED,
      { action: 'FAIL', status: 'FAILED', rule: 'RECOVERIES_EXHAUSTED', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 1 }],
    // No capacity
    ['no capacity at the first launch: FAILED_NO_RESOURCE', { maxRestartsOnErrors: 5 }, {}, NO_CAPACITY,
      { action: 'FAIL', status: 'FAILED_NO_RESOURCE', rule: 'LAUNCH_FAILED', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 0 }],
    ['no capacity at a relaunch: wait for capacity, recovery count unchanged', {}, { recoveryCount: 1 }, NO_CAPACITY,
      { action: 'RECOVER', status: 'RECOVERING', rule: 'WAITING_FOR_CAPACITY', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 1 }],
    ['no capacity at a relaunch, past max_recoveries: still waits (launch_timeout bounds it)', { maxRecoveries: 1 }, { recoveryCount: 1, recoverDecisions: 1, capacityWaits: 9 }, NO_CAPACITY,
      { action: 'RECOVER', status: 'RECOVERING', rule: 'WAITING_FOR_CAPACITY', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 1 }],
    ['no capacity at a relaunch with launch_timeout 0s: FAILED_NO_RESOURCE at once', { launchTimeoutSeconds: 0 }, { recoveryCount: 1 }, NO_CAPACITY,
      { action: 'FAIL', status: 'FAILED_NO_RESOURCE', rule: 'LAUNCH_TIMEOUT', decidingExitCode: null, restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 1 }],
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
    ["the agent's failure names its node, step and error, and says whose failure it is", {}, {}, AGENT_FAILED,
      "the agent failed on node 1 at image-pull: toomanyrequests: You have reached your pull rate limit; relaunch's failure, not the job's, 1 of 3 in a row before the job fails; recovery 1, does not count toward max_restarts_on_errors"],
    ['lost instance', {}, {}, LOST,
      'instance lost (no heartbeat for 300 s); recovery 1, does not count toward max_restarts_on_errors'],
    ['no capacity at the first launch', {}, {}, NO_CAPACITY, 'no capacity: InsufficientInstanceCapacity in 6 zones'],
    ['waiting for capacity', {}, { recoveryCount: 1 }, NO_CAPACITY,
      'waiting for capacity: InsufficientInstanceCapacity in 6 zones; next try in 60 s'],
    ['waiting for capacity with launch_timeout', { launchTimeoutSeconds: 21_600 }, { recoveryCount: 1 }, NO_CAPACITY,
      'waiting for capacity: InsufficientInstanceCapacity in 6 zones; next try in 60 s; launch_timeout 6h, 6h left'],
    ['a 0 in the list names the node that exited 0', { recoverOnExitCodes: [0] }, {}, exited('run', 0, 1),
      'exit code 0 on node 0 (run) is in recover_on_exit_codes; restart 1, unlimited'],
    ['a listed 0 past its cap names both nodes', { recoverOnExitCodes: [0], maxRestartsOnExitCodes: 1 }, { restartsOnExitCodes: 1 }, exited('run', 0, 1),
      'exit code 0 on node 0 (run) is in recover_on_exit_codes, but max_restarts_on_exit_codes (1) is used up; exit code 1 on node 1 (run); max_restarts_on_errors is 0, so no restart'],
    ['a recovery under max_recoveries says what is left', { maxRecoveries: 3 }, { recoverDecisions: 1, recoveryCount: 4 }, PREEMPTED,
      'spot preemption; recovery 5, does not count toward max_restarts_on_errors; 2 of 3 under max_recoveries, 1 left'],
    ['max_recoveries used up gives the count', { maxRecoveries: 2 }, { recoverDecisions: 2 }, PREEMPTED,
      'spot preemption; max_recoveries (2) used up by 2 recoveries'],
    ['max_recoveries 1 used up', { maxRecoveries: 1 }, { recoverDecisions: 1 }, LOST,
      'instance lost (no heartbeat for 300 s); max_recoveries (1) used up by 1 recovery'],
    ['max_recoveries 0', { maxRecoveries: 0 }, {}, PREEMPTED, 'spot preemption; max_recoveries is 0, so no recovery'],
    ['never booted, under max_boot_failures', {}, { bootFailuresInARow: 1 }, NEVER_BOOTED,
      'instance lost (no heartbeat since launch for 300 s); never booted, 2 of 3 in a row before the job fails; recovery 1, does not count toward max_restarts_on_errors'],
    ['never booted, max_boot_failures reached', {}, { bootFailuresInARow: 2 }, NEVER_BOOTED,
      `${NEVER_REACHED} (3 attempts in a row, max_boot_failures 3; last: no heartbeat since launch for 300 s)`],
    ['never booted once, with max_boot_failures 1', { maxBootFailures: 1 }, {}, NEVER_BOOTED,
      `${NEVER_REACHED} (1 attempt in a row, max_boot_failures 1; last: no heartbeat since launch for 300 s)`],
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
      recoverDecisions: 2,
      bootFailuresInARow: 0,
      capacityWaits: 0,
    });
  });
});

describe('decideRecovery: the streak counters', () => {
  type Streaks = Pick<Required<RecoveryCounters>, 'recoverDecisions' | 'bootFailuresInARow' | 'capacityWaits' | 'consecutivePreemptions'>;
  const before: Partial<RecoveryCounters> = { recoverDecisions: 4, bootFailuresInARow: 2, capacityWaits: 3, consecutivePreemptions: 1, recoveryCount: 6, restartsOnErrors: 0 };

  it.each<[string, AttemptOutcome, Streaks]>([
    ['an exit resets both streaks', exited('run', 1), { recoverDecisions: 4, bootFailuresInARow: 0, capacityWaits: 0, consecutivePreemptions: 0 }],
    ['a preemption counts a recovery and resets both streaks', PREEMPTED, { recoverDecisions: 5, bootFailuresInARow: 0, capacityWaits: 0, consecutivePreemptions: 2 }],
    ['a lost instance that had booted resets the boot streak', LOST, { recoverDecisions: 5, bootFailuresInARow: 0, capacityWaits: 0, consecutivePreemptions: 0 }],
    ['a never-booted attempt adds to the boot streak', NEVER_BOOTED, { recoverDecisions: 5, bootFailuresInARow: 3, capacityWaits: 0, consecutivePreemptions: 0 }],
    ['a relaunch without capacity keeps the boot and preemption streaks and adds a wait', NO_CAPACITY, { recoverDecisions: 4, bootFailuresInARow: 2, capacityWaits: 4, consecutivePreemptions: 1 }],
    ['a cancel keeps them (the job ends)', { kind: 'CANCELLED' }, { recoverDecisions: 4, bootFailuresInARow: 2, capacityWaits: 3, consecutivePreemptions: 0 }],
  ])('%s', (_name, outcome, expected) => {
    const { counters: after } = decide(recoveryPolicy({ maxBootFailures: 5, maxRestartsOnErrors: 1 }), counters(before), outcome);
    expect({
      recoverDecisions: after.recoverDecisions,
      bootFailuresInARow: after.bootFailuresInARow,
      capacityWaits: after.capacityWaits,
      consecutivePreemptions: after.consecutivePreemptions,
    }).toEqual(expected);
  });

  it('counters stored before these fields existed read as 0, and come back with every field', () => {
    const stored: RecoveryCounters = { restartsOnErrors: 0, restartsOnExitCodes: 0, recoveryCount: 2, consecutivePreemptions: 0, market: 'spot' };
    expect(decide(recoveryPolicy({ maxRecoveries: 1 }), stored, PREEMPTED).counters).toEqual({ ...stored, recoveryCount: 3, consecutivePreemptions: 1, recoverDecisions: 1, bootFailuresInARow: 0, capacityWaits: 0 });
    expect(decide(recoveryPolicy(), stored, NO_CAPACITY)).toMatchObject({ rule: 'WAITING_FOR_CAPACITY', delaySeconds: 60, counters: { capacityWaits: 1, bootFailuresInARow: 0 } });
    expect(decide(recoveryPolicy({ maxBootFailures: 1 }), stored, NEVER_BOOTED).rule).toBe('BOOT_FAILURES_EXHAUSTED');
  });

  it('a policy stored before the bounds existed keeps SkyPilot\'s behaviour and 3 boot failures', () => {
    const { launchTimeoutSeconds: _l, maxBootFailures: _m, maxRecoveries: _r, ...stored } = recoveryPolicy();
    expect(decide(stored, counters({ recoverDecisions: 1000, recoveryCount: 1000 }), PREEMPTED).action).toBe('RECOVER');
    expect(decide(stored, counters({ capacityWaits: 50, recoveryCount: 1 }), NO_CAPACITY, () => 0.5, 10 ** 9).action).toBe('RECOVER');
    expect(decide(stored, counters({ bootFailuresInARow: 1 }), NEVER_BOOTED).action).toBe('RECOVER');
    expect(decide(stored, counters({ bootFailuresInARow: 2 }), NEVER_BOOTED).action).toBe('FAIL');
  });
});

describe('decideRecovery: waiting for capacity', () => {
  it.each<[string, Partial<RecoveryPolicy>, number, number | undefined, number]>([
    ['the first wait is 60 s', {}, 0, undefined, 60],
    ['the second is 60 x 1.6 = 96 s', {}, 1, 60, 96],
    ['the third is 153.6, rounded to 154 s', {}, 2, 156, 154],
    ['the fourth is 245.76, rounded to 246 s', {}, 3, 310, 246],
    ['the fifth is 393 s', {}, 4, 556, 393],
    ['the sixth would be 629 s: capped at 600', {}, 5, 949, 600],
    ['a huge number of waits stays at 600 (1.6^k overflows to Infinity)', {}, 5000, 10 ** 7, 600],
    ['restart_backoff does not apply to it', { restartBackoff: { initialSeconds: 5, factor: 2, maxSeconds: 10, jitter: 'none' } }, 0, undefined, 60],
    ['launch_timeout shortens a gap that would pass it: the last try falls on it', { launchTimeoutSeconds: 400 }, 3, 300, 100],
    ['a fraction of a second left is a 1 s gap', { launchTimeoutSeconds: 400 }, 3, 399.5, 1],
    ['a launch_timeout shorter than the first gap', { launchTimeoutSeconds: 30 }, 0, undefined, 30],
    ['the first failure starts the wait at 0 s, whatever elapsed time is given', { launchTimeoutSeconds: 100 }, 0, 5000, 60],
    ['a negative elapsed time counts as 0', { launchTimeoutSeconds: 100 }, 1, -50, 96],
    ['without launch_timeout any elapsed time waits on', {}, 40, 10 ** 8, 600],
  ])('%s', (_name, p, waits, elapsed, seconds) => {
    const decision = decide(recoveryPolicy(p), counters({ recoveryCount: 1, capacityWaits: waits }), NO_CAPACITY, () => 0.5, elapsed);
    expect(decision).toMatchObject({ action: 'RECOVER', status: 'RECOVERING', rule: 'WAITING_FOR_CAPACITY', delaySeconds: seconds });
    expect(decision.counters.capacityWaits).toBe(waits + 1);
    expect(decision.reason).toContain(`; next try in ${seconds} s`);
  });

  it.each<[string, number, number]>([
    ['exactly at launch_timeout', 21_600, 21_600],
    ['past launch_timeout', 21_600, 30_000],
    ['with launch_timeout 1s, one second in', 1, 1],
  ])('ends the wait FAILED_NO_RESOURCE %s, naming how long it waited', (_name, timeout, elapsed) => {
    const decision = decide(recoveryPolicy({ launchTimeoutSeconds: timeout }), counters({ recoveryCount: 3, capacityWaits: 5 }), NO_CAPACITY, () => 0.5, elapsed);
    expect(decision).toMatchObject({ action: 'FAIL', status: 'FAILED_NO_RESOURCE', rule: 'LAUNCH_TIMEOUT', delaySeconds: 0 });
    expect(decision.reason).toMatch(/^no capacity after waiting \S+ \(launch_timeout \S+\): InsufficientInstanceCapacity in 6 zones$/);
  });

  it('the reason gives what is left of launch_timeout', () => {
    const decision = decide(recoveryPolicy({ launchTimeoutSeconds: 21_600 }), counters({ recoveryCount: 1, capacityWaits: 2 }), NO_CAPACITY, () => 0.5, 156);
    expect(decision.reason).toBe('waiting for capacity: InsufficientInstanceCapacity in 6 zones; next try in 154 s; launch_timeout 6h, 5h57m24s left');
    const end = decide(recoveryPolicy({ launchTimeoutSeconds: 21_600 }), counters({ recoveryCount: 1, capacityWaits: 9 }), NO_CAPACITY, () => 0.5, 21_700);
    expect(end.reason).toBe('no capacity after waiting 6h1m40s (launch_timeout 6h): InsufficientInstanceCapacity in 6 zones');
  });

  it('keeps the market and the preemption streak: an on-demand fallback still comes after 3 preemptions', () => {
    const decisions = sequence(recoveryPolicy({ onDemandFallbackAfter: 3 }), [PREEMPTED, PREEMPTED, NO_CAPACITY, NO_CAPACITY, PREEMPTED]);
    expect(decisions.map((d) => [d.rule, d.counters.consecutivePreemptions, d.market])).toEqual([
      ['PREEMPTED_OR_LOST', 1, 'spot'],
      ['PREEMPTED_OR_LOST', 2, 'spot'],
      ['WAITING_FOR_CAPACITY', 2, 'spot'],
      ['WAITING_FOR_CAPACITY', 2, 'spot'],
      ['PREEMPTED_OR_LOST', 3, 'on-demand'],
    ]);
  });
});

describe('decideRecovery: runaway guards over a run of attempts', () => {
  it('a fleet that never reaches relaunch ends FAILED_NO_RESOURCE on its 3rd attempt', () => {
    const decisions = sequence(recoveryPolicy(), [NEVER_BOOTED, NEVER_BOOTED, NEVER_BOOTED]);
    expect(decisions.map((d) => [d.action, d.status, d.counters.bootFailuresInARow])).toEqual([
      ['RECOVER', 'RECOVERING', 1],
      ['RECOVER', 'RECOVERING', 2],
      ['FAIL', 'FAILED_NO_RESOURCE', 3],
    ]);
  });

  it("the agent's failures before setup share the run with attempts that never booted, and end it FAILED_SETUP", () => {
    const decisions = sequence(recoveryPolicy(), [AGENT_FAILED, NEVER_BOOTED, AGENT_FAILED]);
    expect(decisions.map((d) => [d.action, d.status, d.counters.bootFailuresInARow, d.counters.restartsOnErrors])).toEqual([
      ['RECOVER', 'RECOVERING', 1, 0],
      ['RECOVER', 'RECOVERING', 2, 0],
      ['FAIL', 'FAILED_SETUP', 3, 0],
    ]);
    expect(decisions.at(-1)?.reason).toBe(
      'the agent failed on node 1 at image-pull: toomanyrequests: You have reached your pull rate limit (3 attempts in a row that never ran the job, max_boot_failures 3)',
    );
    // An attempt that ran the job, even one that failed, breaks the run.
    const broken = sequence(recoveryPolicy({ maxRestartsOnErrors: 1 }), [AGENT_FAILED, AGENT_FAILED, exited('run', 1), AGENT_FAILED, AGENT_FAILED]);
    expect(broken.map((d) => d.action)).toEqual(['RECOVER', 'RECOVER', 'RESTART', 'RECOVER', 'RECOVER']);
  });

  it('an attempt that booted breaks the run; a relaunch without capacity does not', () => {
    const booted = sequence(recoveryPolicy(), [NEVER_BOOTED, NEVER_BOOTED, PREEMPTED, NEVER_BOOTED, NEVER_BOOTED]);
    expect(booted.map((d) => d.action)).toEqual(['RECOVER', 'RECOVER', 'RECOVER', 'RECOVER', 'RECOVER']);
    const noCapacity = sequence(recoveryPolicy(), [NEVER_BOOTED, NEVER_BOOTED, NO_CAPACITY, NEVER_BOOTED]);
    expect(noCapacity.map((d) => d.rule)).toEqual(['PREEMPTED_OR_LOST', 'PREEMPTED_OR_LOST', 'WAITING_FOR_CAPACITY', 'BOOT_FAILURES_EXHAUSTED']);
  });

  it('max_recoveries: 2 allows two recoveries, whatever else happens between them', () => {
    const decisions = sequence(recoveryPolicy({ maxRecoveries: 2, maxRestartsOnErrors: 5 }), [PREEMPTED, exited('run', 1), LOST, NO_CAPACITY, PREEMPTED]);
    expect(decisions.map((d) => [d.action, d.rule])).toEqual([
      ['RECOVER', 'PREEMPTED_OR_LOST'],
      ['RESTART', 'RESTART_ON_ERROR'],
      ['RECOVER', 'PREEMPTED_OR_LOST'],
      ['RECOVER', 'WAITING_FOR_CAPACITY'],
      ['FAIL', 'RECOVERIES_EXHAUSTED'],
    ]);
    expect(decisions.at(-1)?.reason).toBe('spot preemption; max_recoveries (2) used up by 2 recoveries');
  });

  it('a recovery that waits for capacity and then runs: one recovery, the waits reset', () => {
    const decisions = sequence(recoveryPolicy(), [PREEMPTED, NO_CAPACITY, NO_CAPACITY, exited('run', 0)]);
    expect(decisions.map((d) => [d.action, d.delaySeconds, d.counters.recoveryCount, d.counters.capacityWaits])).toEqual([
      ['RECOVER', 0, 1, 0],
      ['RECOVER', 60, 1, 1],
      ['RECOVER', 96, 1, 2],
      ['SUCCEED', 0, 1, 0],
    ]);
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
    ['a never-booted attempt', NEVER_BOOTED],
    ['a wait for capacity', NO_CAPACITY],
    ['a success', exited('run', 0)],
  ] as [string, AttemptOutcome][])('%s leaves its (frozen) inputs as they were and repeats exactly', (_name, outcome) => {
    const p = recoveryPolicy({
      maxRestartsOnErrors: 2,
      recoverOnExitCodes: [29],
      restartBackoff: { initialSeconds: 1, factor: 2, maxSeconds: 8, jitter: 'full' },
      onDemandFallbackAfter: 1,
      launchTimeoutSeconds: 3600,
      maxRecoveries: 10,
    });
    const c = counters({ recoveryCount: 2, capacityWaits: 1, bootFailuresInARow: 1 });
    const input = deepFreeze({ policy: p, counters: c, outcome, random: () => 0.5 });
    const before = structuredClone({ policy: p, counters: c, outcome });

    const first = decideRecovery(input);
    const second = decideRecovery(input);

    expect({ policy: input.policy, counters: input.counters, outcome: input.outcome }).toEqual(before);
    expect(second).toEqual(first);
    expect(first.counters).not.toBe(input.counters);
  });
});
