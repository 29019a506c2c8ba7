// simulate: a policy replayed over events, and every way an event list can be wrong.

import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../../lib/errors.ts';
import type { RecoveryPolicy, TaskSpec } from '../../../lib/task-file/types.ts';
import { EVENT_FORMS, simulate } from '../../../lib/simulate.ts';
import { recoveryPolicy, taskSpec } from '../../support/fixtures/specs.ts';

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

describe('simulate: warnings, vanished instances, capacity and boots', () => {
  const two = (recovery: Partial<RecoveryPolicy> = {}): TaskSpec => spec(recovery, 2);
  const PREEMPTION = 'spot preemption; recovery 1, does not count toward max_restarts_on_errors';

  it.each<[string, string[], string, string]>([
    ['warn then a failing peer: PREEMPTED, recovered uncharged', ['warn', 'exit:0+1'], 'RECOVER', PREEMPTION],
    ['warn then every node failing', ['warn', 'exit:137+1'], 'RECOVER', PREEMPTION],
    ['warn then a failed setup', ['warn', 'setup:0+1'], 'RECOVER', PREEMPTION],
    ['warn then a node gone', ['warn', 'gone:1'], 'RECOVER', PREEMPTION],
    ['warn then a lost heartbeat: the deadline came first', ['warn', 'lost'], 'RECOVER', PREEMPTION],
    ['warn then an attempt that never booted', ['warn', 'noboot'], 'RECOVER', PREEMPTION],
    ['warn twice, then a failure', ['warn', 'warn', 'exit:1+0'], 'RECOVER', PREEMPTION],
    ['warn then every node exiting 0: the job finished first', ['warn', 'exit:0+0'], 'SUCCEED', 'all 2 nodes exited 0 (run); job succeeded'],
    ['a node gone without a warning: LOST', ['gone:1'], 'RECOVER', 'instance lost (instance of node 1 was terminated); recovery 1, does not count toward max_restarts_on_errors'],
    ['the same failing peer without a warning: charged, and FAILED', ['exit:0+1'], 'FAIL', 'exit code 1 on node 1 (run); max_restarts_on_errors is 0, so no restart'],
  ])('%s', (_name, events, action, reason) => {
    const result = simulate(two(), events);
    expect(result.decisions).toEqual([{ event: events.join(' '), action, status: action === 'SUCCEED' ? 'SUCCEEDED' : action === 'FAIL' ? 'FAILED' : 'RECOVERING', restartsOnErrors: 0, recoveryCount: action === 'RECOVER' ? 1 : 0, reason }]);
  });

  it('joins a warn with the event it precedes, one decision per attempt', () => {
    const result = simulate(two(), ['warn', 'exit:0+1', 'exit:0+0']);
    expect(result.decisions.map((d) => d.event)).toEqual(['warn exit:0+1', 'exit:0+0']);
    expect(result.final.status).toBe('SUCCEEDED');
  });

  it('nocap on the first launch is FAILED_NO_RESOURCE', () => {
    const result = simulate(spec(), ['nocap']);
    expect(result).toEqual({
      decisions: [{ event: 'nocap', action: 'FAIL', status: 'FAILED_NO_RESOURCE', restartsOnErrors: 0, recoveryCount: 0, reason: 'no capacity: InsufficientInstanceCapacity in every zone tried' }],
      final: { status: 'FAILED_NO_RESOURCE' },
    });
  });

  it('nocap on a relaunch waits for capacity with a growing gap, then runs', () => {
    const result = simulate(spec(), ['preempt', 'nocap', 'nocap', 'nocap', 'exit:0']);
    expect(result.decisions.slice(1, 4).map((d) => [d.action, d.status, d.recoveryCount, d.reason])).toEqual([
      ['RECOVER', 'RECOVERING', 1, 'waiting for capacity: InsufficientInstanceCapacity in every zone tried; next try in 60 s'],
      ['RECOVER', 'RECOVERING', 1, 'waiting for capacity: InsufficientInstanceCapacity in every zone tried; next try in 96 s'],
      ['RECOVER', 'RECOVERING', 1, 'waiting for capacity: InsufficientInstanceCapacity in every zone tried; next try in 154 s'],
    ]);
    expect(result.final.status).toBe('SUCCEEDED');
  });

  it('launch_timeout is measured in the gaps waited so far, and ends the wait FAILED_NO_RESOURCE', () => {
    const result = simulate(spec({ launchTimeoutSeconds: 300 }), ['lost', 'nocap', 'nocap', 'nocap', 'nocap']);
    expect(result.decisions.slice(1).map((d) => [d.action, d.reason])).toEqual([
      ['RECOVER', 'waiting for capacity: InsufficientInstanceCapacity in every zone tried; next try in 60 s; launch_timeout 5m, 5m left'],
      ['RECOVER', 'waiting for capacity: InsufficientInstanceCapacity in every zone tried; next try in 96 s; launch_timeout 5m, 4m left'],
      ['RECOVER', 'waiting for capacity: InsufficientInstanceCapacity in every zone tried; next try in 144 s; launch_timeout 5m, 2m24s left'],
      ['FAIL', 'no capacity after waiting 5m (launch_timeout 5m): InsufficientInstanceCapacity in every zone tried'],
    ]);
    expect(result.final.status).toBe('FAILED_NO_RESOURCE');
  });

  it('a wait that ends with a launch starts over at 60 s next time', () => {
    const result = simulate(spec({ launchTimeoutSeconds: 100 }), ['preempt', 'nocap', 'preempt', 'nocap', 'nocap']);
    expect(result.decisions.map((d) => d.action)).toEqual(['RECOVER', 'RECOVER', 'RECOVER', 'RECOVER', 'RECOVER']);
    expect(result.decisions[3]?.reason).toMatch(/next try in 60 s; launch_timeout 1m40s, 1m40s left$/);
    expect(result.decisions[4]?.reason).toMatch(/next try in 40 s; launch_timeout 1m40s, 40s left$/);
  });

  it('three attempts that never booted end FAILED_NO_RESOURCE, naming the heartbeat timeout', () => {
    const result = simulate(spec(), ['noboot', 'noboot', 'noboot']);
    expect(result.decisions.map((d) => [d.action, d.status])).toEqual([
      ['RECOVER', 'RECOVERING'],
      ['RECOVER', 'RECOVERING'],
      ['FAIL', 'FAILED_NO_RESOURCE'],
    ]);
    expect(result.decisions[0]?.reason).toBe(
      'instance lost (no node sent a heartbeat within boot_timeout 10m); never booted, 1 of 3 in a row before the job fails; recovery 1, does not count toward max_restarts_on_errors',
    );
    expect(result.decisions[2]?.reason).toBe(
      "the instances never reached relaunch: check the subnet's route to the API endpoint (3 attempts in a row, max_boot_failures 3; last: no node sent a heartbeat within boot_timeout 10m)",
    );
  });

  it("agent:STEP is relaunch's failure before setup: recovered with no error budget, counted with noboot toward max_boot_failures", () => {
    const result = simulate(two({ maxRestartsOnErrors: 0 }), ['agent:image-pull@1', 'noboot', 'agent:mounts']);
    expect(result.decisions.map((d) => [d.event, d.action, d.status, d.restartsOnErrors, d.recoveryCount])).toEqual([
      ['agent:image-pull@1', 'RECOVER', 'RECOVERING', 0, 1],
      ['noboot', 'RECOVER', 'RECOVERING', 0, 2],
      ['agent:mounts', 'FAIL', 'FAILED_SETUP', 0, 2],
    ]);
    expect(result.decisions[0]?.reason).toBe(
      "the agent failed on node 1 at image-pull: simulated; relaunch's failure, not the job's, 1 of 3 in a row before the job fails; recovery 1, does not count toward max_restarts_on_errors",
    );
    expect(result.decisions[2]?.reason).toBe('the agent failed on node 0 at mounts: simulated (3 attempts in a row that never ran the job, max_boot_failures 3)');
  });

  it("warn agent:STEP is a preemption, as the runtime decides it", () => {
    expect(simulate(spec(), ['warn', 'agent:container']).decisions[0]).toMatchObject({ event: 'warn agent:container', action: 'RECOVER', reason: 'spot preemption; recovery 1, does not count toward max_restarts_on_errors' });
  });

  it('max_recoveries caps preemptions and lost instances', () => {
    const result = simulate(two({ maxRecoveries: 1 }), ['preempt', 'gone:0']);
    expect(result.decisions[1]).toMatchObject({ action: 'FAIL', status: 'FAILED', reason: 'instance lost (instance of node 0 was terminated); max_recoveries (1) used up by 1 recovery' });
  });
});

