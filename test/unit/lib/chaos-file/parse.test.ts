// The chaos file's format: every form it takes and the plan it makes, and every way it can be
// wrong with the path, message and line the user sees.

import { describe, expect, it } from 'vitest';
import { parseChaosFile, parseDuration } from '../../../../lib/chaos-file/parse.ts';
import type { ChaosFault } from '../../../../lib/chaos-file/types.ts';
import { InvalidInputError, type InputIssue } from '../../../../lib/errors.ts';
import { HOSTILE_CHAOS } from '../../../../bench/hostile-texts.ts';

/** The issues a parse threw; fails the test when it did not throw InvalidInputError. */
function issuesOf(parse: () => unknown): readonly InputIssue[] {
  try {
    parse();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidInputError);
    return (error as InvalidInputError).issues;
  }
  throw new Error('expected the input to be refused');
}

const ENTRY = 'a fault: a mapping with attempt and one fault: preempt, rebalance, lose, silence, no_capacity or drop_events';
const ATTEMPT = 'expected an attempt number, an integer from 1 to 1000';
const NODE = 'expected a node index, an integer from 0 to 63';
const DURATION = 'expected a duration such as 500ms, 2s, 1m or 1h';
const TRIES = 'expected a number of launch tries, an integer from 1 to 1000';
const PREEMPT_MAPPING = 'expected a mapping such as {node: 0, after: 2s, warning: 2s} ({} for the defaults)';
const LIST = 'expected a list of faults (each a mapping with attempt and one fault)';

