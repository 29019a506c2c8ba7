// The status table: which statuses are final, and which moves between them are legal.

import { describe, expect, it } from 'vitest';
import { IllegalTransitionError } from '../../../lib/errors.ts';
import { assertTransition, canTransition, isEnding, isTerminal, JOB_STATUSES, JobStatus, TRANSITIONS } from '../../../lib/status.ts';

const TERMINAL_STATUSES = [
  'SUCCEEDED',
  'FAILED',
  'FAILED_SETUP',
  'FAILED_PRECHECKS',
  'FAILED_NO_RESOURCE',
  'FAILED_CONTROLLER',
  'CANCELLED',
] as const;
const LIVE_STATUSES = ['PENDING', 'STARTING', 'RUNNING', 'RECOVERING', 'CANCELLING'] as const;

describe('statuses', () => {
  it('lists the twelve statuses of DESIGN.md section 2, each once, in lifecycle order', () => {
    expect(JOB_STATUSES).toEqual([
      'PENDING',
      'STARTING',
      'RUNNING',
      'RECOVERING',
      'SUCCEEDED',
      'FAILED',
      'FAILED_SETUP',
      'FAILED_PRECHECKS',
      'FAILED_NO_RESOURCE',
      'FAILED_CONTROLLER',
      'CANCELLING',
      'CANCELLED',
    ]);
  });

  it('has a row in the transition table for every status, and no other', () => {
    expect(Object.keys(TRANSITIONS).sort()).toEqual([...JOB_STATUSES].sort());
  });

  it('only ever moves to known statuses', () => {
    for (const targets of Object.values(TRANSITIONS)) {
      for (const to of targets) expect(JOB_STATUSES).toContain(to);
    }
  });
});

describe('isTerminal', () => {
  it.each(TERMINAL_STATUSES)('%s is terminal', (status) => {
    expect(isTerminal(status)).toBe(true);
  });

  it.each(LIVE_STATUSES)('%s is live', (status) => {
    expect(isTerminal(status)).toBe(false);
  });
});

describe('isEnding', () => {
  it('is every terminal status and CANCELLING, no other', () => {
    expect(JOB_STATUSES.filter(isEnding).sort()).toEqual([...TERMINAL_STATUSES, JobStatus.CANCELLING].sort());
  });
});

describe('transitions', () => {
  it.each(TERMINAL_STATUSES)('terminal %s has no way out', (status) => {
    expect(TRANSITIONS[status]).toEqual([]);
    for (const to of JOB_STATUSES) expect(canTransition(status, to)).toBe(false);
  });

  it.each(LIVE_STATUSES)('live %s can reach a terminal status (no job is stuck)', (status) => {
    const reached = new Set<JobStatus>([status]);
    for (let grew = true; grew; ) {
      grew = false;
      for (const from of [...reached]) {
        for (const to of TRANSITIONS[from]) {
          if (!reached.has(to)) {
            reached.add(to);
            grew = true;
          }
        }
      }
    }
    expect([...reached].some(isTerminal)).toBe(true);
  });

  it.each(['PENDING', 'STARTING', 'RUNNING', 'RECOVERING'] as const)(
    '%s can fail on the controller, be cancelled, or start cancelling',
    (status) => {
      expect(canTransition(status, JobStatus.FAILED_CONTROLLER)).toBe(true);
      expect(canTransition(status, JobStatus.CANCELLING)).toBe(true);
      expect(canTransition(status, JobStatus.CANCELLED)).toBe(true);
    },
  );

  it.each([
    ['a launch', 'PENDING', 'STARTING'],
    ['the job starting to run', 'STARTING', 'RUNNING'],
    ['a setup failure before RUNNING', 'STARTING', 'FAILED_SETUP'],
    ['no capacity at launch', 'STARTING', 'FAILED_NO_RESOURCE'],
    ['a bad spec found at launch', 'STARTING', 'FAILED_PRECHECKS'],
    ['a relaunch decision', 'RUNNING', 'RECOVERING'],
    ['success', 'RUNNING', 'SUCCEEDED'],
    ['the relaunch itself', 'RECOVERING', 'STARTING'],
    ['cancel completing', 'CANCELLING', 'CANCELLED'],
  ] as const)('allows %s (%s -> %s)', (_name, from, to) => {
    expect(canTransition(from, to)).toBe(true);
    expect(() => assertTransition(from, to)).not.toThrow();
  });

  it.each([
    ['skipping the launch', 'PENDING', 'RUNNING'],
    ['succeeding from RECOVERING without a new attempt', 'RECOVERING', 'SUCCEEDED'],
    ['no capacity once running', 'RUNNING', 'FAILED_PRECHECKS'],
    ['leaving CANCELLING except to its end', 'CANCELLING', 'RUNNING'],
    ['reviving a finished job', 'SUCCEEDED', 'STARTING'],
    ['a status to itself', 'RUNNING', 'RUNNING'],
  ] as const)('refuses %s (%s -> %s)', (_name, from, to) => {
    expect(canTransition(from, to)).toBe(false);
  });

  it('refuses an illegal transition with an error naming both ends', () => {
    let caught: unknown;
    try {
      assertTransition('FAILED', 'RECOVERING');
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(IllegalTransitionError);
    expect(caught).toMatchObject({
      name: 'IllegalTransitionError',
      from: 'FAILED',
      to: 'RECOVERING',
      message: 'a job cannot go from FAILED to RECOVERING',
    });
  });
});
