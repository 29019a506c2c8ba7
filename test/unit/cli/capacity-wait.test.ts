// The line `relaunch run` prints while a relaunch waits for capacity (cli/follow.ts): the
// absolute time of the next try, how long until then, and a short reason; the tries
// themselves stay in the job's record.

import { describe, expect, it } from 'vitest';
import { capacityWait, describeDecision } from '../../../cli/follow.ts';
import type { AttemptView } from '../../../lib/views.ts';

const REASON =
  'waiting for capacity: no capacity for job j-0000000a1-aaaaaa attempt 2 (spot, 1 node): tried g5.xlarge in us-east-1a: InsufficientInstanceCapacity, ' +
  'g5.xlarge in us-east-1b: InsufficientInstanceCapacity, g5.2xlarge in us-east-1a: InsufficientInstanceCapacity; next try in 60 s';

function waiting(overrides: Partial<AttemptView> = {}): AttemptView {
  return {
    attempt: 2,
    outcome: 'LAUNCH_FAILED',
    phase: null,
    exitCodes: [],
    decision: 'RECOVER',
    reason: REASON,
    rule: 'WAITING_FOR_CAPACITY',
    delaySeconds: 60,
    countersAfter: null,
    outputTails: [],
    agentFailure: null,
    market: 'spot',
    placement: null,
    startedAt: '2026-12-06T18:15:20.000Z',
    endedAt: '2026-12-06T18:15:21.000Z',
    decidedAt: '2026-12-06T18:15:21.400Z',
    runStartedAt: null,
    gapSeconds: null,
    standby: null,
    instances: [],
    ...overrides,
  };
}

describe('the wait for capacity as run prints it', () => {
  it('says when the next try is, at what time and in how long, and what had no capacity, in one short line', () => {
    expect(capacityWait(waiting(), 'Europe/Paris')).toBe('waiting for capacity: next try at 19:16:21, in 60 s: no spot capacity for g5.xlarge, g5.2xlarge');
  });

  it('names at most three instance types, and the market of the attempt', () => {
    const tried = ['a1.large', 'b2.large', 'c3.large', 'd4.large', 'e5.large'].map((type) => `${type} in us-east-1a: InsufficientInstanceCapacity`).join(', ');
    const line = capacityWait(waiting({ market: 'on-demand', reason: `waiting for capacity: no capacity: tried ${tried}; next try in 60 s` }), 'UTC');
    expect(line).toBe('waiting for capacity: next try at 18:16:21, in 60 s: no on-demand capacity for a1.large, b2.large, c3.large and 2 more');
  });

  it('reads the local runtime\'s tries too, and is nothing for any other decision', () => {
    const local = waiting({ reason: 'waiting for capacity: no capacity: tried local-process try 1: InsufficientInstanceCapacity (chaos file), local-process try 2: InsufficientInstanceCapacity (chaos file); next try in 60 s' });
    expect(capacityWait(local, 'UTC')).toBe('waiting for capacity: next try at 18:16:21, in 60 s: no spot capacity for local-process');
    expect(capacityWait(waiting({ rule: 'PREEMPTED_OR_LOST' }))).toBeNull();
  });

  it('is what a decision line says through an API, instead of the long reason', () => {
    expect(describeDecision(waiting())).toMatch(/^attempt 2: LAUNCH_FAILED -> RECOVER: waiting for capacity: next try at \d\d:\d\d:\d\d, in 60 s: no spot capacity for g5.xlarge, g5.2xlarge$/);
  });
});
