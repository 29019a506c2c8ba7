// Which node `relaunch ssh` opens, and what it says when there is none to open: the
// cases the end-to-end tests (test/system/cli/ssh.test.ts) do not reach.

import { describe, expect, it } from 'vitest';
import { nodeOf, startSessionArgs } from '../../../../cli/commands/ssh.ts';
import type { AttemptView, JobView } from '../../../../lib/views.ts';

function attempt(n: number, overrides: Partial<AttemptView> = {}): AttemptView {
  return {
    attempt: n, outcome: null, phase: null, exitCodes: [], decision: null, reason: null, rule: null, delaySeconds: null, countersAfter: null,
    outputTails: [], agentFailure: null, market: 'spot', placement: { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm6i.large' },
    startedAt: '2026-12-06T10:00:00.000Z', endedAt: null, decidedAt: null, runStartedAt: null, gapSeconds: null, standby: null,
    instances: [{ nodeRank: 0, instanceId: 'i-0aaaaaaaaaaaaaaaa' }],
    ...overrides,
  };
}

function job(status: JobView['status'], attempts: AttemptView[]): JobView {
  return { jobId: 'j-0m8x2k1qz-4fz0aa', name: null, status, recoveryCount: 0, restartsOnErrors: 0, failureReason: null, numNodes: 1, createdAt: '', updatedAt: '', attempts } as unknown as JobView;
}

describe('relaunch ssh: the node', () => {
  it('is node 0 of the latest attempt by default', () => {
    expect(nodeOf(job('RUNNING', [attempt(1)]), undefined, 0).instance.instanceId).toBe('i-0aaaaaaaaaaaaaaaa');
  });

  it.each([
    ['a job not launched yet', job('PENDING', []), undefined, 'job j-0m8x2k1qz-4fz0aa has no attempt yet (PENDING): try again once it is launched'],
    ['an attempt still launching', job('STARTING', [attempt(1, { instances: [] })]), undefined, 'attempt 1 of job j-0m8x2k1qz-4fz0aa has no instance yet (it is launching): try again in a moment'],
    ['an attempt the job does not have', job('RUNNING', [attempt(1)]), 3, "expected 1-1 (job j-0m8x2k1qz-4fz0aa's attempts), got 3"],
    ['a standby let go, with no outcome', job('RUNNING', [attempt(1, { endedAt: 'x' }), attempt(2)]), 1, 'attempt 1 of job j-0m8x2k1qz-4fz0aa ended: its nodes are gone; attempt 2 runs now (relaunch ssh j-0m8x2k1qz-4fz0aa --attempt 2)'],
    ['a job that ended', job('SUCCEEDED', [attempt(1, { endedAt: 'x', outcome: 'EXITED' })]), undefined, 'job j-0m8x2k1qz-4fz0aa ended SUCCEEDED: its nodes are gone (relaunch logs j-0m8x2k1qz-4fz0aa shows what they wrote)'],
  ])('is refused for %s', (_name, given, attemptNumber, message) => {
    expect(() => nodeOf(given, attemptNumber, 0)).toThrow(message);
  });

  it('runs a command through the interactive-command document, as one line', () => {
    expect(startSessionArgs('i-0aaaaaaaaaaaaaaaa', 'us-east-1', ['echo', 'a b'])).toEqual([
      'ssm', 'start-session', '--target', 'i-0aaaaaaaaaaaaaaaa', '--region', 'us-east-1', '--document-name', 'AWS-StartInteractiveCommand', '--parameters', '{"command":["echo a b"]}',
    ]);
  });
});
