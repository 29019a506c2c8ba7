// simulate: a policy replayed over events, and every way an event list can be wrong.

import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../lib/errors.ts';
import type { RecoveryPolicy, TaskSpec } from '../../lib/spec/types.ts';
import { simulate } from '../../lib/simulate.ts';
import { recoveryPolicy, taskSpec } from '../fixtures/specs.ts';

function spec(recovery: Partial<RecoveryPolicy> = {}, numNodes = 1, useSpot = true): TaskSpec {
  return taskSpec({ numNodes, setup: null, resources: { useSpot, jobRecovery: recoveryPolicy(recovery) } });
}

/** The InvalidInputError's issues, or a failure when nothing (or something else) is thrown. */
function issuesOf(run: () => unknown): { path: string; message: string }[] {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidInputError);
    return (error as InvalidInputError).issues.map(({ path, message }) => ({ path, message }));
  }
  throw new Error('expected an InvalidInputError, nothing was thrown');
}

describe('simulate', () => {
  it('returns exactly the documented shape, one decision per event', () => {
    const result = simulate(spec({ recoverOnExitCodes: [29], maxRestartsOnErrors: 1 }), ['exit:29', 'preempt', 'exit:1', 'exit:0']);
    expect(result).toEqual({
      decisions: [
        {
          event: 'exit:29',
          action: 'RESTART',
          status: 'RECOVERING',
          restartsOnErrors: 0,
          recoveryCount: 1,
          reason: 'exit code 29 (run) is in recover_on_exit_codes; restart 1, unlimited',
        },
        {
          event: 'preempt',
          action: 'RECOVER',
          status: 'RECOVERING',
          restartsOnErrors: 0,
          recoveryCount: 2,
          reason: 'spot preemption; recovery 2, does not count toward max_restarts_on_errors',
        },
        {
          event: 'exit:1',
          action: 'RESTART',
          status: 'RECOVERING',
          restartsOnErrors: 1,
          recoveryCount: 3,
          reason: 'exit code 1 (run); restart 1 of 1 on errors, 0 left',
        },
        {
          event: 'exit:0',
          action: 'SUCCEED',
          status: 'SUCCEEDED',
          restartsOnErrors: 1,
          recoveryCount: 3,
          reason: 'exit code 0 (run); job succeeded',
        },
      ],
      final: { status: 'SUCCEEDED' },
    });
  });

  it('max_restarts_on_errors: 3 gives 4 attempts', () => {
    const result = simulate(spec({ maxRestartsOnErrors: 3 }), ['exit:1', 'exit:1', 'exit:1', 'exit:1']);
    expect(result.decisions.map((d) => d.action)).toEqual(['RESTART', 'RESTART', 'RESTART', 'FAIL']);
    expect(result.final.status).toBe('FAILED');
  });

  it('leaves a job that is still relaunching in RECOVERING', () => {
    expect(simulate(spec(), ['lost']).final.status).toBe('RECOVERING');
  });

  it.each([
    ['exit:N+M gives one code per node', ['exit:0+29'], 2, 'RESTART', 'exit code 29 on node 1 (run) is in recover_on_exit_codes; restart 1, unlimited'],
    ['setup:N is a setup failure', ['setup:1'], 1, 'FAIL', 'exit code 1 (setup); max_restarts_on_errors is 0, so no restart'],
    ['setup:N+M on two nodes', ['setup:0+2'], 2, 'FAIL', 'exit code 2 on node 1 (setup); max_restarts_on_errors is 0, so no restart'],
    ['lost', ['lost'], 1, 'RECOVER', 'instance lost (heartbeat lost); recovery 1, does not count toward max_restarts_on_errors'],
  ] as [string, string[], number, string, string][])('%s', (_name, events, numNodes, action, reason) => {
    const result = simulate(spec({ recoverOnExitCodes: [29] }, numNodes), events);
    expect(result.decisions[0]).toMatchObject({ action, reason });
  });

  it('a setup failure that ends the job is FAILED_SETUP', () => {
    expect(simulate(spec(), ['setup:3']).final.status).toBe('FAILED_SETUP');
  });

  it('with jitter full and no random given, draws the midpoint so output repeats', () => {
    const task = spec({ maxRestartsOnErrors: 2, restartBackoff: { initialSeconds: 10, factor: 2, maxSeconds: 60, jitter: 'full' } });
    const reasons = simulate(task, ['exit:1', 'exit:1']).decisions.map((d) => d.reason);
    expect(reasons).toEqual([
      'exit code 1 (run); restart 1 of 2 on errors, 1 left; next attempt in 5 s (full jitter, up to 10 s)',
      'exit code 1 (run); restart 2 of 2 on errors, 0 left; next attempt in 10 s (full jitter, up to 20 s)',
    ]);
    expect(simulate(task, ['exit:1', 'exit:1'])).toEqual(simulate(task, ['exit:1', 'exit:1']));
  });

  it('uses the random source it is given', () => {
    const task = spec({ maxRestartsOnErrors: 1, restartBackoff: { initialSeconds: 10, factor: 2, maxSeconds: 60, jitter: 'full' } });
    expect(simulate(task, ['exit:1'], () => 0).decisions[0]?.reason).toMatch(/next attempt in 0 s \(full jitter, up to 10 s\)$/);
  });

  it('a spot job falls back to on-demand after the configured preemptions', () => {
    const result = simulate(spec({ onDemandFallbackAfter: 2 }), ['preempt', 'preempt', 'exit:0']);
    expect(result.decisions[1]?.reason).toMatch(/2 preemptions in a row; relaunching on-demand$/);
  });

  it('does not change the events it is given', () => {
    const events = Object.freeze(['exit:1', 'exit:0']);
    simulate(spec({ maxRestartsOnErrors: 1 }), events);
    expect(events).toEqual(['exit:1', 'exit:0']);
  });
});

