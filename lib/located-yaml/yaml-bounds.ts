// How much YAML relaunch agrees to parse. A task file, an API body or a chaos file is at
// most MAX_BODY_BYTES, yet the time the yaml package takes over it grows with its shape:
// a dense list of 256 KiB took 3.6 s to build, and its duplicate-key check compares each
// key of a mapping with every key before it (a 256 KiB mapping took 24 to 28 s: the
// "before" column of BENCHMARKS.md's Hostile YAML). So a text is first read by yaml's Lexer alone, once, in time linear in its length,
// and refused past a count of keys and list items or a depth of [ ] and { } nesting; the
// documents are then built without yaml's check and the duplicate keys found in one pass.
// Block nesting needs no bound of its own: each level costs one more space of indent, so
// 256 KiB hold about 714 levels, which yaml builds in tens of milliseconds.

import { isMap, isScalar, isSeq, Lexer, parseAllDocuments, YAMLParseError, type Document, type LineCounter, type Range, type Scalar } from 'yaml';
import type { InputIssue } from '../errors.ts';

/** How much of a shape a kind of file may have. */
export interface YamlBounds {
  /** Keys and list items, in every mapping and list of every document together. */
  readonly maxEntries: number;
  /** Levels of flow collections (`[ ]`, `{ }`) one inside another. */
  readonly maxFlowDepth: number;
}

/**
 * A task file or a task body. A pipeline of 16 tasks with 256 envs each (the most a task
 * may have) holds about 4,600; the 30 real SkyPilot files of the corpus hold at most 43.
 * Past this a text is refused in well under a second, whatever its shape (BENCHMARKS.md).
 */
export const TASK_YAML_BOUNDS: YamlBounds = { maxEntries: 8192, maxFlowDepth: 64 };

/** Parse options: YAML 1.2 core schema, tags left unresolved; duplicate keys are found by findDuplicateKeys. */
const OPTIONS = { prettyErrors: false, uniqueKeys: false, resolveKnownTags: false, logLevel: 'silent' } as const;

/**
 * The text's documents, as `parseAllDocuments` builds them with relaunch's options, each
 * with its errors; a key repeated in a mapping is one of them ("Map keys must be unique",
 * at the repeat), as yaml's own check would report it. Call only on a text that passed
 * `yamlShapeIssue`.
 */
export function parseYamlDocuments(text: string, lineCounter: LineCounter): Document.Parsed[] {
  const docs = parseAllDocuments(text, { ...OPTIONS, lineCounter });
  // parseAllDocuments answers an EmptyStream (an array too) for a text with no document.
  for (const doc of docs) doc.errors.push(...findDuplicateKeys(doc));
  return [...docs];
}

/**
 * The first way the text passes `bounds`, as an issue at the line where it did (and at the
 * top-level key it is under, when there is one), or undefined. Reads the Lexer's tokens
 * only: `:` (a key's value), `-` (a block list item) and `,` (a flow collection's next
 * entry) count one entry each, which counts every key and item at least once.
 */
export function yamlShapeIssue(text: string, bounds: YamlBounds): InputIssue | undefined {
  let entries = 0;
  let depth = 0;
  let line = 1;
  let lineStart = true;
  /** A scalar at the start of a line, outside any flow collection: a top-level key once `:` follows it. */
  let topScalar: string | null = null;
  let topKey = '';
  let scalarNext = false;
  for (const token of new Lexer().lex(text)) {
    if (scalarNext) {
      scalarNext = false;
      if (lineStart && depth === 0) topScalar = token;
    } else if (token === SCALAR) {
      scalarNext = true;
    } else if (token === ':' || token === '-' || token === ',') {
      entries += 1;
      if (token === ':' && topScalar !== null) topKey = topScalar;
      if (entries > bounds.maxEntries) {
        return issue(topKey, `expected at most ${bounds.maxEntries} keys and list items in all, got more; refused before parsing`, line);
      }
    } else if (token === '{' || token === '[') {
      depth += 1;
      if (depth > bounds.maxFlowDepth) return issue(topKey, `expected at most ${bounds.maxFlowDepth} levels of [ ] and { } one inside another, got more`, line);
    } else if (token === '}' || token === ']') {
      depth = Math.max(0, depth - 1);
    } else if (token.startsWith('"') || token.startsWith("'")) {
      if (lineStart && depth === 0) topScalar = token.slice(1, -1);
    }
    if (token === ':') topScalar = null;
    const breaks = countBreaks(token);
    line += breaks;
    if (breaks > 0) {
      lineStart = true;
      topScalar = null;
    } else if (!isMark(token)) {
      lineStart = false;
    }
  }
  return undefined;
}

/** The Lexer's mark before a plain or block scalar's source. */
const SCALAR = '\u001f';

/** The Lexer's marks (a document's start, a scalar's, a flow error): one control character, no source text. */
function isMark(token: string): boolean {
  return token.length === 1 && token < ' ';
}

function countBreaks(token: string): number {
  let breaks = 0;
  for (let at = token.indexOf('\n'); at >= 0; at = token.indexOf('\n', at + 1)) breaks += 1;
  return breaks;
}

function issue(path: string, message: string, line: number): InputIssue {
  return { path, message, line };
}

/**
 * Every key of a mapping equal to one before it in the same mapping, in one pass over the
 * document: scalar keys compare by value (as yaml's uniqueKeys does: `1` and `1.0` are the
 * same number), any other key is its own. No recursion: nesting may be hundreds deep.
 */
function findDuplicateKeys(doc: Document.Parsed): YAMLParseError[] {
  const found: YAMLParseError[] = [];
  const stack: unknown[] = [doc.contents];
  while (stack.length > 0) {
    const node = stack.pop();
    if (isSeq(node)) {
      for (const item of node.items) stack.push(item);
    } else if (isMap(node)) {
      const seen = new Set<unknown>();
      for (const pair of node.items) {
        stack.push(pair.key, pair.value);
        if (!isScalar(pair.key) || Number.isNaN(pair.key.value)) continue;
        if (seen.has(pair.key.value)) {
          // A parsed document's nodes all have their range.
          const [start] = (pair.key as Scalar & { range: Range }).range;
          found.push(new YAMLParseError([start, start + 1], 'DUPLICATE_KEY', 'Map keys must be unique'));
        }
        seen.add(pair.key.value);
      }
    }
  }
  // In the order they stand in the text, as yaml reports its errors.
  return found.sort((a, b) => a.pos[0] - b.pos[0]);
}
