// How problems are worded: "expected <what>, got <what arrived>", and the shape they travel in.

import type { Path } from './path.ts';

/** A problem found in a task, before it is placed on a line: where, and what is wrong. */
export interface Problem {
  readonly path: Path;
  readonly message: string;
}

/** Longest string shown verbatim in a message; longer ones are cut with an ellipsis. */
const MAX_SHOWN = 60;

/**
 * Names a value the way a message shows what arrived: numbers and booleans as written,
 * strings quoted (so `"300"` differs from `300`), collections by kind.
 */
export function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (typeof value === 'string') {
    const shown = value.length > MAX_SHOWN ? `${value.slice(0, MAX_SHOWN)}...` : value;
    return JSON.stringify(shown);
  }
  if (Array.isArray(value)) return value.length === 0 ? 'an empty list' : 'a list';
  if (typeof value === 'object' && value !== null) {
    return Object.keys(value).length === 0 ? 'an empty mapping' : 'a mapping';
  }
  return String(value);
}

/** `expected <what>, got <value>`: the one sentence shape of every validation message. */
export function expectedGot(what: string, value: unknown): string {
  return `expected ${what}, got ${describe(value)}`;
}

/**
 * A zod error function that words any failure of one field the same way, whatever check
 * failed (type, integer, range): `expected an integer >= 0, got -1`.
 */
export function expected(what: string): (issue: { readonly input?: unknown }) => string {
  return (issue) => expectedGot(what, issue.input);
}
