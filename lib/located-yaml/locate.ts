// A parsed YAML document as a plain value, with the 1-based line of every key and list item.

import { isAlias, isMap, isScalar, isSeq, type Document, type LineCounter } from 'yaml';
import type { Problem } from './messages.ts';
import { formatPath, type Path } from './path.ts';

/** Finds the line of a path in the source file. */
export interface LineTable {
  /** The line of the path's key or list item (of the document's start for the empty path). */
  lineOf(path: Path): number | undefined;
}

/** For input that came with no file (a JSON body): no lines. */
export const NO_LINES: LineTable = { lineOf: () => undefined };

/** A document as a plain value, where its paths are, and what could not be read as data. */
export interface LocatedValue {
  readonly value: unknown;
  readonly lines: LineTable;
  /** Template placeholders and keys that are not scalars, each at its path. */
  readonly problems: readonly Problem[];
}

/**
 * PyYAML (YAML 1.1), which SkyPilot reads task files with, also takes these plain words as
 * booleans; the `yaml` package's core schema (YAML 1.2) already takes true/True/TRUE.
 */
const YAML_1_1_BOOLEANS: ReadonlyMap<string, boolean> = new Map([
  ...['yes', 'Yes', 'YES', 'on', 'On', 'ON'].map((word) => [word, true] as const),
  ...['no', 'No', 'NO', 'off', 'Off', 'OFF'].map((word) => [word, false] as const),
]);

/**
 * Whether a number at `path` keeps the text it was written as: an env's value becomes text
 * in the job's environment, and the text the user wrote is what the job must see (`LR:
 * 1e-4` as `1e-4`, `1.0` as `1.0`; as numbers they would print as `0.0001` and `1`).
 * PyYAML reads `1e-4` as a string too, having no exponent without a dot.
 */
function keepsText(path: Path): boolean {
  return path.length === 2 && path[0] === 'envs';
}

/**
 * Aliases a file may dereference. Each use expands its anchor again, so a few nested
 * aliases can stand for billions of values (a "billion laughs" file): the budget stops that.
 */
const MAX_ALIASES = 1000;

interface Ranged {
  readonly range?: readonly [number, number, number] | null;
}

/**
 * Converts a parsed document (core schema, known tags left unresolved) into plain data:
 * mappings become objects, keys strings, aliases their anchored value. A flow mapping that
 * starts with `{{` is a Jinja placeholder (`name: {{storage_name}}`): it is reported and
 * kept as its text, so the rest of the file is still checked.
 */
export function locate(doc: Document.Parsed, source: string, counter: LineCounter): LocatedValue {
  const lines = new Map<string, number>();
  const problems: Problem[] = [];
  /** The mappings and lists being converted, from the root down: an alias to one is a cycle. */
  const open = new Set<unknown>();
  let aliasesLeft = MAX_ALIASES;

  /** Every node of a parsed document has a range; a key or item is placed by where it starts. */
  const mark = (path: Path, node: unknown): void => {
    const [start] = (node as Ranged).range as readonly [number, number, number];
    lines.set(formatPath(path), counter.linePos(start).line);
  };
  const textOf = (node: Ranged): string => {
    const [start, end] = node.range as readonly [number, number, number];
    return source.slice(start, end).trim();
  };

  const toPlain = (node: unknown, path: Path): unknown => {
    if (isAlias(node)) {
      aliasesLeft -= 1;
      if (aliasesLeft < 0) {
        // Said once: past the budget every alias is dropped, and the file is rejected anyway.
        if (aliasesLeft === -1) problems.push({ path, message: `expected at most ${MAX_ALIASES} uses of aliases, got more` });
        return null;
      }
      const target = node.resolve(doc);
      const wrong =
        target === undefined ? 'names no anchor before it'
        : open.has(target) ? 'refers to a mapping or list that holds it'
        : undefined;
      if (wrong !== undefined) {
        problems.push({ path, message: `expected a value, got the alias *${node.source}, which ${wrong}` });
        return null;
      }
      return toPlain(target, path);
    }
    if (isScalar(node)) {
      const plain = node.type === 'PLAIN' ? YAML_1_1_BOOLEANS.get(node.source as string) : undefined;
      if (keepsText(path) && typeof node.value === 'number') return node.source;
      return plain ?? node.value;
    }
    if (isSeq(node)) {
      open.add(node);
      const items = node.items.map((item, index) => {
        mark([...path, index], item);
        return toPlain(item, [...path, index]);
      });
      open.delete(node);
      return items;
    }
    if (isMap(node)) {
      if (node.flow === true && textOf(node).startsWith('{{')) {
        problems.push({
          path,
          message: `expected a YAML value, got the template placeholder ${textOf(node)} (render the template first)`,
        });
        return textOf(node);
      }
      open.add(node);
      const entries: [string, unknown][] = [];
      for (const { key, value } of node.items) {
        if (!isScalar(key)) {
          const shown = textOf(key as Ranged);
          const hint = shown.startsWith('{{') ? ' (a template placeholder: render the template first)' : '';
          problems.push({ path, message: `expected a plain key, got ${shown}${hint}` });
          continue;
        }
        const name = String(key.value);
        mark([...path, name], key);
        entries.push([name, toPlain(value, [...path, name])]);
      }
      open.delete(node);
      return Object.fromEntries(entries);
    }
    return null;
  };

  mark([], doc.contents);
  const value = toPlain(doc.contents, []);
  return {
    value,
    problems,
    lines: {
      lineOf: (path) => lines.get(formatPath(path)),
    },
  };
}
