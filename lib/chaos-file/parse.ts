// The chaos file's format: its keys, values and defaults, and every way a file can be wrong,
// each with its path, message and line.

import { InvalidInputError, type InputIssue } from '../errors.ts';
import { MAX_NUM_NODES } from '../report-tail.ts';
import { fromParser, integer, isMapping, type Report } from '../located-yaml/fields.ts';
import type { LineTable } from '../located-yaml/locate.ts';
import { expected, expectedGot, type Problem } from '../located-yaml/messages.ts';
import { formatPath, type Path } from '../located-yaml/path.ts';
import { editDistance } from '../task-file/unsupported.ts';
import * as z from '../zod.ts';
import {
  DEFAULT_PREEMPT_WARNING_MS,
  FAULT_KINDS,
  MAX_ATTEMPT,
  MAX_DURATION_MS,
  MAX_FAULTS,
  MAX_NO_CAPACITY_TRIES,
  type ChaosFault,
  type ChaosPlan,
  type ChaosSource,
} from './types.ts';
import { readChaosYaml } from './yaml.ts';

const MS_PER_UNIT: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };
const DURATION = /^([0-9]+)(ms|s|m|h)$/;
const DURATION_FORMS = 'a duration such as 500ms, 2s, 1m or 1h';

/** A duration, or undefined after reporting why the value is not one. */
function readDuration(value: unknown, report: Report): number | undefined {
  const bare = typeof value === 'number' ? String(value) : typeof value === 'string' ? value.trim() : '';
  if (/^[0-9]+$/.test(bare)) return report(`${expectedGot(DURATION_FORMS, value)}: add a unit, such as ${bare}s or ${bare}ms`);
  const match = typeof value === 'string' ? DURATION.exec(value.trim()) : null;
  if (match === null) return report(expectedGot(DURATION_FORMS, value));
  const ms = Number(match[1]) * (MS_PER_UNIT[match[2] as string] as number);
  if (ms > MAX_DURATION_MS) return report(expectedGot('a duration of at most 24h', value));
  return ms;
}

/**
 * A duration in milliseconds: a whole number and a unit, `500ms`, `2s`, `1m` or `1h`, at
 * most MAX_DURATION_MS. A bare number is refused (is `2` seconds or milliseconds?).
 *
 * @param path where the text came from, for the error (an option's name, a file's path).
 * @throws InvalidInputError naming `path`, with what was expected and what arrived.
 */
export function parseDuration(text: string, path = ''): number {
  return readDuration(text, (message) => {
    throw new InvalidInputError([{ path, message }]);
  }) as number;
}

const durationSchema = fromParser<number>(readDuration);

const nodeFaultShape = {
  node: z.optional(integer(`a node index, an integer from 0 to ${MAX_NUM_NODES - 1}`, 0, MAX_NUM_NODES - 1)),
  after: z.optional(durationSchema),
};
const preemptShape = { ...nodeFaultShape, warning: z.optional(durationSchema) };
const silenceShape = {
  ...nodeFaultShape,
  from: z.optional(z.enum(['run', 'boot'], { error: expected('run (the default) or boot') })),
  for: z.optional(durationSchema),
};

/** A fault's mapping; `{}` asks for every default. A key with no value is refused, not defaulted. */
function nodeFaultSchema<S extends typeof nodeFaultShape>(shape: S, example: string) {
  return z.strictObject(shape, { error: expected(`a mapping such as ${example} ({} for the defaults)`) });
}

/** An entry of `faults`, in the file's spelling. Which fault it holds is checked apart. */
const entrySchema = z.strictObject({
  attempt: integer(`an attempt number, an integer from 1 to ${MAX_ATTEMPT}`, 1, MAX_ATTEMPT),
  preempt: z.optional(nodeFaultSchema(preemptShape, '{node: 0, after: 2s, warning: 2s}')),
  rebalance: z.optional(nodeFaultSchema(nodeFaultShape, '{node: 0, after: 1s}')),
  lose: z.optional(nodeFaultSchema(nodeFaultShape, '{node: 0, after: 1s}')),
  silence: z.optional(nodeFaultSchema(silenceShape, '{node: 0, after: 1s}')),
  no_capacity: z.optional(integer(`a number of launch tries, an integer from 1 to ${MAX_NO_CAPACITY_TRIES}`, 1, MAX_NO_CAPACITY_TRIES)),
  drop_events: z.optional(z.literal(true, { error: expected('true (leave drop_events out for no fault)') })),
});

type Entry = z.output<typeof entrySchema>;

const ENTRY_KEYS: readonly string[] = ['attempt', ...FAULT_KINDS];