describe('simulate: bad input', () => {
  it.each([
    ['an unknown word', ['reboot'], 1, [{ path: 'event 1', message: 'expected exit:N, exit:N+M (one code per node), setup:N, setup:N+M, preempt or lost; got "reboot"' }]],
    ['exit without a code', ['exit:'], 1, [{ path: 'event 1', message: 'expected exit:N, exit:N+M (one code per node), setup:N, setup:N+M, preempt or lost; got "exit:"' }]],
    ['a negative code', ['exit:-1'], 1, [{ path: 'event 1', message: 'expected exit:N, exit:N+M (one code per node), setup:N, setup:N+M, preempt or lost; got "exit:-1"' }]],
    ['a code above 255', ['exit:300'], 1, [{ path: 'event 1', message: '"exit:300": exit code 300 is out of range, expected 0-255' }]],
    ['too few codes for the nodes', ['exit:1'], 2, [{ path: 'event 1', message: '"exit:1" has 1 exit code, but the task has 2 nodes (num_nodes: 2); give one code per node, e.g. exit:1+0' }]],
    ['too many codes for the nodes', ['setup:1+2'], 1, [{ path: 'event 1', message: '"setup:1+2" has 2 exit codes, but the task has 1 node (num_nodes: 1); give one code per node, e.g. setup:1' }]],
    ['a setup that succeeded on every node', ['setup:0+0'], 2, [{ path: 'event 1', message: '"setup:0+0": a setup that exits 0 goes on to run, so it does not end an attempt; use exit:N for how the run ended' }]],
    ['every bad event at once, each by its number', ['preempt', 'PREEMPT', 'exit:1', 'x'], 1, [
      { path: 'event 2', message: 'expected exit:N, exit:N+M (one code per node), setup:N, setup:N+M, preempt or lost; got "PREEMPT"' },
      { path: 'event 4', message: 'expected exit:N, exit:N+M (one code per node), setup:N, setup:N+M, preempt or lost; got "x"' },
    ]],
    ['no events at all', [], 1, [{ path: 'events', message: 'give at least one event: exit:N, exit:N+M (one code per node), setup:N, setup:N+M, preempt or lost' }]],
  ] as [string, string[], number, { path: string; message: string }[]][])('%s is an InvalidInputError', (_name, events, numNodes, issues) => {
    expect(issuesOf(() => simulate(spec({}, numNodes), events))).toEqual(issues);
  });

  it.each([
    ['after success', {}, ['exit:0', 'preempt'], 'event 2', '"preempt" comes after the job ended with SUCCEEDED at event 1; a finished job takes no more events'],
    ['after the budget ran out', { maxRestartsOnErrors: 1 }, ['exit:1', 'exit:1', 'exit:0'], 'event 3', '"exit:0" comes after the job ended with FAILED at event 2; a finished job takes no more events'],
    ['after a setup failure', {}, ['setup:1', 'exit:0', 'exit:0'], 'event 2', '"exit:0" comes after the job ended with FAILED_SETUP at event 1; a finished job takes no more events'],
  ] as [string, Partial<RecoveryPolicy>, string[], string, string][])(
    'an event %s names its number and the terminal status',
    (_name, recovery, events, path, message) => {
      expect(issuesOf(() => simulate(spec(recovery), events))).toEqual([{ path, message }]);
    },
  );
});
