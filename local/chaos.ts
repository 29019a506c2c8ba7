// The chaos file: which faults (spot preemption, a lost or silent node, no capacity, lost
// EC2 events) to inject into which attempts of a job, to rehearse recovery locally.

import { stat } from 'node:fs/promises';
import { isAlias, isCollection, isMap, isScalar, isSeq, LineCounter, type Document, type ParsedNode } from 'yaml';
import { readTaskFile } from '../cli/task-file.ts';
import { InvalidInputError, type InputIssue } from '../lib/errors.ts';
import { parseYamlDocuments, yamlShapeIssue, type YamlBounds } from '../lib/spec/yaml-bounds.ts';
import { MAX_BODY_BYTES } from '../lib/http/handle.ts';
import { MAX_NUM_NODES } from '../lib/report-tail.ts';
import { fromParser, integer, isMapping, type Report } from '../lib/spec/fields.ts';
import { locate, type LineTable, type LocatedValue } from '../lib/spec/locate.ts';
import { describe, expected, expectedGot, type Problem } from '../lib/spec/messages.ts';
import { formatPath, type Path } from '../lib/spec/path.ts';
import { editDistance } from '../lib/spec/unsupported.ts';
import * as z from '../lib/zod.ts';

/**
 * Where a fault was written, for messages about it: its index in the file's `faults` list
 * and the line to point at (its `node` key when it names one, else its entry). Faults made
 * from options (`preemptAttemptsPlan`) have none.
 */
export interface ChaosSource {
  readonly index: number;
  readonly line?: number;
}

/**
 * One injected fault, for one attempt (1-based). Times count from the node's `run` start.
 * - `preempt`: a spot interruption warning, then `warningMs` later the termination.
 * - `rebalance`: EC2's rebalance recommendation for the node's instance; nothing ends.
 * - `lose`: the instance vanishes (no report, the instance `terminated`).
 * - `silence`: the node's network is cut (no heartbeat or report), its process runs on;
 *   `from: boot` counts `after` from the node's start instead, so with `after: 0s` the
 *   node never reaches relaunch at all (an instance with no route to the API); `for`
 *   restores the network after that long (with `from: boot`, a slow boot).
 * - `no_capacity`: the attempt's first `tries` launch tries fail with InsufficientInstanceCapacity.
 * - `drop_events`: EC2 events about the attempt's instances are never delivered.
 */
export type ChaosFault =
  | {
      readonly kind: 'preempt';
      readonly attempt: number;
      readonly node: number;
      readonly afterMs: number;
      readonly warningMs: number;
      readonly source?: ChaosSource;
    }
  | { readonly kind: 'lose'; readonly attempt: number; readonly node: number; readonly afterMs: number; readonly source?: ChaosSource }
  | { readonly kind: 'rebalance'; readonly attempt: number; readonly node: number; readonly afterMs: number; readonly source?: ChaosSource }
  | {
      readonly kind: 'silence';
      readonly attempt: number;
      readonly node: number;
      readonly afterMs: number;
      /** Set when `after` counts from the node's start, not its run's. */
      readonly from?: 'boot';
      /** How long the network stays cut; absent: for good. */
      readonly forMs?: number;
      readonly source?: ChaosSource;
    }
  | { readonly kind: 'no_capacity'; readonly attempt: number; readonly tries: number; readonly source?: ChaosSource }
  | { readonly kind: 'drop_events'; readonly attempt: number; readonly source?: ChaosSource };

/** The faults to inject, in the order they were given (a file's, then the options'). */
export interface ChaosPlan {
  readonly faults: readonly ChaosFault[];
}

/** No fault at all. */
export const NO_CHAOS: ChaosPlan = Object.freeze({ faults: Object.freeze([]) });

/** The fault kinds, as an entry of the file names them. */
export const FAULT_KINDS = ['preempt', 'rebalance', 'lose', 'silence', 'no_capacity', 'drop_events'] as const;

/** `preempt`'s `warning` when not given: short locally (EC2 gives 120 s). */
export const DEFAULT_PREEMPT_WARNING_MS = 2_000;

/**
 * When `--preempt-attempts` warns, counted from run's start, and how long before the
 * instance goes: what the option always did (a strike 300 ms in), now with a warning
 * first. Short on purpose: examples/spot-preemption.yaml runs for 2 s, and a preemption
 * that lands after the job has exited 0 is no preemption.
 */