describe('simulate: a standby (launch_on_warning)', () => {
  const fates = (recovery: Partial<RecoveryPolicy>, events: string[]) => simulate(spec(recovery), events).decisions.map((d) => [d.event, d.action, d.standby]);

  it('takes the standby a warning started when the job relaunches, and lets it go when it does not', () => {
    expect(fates({ launchOnWarning: true, maxRestartsOnErrors: 1 }, 'warn gone:0 warn exit:1 exit:2 warn exit:0'.split(' '))).toEqual([
      ['warn gone:0', 'RECOVER', 'adopted'],
      ['warn exit:1', 'RECOVER', 'adopted'],
      ['exit:2', 'RESTART', null],
      ['warn exit:0', 'SUCCEED', 'released'],
    ]);
  });

  it('decides exactly what the same events decide without the option: only the standby is added', () => {
    const events = ['warn exit:1', 'rebalance', 'exit:3', 'warn', 'gone:0', 'rebalance', 'exit:0'].join(' ').split(' ');
    const without = simulate(spec({ maxRestartsOnErrors: 2 }), events).decisions;
    const withStandby = simulate(spec({ maxRestartsOnErrors: 2, launchOnWarning: 'rebalance' }), events).decisions;
    expect(withStandby.map(({ standby: _standby, ...decision }) => decision)).toEqual(without);
    expect(without.every((decision) => !('standby' in decision))).toBe(true);
    expect(withStandby.map((decision) => decision.standby)).toEqual(['adopted', 'adopted', 'adopted', 'released']);
  });

  it('takes a rebalance recommendation for a standby only with launch_on_warning: rebalance, and as no interruption', () => {
    expect(fates({ launchOnWarning: true, maxRestartsOnErrors: 1 }, ['rebalance', 'exit:1'])).toEqual([['rebalance exit:1', 'RESTART', null]]);
    expect(fates({ launchOnWarning: 'rebalance', maxRestartsOnErrors: 1 }, ['rebalance', 'exit:1'])).toEqual([['rebalance exit:1', 'RESTART', 'adopted']]);
  });

  it('fails on a fail_on_exit_codes code after a warning, as the runtime does; any other code after a warning is a preemption', () => {
    expect(simulate(spec({ failOnExitCodes: [42], maxRestartsOnErrors: 2 }), ['warn', 'exit:42']).decisions.map((d) => d.action)).toEqual(['FAIL']);
    expect(simulate(spec({ failOnExitCodes: [42], maxRestartsOnErrors: 2 }), ['warn', 'exit:1', 'exit:0']).decisions.map((d) => d.action)).toEqual(['RECOVER', 'SUCCEED']);
  });

  it('starts no standby once max_recoveries is spent, or when it is 0: the policy could never take it', () => {
    expect(fates({ launchOnWarning: true, maxRecoveries: 1 }, 'warn gone:0 warn gone:0'.split(' '))).toEqual([
      ['warn gone:0', 'RECOVER', 'adopted'],
      ['warn gone:0', 'FAIL', null],
    ]);
    expect(fates({ launchOnWarning: true, maxRecoveries: 0 }, ['warn', 'gone:0'])).toEqual([['warn gone:0', 'FAIL', null]]);
  });

  it('lets the standby go when the relaunch moves to on-demand', () => {
    expect(fates({ launchOnWarning: true, onDemandFallbackAfter: 1 }, ['warn', 'gone:0', 'exit:0'])).toEqual([
      ['warn gone:0', 'RECOVER', 'released'],
      ['exit:0', 'SUCCEED', null],
    ]);
  });

  it('refuses a rebalance with nothing after it, or before a nocap', () => {
    expect(issuesOf(() => simulate(spec({ launchOnWarning: 'rebalance' }), ['exit:1', 'rebalance']))).toEqual([
      { path: 'event 2', message: '"rebalance" ends nothing by itself: follow it with the event that ends its attempt, e.g. rebalance exit:0 or rebalance gone:0' },
    ]);
    expect(issuesOf(() => simulate(spec({ launchOnWarning: 'rebalance' }), ['preempt', 'rebalance', 'nocap']))).toEqual([
      { path: 'event 3', message: '"nocap" follows a rebalance, but a warning comes from a running instance and nocap is a launch that found none; put rebalance right before the event that ends a running attempt' },
    ]);
  });
});

