// Durations as task files write them, both ways, and the limits the parser holds them to.

import { describe, expect, it } from 'vitest';
import { formatDuration, MAX_LAUNCH_TIMEOUT_SECONDS, MAX_WAIT_SECONDS, parseDuration } from '../../../../lib/task-file/bounds.ts';

describe('parseDuration', () => {
  it.each([
    ['90s', 90],
    ['30m', 1_800],
    ['6h', 21_600],
    ['2d', 172_800],
    ['1h30m', 5_400],
    ['1d2h3m4s', 93_784],
    ['0s', 0],
    ['90m', 5_400],
  ])('%s is %i seconds', (text, seconds) => {
    expect(parseDuration(text)).toBe(seconds);
  });

  it.each(['', '6', '6 h', '1h 30m', '30m1h', '1.5h', '500ms', '6H', '-1s', '1w', 'h'])('%j is not a duration', (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0s'],
    [45, '45s'],
    [90, '1m30s'],
    [600, '10m'],
    [21_600, '6h'],
    [93_784, '1d2h3m4s'],
    [604_800, '7d'],
    [1.4, '1s'],
    [-5, '0s'],
  ])('%d seconds read %s', (seconds, text) => {
    expect(formatDuration(seconds)).toBe(text);
  });

  it.each([0, 59, 3_601, 93_784, MAX_WAIT_SECONDS, MAX_LAUNCH_TIMEOUT_SECONDS])('parseDuration reads back what formatDuration writes: %i', (seconds) => {
    expect(parseDuration(formatDuration(seconds))).toBe(seconds);
  });
});

describe('the limits', () => {
  it('a 7-day wait fits the local runtime\'s timers (2^31-1 ms) and Step Functions\' year', () => {
    expect(MAX_WAIT_SECONDS * 1000).toBeLessThan(2 ** 31 - 1);
    expect(MAX_WAIT_SECONDS).toBe(604_800);
    expect(MAX_LAUNCH_TIMEOUT_SECONDS).toBe(365 * 86_400);
  });
});