describe('parseChaosFile: valid files', () => {
  it.each<[string, string, readonly ChaosFault[]]>([
    [
      'the documented example, each fault with its index and line',
      [
        'faults:                                  # each applies to one attempt (1-based)',
        '  - attempt: 1',
        '    preempt: {node: 0, after: 2s}',
        '  - attempt: 2',
        '    lose: {node: 1, after: 1s}',
        '  - attempt: 3',
        '    no_capacity: 2',
        '  - attempt: 1',
        '    silence: {node: 0, after: 1s}',
        '  - attempt: 2',
        '    drop_events: true',
      ].join('\n'),
      [
        { kind: 'preempt', attempt: 1, node: 0, afterMs: 2_000, warningMs: 15_000, source: { index: 0, line: 3 } },
        { kind: 'lose', attempt: 2, node: 1, afterMs: 1_000, source: { index: 1, line: 5 } },
        { kind: 'no_capacity', attempt: 3, tries: 2, source: { index: 2, line: 6 } },
        { kind: 'silence', attempt: 1, node: 0, afterMs: 1_000, source: { index: 3, line: 9 } },
        { kind: 'drop_events', attempt: 2, source: { index: 4, line: 10 } },
      ],
    ],
    ['an empty list: no faults', 'faults: []', []],
    [
      '{} takes every default: node 0, after 0s, warning 15s',
      'faults:\n  - attempt: 1\n    preempt: {}\n  - attempt: 1\n    lose: {}\n  - attempt: 1\n    silence: {}',
      [
        { kind: 'preempt', attempt: 1, node: 0, afterMs: 0, warningMs: 15_000, source: { index: 0, line: 2 } },
        { kind: 'lose', attempt: 1, node: 0, afterMs: 0, source: { index: 1, line: 4 } },
        { kind: 'silence', attempt: 1, node: 0, afterMs: 0, source: { index: 2, line: 6 } },
      ],
    ],
    [
      'block mappings: the line is the node key',
      'faults:\n  - attempt: 2\n    preempt:\n      after: 500ms\n      warning: 1m\n      node: 3',
      [{ kind: 'preempt', attempt: 2, node: 3, afterMs: 500, warningMs: 60_000, source: { index: 0, line: 6 } }],
    ],
    [
      'a rebalance recommendation, defaults and given',
      'faults:\n  - attempt: 1\n    rebalance: {}\n  - attempt: 2\n    rebalance: {node: 1, after: 3s}',
      [
        { kind: 'rebalance', attempt: 1, node: 0, afterMs: 0, source: { index: 0, line: 2 } },
        { kind: 'rebalance', attempt: 2, node: 1, afterMs: 3_000, source: { index: 1, line: 5 } },
      ],
    ],
    [
      'every unit, 0s, and the 24h cap itself',
      'faults:\n  - {attempt: 1, preempt: {after: 0s, warning: 24h}}\n  - {attempt: 2, lose: {after: 1h}}\n  - {attempt: 3, silence: {after: 90s}}',
      [
        { kind: 'preempt', attempt: 1, node: 0, afterMs: 0, warningMs: 86_400_000, source: { index: 0, line: 2 } },
        { kind: 'lose', attempt: 2, node: 0, afterMs: 3_600_000, source: { index: 1, line: 3 } },
        { kind: 'silence', attempt: 3, node: 0, afterMs: 90_000, source: { index: 2, line: 4 } },
      ],
    ],
    [
      'a silence from the node\'s start, one from its run given as such, and a slow boot',
      'faults:\n  - {attempt: 1, silence: {from: boot}}\n  - {attempt: 2, silence: {from: run, after: 1s}}\n  - {attempt: 3, silence: {from: boot, for: 2m}}',
      [
        { kind: 'silence', attempt: 1, node: 0, afterMs: 0, from: 'boot', source: { index: 0, line: 2 } },
        { kind: 'silence', attempt: 2, node: 0, afterMs: 1_000, source: { index: 1, line: 3 } },
        { kind: 'silence', attempt: 3, node: 0, afterMs: 0, from: 'boot', forMs: 120_000, source: { index: 2, line: 4 } },
      ],
    ],
    [
      'the largest attempt, node and tries',
      'faults:\n  - {attempt: 1000, lose: {node: 63}}\n  - {attempt: 1000, no_capacity: 1000}',
      [
        { kind: 'lose', attempt: 1_000, node: 63, afterMs: 0, source: { index: 0, line: 2 } },
        { kind: 'no_capacity', attempt: 1_000, tries: 1_000, source: { index: 1, line: 3 } },
      ],
    ],
    [
      'no_capacity on two different attempts',
      'faults: [{attempt: 1, no_capacity: 1}, {attempt: 2, no_capacity: 1}]',
      [
        { kind: 'no_capacity', attempt: 1, tries: 1, source: { index: 0, line: 1 } },
        { kind: 'no_capacity', attempt: 2, tries: 1, source: { index: 1, line: 1 } },
      ],
    ],
    [
      'an anchored fault used again through an alias (its node is on the anchor\'s line)',
      'faults:\n  - attempt: 1\n    lose: &lost {node: 1, after: 3s}\n  - attempt: 2\n    lose: *lost',
      [
        { kind: 'lose', attempt: 1, node: 1, afterMs: 3_000, source: { index: 0, line: 3 } },
        { kind: 'lose', attempt: 2, node: 1, afterMs: 3_000, source: { index: 1, line: 3 } },
      ],
    ],
    [
      'YAML 1.1 yes, as task files read it',
      'faults:\n  - attempt: 1\n    drop_events: yes',
      [{ kind: 'drop_events', attempt: 1, source: { index: 0, line: 2 } }],
    ],
    [
      'a document marker, comments and a trailing empty document',
      '# rehearsal\n---\nfaults:\n  - attempt: 1 # first\n    drop_events: true\n---\n# nothing more\n',
      [{ kind: 'drop_events', attempt: 1, source: { index: 0, line: 4 } }],
    ],
    [
      'exactly 1000 entries',
      `faults:\n${'  - {attempt: 1, drop_events: true}\n'.repeat(1_000)}`,
      Array.from({ length: 1_000 }, (_, index): ChaosFault => ({ kind: 'drop_events', attempt: 1, source: { index, line: index + 2 } })),
    ],
  ])('%s', (_name, text, faults) => {
    expect(parseChaosFile(text)).toEqual({ faults });
  });
});

