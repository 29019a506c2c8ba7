// Sizes in a task: cpus and memory (`4` exactly, `4+` at least) and disk_size in GB.

import type { Quantity } from './types.ts';
import { fromParser } from '../located-yaml/fields.ts';
import { expectedGot } from '../located-yaml/messages.ts';

/** A positive decimal number (`4`, `0.5`, `.5`), an optional unit, an optional `+`. */
const AMOUNT = /^(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*(\+?)$/i;

/**
 * GB per unit. SkyPilot reads sizes in binary units under decimal names (1 TB = 1024 GB),
 * and so does relaunch, so a file means the same in both.
 */
const GB_PER_UNIT: Readonly<Record<string, number>> = { '': 1, m: 1 / 1024, mb: 1 / 1024, g: 1, gb: 1, t: 1024, tb: 1024 };

interface Amount {
  readonly value: number;
  readonly unit: string;
  readonly orMore: boolean;
}

function amount(value: unknown): Amount | undefined {
  if (typeof value === 'number') {
    return Number.isFinite(value) && value > 0 ? { value, unit: '', orMore: false } : undefined;
  }
  if (typeof value !== 'string') return undefined;
  const match = AMOUNT.exec(value.trim());
  if (match === null) return undefined;
  const number = Number(match[1]);
  if (number <= 0) return undefined;
  return { value: number, unit: (match[2] as string).toLowerCase(), orMore: match[3] === '+' };
}

/** `resources.cpus`: `4` (exactly 4), `4+` (at least 4), fractions allowed (`0.5`). */
export const cpusSchema = fromParser<Quantity>((value, report) => {
  const parsed = amount(value);
  if (parsed === undefined || parsed.unit !== '') {
    return report(expectedGot('a number of CPUs > 0 such as 4, or 4+ for at least 4', value));
  }
  return { value: parsed.value, orMore: parsed.orMore };
});

/** `resources.memory`, in GB: `32`, `32+`, `64GB+`, `0.5`; units MB, GB, TB (binary). */
export const memorySchema = fromParser<Quantity>((value, report) => {
  const parsed = amount(value);
  const perUnit = parsed === undefined ? undefined : GB_PER_UNIT[parsed.unit];
  if (parsed === undefined || perUnit === undefined) {
    return report(expectedGot('memory in GB > 0 such as 32, 32+ for at least 32, or 64GB+', value));
  }
  return { value: parsed.value * perUnit, orMore: parsed.orMore };
});

/** `resources.disk_size`, in whole GB: `256`, `1024GB`, `1TB` (= 1024 GB). */
export const diskSizeSchema = fromParser<number>((value, report) => {
  const parsed = amount(value);
  const perUnit = parsed === undefined ? undefined : GB_PER_UNIT[parsed.unit];
  const gb = parsed === undefined || perUnit === undefined || parsed.orMore ? NaN : parsed.value * perUnit;
  if (!Number.isInteger(gb)) {
    return report(expectedGot('a whole number of GB such as 256, 1024GB or 1TB', value));
  }
  return gb;
});