/** The keys each mapping of the file takes, and where each key belongs, for unknown keys. */
const KEYS: Readonly<Record<string, readonly string[]>> = {
  file: ['faults', 'boot'],
  entry: ENTRY_KEYS,
  preempt: Object.keys(preemptShape),
  rebalance: Object.keys(nodeFaultShape),
  lose: Object.keys(nodeFaultShape),
  silence: Object.keys(silenceShape),
};
const HOME: Readonly<Record<string, string>> = {
  faults: 'at the top of the file',
  boot: 'at the top of the file',
  ...Object.fromEntries(ENTRY_KEYS.map((key) => [key, 'in an entry of the faults list'])),
  node: 'inside preempt, rebalance, lose or silence',
  after: 'inside preempt, rebalance, lose or silence',
  warning: 'inside preempt',
  from: 'inside silence',
  for: 'inside silence',
};

/** Keys compared for a suggestion: case and `-` versus `_` never matter. */
function folded(key: string): string {
  return key.toLowerCase().replaceAll('-', '_');
}

/**
 * Why a mapping does not take `key`: it belongs in another mapping of the file, it is a
 * likely typo of one this mapping takes (at most 2 edits, fewer than half its length),
 * or it is unknown (the message lists what the mapping takes).
 */
function unknownKey(section: string, key: string): string {
  const taken = KEYS[section] ?? [];
  const home = Object.hasOwn(HOME, key) ? HOME[key] : undefined;
  if (home !== undefined) return `unknown key here: ${key} goes ${home}`;
  const near = taken
    .map((candidate) => ({ candidate, distance: editDistance(folded(key), folded(candidate)) }))
    .filter(({ candidate, distance }) => distance <= 2 && distance * 2 < candidate.length)
    .sort((a, b) => a.distance - b.distance)[0];
  if (near !== undefined) return `unknown key, did you mean \`${near.candidate}\`?`;
  return `unknown key; expected ${taken.join(', ')}`;
}

/** `a`, `a and b`, `a, b and c` (or `a, b or c`). */
function listed(words: readonly string[], conjunction = 'and'): string {
  return words.length <= 1 ? words.join('') : `${words.slice(0, -1).join(', ')} ${conjunction} ${words.at(-1)}`;
}

const ONE_FAULT = `one fault: ${listed(FAULT_KINDS, 'or')}`;

/** An entry's zod issues as problems, unknown keys worded by the mapping they are in. */
function entryProblems(issues: readonly z.core.$ZodIssue[], at: Path): Problem[] {
  return issues.flatMap((issue): Problem[] => {
    const path = [...at, ...(issue.path as Path)];
    if (issue.code !== 'unrecognized_keys') return [{ path, message: issue.message }];
    const section = typeof issue.path[0] === 'string' ? issue.path[0] : 'entry';
    return issue.keys.map((key) => ({ path: [...path, key], message: unknownKey(section, key) }));
  });
}

/** The entry's one fault, with where it was written. */
function faultOf(entry: Entry, source: ChaosSource): ChaosFault {
  const { attempt } = entry;
  if (entry.preempt !== undefined) {
    const { node = 0, after = 0, warning = DEFAULT_PREEMPT_WARNING_MS } = entry.preempt;
    return { kind: 'preempt', attempt, node, afterMs: after, warningMs: warning, source };
  }
  if (entry.rebalance !== undefined) return { kind: 'rebalance', attempt, node: entry.rebalance.node ?? 0, afterMs: entry.rebalance.after ?? 0, source };
  if (entry.lose !== undefined) return { kind: 'lose', attempt, node: entry.lose.node ?? 0, afterMs: entry.lose.after ?? 0, source };
  if (entry.silence !== undefined) {
    const { node = 0, after = 0, from = 'run', for: forMs } = entry.silence;
    return {
      kind: 'silence',
      attempt,
      node,
      afterMs: after,
      ...(from === 'boot' ? { from } : {}),
      ...(forMs === undefined ? {} : { forMs }),
      source,
    };
  }
  if (entry.no_capacity !== undefined) return { kind: 'no_capacity', attempt, tries: entry.no_capacity, source };
  return { kind: 'drop_events', attempt, source };
}

/** Checks one entry of `faults`: its problems go to `problems`, its fault (when valid) is returned. */
function readEntry(value: unknown, index: number, lines: LineTable, problems: Problem[]): ChaosFault | undefined {
  const at: Path = ['faults', index];
  if (!isMapping(value)) {
    problems.push({ path: at, message: expectedGot(`a fault: a mapping with attempt and ${ONE_FAULT}`, value) });
    return undefined;
  }
  const result = entrySchema.safeParse(value);
  const found = result.success ? [] : entryProblems(result.error.issues, at);
  const kinds = FAULT_KINDS.filter((kind) => Object.hasOwn(value, kind));
  const [first, second] = kinds;
  // An entry with an unknown key most likely misspells its fault: the key's message says so.
  if (first === undefined && Object.keys(value).every((key) => ENTRY_KEYS.includes(key))) {
    found.push({ path: at, message: `expected ${ONE_FAULT}, got none` });
  }
  if (second !== undefined) {
    found.push({ path: [...at, second], message: `expected one fault per entry, got ${listed(kinds)} (give each its own entry)` });
  }
  problems.push(...found);
  if (!result.success || found.length > 0) return undefined;
  const line = lines.lineOf([...at, first as string, 'node']) ?? lines.lineOf(at);
  return faultOf(result.data, line === undefined ? { index } : { index, line });
}