describe('simulate: a standby of the warned node alone (launch_on_warning with reuse)', () => {
  const warm = spec({ strategy: 'FAILOVER', launchOnWarning: true, maxRestartsOnErrors: 1 }, 4);
  const rows = (events: string[]) => simulate(warm, events).decisions.map((d) => [d.event, d.standby, d.nodes?.kept, d.nodes?.launched]);

  it('warn@2 then node 2 preempted: the standby of node 2 is taken, nodes 0, 1 and 3 kept', () => {
    expect(rows(['warn@2', 'preempt@2', 'exit:0+0+0+0'])[0]).toEqual(['warn@2 preempt@2', 'adopted', [0, 1, 3], [2]]);
  });

  it('a code after warn@2 is a preemption that names node 2, so the same standby is taken', () => {
    expect(rows(['warn@2', 'exit:1+0+0+0', 'exit:0+0+0+0'])[0]).toEqual(['warn@2 exit:1+0+0+0', 'adopted', [0, 1, 3], [2]]);
  });

  it('warn@1 but node 2 preempted: both go, the relaunch keeps other nodes than the standby was launched beside, and lets it go', () => {
    expect(rows(['warn@1', 'preempt@2', 'exit:0+0+0+0'])[0]).toEqual(['warn@1 preempt@2', 'released', [0, 3], [1, 2]]);
  });

  it('a rebalance@1 no interruption follows, then exit 29 on a code the job restarts on: every node kept, the standby let go', () => {
    const task = spec({ strategy: 'FAILOVER', launchOnWarning: 'rebalance', recoverOnExitCodes: [29] }, 2);
    expect(simulate(task, ['rebalance@1', 'exit:29+0', 'exit:0+0']).decisions[0]).toMatchObject({ standby: 'released', nodes: { kept: [0, 1], launched: [] } });
  });

  it('a warn that names no node starts a whole set, and the relaunch keeps no node', () => {
    expect(rows(['warn', 'preempt@2', 'exit:0+0+0+0'])[0]).toEqual(['warn preempt@2', 'adopted', [], [0, 1, 2, 3]]);
  });

  it('refuses a warned node the task does not have', () => {
    expect(issuesOf(() => simulate(warm, ['warn@4', 'exit:0+0+0+0']))).toEqual([{ path: 'event 1', message: '"warn@4": node 4 is not one of the task\'s 4 nodes (ranks 0 to 3)' }]);
  });
});