describe('parseChaosFile: invalid files name the path, the problem and the line', () => {
  it.each<[string, string, readonly InputIssue[]]>([
    // The file as a whole.
    ['an empty file', '', [{ path: '', message: 'expected a chaos file (a mapping with a faults list), got an empty file' }]],
    ['only comments', '# nothing\n', [{ path: '', message: 'expected a chaos file (a mapping with a faults list), got an empty file' }]],
    ['a list', '- attempt: 1', [{ path: '', message: 'expected a chaos file (a mapping with a faults list), got a list', line: 1 }]],
    ['a scalar', 'preempt', [{ path: '', message: 'expected a chaos file (a mapping with a faults list), got "preempt"', line: 1 }]],
    ['two documents', 'faults: []\n---\nfaults: []\n', [{ path: '', message: 'expected one YAML document, got 2', line: 3 }]],
    ['YAML syntax', 'faults:\n  - attempt: 1\n    preempt: {node: 0\n', [
      { path: '', message: 'invalid YAML: Flow map in block collection must be sufficiently indented and end with a }', line: 4 },
    ]],
    ['a key given twice', 'faults:\n  - attempt: 1\n    attempt: 2\n    drop_events: true\n', [
      { path: '', message: 'invalid YAML: Map keys must be unique', line: 3 },
    ]],
    ['an unknown top-level key, with a suggestion', 'fault: []', [
      { path: 'fault', message: 'unknown key, did you mean `faults`?', line: 1 },
      { path: 'faults', message: `${LIST}, got nothing`, line: 1 },
    ]],
    ['an entry key at the top level', 'attempt: 1\nfaults: []', [
      { path: 'attempt', message: 'unknown key here: attempt goes in an entry of the faults list', line: 1 },
    ]],
    ['a __proto__ key at the top level', '__proto__: {faults: []}\nfaults: []', [
      { path: '__proto__', message: 'unknown key; expected faults, boot', line: 1 },
    ]],
    ['faults with no value', 'faults:', [{ path: 'faults', message: `${LIST}, got null`, line: 1 }]],
    ['faults a mapping', 'faults: {attempt: 1}', [{ path: 'faults', message: `${LIST}, got a mapping`, line: 1 }]],
    ['faults a string', 'faults: preempt', [{ path: 'faults', message: `${LIST}, got "preempt"`, line: 1 }]],
    // Refused before parsing: four keys and list items a line, the 8,193rd on line 2049.
    ['10,000 entries (in 250 KB)', `faults:\n${'- {attempt: 1, lose: {}}\n'.repeat(10_000)}`, [
      { path: 'faults', message: 'expected at most 8192 keys and list items in all, got more; refused before parsing', line: 2049 },
    ]],
    ['1001 entries', `faults:\n${'  - {attempt: 1, drop_events: true}\n'.repeat(1_001)}`, [
      { path: 'faults', message: 'expected at most 1000 faults, got 1001', line: 1 },
    ]],
    // An entry.
    ['an entry that is not a mapping', 'faults:\n  - 5\n  - [attempt, 1]', [
      { path: 'faults[0]', message: `expected ${ENTRY}, got 5`, line: 2 },
      { path: 'faults[1]', message: `expected ${ENTRY}, got a list`, line: 3 },
    ]],
    ['no fault', 'faults:\n  - attempt: 1', [
      { path: 'faults[0]', message: 'expected one fault: preempt, rebalance, lose, silence, no_capacity or drop_events, got none', line: 2 },
    ]],
    ['two faults', 'faults:\n  - attempt: 1\n    lose: {}\n    silence: {}', [
      { path: 'faults[0].silence', message: 'expected one fault per entry, got lose and silence (give each its own entry)', line: 4 },
    ]],
    ['three faults', 'faults:\n  - {attempt: 1, drop_events: true, no_capacity: 1, preempt: {}}', [
      { path: 'faults[0].no_capacity', message: 'expected one fault per entry, got preempt, no_capacity and drop_events (give each its own entry)', line: 2 },
    ]],
    ['no attempt', 'faults:\n  - drop_events: true', [{ path: 'faults[0].attempt', message: `${ATTEMPT}, got nothing`, line: 2 }]],
    ['a misspelt fault: the typo, not "got none"', 'faults:\n  - attempt: 1\n    preemt: {}', [
      { path: 'faults[0].preemt', message: 'unknown key, did you mean `preempt`?', line: 3 },
    ]],
    ['a fault in kebab case', 'faults:\n  - attempt: 1\n    no-capacity: 2', [
      { path: 'faults[0].no-capacity', message: 'unknown key, did you mean `no_capacity`?', line: 3 },
    ]],
    ['a capitalized key', 'faults:\n  - Attempt: 1\n    drop_events: true', [
      { path: 'faults[0].attempt', message: `${ATTEMPT}, got nothing`, line: 2 },
      { path: 'faults[0].Attempt', message: 'unknown key, did you mean `attempt`?', line: 2 },
    ]],
    ['node beside the fault instead of inside it', 'faults:\n  - attempt: 1\n    node: 1\n    lose: {}', [
      { path: 'faults[0].node', message: 'unknown key here: node goes inside preempt, rebalance, lose or silence', line: 3 },
    ]],
    ['a silence from a moment that is neither boot nor run', 'faults:\n  - {attempt: 1, silence: {from: later}}', [
      { path: 'faults[0].silence.from', message: 'expected run (the default) or boot, got "later"', line: 2 },
    ]],
    ['from beside the fault instead of inside it', 'faults:\n  - {attempt: 1, from: boot, silence: {}}', [
      { path: 'faults[0].from', message: 'unknown key here: from goes inside silence', line: 2 },
    ]],
    ['a silence for a bare number', 'faults:\n  - {attempt: 1, silence: {for: 30}}', [
      { path: 'faults[0].silence.for', message: 'expected a duration such as 500ms, 2s, 1m or 1h, got 30: add a unit, such as 30s or 30ms', line: 2 },
    ]],
    ['for inside a fault that does not take it', 'faults:\n  - {attempt: 1, lose: {for: 2s}}', [
      { path: 'faults[0].lose.for', message: 'unknown key here: for goes inside silence', line: 2 },
    ]],
    ['faults inside an entry', 'faults:\n  - {attempt: 1, faults: [], drop_events: true}', [
      { path: 'faults[0].faults', message: 'unknown key here: faults goes at the top of the file', line: 2 },
    ]],
    ['a __proto__ key in an entry', 'faults:\n  - attempt: 1\n    __proto__: {drop_events: true}', [
      { path: 'faults[0].__proto__', message: 'unknown key; expected attempt, preempt, rebalance, lose, silence, no_capacity, drop_events', line: 3 },
    ]],
    // attempt.
    ...(
      [
        ['0', '0'],
        ['-1', '-1'],
        ['1.5', '1.5'],
        ['"1"', '"1"'],
        ['1e300', '1e+300'],
        ['1001', '1001'],
        ['.inf', 'Infinity'],
        ['true', 'true'],
        ['', 'null'],
      ] as const
    ).map(([given, shown]): [string, string, InputIssue[]] => [
      `attempt: ${given}`,
      `faults:\n  - drop_events: true\n    attempt: ${given}`,
      [{ path: 'faults[0].attempt', message: `${ATTEMPT}, got ${shown}`, line: 3 }],
    ]),
    // A fault's mapping.
    ['preempt with no value', 'faults:\n  - attempt: 1\n    preempt:', [{ path: 'faults[0].preempt', message: `${PREEMPT_MAPPING}, got null`, line: 3 }]],
    ['preempt a list', 'faults:\n  - attempt: 1\n    preempt: [0]', [{ path: 'faults[0].preempt', message: `${PREEMPT_MAPPING}, got a list`, line: 3 }]],
    ['lose true', 'faults:\n  - attempt: 1\n    lose: true', [
      { path: 'faults[0].lose', message: 'expected a mapping such as {node: 0, after: 1s} ({} for the defaults), got true', line: 3 },
    ]],
    ['warning on lose', 'faults:\n  - attempt: 1\n    lose: {warning: 1s}', [
      { path: 'faults[0].lose.warning', message: 'unknown key here: warning goes inside preempt', line: 3 },
    ]],
    ['attempt inside the fault', 'faults:\n  - attempt: 1\n    preempt: {attempt: 2}', [
      { path: 'faults[0].preempt.attempt', message: 'unknown key here: attempt goes in an entry of the faults list', line: 3 },
    ]],
    ['a misspelt node', 'faults:\n  - attempt: 1\n    silence:\n      nod: 1', [
      { path: 'faults[0].silence.nod', message: 'unknown key, did you mean `node`?', line: 4 },
    ]],
    ['an unknown key in a fault', 'faults:\n  - attempt: 1\n    preempt: {region: us-east-1}', [
      { path: 'faults[0].preempt.region', message: 'unknown key; expected node, after, warning', line: 3 },
    ]],
    // node.
    ...(
      [
        ['-1', '-1'],
        ['64', '64'],
        ['1.5', '1.5'],
        ['"0"', '"0"'],
        ['1e300', '1e+300'],
        ['', 'null'],
      ] as const
    ).map(([given, shown]): [string, string, InputIssue[]] => [
      `node: ${given}`,
      `faults:\n  - attempt: 1\n    lose:\n      node: ${given}`,
      [{ path: 'faults[0].lose.node', message: `${NODE}, got ${shown}`, line: 4 }],
    ]),
    // Durations.
    ...(
      [
        ['2', `${DURATION}, got 2: add a unit, such as 2s or 2ms`],
        ['"2"', `${DURATION}, got "2": add a unit, such as 2s or 2ms`],
        ['1.5s', `${DURATION}, got "1.5s"`],
        ['-1s', `${DURATION}, got "-1s"`],
        ['-1', `${DURATION}, got -1`],
        ['2S', `${DURATION}, got "2S"`],
        ['2d', `${DURATION}, got "2d"`],
        ['2 s', `${DURATION}, got "2 s"`],
        ['1e300', `${DURATION}, got 1e+300`],
        ['', `${DURATION}, got null`],
        ['{s: 2}', `${DURATION}, got a mapping`],
        ['25h', 'expected a duration of at most 24h, got "25h"'],
        ['86400001ms', 'expected a duration of at most 24h, got "86400001ms"'],
        ['99999999999999999999h', 'expected a duration of at most 24h, got "99999999999999999999h"'],
      ] as const
    ).map(([given, message]): [string, string, InputIssue[]] => [
      `after: ${given}`,
      `faults:\n  - attempt: 1\n    preempt:\n      after: ${given}`,
      [{ path: 'faults[0].preempt.after', message, line: 4 }],
    ]),
    ['warning: 25h', 'faults:\n  - attempt: 1\n    preempt:\n      warning: 25h', [
      { path: 'faults[0].preempt.warning', message: 'expected a duration of at most 24h, got "25h"', line: 4 },
    ]],
    // no_capacity and drop_events.
    ...(
      [
        ['0', '0'],
        ['1001', '1001'],
        ['1.5', '1.5'],
        ['"2"', '"2"'],
        ['true', 'true'],
        ['', 'null'],
      ] as const
    ).map(([given, shown]): [string, string, InputIssue[]] => [
      `no_capacity: ${given}`,
      `faults:\n  - attempt: 1\n    no_capacity: ${given}`,
      [{ path: 'faults[0].no_capacity', message: `${TRIES}, got ${shown}`, line: 3 }],
    ]),
    ...(
      [
        ['false', 'false'],
        ['"true"', '"true"'],
        ['1', '1'],
        ['', 'null'],
      ] as const
    ).map(([given, shown]): [string, string, InputIssue[]] => [
      `drop_events: ${given}`,
      `faults:\n  - attempt: 1\n    drop_events: ${given}`,
      [{ path: 'faults[0].drop_events', message: `expected true (leave drop_events out for no fault), got ${shown}`, line: 3 }],
    ]),
    ['two no_capacity for one attempt', 'faults:\n  - {attempt: 3, no_capacity: 1}\n  - {attempt: 2, no_capacity: 1}\n  - {attempt: 3, no_capacity: 2}', [
      { path: 'faults[2].no_capacity', message: 'expected one no_capacity per attempt, got another for attempt 3 (also faults[0])', line: 4 },
    ]],
    // Hostile input.
    [
      'an alias bomb (each level repeats the one before ten times)',
      ['a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]', ...'bcdefghij'.split('').map((name, i) => `${name}: &${name} [${`*${'abcdefghij'[i]}, `.repeat(10)}]`), 'faults: []'].join('\n'),
      [{ path: '', message: 'expected at most 100 uses of aliases, counting those inside what an alias repeats, got more', line: 3 }],
    ],
    [
      'one wide anchor repeated a thousand times',
      `a: &a [${'1, '.repeat(1_000)}]\nb: [${'*a, '.repeat(1_000)}]\nfaults: []`,
      [{ path: '', message: 'expected at most 100000 values, each alias counted as the values it repeats, got more', line: 2 }],
    ],
    [
      'more than 100 uses of aliases',
      `a: &a 1\nb: [${'*a, '.repeat(101)}]\nfaults: []`,
      [{ path: '', message: 'expected at most 100 uses of aliases, counting those inside what an alias repeats, got more', line: 2 }],
    ],
    [
      'a flow list of 120,000 numbers',
      `faults: [${'1,'.repeat(120_000)}]`,
      [{ path: 'faults', message: 'expected at most 8192 keys and list items in all, got more; refused before parsing', line: 1 }],
    ],
    ['an alias with no anchor', 'faults: *none', [
      { path: 'faults', message: 'expected a value, got the alias *none, which names no anchor before it', line: 1 },
    ]],
    ['an alias to the list holding it', 'faults: &f [*f]', [
      { path: 'faults[0]', message: 'expected a value, got the alias *f, which refers to a mapping or list that holds it', line: 1 },
    ]],
    ['nesting 20 levels deep', `faults: ${'['.repeat(20)}${']'.repeat(20)}`, [
      { path: 'faults', message: 'expected at most 16 levels of [ ] and { } one inside another, got more', line: 1 },
    ]],
    ['block nesting 20 levels deep', `faults:\n${Array.from({ length: 20 }, (_, i) => `${'  '.repeat(i)}- `).join('\n')}1\n`, [
      { path: '', message: 'expected at most 16 levels of nesting, got more', line: 16 },
    ]],
    ['text read from bytes that are not UTF-8', 'faults:\n  - attempt: 1\n    preempt: {after: 2\uFFFDs}', [
      { path: '', message: 'expected text without U+FFFD, the mark of bytes that were not UTF-8', line: 3 },
    ]],
    ['more than 256 KiB of text', `faults: []\n${'#'.repeat(256 * 1024)}`, [
      { path: '', message: 'expected a chaos file of at most 262144 characters, got 262155' },
    ]],
    // Everything at once, in the file's order.
    [
      'every problem of the file at once, by line',
      [
        'faults:',
        '  - attempt: 1e300',
        '    preempt: {after: 2, warning: 25h, nod: 1}',
        '  - attempt: 2',
        '    no_capacity: 0',
        '  - 5',
        'fault: 1',
      ].join('\n'),
      [
        { path: 'faults[0].attempt', message: `${ATTEMPT}, got 1e+300`, line: 2 },
        { path: 'faults[0].preempt.after', message: `${DURATION}, got 2: add a unit, such as 2s or 2ms`, line: 3 },
        { path: 'faults[0].preempt.warning', message: 'expected a duration of at most 24h, got "25h"', line: 3 },
        { path: 'faults[0].preempt.nod', message: 'unknown key, did you mean `node`?', line: 3 },
        { path: 'faults[1].no_capacity', message: `${TRIES}, got 0`, line: 5 },
        { path: 'faults[2]', message: `expected ${ENTRY}, got 5`, line: 6 },
        { path: 'fault', message: 'unknown key, did you mean `faults`?', line: 7 },
      ],
    ],
  ])('%s', (_name, text, issues) => {
    expect(issuesOf(() => parseChaosFile(text))).toEqual(issues);
  });

  it('refuses a mapping of tens of thousands of keys (the body limit full) before parsing it, naming the key it is under', () => {
    expect(HOSTILE_CHAOS.length).toBeLessThanOrEqual(256 * 1024);
    expect(issuesOf(() => parseChaosFile(HOSTILE_CHAOS))).toEqual([
      { path: 'attempts', message: 'expected at most 8192 keys and list items in all, got more; refused before parsing', line: 2 },
    ]);
  });

  it('refuses [ ] nested deeper than a chaos file ever is, before parsing it', () => {
    expect(issuesOf(() => parseChaosFile(`faults: ${'['.repeat(100_000)}\n`))).toEqual([
      { path: 'faults', message: 'expected at most 16 levels of [ ] and { } one inside another, got more', line: 1 },
    ]);
  });

  it('names the path and line in the error message itself', () => {
    expect(() => parseChaosFile('faults:\n  - attempt: 1\n    lose: {node: -1}')).toThrow(
      `faults[0].lose.node: ${NODE}, got -1 (line 3)`,
    );
  });
});