/** The plan a file's data stands for; every problem found goes to `problems`. */
function readPlan(value: unknown, lines: LineTable, problems: Problem[]): ChaosPlan {
  if (!isMapping(value)) {
    problems.push({ path: [], message: expectedGot('a chaos file (a mapping with a faults list)', value) });
    return { faults: [] };
  }
  for (const key of Object.keys(value).filter((name) => !(KEYS.file as readonly string[]).includes(name))) {
    problems.push({ path: [key], message: unknownKey('file', key) });
  }
  const bootMs = Object.hasOwn(value, 'boot') ? readDuration(value.boot, (message) => void problems.push({ path: ['boot'], message })) : undefined;
  const boot = bootMs === undefined ? {} : { bootMs };
  // A file may give only the boot: its faults are then none.
  if (!Object.hasOwn(value, 'faults') && Object.hasOwn(value, 'boot')) return { faults: [], ...boot };
  return { faults: readFaults(value.faults, lines, problems), ...boot };
}

/** The `faults` list's faults; every problem found goes to `problems`. */
function readFaults(list: unknown, lines: LineTable, problems: Problem[]): ChaosFault[] {
  if (!Array.isArray(list)) {
    problems.push({ path: ['faults'], message: expectedGot('a list of faults (each a mapping with attempt and one fault)', list) });
    return [];
  }
  if (list.length > MAX_FAULTS) {
    problems.push({ path: ['faults'], message: `expected at most ${MAX_FAULTS} faults, got ${list.length}` });
    return [];
  }
  const faults = list.flatMap((entry, index) => readEntry(entry, index, lines, problems) ?? []);
  const capacityAt = new Map<number, number>();
  for (const fault of faults) {
    if (fault.kind !== 'no_capacity' || fault.source === undefined) continue;
    const earlier = capacityAt.get(fault.attempt);
    if (earlier === undefined) capacityAt.set(fault.attempt, fault.source.index);
    else {
      problems.push({
        path: ['faults', fault.source.index, 'no_capacity'],
        message: `expected one no_capacity per attempt, got another for attempt ${fault.attempt} (also faults[${earlier}])`,
      });
    }
  }
  return faults;
}

/** A problem's line: its own, or else its nearest enclosing key's or item's (a missing key has none). */
function lineOf(path: Path, lines: LineTable): number | undefined {
  for (let end = path.length; end >= 0; end -= 1) {
    const line = lines.lineOf(path.slice(0, end));
    if (line !== undefined) return line;
  }
  return undefined;
}

/**
 * Problems as issues, with their lines, in the file's order. A problem said twice is kept
 * once: zod words every failed check of a field alike (1e300 fails both int and maximum).
 */
function placed(problems: readonly Problem[], lines: LineTable): InputIssue[] {
  const issues = new Map<string, InputIssue>();
  for (const problem of problems) {
    const line = lineOf(problem.path, lines);
    const path = formatPath(problem.path);
    const issue = line === undefined ? { path, message: problem.message } : { path, message: problem.message, line };
    issues.set(`${path}\n${problem.message}`, issue);
  }
  return [...issues.values()].sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
}

/**
 * Parses a chaos file's text into a plan: its `boot` (bootMs, absent when not given) and
 * its faults in the file's order, each with its `source` (index in `faults`, line).
 * Defaults: `node` 0, `after` 0s, `warning` 15s (DEFAULT_PREEMPT_WARNING_MS).
 *
 * @throws InvalidInputError carrying every problem at once, each with its path (such as
 *   `faults[2].preempt.after`) and line: YAML syntax, several documents, a file too large
 *   or too deeply nested, aliases that expand too far, unknown keys (with suggestions),
 *   entries without exactly one fault, values out of range, two no_capacity for one attempt.
 */
export function parseChaosFile(text: string): ChaosPlan {
  const { value, lines, problems: readProblems } = readChaosYaml(text);
  const found: Problem[] = [];
  const plan = readPlan(value, lines, found);
  // A value reading could not make (a dangling alias) is reported once, by the reading.
  const covered = new Set(readProblems.map((problem) => formatPath(problem.path)));
  const problems = [...readProblems, ...found.filter((problem) => !covered.has(formatPath(problem.path)))];
  if (problems.length > 0) throw new InvalidInputError(placed(problems, lines));
  return plan;
}
