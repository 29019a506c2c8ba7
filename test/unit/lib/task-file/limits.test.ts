// The task's size limits and the env names no object can hold: each refused with its field
// and the limit, in a file and in a JSON body, at submit and for `--env` overrides.

import { describe, expect, it } from 'vitest';
import { InvalidTaskSpecError } from '../../../../lib/errors.ts';
import { withEnvOverrides } from '../../../../lib/task-file/envs.ts';
import {
  MAX_ENV_NAME_LENGTH,
  MAX_ENV_VALUE_BYTES,
  MAX_ENVS,
  MAX_NAME_LENGTH,
  MAX_TASK_TEXT_BYTES,
  MAX_WORKDIR_LENGTH,
  taskTextBytes,
} from '../../../../lib/task-file/limits.ts';
import { parseTaskFile, parseTaskObject } from '../../../../lib/task-file/parse.ts';
import { rejectedIssues, rejectionOf } from '../../../support/task-file-rejection.ts';

/** `count` envs named E0, E1, ... with the value 'v'. */
function manyEnvs(count: number): Record<string, string> {
  return Object.fromEntries(Array.from({ length: count }, (_, i) => [`E${i}`, 'v']));
}

describe('limits a JSON body is held to', () => {
  it.each([
    ['a 210 KB name', { name: 'a'.repeat(210_000) }, `name: expected a name of at most ${MAX_NAME_LENGTH} characters, got 210000 characters`],
    ['a name one past the limit', { name: 'a'.repeat(MAX_NAME_LENGTH + 1) }, `name: expected a name of at most 128 characters, got 129 characters`],
    ['a workdir past PATH_MAX', { workdir: '/'.repeat(MAX_WORKDIR_LENGTH + 1) }, 'workdir: expected a local directory path of at most 4096 characters, got 4097 characters'],
    ['a workdir with a NUL', { workdir: '/data\0/x' }, 'workdir: expected a local directory path without NUL characters'],
    ['too many envs', { envs: manyEnvs(MAX_ENVS + 1) }, 'envs: expected at most 256 environment variables, got 257'],
    ['an env name past the limit', { envs: { ['A'.repeat(MAX_ENV_NAME_LENGTH + 1)]: 'x' } }, `envs.${'A'.repeat(257)}: expected an environment variable name of at most 256 characters, got 257 characters`],
    ['an env value past the limit', { envs: { BIG: 'x'.repeat(MAX_ENV_VALUE_BYTES + 1) } }, 'envs.BIG: expected a value of at most 32768 bytes (UTF-8), got 32769'],
    ['an env value past the limit in bytes, not characters', { envs: { WIDE: 'é'.repeat(MAX_ENV_VALUE_BYTES / 2 + 1) } }, 'envs.WIDE: expected a value of at most 32768 bytes (UTF-8), got 32770'],
    ['an env value with a NUL', { envs: { NUL: 'a\0b' } }, 'envs.NUL: expected a value without NUL characters, which no process environment can hold'],
    ['an env named __proto__', JSON.parse('{"envs": {"__proto__": "x"}}') as object, 'envs.__proto__: expected an environment variable name other than __proto__, which relaunch cannot store'],
    ['a run with a NUL', { run: 'echo a\0b' }, 'run: expected shell commands without NUL characters, which no process argument can hold'],
    ['a setup with a NUL', { setup: '\0' }, 'setup: expected shell commands without NUL characters, which no process argument can hold'],
    ['a run that is not text', { run: ['echo'] }, 'run: expected shell commands as a string, got a list'],
    ['setup and run over the total', { setup: 'x'.repeat(40_000), run: 'y'.repeat(30_000) }, `expected envs, setup and run to take at most ${MAX_TASK_TEXT_BYTES} bytes together (64 KiB of UTF-8), got 70000`],
    [
      'envs within their own limits but over the total with run',
      { envs: { A: 'a'.repeat(MAX_ENV_VALUE_BYTES), B: 'b'.repeat(MAX_ENV_VALUE_BYTES) }, run: 'true' },
      'expected envs, setup and run to take at most 65536 bytes together (64 KiB of UTF-8), got 65542',
    ],
  ])('refuses %s', (_what, fields, issue) => {
    expect(rejectedIssues(() => parseTaskObject({ run: 'true', ...fields }))).toEqual([issue]);
  });

  it.each([
    ['a name at the limit', { name: 'a'.repeat(MAX_NAME_LENGTH) }],
    ['a workdir at the limit', { workdir: '/'.repeat(MAX_WORKDIR_LENGTH) }],
    ['as many envs as allowed', { envs: manyEnvs(MAX_ENVS) }],
    ['an env name at the limit', { envs: { ['A'.repeat(MAX_ENV_NAME_LENGTH)]: 'x' } }],
    ['an env value at the limit', { envs: { BIG: 'x'.repeat(MAX_ENV_VALUE_BYTES) } }],
    ['a run of the whole total', { run: 'x'.repeat(MAX_TASK_TEXT_BYTES) }],
  ])('accepts %s', (_what, fields) => {
    expect(() => parseTaskObject({ run: 'true', ...fields })).not.toThrow();
  });

  it('keeps envs named constructor and prototype as plain keys, and changes no prototype', () => {
    const { spec } = parseTaskObject(JSON.parse('{"run": "env", "envs": {"constructor": "c", "prototype": "p", "toString": "t"}}'));
    expect(Object.entries(spec.envs)).toEqual([['constructor', 'c'], ['prototype', 'p'], ['toString', 't']]);
    expect(Object.getPrototypeOf(spec.envs)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).prototype).toBeUndefined();
  });
});

