// Identifiers: job ids and the execution names derived from them.

import type { Clock, Random } from './ports.ts';

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';
/** Base-36 milliseconds stay 9 characters wide until the year 5188, so ids sort by time. */
const TIME_WIDTH = 9;
const RANDOM_CHARS = 6;

/**
 * A new job id: `j-<time>-<random>`, e.g. `j-0m8x2k1qz-4fz0aa`. Short, sortable by creation
 * time (the time is fixed-width base 36), and made only of `[a-z0-9-]`, so it is a valid
 * Step Functions execution name as it is.
 */
export function newJobId(clock: Clock, random: Random): string {
  const time = clock.now().getTime().toString(36).padStart(TIME_WIDTH, '0');
  let suffix = '';
  for (let i = 0; i < RANDOM_CHARS; i += 1) {
    const index = Math.min(ALPHABET.length - 1, Math.floor(random() * ALPHABET.length));
    suffix += ALPHABET[index];
  }
  return `j-${time}-${suffix}`;
}

/**
 * The name of the execution that continues a job after `attempt`: `<jobId>-a<attempt>`.
 * Unique per job and attempt, so starting it twice (a retried Lambda) starts one.
 */
export function continuationExecutionName(jobId: string, attempt: number): string {
  return `${jobId}-a${attempt}`;
}
