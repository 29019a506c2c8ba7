// resources.accelerators in every form SkyPilot accepts, normalized to a list of candidates.

import type { Accelerator } from './types.ts';
import { fromParser, isMapping, type Report } from '../located-yaml/fields.ts';
import { expectedGot } from '../located-yaml/messages.ts';

/** `A100`, `A100:8`, `A100-80GB:8`, `tpu-v5e-16`: a name, then an optional `:count`. */
const NAME_AND_COUNT = /^([A-Za-z0-9][A-Za-z0-9._-]*)(?::\s*(\S*))?$/;

const ONE = 'an accelerator such as A100:8 or L4';
const COUNT = 'a whole number of accelerators >= 1';

/** A positive whole count, or undefined. */
function wholeCount(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 ? value : undefined;
}

/** `A100:8` or `A100`; a bad count is reported as such, anything else as a bad accelerator. */
function fromText(text: string, report: Report): Accelerator | undefined {
  const match = NAME_AND_COUNT.exec(text.trim());
  if (match === null) return report(expectedGot(ONE, text));
  const [, name = '', countText] = match;
  if (countText === undefined) return { name, count: 1 };
  const count = wholeCount(/^\d+$/.test(countText) ? Number(countText) : NaN);
  if (count === undefined) return report(expectedGot(`${COUNT} after ${name}:`, text));
  return { name, count };
}

/**
 * One mapping entry: `A100: 8`, `A100:` (count 1), or a set member `'A100:8':` (a YAML
 * mapping with a null value, which is how `{A100:8, T4:1}` reads).
 */
function fromEntry(key: string, count: unknown, report: Report): Accelerator | undefined {
  if (count === null) return fromText(key, report);
  const named = fromText(key, report);
  if (named === undefined) return undefined;
  if (key.includes(':')) return report(expectedGot(`no count after ${key} (it names its own)`, count));
  const whole = wholeCount(count);
  if (whole === undefined) return report(expectedGot(COUNT, count));
  return { name: named.name, count: whole };
}

function fromMapping(mapping: Record<string, unknown>, report: Report): Accelerator[] {
  const found: Accelerator[] = [];
  for (const [key, count] of Object.entries(mapping)) {
    const accelerator = fromEntry(key, count, (message) => report(message, [key]));
    if (accelerator !== undefined) found.push(accelerator);
  }
  return found;
}

function fromListItem(item: unknown, report: Report): Accelerator | undefined {
  if (typeof item === 'string') return fromText(item, report);
  if (isMapping(item) && Object.keys(item).length === 1) {
    const [[key, count]] = Object.entries(item) as [[string, unknown]];
    return fromEntry(key, count, report);
  }
  return report(expectedGot(`${ONE}, or a one-entry mapping such as {T4: 1}`, item));
}

/** Drops repeated candidates (`[A100:8, A100:8]`), keeping the first of each. */
function unique(candidates: readonly Accelerator[]): Accelerator[] {
  const seen = new Set<string>();
  return candidates.filter(({ name, count }) => {
    const key = `${name}:${count}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/**
 * `resources.accelerators`: `A100:8`, `L4` (count 1), `{A100: 8}`, a set of candidates
 * (`{H100:8, H200:8}`, `{'A100:1', 'T4:1'}`) or a list (`[T4: 1, "V100:2"]`), any one of
 * which will do. Counts are whole numbers: one job has whole GPUs on its instances.
 */
export const acceleratorsSchema = fromParser<readonly Accelerator[]>((value, report) => {
  if (typeof value === 'string') {
    const one = fromText(value, report);
    return one === undefined ? undefined : [one];
  }
  const isList = Array.isArray(value);
  if ((!isList && !isMapping(value)) || Object.keys(value).length === 0) {
    return report(expectedGot(`${ONE}, a mapping such as {H100: 8, H200: 8} or a list of them`, value));
  }
  let failed = false;
  const flagging: Report = (message, path) => {
    failed = true;
    return report(message, path);
  };
  const candidates = isList
    ? value.flatMap((item, index) => fromListItem(item, (message) => flagging(message, [index])) ?? [])
    : fromMapping(value, flagging);
  return failed ? undefined : unique(candidates);
});