describe('parseChaosFile: boot, the emulated boot of every new node', () => {
  it.each<[string, string, { faults: readonly ChaosFault[]; bootMs?: number }]>([
    ['boot alone: no faults', 'boot: 30s', { faults: [], bootMs: 30_000 }],
    ['boot beside faults', 'boot: 500ms\nfaults: [{attempt: 1, drop_events: true}]', { faults: [{ kind: 'drop_events', attempt: 1, source: { index: 0, line: 2 } }], bootMs: 500 }],
    ['boot 0s: none', 'boot: 0s\nfaults: []', { faults: [], bootMs: 0 }],
    ['no boot: the plan has none', 'faults: []', { faults: [] }],
  ])('%s', (_name, text, plan) => {
    expect(parseChaosFile(text)).toEqual(plan);
  });

  it.each<[string, string, readonly InputIssue[]]>([
    ['a bare number', 'boot: 30', [{ path: 'boot', message: `${DURATION}, got 30: add a unit, such as 30s or 30ms`, line: 1 }]],
    ['a word', 'boot: slow', [{ path: 'boot', message: `${DURATION}, got "slow"`, line: 1 }]],
    ['no value', 'boot:', [{ path: 'boot', message: `${DURATION}, got null`, line: 1 }]],
    ['longer than a day', 'boot: 25h', [{ path: 'boot', message: 'expected a duration of at most 24h, got "25h"', line: 1 }]],
    ['a list', 'boot: [1s]\nfaults: []', [{ path: 'boot', message: `${DURATION}, got a list`, line: 1 }]],
    ['inside an entry', 'faults:\n  - attempt: 1\n    boot: 1s\n    drop_events: true', [
      { path: 'faults[0].boot', message: 'unknown key here: boot goes at the top of the file', line: 3 },
    ]],
    ['misspelt', 'bot: 1s\nfaults: []', [{ path: 'bot', message: 'unknown key, did you mean `boot`?', line: 1 }]],
  ])('refuses %s, naming boot', (_name, text, issues) => {
    expect(issuesOf(() => parseChaosFile(text))).toEqual(issues);
  });
});

describe('parseDuration', () => {
  it.each([
    ['500ms', 500],
    ['2s', 2_000],
    ['1m', 60_000],
    ['1h', 3_600_000],
    ['0s', 0],
    ['24h', 86_400_000],
  ])('%s is %i ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each([
    ['2', `${DURATION}, got "2": add a unit, such as 2s or 2ms`],
    ['2 hours', `${DURATION}, got "2 hours"`],
    ['', `${DURATION}, got ""`],
    ['25h', 'expected a duration of at most 24h, got "25h"'],
    ['9'.repeat(400) + 'ms', `expected a duration of at most 24h, got "${'9'.repeat(60)}..."`],
  ])('refuses %j, naming where it came from', (text, message) => {
    expect(issuesOf(() => parseDuration(text, '--preempt-after'))).toEqual([{ path: '--preempt-after', message }]);
  });
});