describe('limits a task file is held to, with lines', () => {
  it('names __proto__ among the envs on its line, and every other problem with it', () => {
    const text = ['run: echo hi', 'envs:', '  OK: fine', '  __proto__: polluted', `  BIG: ${'x'.repeat(MAX_ENV_VALUE_BYTES + 1)}`, ''].join('\n');
    expect(rejectedIssues(() => parseTaskFile(text))).toEqual([
      'envs.__proto__: expected an environment variable name other than __proto__, which relaunch cannot store (line 4)',
      'envs.BIG: expected a value of at most 32768 bytes (UTF-8), got 32769 (line 5)',
    ]);
  });

  it('counts a value an alias repeats each time it is used', () => {
    const value = 'x'.repeat(30_000);
    const text = ['envs:', `  A: &big ${value}`, '  B: *big', '  C: *big', 'run: echo', ''].join('\n');
    expect(rejectedIssues(() => parseTaskFile(text))).toEqual([
      'expected envs, setup and run to take at most 65536 bytes together (64 KiB of UTF-8), got 90007 (line 1)',
    ]);
  });
});

describe('taskTextBytes', () => {
  it('counts env names and values, setup and run, in bytes of UTF-8', () => {
    expect(taskTextBytes({ envs: { AB: 'é' }, setup: null, run: '日本' })).toBe(2 + 2 + 6);
    expect(taskTextBytes({ envs: {}, setup: 'x', run: null })).toBe(1);
  });
});

describe('withEnvOverrides', () => {
  const spec = parseTaskObject({ run: 'env', envs: { KEEP: 'file', SET: 'file' } }).spec;

  it('lets an override win over the file and keeps every other env', () => {
    expect(withEnvOverrides(spec, { SET: 'flag', NEW: '1' }).envs).toEqual({ KEEP: 'file', SET: 'flag', NEW: '1' });
  });

  it('keeps an override named constructor as a plain key', () => {
    const merged = withEnvOverrides(spec, JSON.parse('{"constructor": "c"}') as Record<string, string>);
    expect(Object.keys(merged.envs)).toEqual(['KEEP', 'SET', 'constructor']);
    expect(Object.getPrototypeOf(merged.envs)).toBe(Object.prototype);
  });

  it.each([
    ['__proto__', JSON.parse('{"__proto__": "x"}') as Record<string, string>, 'envs.__proto__: expected an environment variable name other than __proto__, which relaunch cannot store (an override)'],
    ['a bad name', { 'NOT-A-NAME': 'x' }, 'envs.NOT-A-NAME: expected an environment variable name (letters, digits and _, not starting with a digit), got "NOT-A-NAME" (an override)'],
    ['a value past the limit', { BIG: 'x'.repeat(MAX_ENV_VALUE_BYTES + 1) }, 'envs.BIG: expected a value of at most 32768 bytes (UTF-8), got 32769 (an override)'],
    ['a value with a NUL', { NUL: '\0' }, 'envs.NUL: expected a value without NUL characters, which no process environment can hold (an override)'],
    ['one env too many', manyEnvs(MAX_ENVS - 1), 'envs: expected at most 256 environment variables, got 257 (overrides included)'],
    [
      'values that make the task too large',
      { A: 'a'.repeat(MAX_ENV_VALUE_BYTES), B: 'b'.repeat(MAX_ENV_VALUE_BYTES) },
      'expected envs, setup and run to take at most 65536 bytes together (64 KiB of UTF-8), got 65556 (overrides included)',
    ],
  ])('refuses %s, storing nothing', (_what, overrides, issue) => {
    const error = rejectionOf(() => withEnvOverrides(spec, overrides));
    expect(error).toBeInstanceOf(InvalidTaskSpecError);
    expect(error.message).toBe(issue);
  });
});