export const PREEMPT_ATTEMPTS_AFTER_MS = 300;
export const PREEMPT_ATTEMPTS_WARNING_MS = 500;

/**
 * The longest duration a file may give. The local runtime waits with setTimeout, which
 * fires at once past 2^31-1 ms (about 24.8 days); a day is far below that and far above
 * any rehearsal.
 */
export const MAX_DURATION_MS = 24 * 3_600_000;

/** The highest attempt a fault may name: a rehearsal of a thousand attempts is plenty. */
export const MAX_ATTEMPT = 1_000;

/** The most launch tries `no_capacity` may fail. */
export const MAX_NO_CAPACITY_TRIES = 1_000;

/** The most entries `faults` may have. */
export const MAX_FAULTS = 1_000;

/**
 * The largest chaos file, in bytes (and the longest text, in characters): as large as a
 * task file may be, the most readTaskFile reads. A full file of MAX_FAULTS entries with a
 * comment each takes about 100 KiB; the yaml package parses a dense flow list at about
 * 3 s per MiB, so this also bounds a hostile file to under a second.
 */
export const MAX_CHAOS_FILE_BYTES = MAX_BODY_BYTES;

/**
 * The most values a file may stand for once its aliases are expanded. MAX_ALIAS_USES
 * bounds how often aliases repeat, not what each repeats: a hundred uses of an anchored
 * list of 100,000 numbers would build 10^7 values. A full file of MAX_FAULTS entries, each
 * with every setting, holds about 12,000.
 */
const MAX_VALUES = 100_000;

/**
 * The most uses of aliases a file may make, those inside an anchor counted each time it is
 * repeated. Enough to reuse a fault's settings by hand; locate() resolves each use by
 * walking the whole document, so thousands of them on a large file would take seconds.
 */
const MAX_ALIAS_USES = 100;

