// parseTaskFile on what only YAML text has: lines, aliases, odd keys, YAML 1.1 booleans, line endings.

import { describe, expect, it, vi } from 'vitest';
import { Alias } from 'yaml';
import { parseTaskFile } from '../../../../lib/task-file/parse.ts';
import { rejectedIssues } from '../../../support/task-file-rejection.ts';

function issuesOf(text: string): string[] {
  return rejectedIssues(() => parseTaskFile(text));
}

/** A file whose aliases expand to 10^6 values: anchors a0..a5, each ten uses of the one before. */
function aliasBomb(): string {
  const levels = ['run: &a0 echo'];
  for (let level = 1; level <= 5; level += 1) {
    levels.push(`k${level}: &a${level} [${Array(10).fill(`*a${level - 1}`).join(', ')}]`);
  }
  return `${levels.join('\n')}\n`;
}

describe('parseTaskFile rejects, with lines', () => {
  it.each([
    ['an empty string as an empty file', '', ['expected a task (a mapping with run, resources, ...), got an empty file']],
    [
      'an alias to the mapping that holds it',
      'resources: &r\n  cpus: 4\n  job_recovery: *r\nrun: x\n',
      ['resources.job_recovery: expected a value, got the alias *r, which refers to a mapping or list that holds it (line 3)'],
    ],
    [
      'an alias to the list that holds it',
      'resources:\n  accelerators: &l [T4, *l]\nrun: x\n',
      ['resources.accelerators[1]: expected a value, got the alias *l, which refers to a mapping or list that holds it (line 2)'],
    ],
    [
      'a key that is a list (not a template)',
      '[a, b]: 1\nrun: x\n',
      ['expected a plain key, got [a, b] (line 1)'],
    ],
    [
      'a quoted "yes": only plain words are YAML 1.1 booleans',
      'resources:\n  use_spot: "yes"\nrun: x\n',
      ['resources.use_spot: expected true or false, got "yes" (line 2)'],
    ],
    [
      'an issue inside a value placed on its key line, list items on their own lines',
      'resources:\n  job_recovery:\n    recover_on_exit_codes:\n      - 1\n      - 2\n      - 999\nrun: x\n',
      ['resources.job_recovery.recover_on_exit_codes[2]: expected an integer 0-255, got 999 (line 6)'],
    ],
    [
      'a key of an explicit-key pair with no value (an unknown key, on its line)',
      'run: x\n? odd\n',
      ['odd: unknown key (line 2)'],
    ],
  ])('%s', (_name, text, expected) => {
    expect(issuesOf(text)).toEqual(expected);
  });

  it('stops expanding aliases after a budget, and says so once', () => {
    // Each alias expanded is one resolve; past the budget none is.
    const resolves = vi.spyOn(Alias.prototype, 'resolve');
    const issues = issuesOf(aliasBomb());
    expect(resolves.mock.calls.length).toBe(1000);
    expect(issues.filter((issue) => issue.includes('expected at most 1000 uses of aliases, got more'))).toHaveLength(1);
  });
});

describe('parseTaskFile reads', () => {
  it.each([
    ['YAML 1.1 "on" as true', 'resources:\n  use_spot: on\nrun: x\n', true],
    ['YAML 1.1 "NO" as false', 'resources:\n  use_spot: NO\nrun: x\n', false],
    ['YAML 1.2 "True" as true', 'resources:\n  use_spot: True\nrun: x\n', true],
    ['Windows line endings', 'resources:\r\n  use_spot: TRUE\r\nrun: x\r\n', true],
  ])('%s', (_name, text, useSpot) => {
    expect(parseTaskFile(text).spec.resources.useSpot).toBe(useSpot);
  });

  it('an alias to a scalar as its value', () => {
    const { spec } = parseTaskFile('envs:\n  A: &v shared\n  B: *v\nrun: x\n');
    expect(spec.envs).toEqual({ A: 'shared', B: 'shared' });
  });

  it.each([
    ['an exponent', '1e-4', '1e-4'],
    ['a float with a zero fraction', '1.0', '1.0'],
    ['a leading zero', '007', '007'],
    ['a plus sign', '+5', '+5'],
    ['a hexadecimal number', '0x1F', '0x1F'],
    ['a large integer', '12345678901234567890', '12345678901234567890'],
    ['infinity', '.inf', '.inf'],
    ['a quoted number', '"1e-4"', '1e-4'],
    ['an alias to a number', '&lr 1e-4\n  COPY: *lr', '1e-4'],
  ])('an env written as %s reaches the job as written', (_name, written, text) => {
    const { spec } = parseTaskFile(`envs:\n  LR: ${written}\nrun: x\n`);
    expect(spec.envs.LR).toBe(text);
    if (spec.envs.COPY !== undefined) expect(spec.envs.COPY).toBe(text);
  });

  it('an env written as a YAML boolean reaches the job as SkyPilot (Python) prints it', () => {
    expect(parseTaskFile('envs:\n  A: true\n  B: off\nrun: x\n').spec.envs).toEqual({ A: 'True', B: 'False' });
  });

  it('a trailing empty document as no document', () => {
    expect(parseTaskFile('run: x\n---\n').spec.run).toBe('x');
  });
});
