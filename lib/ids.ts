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

/** `j-`, the fixed-width time, `-`, the random part: every id `newJobId` makes, nothing else. */
const JOB_ID = new RegExp(`^j-[0-9a-z]{${TIME_WIDTH}}-[0-9a-z]{${RANDOM_CHARS}}$`);

/** How long every job id is: `j-` + time + `-` + random. */
export const JOB_ID_LENGTH = 2 + TIME_WIDTH + 1 + RANDOM_CHARS;

/**
 * Whether a string has the shape of an id `newJobId` makes. A request naming anything else
 * (a 2 KB string, `../x`) can name no job, so the API answers it without asking the store,
 * whose key limits (DynamoDB: 2048 bytes) would otherwise turn it into a 500.
 */
export function isJobId(value: string): boolean {
  return JOB_ID.test(value);
}

/**
 * The name of the execution that continues a job after `attempt`: `<jobId>-a<attempt>`.
 * Unique per job and attempt, so starting it twice (a retried Lambda) starts one.
 */
export function continuationExecutionName(jobId: string, attempt: number): string {
  return `${jobId}-a${attempt}`;
}
