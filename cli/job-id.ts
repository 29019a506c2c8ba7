// A job id given on the command line: checked before any store sees it, so a string that
// can name no job (2 KB long, `../x`) is bad input, not a store's key-size error.

import { InvalidInputError } from '../lib/errors.ts';
import { isJobId } from '../lib/ids.ts';

/** The longest part of a bad id the message repeats. */
const SHOWN_CHARS = 40;

/** Commander's parser for a `<job>` argument: the id itself, or exit 2 saying what an id looks like. */
export function jobIdArgument(value: string): string {
  if (isJobId(value)) return value;
  const shown = value.length > SHOWN_CHARS ? `${JSON.stringify(value.slice(0, SHOWN_CHARS))}... (${value.length} characters)` : JSON.stringify(value);
  throw new InvalidInputError([{ path: '<job>', message: `expected a job id such as j-0m8x2k1qz-4fz0aa, got ${shown}` }]);
}