/** The deepest nesting a file may have; a valid one has 5 levels. */
const MAX_DEPTH = 16;

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
  file: ['faults'],
  entry: ENTRY_KEYS,
  preempt: Object.keys(preemptShape),
  rebalance: Object.keys(nodeFaultShape),
  lose: Object.keys(nodeFaultShape),
  silence: Object.keys(silenceShape),
};
const HOME: Readonly<Record<string, string>> = {
  faults: 'at the top of the file',
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
function readPlan(value: unknown, lines: LineTable, problems: Problem[]): ChaosFault[] {
  if (!isMapping(value)) {
    problems.push({ path: [], message: expectedGot('a chaos file (a mapping with a faults list)', value) });
    return [];
  }
  for (const key of Object.keys(value).filter((name) => name !== 'faults')) {
    problems.push({ path: [key], message: unknownKey('file', key) });
  }
  const list = value.faults;
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
 * How much shape a chaos file may have before it is parsed (lib/spec/yaml-bounds.ts): a
 * full file of MAX_FAULTS faults, each with every setting of a `silence`, holds 7,001 keys
 * and list items.
 */
const CHAOS_YAML_BOUNDS: YamlBounds = { maxEntries: 8192, maxFlowDepth: MAX_DEPTH };

/** A document with no content, or only comments. */
function isEmptyDocument(doc: Document.Parsed): boolean {
  return doc.contents === null || (isScalar(doc.contents) && doc.contents.value === null);
}

/** What a node stands for once its aliases are expanded: values, and uses of aliases. */
interface Size {
  readonly values: number;
  readonly aliases: number;
}

/**
 * What makes a document too big to convert, or undefined: nesting deeper than MAX_DEPTH,
 * more than MAX_VALUES values or MAX_ALIAS_USES uses of aliases, each alias counted as
 * what it repeats. One iterative walk in document order, anchors looked up in a map as
 * they are defined (yaml's own Alias.resolve walks the whole document each time): hostile
 * input costs time linear in its length, and locate() then resolves few aliases.
 */
function sizeProblem(doc: Document.Parsed, counter: LineCounter): InputIssue | undefined {
  const anchors = new Map<string, unknown>();
  const targets = new Map<unknown, unknown>();
  /** Values and alias uses a node stands for, once its aliases are expanded. */
  const sizes = new Map<unknown, Size>();
  // An alias to no anchor, or to a collection still open (a cycle), counts as itself: locate() reports it.
  const sizeOf = (node: unknown): Size => sizes.get(node) ?? { values: 1, aliases: 0 };
  const childrenOf = (node: unknown): unknown[] =>
    (isSeq(node) ? node.items : isMap(node) ? node.items.flatMap((pair) => [pair.key, pair.value]) : []).filter((child) => child != null);
  const tooBig = (message: string, node: unknown): InputIssue => ({ path: '', message, line: lineAt(node, counter) });
  const stack = [{ node: doc.contents as unknown, depth: 1, open: false }];
  for (let top = stack.at(-1); top !== undefined; top = stack.at(-1)) {
    const { node } = top;
    const children = childrenOf(node);
    if (!top.open) {
      top.open = true;
      if (isAlias(node)) targets.set(node, anchors.get(node.source));
      else if ((isScalar(node) || isCollection(node)) && node.anchor !== undefined) anchors.set(node.anchor, node);
      if (children.length > 0) {
        if (top.depth === MAX_DEPTH) return tooBig(`expected at most ${MAX_DEPTH} levels of nesting, got more`, node);
        const depth = top.depth + 1;
        // One push per child: spreading 100,000 arguments would overflow the call stack.
        for (const child of children.reverse()) stack.push({ node: child, depth, open: false });
        continue;
      }
    }
    stack.pop();
    const size: Size = isAlias(node)
      ? { values: sizeOf(targets.get(node)).values, aliases: 1 + sizeOf(targets.get(node)).aliases }
      : children.reduce<Size>(
          (sum, child) => ({ values: sum.values + sizeOf(child).values, aliases: sum.aliases + sizeOf(child).aliases }),
          { values: 1, aliases: 0 },
        );
    if (size.values > MAX_VALUES) return tooBig(`expected at most ${MAX_VALUES} values, each alias counted as the values it repeats, got more`, node);
    if (size.aliases > MAX_ALIAS_USES) {
      return tooBig(`expected at most ${MAX_ALIAS_USES} uses of aliases, counting those inside what an alias repeats, got more`, node);
    }
    sizes.set(node, size);
  }
  return undefined;
}

function lineAt(node: unknown, counter: LineCounter): number {
  return counter.linePos((node as ParsedNode).range[0]).line;
}

/** The text's YAML as plain data with lines; throws for what makes it unreadable as one chaos file. */
function readChaosYaml(text: string): LocatedValue {
  if (text.length > MAX_CHAOS_FILE_BYTES) {
    throw new InvalidInputError([{ path: '', message: `expected a chaos file of at most ${MAX_CHAOS_FILE_BYTES} characters, got ${text.length}` }]);
  }
  // Text decoded leniently elsewhere carries U+FFFD for each invalid byte; no chaos file needs one.
  const replaced = text.indexOf('\uFFFD');
  if (replaced >= 0) {
    const line = text.slice(0, replaced).split('\n').length;
    throw new InvalidInputError([{ path: '', message: 'expected text without U+FFFD, the mark of bytes that were not UTF-8', line }]);
  }
  const shape = yamlShapeIssue(text, CHAOS_YAML_BOUNDS);
  if (shape !== undefined) throw new InvalidInputError([shape]);
  const counter = new LineCounter();
  const docs = parseYamlDocuments(text, counter);
  const syntax = docs.flatMap((doc) =>
    doc.errors.map((error): InputIssue => ({ path: '', message: `invalid YAML: ${error.message}`, line: counter.linePos(error.pos[0]).line })),
  );
  if (syntax.length > 0) throw new InvalidInputError(syntax);
  const [first, second, ...rest] = docs.filter((doc) => !isEmptyDocument(doc));
  if (first === undefined) {
    throw new InvalidInputError([{ path: '', message: 'expected a chaos file (a mapping with a faults list), got an empty file' }]);
  }
  if (second !== undefined) {
    const message = `expected one YAML document, got ${2 + rest.length}`;
    throw new InvalidInputError([{ path: '', message, line: lineAt(second.contents, counter) }]);
  }
  const tooBig = sizeProblem(first, counter);
  if (tooBig !== undefined) throw new InvalidInputError([tooBig]);
  return locate(first, text, counter);
}

/**
 * Parses a chaos file's text into a plan, faults in the file's order, each with its
 * `source` (index in `faults`, line). Defaults: `node` 0, `after` 0s, `warning` 2s.
 *
 * @throws InvalidInputError carrying every problem at once, each with its path (such as
 *   `faults[2].preempt.after`) and line: YAML syntax, several documents, a file too large
 *   or too deeply nested, aliases that expand too far, unknown keys (with suggestions),
 *   entries without exactly one fault, values out of range, two no_capacity for one attempt.
 */
export function parseChaosFile(text: string): ChaosPlan {
  const { value, lines, problems: readProblems } = readChaosYaml(text);
  const found: Problem[] = [];
  const faults = readPlan(value, lines, found);
  // A value reading could not make (a dangling alias) is reported once, by the reading.
  const covered = new Set(readProblems.map((problem) => formatPath(problem.path)));
  const problems = [...readProblems, ...found.filter((problem) => !covered.has(formatPath(problem.path)))];
  if (problems.length > 0) throw new InvalidInputError(placed(problems, lines));
  return { faults };
}

/**
 * Reads and parses a chaos file (`-`: standard input), through readTaskFile.
 *
 * @throws InvalidInputError naming the file when it is missing, unreadable, a directory,
 *   not a regular file, larger than MAX_CHAOS_FILE_BYTES or not UTF-8; else as parseChaosFile.
 */
export async function readChaosFile(file: string): Promise<ChaosPlan> {
  // Checked here too, to word these two for a chaos file; readTaskFile refuses the rest
  // (devices, pipes, bytes that are not UTF-8) and reads standard input for `-`.
  const info = await stat(file).catch(() => null);
  if (info?.isDirectory() === true) throw new InvalidInputError([{ path: file, message: 'is a directory, expected a chaos file' }]);
  if (info !== null && info.isFile() && info.size > MAX_CHAOS_FILE_BYTES) {
    throw new InvalidInputError([{ path: file, message: `expected a chaos file of at most ${MAX_CHAOS_FILE_BYTES} bytes, got ${info.size} bytes` }]);
  }
  return parseChaosFile(await readTaskFile(file));
}

/**
 * `--preempt-attempts 1,3` as a plan: node 0 of each attempt warned PREEMPT_ATTEMPTS_AFTER_MS
 * after run starts and gone PREEMPT_ATTEMPTS_WARNING_MS later. An attempt given twice is one fault.
 *
 * @throws InvalidInputError naming `--preempt-attempts` for a number that is not an attempt.
 */
export function preemptAttemptsPlan(attempts: readonly number[]): ChaosPlan {
  const wrong = attempts.find((attempt) => !Number.isSafeInteger(attempt) || attempt < 1 || attempt > MAX_ATTEMPT);
  if (wrong !== undefined) {
    throw new InvalidInputError([
      { path: '--preempt-attempts', message: expectedGot(`attempt numbers from 1 to ${MAX_ATTEMPT}`, wrong) },
    ]);
  }
  return {
    faults: [...new Set(attempts)].map(
      (attempt): ChaosFault => ({
        kind: 'preempt',
        attempt,
        node: 0,
        afterMs: PREEMPT_ATTEMPTS_AFTER_MS,
        warningMs: PREEMPT_ATTEMPTS_WARNING_MS,
      }),
    ),
  };
}

/** Both plans' faults, `a`'s first. */
export function mergeChaos(a: ChaosPlan, b: ChaosPlan): ChaosPlan {
  return { faults: [...a.faults, ...b.faults] };
}

/**
 * Issues for faults naming a node the task does not have (node >= numNodes), at
 * `faults[i].<kind>.node` with the line where the file names it. `i` is the fault's
 * `source.index`, or its position in the plan when it has no source.
 */
export function chaosIssuesForTask(plan: ChaosPlan, numNodes: number): InputIssue[] {
  const nodes = numNodes === 1 ? 'node 0 (the task has 1 node)' : `a node from 0 to ${numNodes - 1} (the task has ${numNodes} nodes)`;
  return plan.faults.flatMap((fault, position): InputIssue[] => {
    if (!('node' in fault) || fault.node < numNodes) return [];
    const path = `faults[${fault.source?.index ?? position}].${fault.kind}.node`;
    const message = `expected ${nodes}, got ${describe(fault.node)}`;
    const line = fault.source?.line;
    return [line === undefined ? { path, message } : { path, message, line }];
  });
}

/** The faults of one attempt, in the plan's order. */
export function faultsOfAttempt(plan: ChaosPlan, attempt: number): readonly ChaosFault[] {
  return plan.faults.filter((fault) => fault.attempt === attempt);
}
