// Exit code lists of job_recovery: one code, or a list of unique codes and "lo-hi" ranges.

import { fromParser, type Report } from '../located-yaml/fields.ts';
import { expectedGot } from '../located-yaml/messages.ts';

const MAX_CODE = 255;
/** relaunch's extension: `"64-78"` is every code from 64 to 78; `"29"` is 29. */
const RANGE = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/;

const CODE = 'an integer 0-255';
const CODE_OR_RANGE = `${CODE} or a range such as "64-78"`;

/**
 * The longest list read item by item: there are only 256 codes, so a longer list repeats
 * one, and is refused whole with one message instead of one per item.
 */
export const MAX_EXIT_CODE_ITEMS = MAX_CODE + 1;

/** The codes one list item stands for, or undefined after reporting why it stands for none. */
function codesOf(item: unknown, report: Report): number[] | undefined {
  if (typeof item === 'number') {
    return Number.isInteger(item) && item >= 0 && item <= MAX_CODE ? [item] : report(expectedGot(CODE, item));
  }
  const match = typeof item === 'string' ? RANGE.exec(item) : null;
  if (match === null) return report(expectedGot(CODE_OR_RANGE, item));
  const low = Number(match[1]);
  const high = match[2] === undefined ? low : Number(match[2]);
  if (high > MAX_CODE) return report(expectedGot('a range within 0-255', item));
  if (low > high) return report(expectedGot('a range low-high with low <= high', item));
  return Array.from({ length: high - low + 1 }, (_, offset) => low + offset);
}

/**
 * An exit code list: `29`, `[29, 42]`, or (relaunch's extension) ranges `["64-78", 99]`.
 * Normalized sorted and unique; a code given twice is an error, as SkyPilot requires
 * unique codes, and a range that overlaps another item counts as giving its codes twice.
 */
export const exitCodesSchema = fromParser<readonly number[]>((value, report) => {
  if (!Array.isArray(value)) return codesOf(value, report);
  if (value.length > MAX_EXIT_CODE_ITEMS) {
    return report(`expected at most ${MAX_EXIT_CODE_ITEMS} items, each code 0-255 once (ranges such as "64-78" cover many), got a list of ${value.length}`);
  }
  const firstSeenAt = new Map<number, number>();
  let failed = false;
  value.forEach((item, index) => {
    const codes = codesOf(item, (message) => {
      failed = true;
      return report(message, [index]);
    });
    const repeated = codes?.find((code) => firstSeenAt.has(code));
    if (repeated !== undefined) {
      failed = true;
      report(`expected unique exit codes, got ${repeated} again (also in [${firstSeenAt.get(repeated)}])`, [index]);
    }
    for (const code of codes ?? []) if (!firstSeenAt.has(code)) firstSeenAt.set(code, index);
  });
  return failed ? undefined : [...firstSeenAt.keys()].sort((a, b) => a - b);
});
