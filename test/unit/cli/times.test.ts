// The one time convention every command prints (cli/times.ts): local time with its zone.

import { describe, expect, it } from 'vitest';
import { formatClock, formatLength, formatTime } from '../../../cli/times.ts';

describe('formatTime', () => {
  it.each([
    ['Europe/Paris', '2026-12-06 19:16:21 CET'],
    ['America/New_York', '2026-12-06 13:16:21 EST'],
    ['UTC', '2026-12-06 18:16:21 UTC'],
    ['Asia/Kolkata', '2026-12-06 23:46:21 IST'],
    ['Asia/Tokyo', '2026-12-07 03:16:21 GMT+9'],
  ])('prints an instant in %s as date, time to the second and the zone: %s', (zone, printed) => {
    expect(formatTime('2026-12-06T18:16:21.250Z', zone)).toBe(printed);
  });

  it('follows summer time, and takes epoch ms and Dates as well as ISO text', () => {
    expect(formatTime(Date.parse('2026-07-01T10:00:00Z'), 'Europe/Paris')).toBe('2026-07-01 12:00:00 CEST');
    expect(formatTime(new Date('2026-07-01T10:00:00Z'), 'UTC')).toBe('2026-07-01 10:00:00 UTC');
  });

  it('prints - for what is not a time, and the clock alone with formatClock', () => {
    expect(formatTime('soon')).toBe('-');
    expect(formatClock('2026-12-06T18:16:21Z', 'Europe/Paris')).toBe('19:16:21');
  });
});

describe('formatLength', () => {
  it.each([
    [-2, '0s'],
    [42.9, '42s'],
    [185, '3m 05s'],
    [7650, '2h 07m'],
    [302_400, '3d 12h'],
  ])('%d s reads %s', (seconds, printed) => {
    expect(formatLength(seconds)).toBe(printed);
  });
});
