// The YAML a task file, a task body or a chaos file may hold: its shape is bounded before
// any document is built (the keys and list items in all, the nesting of [ ] and { }), and
// duplicate keys are found in one pass, as yaml's own check would report them.

import { LineCounter } from 'yaml';
import { describe, expect, it } from 'vitest';
import { InvalidTaskSpecError } from '../../../../lib/errors.ts';
import { parseJobFile } from '../../../../lib/task-file/parse.ts';
import { parseYamlDocuments, TASK_YAML_BOUNDS, yamlShapeIssue } from '../../../../lib/located-yaml/yaml-bounds.ts';
import { HOSTILE_TASKS } from '../../../../bench/hostile-texts.ts';

const SMALL = { maxEntries: 4, maxFlowDepth: 2 };
const TOO_MANY = 'expected at most 4 keys and list items in all, got more; refused before parsing';
const TOO_DEEP = 'expected at most 2 levels of [ ] and { } one inside another, got more';

describe('yamlShapeIssue', () => {
  it.each([
    ['four keys', 'a: 1\nb: 2\nc: 3\nd: 4\n'],
    ['four list items', '- 1\n- 2\n- 3\n- 4\n'],
    ['keys and items in flow collections', 'a: [1, 2]\n'],
    ['two levels of flow nesting, closed and opened again', 'a: [[1]]\nb: [{}]\n'],
    ['what block scalars and quotes hold', 'run: |\n  a: b, c\n  - d: [[[e]]]\nx: "f: g, [h"\ny: \'i: [j\'\n'],
    ['nothing', ''],
  ])('lets %s through', (_what, text) => {
    expect(yamlShapeIssue(text, SMALL)).toBeUndefined();
  });

  it.each([
    ['a fifth key, under the top-level key it is in, at its line', 'a: 1\nb: 2\nc:\n  d: 3\n  e: 4\n', { path: 'c', message: TOO_MANY, line: 5 }],
    ['a fifth list item', 'list:\n  - 1\n  - 2\n  - 3\n  - 4\n', { path: 'list', message: TOO_MANY, line: 5 }],
    ['flow entries, commas counted', 'x: {a: 1, b: 2, c: 3}\n', { path: 'x', message: TOO_MANY, line: 1 }],
    ['a double-quoted top-level key', 'a: 1\n"q: r": [1, 2, 3, 4]\n', { path: 'q: r', message: TOO_MANY, line: 2 }],
    ["a single-quoted top-level key", "'s': [1, 2, 3, 4, 5]\n", { path: 's', message: TOO_MANY, line: 1 }],
    ['lines of a block scalar counted', 'run: |\n  one\n  two\nx: [1, 2, 3, 4]\n', { path: 'x', message: TOO_MANY, line: 4 }],
    ['a flow mapping at the top: no top-level key to name', '{a: 1, b: [1, 2, 3]}\n', { path: '', message: TOO_MANY, line: 1 }],
    ['three levels of flow nesting', 'deep: [[[]]]\n', { path: 'deep', message: TOO_DEEP, line: 1 }],
    ['quoted values inside flow collections, no key to name', '["a", \'b\', {c: [[]]}]\n', { path: '', message: TOO_DEEP, line: 1 }],
  ])('refuses %s', (_what, text, issue) => {
    expect(yamlShapeIssue(text, SMALL)).toEqual(issue);
  });

  it('lets through every file of the shapes relaunch takes: a pipeline of 16 tasks with 256 envs each', () => {
    const task = `run: echo hi\nenvs:\n${Array.from({ length: 256 }, (_, i) => `  E${i}: x`).join('\n')}\n`;
    const pipeline = `name: p\n---\n${Array.from({ length: 16 }, () => task).join('---\n')}`;
    expect(yamlShapeIssue(pipeline, TASK_YAML_BOUNDS)).toBeUndefined();
    expect(parseJobFile(pipeline).tasks).toHaveLength(16);
  });
});

describe('a hostile task, within the body limit, is refused before it is parsed', () => {
  it.each(HOSTILE_TASKS)('$name', ({ text, key }) => {
    expect(text.length).toBeLessThanOrEqual(256 * 1024);
    let thrown: unknown;
    try {
      parseJobFile(text);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(InvalidTaskSpecError);
    const issues = (thrown as InvalidTaskSpecError).issues;
    expect(issues).toHaveLength(1);
    expect(issues[0]?.path).toBe(key);
    expect(issues[0]?.message).toMatch(/^expected at most (8192 keys and list items in all, got more; refused before parsing|64 levels of \[ \] and \{ \} one inside another, got more)$/);
  });
});

describe('parseYamlDocuments: duplicate keys, found in one pass', () => {
  const duplicates = (text: string): { message: string; line: number }[] => {
    const counter = new LineCounter();
    return parseYamlDocuments(text, counter).flatMap((doc) => doc.errors.map((error) => ({ message: error.message, line: counter.linePos(error.pos[0]).line })));
  };

  it.each([
    ['a repeated top-level key', 'a: 1\nb: 2\na: 3\n', [3]],
    ['a repeat in a nested mapping, and in a mapping inside a list', 'x:\n  k: 1\n  k: 2\nl:\n  - {m: 1, m: 2}\n', [3, 5]],
    ['numbers that are the same number', '1: a\n1.0: b\n', [2]],
    ['a repeat in the second document', 'a: 1\n---\nb: 1\nb: 2\n', [4]],
  ])('%s', (_what, text, lines) => {
    expect(duplicates(text)).toEqual(lines.map((line) => ({ message: 'Map keys must be unique', line })));
  });

  it.each([
    ['the same key in two mappings', 'a: {k: 1}\nb: {k: 1}\n'],
    ['a string and a number that read alike', '"1": a\n1: b\n'],
    ['.nan twice: not equal to itself', '.nan: a\n.nan: b\n'],
    ['collections as keys, each its own', '? [1]\n: a\n? [1]\n: b\n'],
    ['no document at all', ''],
  ])('finds none in %s', (_what, text) => {
    expect(duplicates(text)).toEqual([]);
  });
});