describe('simulate: bad input', () => {
  it.each([
    ['an unknown word', ['reboot'], 1, [{ path: 'event 1', message: `expected ${EVENT_FORMS}; got "reboot"` }]],
    ['exit without a code', ['exit:'], 1, [{ path: 'event 1', message: `expected ${EVENT_FORMS}; got "exit:"` }]],
    ['a negative code', ['exit:-1'], 1, [{ path: 'event 1', message: `expected ${EVENT_FORMS}; got "exit:-1"` }]],
    ['a code above 255', ['exit:300'], 1, [{ path: 'event 1', message: '"exit:300": exit code 300 is out of range, expected 0-255' }]],
    ['too few codes for the nodes', ['exit:1'], 2, [{ path: 'event 1', message: '"exit:1" has 1 exit code, but the task has 2 nodes (num_nodes: 2); give one code per node, e.g. exit:1+0' }]],
    ['too many codes for the nodes', ['setup:1+2'], 1, [{ path: 'event 1', message: '"setup:1+2" has 2 exit codes, but the task has 1 node (num_nodes: 1); give one code per node, e.g. setup:1' }]],
    ['a setup that succeeded on every node', ['setup:0+0'], 2, [{ path: 'event 1', message: '"setup:0+0": a setup that exits 0 goes on to run, so it does not end an attempt; use exit:N for how the run ended' }]],
    ['every bad event at once, each by its number', ['preempt', 'PREEMPT', 'exit:1', 'x'], 1, [
      { path: 'event 2', message: `expected ${EVENT_FORMS}; got "PREEMPT"` },
      { path: 'event 4', message: `expected ${EVENT_FORMS}; got "x"` },
    ]],
    ['a gone node the task does not have', ['gone:2'], 2, [{ path: 'event 1', message: '"gone:2": node 2 is not one of the task\'s 2 nodes (ranks 0 to 1)' }]],
    ['gone without a node', ['gone:'], 1, [{ path: 'event 1', message: `expected ${EVENT_FORMS}; got "gone:"` }]],
    ['a warn before a launch that found no capacity', ['preempt', 'warn', 'nocap'], 1, [
      { path: 'event 3', message: '"nocap" follows a warn, but a warning comes from a running instance and nocap is a launch that found none; put warn right before the event that ends a running attempt' },
    ]],
    ['a warn at the end', ['exit:1', 'warn'], 1, [
      { path: 'event 2', message: '"warn" ends nothing by itself: follow it with the event that ends its attempt, e.g. warn exit:0 or warn gone:0' },
    ]],
    ['a warn and a bad event after it, each reported', ['warn', 'exit:300', 'warn'], 1, [
      { path: 'event 2', message: '"exit:300": exit code 300 is out of range, expected 0-255' },
      { path: 'event 3', message: '"warn" ends nothing by itself: follow it with the event that ends its attempt, e.g. warn exit:0 or warn gone:0' },
    ]],
    ['no events at all', [], 1, [{ path: 'events', message: `give at least one event: ${EVENT_FORMS}` }]],
    ['an agent step that is not one', ['agent:reboot'], 1, [
      { path: 'event 1', message: '"agent:reboot": expected one of the agent\'s steps (data-credentials, install, mounts, image-login, image-pull, container, previous-attempt), got reboot' },
    ]],
    ['an agent failure on a node the task does not have', ['agent:mounts@2'], 2, [{ path: 'event 1', message: '"agent:mounts@2": node 2 is not one of the task\'s 2 nodes (ranks 0 to 1)' }]],
  ] as [string, string[], number, { path: string; message: string }[]][])('%s is an InvalidInputError', (_name, events, numNodes, issues) => {
    expect(issuesOf(() => simulate(spec({}, numNodes), events))).toEqual(issues);
  });

  it.each([
    ['after success', {}, ['exit:0', 'preempt'], 'event 2', '"preempt" comes after the job ended with SUCCEEDED at event 1; a finished job takes no more events'],
    ['after the budget ran out', { maxRestartsOnErrors: 1 }, ['exit:1', 'exit:1', 'exit:0'], 'event 3', '"exit:0" comes after the job ended with FAILED at event 2; a finished job takes no more events'],
    ['after a setup failure', {}, ['setup:1', 'exit:0', 'exit:0'], 'event 2', '"exit:0" comes after the job ended with FAILED_SETUP at event 1; a finished job takes no more events'],
    ['after a first launch without capacity', {}, ['nocap', 'exit:0'], 'event 2', '"exit:0" comes after the job ended with FAILED_NO_RESOURCE at event 1; a finished job takes no more events'],
    ['starting with a warn, named by the warn', {}, ['exit:0', 'warn', 'exit:1'], 'event 2', '"warn" comes after the job ended with SUCCEEDED at event 1; a finished job takes no more events'],
    ['after a warned attempt, counted to its last event', { maxRecoveries: 0 }, ['warn', 'exit:1', 'exit:0'], 'event 3', '"exit:0" comes after the job ended with FAILED at event 2; a finished job takes no more events'],
  ] as [string, Partial<RecoveryPolicy>, string[], string, string][])(
    'an event %s names its number and the terminal status',
    (_name, recovery, events, path, message) => {
      expect(issuesOf(() => simulate(spec(recovery), events))).toEqual([{ path, message }]);
    },
  );
});

