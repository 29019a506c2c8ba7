// Job ids and callback secrets.

import { describe, expect, it } from 'vitest';
import { continuationExecutionName, isJobId, JOB_ID_LENGTH, newJobId } from '../../../../lib/ids.ts';
import { hashSecret, newCallbackSecret, secretMatches } from '../../../../lib/secrets.ts';
import { TestClock } from '../../../support/usecases-harness.ts';

/** Step Functions execution names: 1-80 of these characters. */
const EXECUTION_NAME = /^[A-Za-z0-9_-]{1,80}$/;

describe('newJobId', () => {
  it('is short, prefixed, and a valid execution name, even continued', () => {
    const id = newJobId(new TestClock(), () => 0.5);
    expect(id).toMatch(/^j-[0-9a-z]{9}-[0-9a-z]{6}$/);
    expect(id).toMatch(EXECUTION_NAME);
    expect(continuationExecutionName(id, 12345)).toMatch(EXECUTION_NAME);
  });

  it('sorts by creation time as a string', () => {
    const clock = new TestClock('2026-01-01T00:00:00.000Z');
    const ids: string[] = [];
    for (const step of [1, 60, 86_400, 365 * 86_400]) {
      ids.push(newJobId(clock, () => 0.99));
      clock.advance(step);
    }
    expect([...ids].sort()).toEqual(ids);
  });

  it('differs with the random draw at the same instant', () => {
    const clock = new TestClock();
    expect(newJobId(clock, () => 0)).not.toBe(newJobId(clock, () => 0.5));
  });

  it('stays in the alphabet when the draw is at its edges', () => {
    expect(newJobId(new TestClock(), () => 0.9999999999)).toMatch(/-zzzzzz$/);
    expect(newJobId(new TestClock(), () => 0)).toMatch(/-000000$/);
  });
});

describe('isJobId', () => {
  it('accepts every id newJobId makes, whatever the time and the draw', () => {
    const clock = new TestClock('1970-01-01T00:00:00.000Z');
    for (const draw of [0, 0.5, 0.9999999999]) {
      const id = newJobId(clock, () => draw);
      expect(id).toHaveLength(JOB_ID_LENGTH);
      expect(isJobId(id)).toBe(true);
      clock.advance(400_000_000);
    }
  });

  it.each([
    ['empty', ''],
    ['too short', 'j-1'],
    ['a word', 'j-no-such-job'],
    ['2 KB long', `j-0m8x2k1qz-${'a'.repeat(2048)}`],
    ['upper case', 'j-0M8X2K1QZ-4FZ0AA'],
    ['no prefix', 'x-0m8x2k1qz-4fz0aa'],
    ['a path', 'j-0m8x2k1qz/../../x'],
    ['a trailing newline', 'j-0m8x2k1qz-4fz0aa\n'],
    ['a continuation name', 'j-0m8x2k1qz-4fz0aa-a12'],
    ['non-ASCII digits', 'j-０m8x2k1qz-4fz0aa'],
  ])('refuses %s', (_what, value) => {
    expect(isJobId(value)).toBe(false);
  });
});

describe('callback secrets', () => {
  it('are 32 random bytes in hex, a new one each time', () => {
    const secret = newCallbackSecret();
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    expect(newCallbackSecret()).not.toBe(secret);
  });

  it('match their own hash only', () => {
    const secret = newCallbackSecret();
    const hash = hashSecret(secret);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(hash).not.toContain(secret);
    expect(secretMatches(secret, hash)).toBe(true);
    expect(secretMatches(newCallbackSecret(), hash)).toBe(false);
    expect(secretMatches('', hash)).toBe(false);
  });

  it('never match a malformed hash', () => {
    const secret = newCallbackSecret();
    expect(secretMatches(secret, 'not hex')).toBe(false);
    expect(secretMatches(secret, hashSecret(secret).slice(0, 32))).toBe(false);
  });
});
