// A chaos file's YAML read as plain data with lines, within bounds a hostile file cannot
// push past: size, text that was not UTF-8, shape, one document, nesting and aliases.

import { isAlias, isCollection, isMap, isScalar, isSeq, LineCounter, type Document, type ParsedNode } from 'yaml';
import { InvalidInputError, type InputIssue } from '../errors.ts';
import { locate, type LocatedValue } from '../located-yaml/locate.ts';
import { parseYamlDocuments, yamlShapeIssue, type YamlBounds } from '../located-yaml/yaml-bounds.ts';
import { MAX_CHAOS_FILE_BYTES } from './types.ts';

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

/**
 * How much shape a chaos file may have before it is parsed (lib/located-yaml/yaml-bounds.ts): a
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

/**
 * The text's YAML as plain data with lines, and the problems met making it (a dangling alias).
 *
 * @throws InvalidInputError for what makes it unreadable as one chaos file: too long, U+FFFD,
 *   too many entries or too deep a flow, YAML syntax, no document or several, a document
 *   too deeply nested or whose aliases expand too far.
 */
export function readChaosYaml(text: string): LocatedValue {
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
