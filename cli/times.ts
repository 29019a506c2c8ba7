// How every relaunch command prints a time and a length of time: local time with its zone
// (`2026-12-06 19:16:21 CET`), so a line of `run`, a row of `status`, a line of `logs
// --controller` and a note of `validate` can be read against each other and against a clock.

/**
 * `2026-12-06 19:16:21 CET`: the instant in `timeZone` (the machine's own by default), to
 * the second, with the zone's short name. An instant that is not a time prints `-`.
 */
export function formatTime(at: string | number | Date, timeZone?: string): string {
  const date = at instanceof Date ? at : new Date(at);
  if (Number.isNaN(date.getTime())) return '-';
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
  }).formatToParts(date);
  const part = (type: Intl.DateTimeFormatPartTypes): string => parts.find((each) => each.type === type)?.value ?? '';
  return `${part('year')}-${part('month')}-${part('day')} ${part('hour')}:${part('minute')}:${part('second')} ${zoneName(date, timeZone)}`;
}

/**
 * Locales asked in turn for a zone's short name: each knows the abbreviations of its own
 * region (en-US has EST but not CET, en-GB has CET but not EST).
 */
const ZONE_LOCALES = ['en-US', 'en-GB', 'en-IN', 'en-AU'] as const;

/** The zone's short name at that instant (`CET`, `EST`, `UTC`), else its offset (`GMT+9`). */
function zoneName(date: Date, timeZone: string | undefined): string {
  let offset = '';
  for (const locale of ZONE_LOCALES) {
    const name = new Intl.DateTimeFormat(locale, { timeZone, timeZoneName: 'short' }).formatToParts(date).find((each) => each.type === 'timeZoneName')?.value ?? '';
    if (name !== '' && !/^(GMT|UTC)[+-]/.test(name)) return name;
    if (offset === '') offset = name;
  }
  return offset;
}

/** The clock part of formatTime (`19:16:21`), for a line that already carries the date and zone. */
export function formatClock(at: string | number | Date, timeZone?: string): string {
  const full = formatTime(at, timeZone);
  return full === '-' ? full : (full.split(' ')[1] ?? full);
}

/**
 * A length of time as a person reads it: `42s`, `3m 05s`, `2h 07m`, `3d 04h`. Negative
 * lengths (clocks a little apart) read as 0s.
 */
export function formatLength(seconds: number): string {
  const whole = Math.max(0, Math.floor(seconds));
  if (whole < 60) return `${whole}s`;
  const pad = (value: number): string => String(value).padStart(2, '0');
  if (whole < 3600) return `${Math.floor(whole / 60)}m ${pad(whole % 60)}s`;
  if (whole < 86_400) return `${Math.floor(whole / 3600)}h ${pad(Math.floor((whole % 3600) / 60))}m`;
  return `${Math.floor(whole / 86_400)}d ${pad(Math.floor((whole % 86_400) / 3600))}h`;
}
