// relaunch's recovery bounds: defaults, limits and how durations read. No zod here, so the
// policy (and every Lambda that decides) can import them without the parser.

/** `max_boot_failures`' default: three attempts in a row that never ran the job (never booted, or their agent failed before setup) end it. */
export const DEFAULT_MAX_BOOT_FAILURES = 3;

/**
 * `boot_timeout`'s default: every node's first heartbeat must arrive within 10 minutes of
 * the launch, on a clock of its own (the heartbeat timeout starts once all are up).
 */
export const DEFAULT_BOOT_TIMEOUT_SECONDS = 10 * 60;

/**
 * The longest `boot_timeout`, in seconds: 1 day. It becomes one timer (the AwaitBoot
 * state's timeout), so it stays well inside MAX_WAIT_SECONDS; a boot slower than a day is
 * a broken image, not a slow one.
 */
export const MAX_BOOT_TIMEOUT_SECONDS = 24 * 60 * 60;

/**
 * The longest wait a task may ask for, in seconds: 7 days, for `restart_backoff`'s
 * `initial_seconds` and `max_seconds`. Each becomes a timer: a Step Functions Wait on AWS
 * (at most a year), and a Node timer in the local runtime, which cannot run past
 * 2^31-1 ms (about 24.8 days): a longer one fires at once. 7 days is well inside both.
 */
export const MAX_WAIT_SECONDS = 7 * 24 * 60 * 60;

/**
 * The longest `launch_timeout`, in seconds: 365 days. It is compared with the time a wait
 * for capacity has lasted, never set as one timer, so it may exceed MAX_WAIT_SECONDS; the
 * bound keeps it a plain number of seconds.
 */
export const MAX_LAUNCH_TIMEOUT_SECONDS = 365 * 24 * 60 * 60;

const UNITS: readonly (readonly [suffix: string, seconds: number])[] = [
  ['d', 86_400],
  ['h', 3_600],
  ['m', 60],
  ['s', 1],
];

/** Whole seconds the way a task file writes them: `6h`, `1h30m`, `90s` (`1m30s`), `0s`. */
export function formatDuration(seconds: number): string {
  let left = Math.max(0, Math.round(seconds));
  let text = '';
  for (const [suffix, size] of UNITS) {
    const count = Math.floor(left / size);
    left -= count * size;
    if (count > 0) text += `${count}${suffix}`;
  }
  return text === '' ? '0s' : text;
}

/**
 * A duration as the task file writes it, in seconds: one or more `<whole number><unit>`
 * from largest to smallest unit, units d, h, m, s (`6h`, `30m`, `90s`, `1h30m`); undefined
 * when the text is not one.
 */
export function parseDuration(text: string): number | undefined {
  const match = /^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/.exec(text);
  if (match === null || text === '') return undefined;
  return UNITS.reduce((total, [, size], index) => total + Number(match[index + 1] ?? 0) * size, 0);
}