describe('simulate: which nodes each relaunch runs on', () => {
  const failover = (recovery: Partial<RecoveryPolicy> = {}, numNodes = 4): TaskSpec => spec({ strategy: 'FAILOVER', maxRestartsOnErrors: 2, ...recovery }, numNodes);
  const nodesOf = (task: TaskSpec, events: string[]) => simulate(task, events).decisions.map((d) => d.nodes);
  const FRESH_UNKNOWN = { kept: [], launched: [0, 1, 2, 3], setup: null, reason: 'fresh nodes: which node went is not known' };

  it('node 2 of 4 preempted: the relaunch keeps nodes 0, 1 and 3 and launches node 2', () => {
    expect(nodesOf(failover(), ['preempt@2', 'exit:0+0+0+0'])).toEqual([
      { kept: [0, 1, 3], launched: [2], setup: 'rerun', reason: 'keeps nodes 0, 1, 3 and replaces node 2 (preempted), setup run again' },
      undefined,
    ]);
  });

  it('naming the node changes nothing in the decision itself', () => {
    const named = simulate(failover(), ['preempt@2', 'lost@1+3', 'exit:0+0+0+0']).decisions;
    const unnamed = simulate(failover(), ['preempt', 'lost', 'exit:0+0+0+0']).decisions;
    expect(named.map(({ action, status, reason, recoveryCount }) => ({ action, status, reason, recoveryCount }))).toEqual(
      unnamed.map(({ action, status, reason, recoveryCount }) => ({ action, status, reason, recoveryCount })),
    );
  });

  it.each<[string, Partial<RecoveryPolicy>, number, string[], unknown]>([
    ['a recover_on_exit_codes code restarts in place on one node, setup skipped', { recoverOnExitCodes: [29], reuseNodes: { reuse: true, setup: 'skip' } }, 1, ['exit:29'],
      { kept: [0], launched: [], setup: 'skip', reason: 'in place on the same node, setup skipped' }],
    ['a failed setup restarts in place, setup not skipped', { reuseNodes: { reuse: true, setup: 'skip' } }, 2, ['setup:0+1'],
      { kept: [0, 1], launched: [], setup: 'rerun', reason: 'in place on nodes 0-1, setup run again (not skipped: the attempt ended in setup)' }],
    ['a preemption without a node: fresh nodes', {}, 4, ['preempt'], FRESH_UNKNOWN],
    ['a lost heartbeat without a node: fresh nodes', {}, 4, ['lost'], FRESH_UNKNOWN],
    ['lost@1: the others are kept', {}, 4, ['lost@1'], { kept: [0, 2, 3], launched: [1], setup: 'rerun', reason: 'keeps nodes 0, 2, 3 and replaces node 1 (lost), setup run again' }],
    ['warn lost@1: a preemption of node 1', {}, 4, ['warn', 'lost@1'], { kept: [0, 2, 3], launched: [1], setup: 'rerun', reason: 'keeps nodes 0, 2, 3 and replaces node 1 (preempted), setup run again' }],
    ['gone:3: its instance went, the others are kept', {}, 4, ['gone:3'], { kept: [0, 1, 2], launched: [3], setup: 'rerun', reason: 'keeps nodes 0, 1, 2 and replaces node 3 (lost), setup run again' }],
    ['warn gone:0: a preemption of node 0', {}, 2, ['warn', 'gone:0'], { kept: [1], launched: [0], setup: 'rerun', reason: 'keeps node 1 and replaces node 0 (preempted), setup run again' }],
    ['an agent failure on node 1 replaces node 1', {}, 2, ['agent:mounts@1'], { kept: [0], launched: [1], setup: 'rerun', reason: 'keeps node 0 and replaces node 1 (its agent failed at mounts), setup run again' }],
    ['a bad-node code on node 2 of 4 replaces only node 2', { badNodeExitCodes: [42] }, 4, ['exit:0+0+42+0'],
      { kept: [0, 1, 3], launched: [2], setup: 'rerun', reason: 'keeps nodes 0, 1, 3 and replaces node 2 (exited 42, a bad_node_exit_codes code), setup run again' }],
    ['a backoff over 300 s releases the nodes', { restartBackoff: { initialSeconds: 301, factor: 1, maxSeconds: 301, jitter: 'none' } }, 2, ['exit:1+0'],
      { kept: [], launched: [0, 1], setup: null, reason: 'fresh nodes: the 301 s wait before the relaunch is longer than the 300 s a node is held' }],
    ['reuse_nodes false under FAILOVER: fresh nodes, said so', { reuseNodes: { reuse: false, setup: 'rerun' } }, 2, ['preempt@0'],
      { kept: [], launched: [0, 1], setup: null, reason: 'relaunches on fresh nodes (reuse_nodes)' }],
  ])('%s', (_name, recovery, numNodes, events, expected) => {
    expect(nodesOf(failover(recovery, numNodes), events)[0]).toEqual(expected);
  });

  it('a wait for capacity releases the nodes held for the relaunch', () => {
    expect(nodesOf(failover(), ['preempt@2', 'nocap', 'exit:0+0+0+0'])[1]).toEqual({
      kept: [],
      launched: [0, 1, 2, 3],
      setup: null,
      reason: 'fresh nodes: the launch placed no node, and a wait for capacity releases the nodes held for it',
    });
  });

  it('says nothing of nodes on a decision that does not relaunch', () => {
    const decisions = simulate(failover({ maxRestartsOnErrors: 0 }), ['exit:1+0+0+0']).decisions;
    expect(Object.keys(decisions[0] ?? {})).not.toContain('nodes');
  });

  it('a task on the default strategy without the keys prints what it always printed: no nodes key', () => {
    const decisions = simulate(spec({ maxRestartsOnErrors: 1 }, 2), ['preempt@1', 'exit:1+0', 'exit:0+0']).decisions;
    expect(decisions.map((d) => Object.keys(d))).toEqual(Array(3).fill(['event', 'action', 'status', 'restartsOnErrors', 'recoveryCount', 'reason']));
  });

  it('bad_node_exit_codes alone shows the fresh nodes a default-strategy relaunch runs on', () => {
    expect(nodesOf(spec({ maxRestartsOnErrors: 1, badNodeExitCodes: [42] }, 2), ['exit:42+0', 'exit:0+0'])[0]).toEqual({
      kept: [],
      launched: [0, 1],
      setup: null,
      reason: "relaunches on fresh nodes (the EAGER_NEXT_REGION strategy's default)",
    });
  });

  it.each<[string, string[], number, { path: string; message: string }[]]>([
    ['a preempted node the task does not have', ['preempt@4'], 4, [{ path: 'event 1', message: '"preempt@4": node 4 is not one of the task\'s 4 nodes (ranks 0 to 3)' }]],
    ['a lost node named twice', ['lost@1+1'], 2, [{ path: 'event 1', message: '"lost@1+1": node 1 is named twice; name each node once' }]],
    ['preempt@ with no node', ['preempt@'], 2, [{ path: 'event 1', message: `expected ${EVENT_FORMS}; got "preempt@"` }]],
    ['a node that is not a number', ['lost@two'], 2, [{ path: 'event 1', message: `expected ${EVENT_FORMS}; got "lost@two"` }]],
    ['a negative node', ['preempt@-1'], 2, [{ path: 'event 1', message: `expected ${EVENT_FORMS}; got "preempt@-1"` }]],
  ])('refuses %s', (_name, events, numNodes, expected) => {
    expect(issuesOf(() => simulate(spec({}, numNodes), events))).toEqual(expected);
  });
});
