// `secrets` in a task: names and values checked as envs are, values kept out of the spec,
// and resolveSecrets, which a submit runs with the values given on the command line.

import { describe, expect, it } from 'vitest';
import { parseTaskFile, parseTaskObject } from '../../../../lib/task-file/parse.ts';
import { MAX_SECRETS, MAX_SECRETS_BYTES, resolveSecrets } from '../../../../lib/task-file/secrets.ts';
import { rejectedIssues } from '../../../support/task-file-rejection.ts';

describe('secrets in a task file', () => {
  it('are named in the spec, sorted, and their values come out beside it', () => {
    const parsed = parseTaskFile('run: train\nsecrets:\n  WANDB_API_KEY: null\n  HF_TOKEN: hf_abc\n  PORT: 8080\n  DEBUG: true\n');

    expect(parsed.spec.secretNames).toEqual(['DEBUG', 'HF_TOKEN', 'PORT', 'WANDB_API_KEY']);
    expect(parsed.secrets).toEqual({ WANDB_API_KEY: null, HF_TOKEN: 'hf_abc', PORT: '8080', DEBUG: 'True' });
    expect(JSON.stringify(parsed.spec)).not.toContain('hf_abc');
  });

  it('leave the spec as it was when there are none', () => {
    expect(parseTaskObject({ run: 'x' }).spec).not.toHaveProperty('secretNames');
    expect(parseTaskObject({ run: 'x', secrets: {} }).spec).not.toHaveProperty('secretNames');
  });

  it.each([
    ['a list', { secrets: ['A'] }, 'secrets: expected a mapping of secret names to values'],
    ['a bad name', { secrets: { 'MY-KEY': 'x' } }, 'secrets.MY-KEY: expected an environment variable name'],
    ['__proto__ as a name', JSON.parse('{"secrets": {"__proto__": "x"}}') as unknown, 'secrets.__proto__: expected an environment variable name other than __proto__'],
    ['a nested value', { secrets: { A: { b: 1 } } }, 'secrets.A: expected a string, a number, true/false or null'],
    ['a NUL in a value', { secrets: { A: 'x\0y' } }, 'secrets.A: expected a value without NUL characters'],
    ['a name envs also sets', { envs: { A: '1' }, secrets: { A: '2' } }, 'secrets.A: expected a name envs does not also set'],
    ['too many', { secrets: Object.fromEntries(Array.from({ length: MAX_SECRETS + 1 }, (_, i) => [`S${i}`, 'x'])) }, `secrets: expected at most ${MAX_SECRETS} secrets, got ${MAX_SECRETS + 1}`],
    ['too large together', { secrets: { A: 'x'.repeat(MAX_SECRETS_BYTES) } }, `secrets: expected secrets' names and values to take at most ${MAX_SECRETS_BYTES} bytes together`],
  ])('refuse %s, naming the field', (_name, task, message) => {
    const issues = rejectedIssues(() => parseTaskObject({ run: 'x', ...(task as object) }));
    expect(issues.some((issue) => issue.startsWith(message)), issues.join('\n')).toBe(true);
  });

  it('never echo a refused value back in the message', () => {
    const issues = rejectedIssues(() => parseTaskObject({ run: 'x', secrets: { A: `sk-live-${'z'.repeat(MAX_SECRETS_BYTES)}` } }));
    expect(issues.join('\n')).not.toContain('sk-live');
  });
});

describe('resolveSecrets', () => {
  const parsed = parseTaskFile('run: x\nsecrets:\n  TOKEN: null\n  FIXED: from-file\n');

  it('fills the nulls and overrides the file with the values given, adding new names', () => {
    const resolved = resolveSecrets(parsed.spec, parsed.secrets, { TOKEN: 't', FIXED: 'cli', EXTRA: 'e' });

    expect(resolved.values).toEqual({ TOKEN: 't', FIXED: 'cli', EXTRA: 'e' });
    expect(resolved.spec.secretNames).toEqual(['EXTRA', 'FIXED', 'TOKEN']);
  });

  it('refuses a null nobody gave, saying how to give it', () => {
    expect(rejectedIssues(() => resolveSecrets(parsed.spec, parsed.secrets, {}))).toEqual([
      'secrets.TOKEN: expected a value at submit: give it with --secret TOKEN (from your environment) or --secret TOKEN=VALUE',
    ]);
  });

  it('checks given values as the file is checked', () => {
    const issues = rejectedIssues(() => resolveSecrets(parsed.spec, parsed.secrets, { TOKEN: 'a\0b', 'BAD NAME': 'x' }));
    expect(issues).toEqual([
      'secrets.TOKEN: expected a value without NUL characters, which no process environment can hold (given with --secret)',
      expect.stringContaining('expected an environment variable name'),
    ]);
  });
});

describe('secret names an object has by inheritance', () => {
  it('are names like any other, not taken for envs', () => {
    const parsed = parseTaskFile('run: x\nenvs:\n  A: "1"\nsecrets:\n  constructor: c\n  toString: t\n');
    expect(resolveSecrets(parsed.spec, parsed.secrets, { valueOf: 'v' }).spec.secretNames).toEqual(['constructor', 'toString', 'valueOf']);
  });
});

describe('names relaunch or bash own, in envs', () => {
  it.each([
    ['RELAUNCH_INSTANCE_ID', 'expected a name that does not start with RELAUNCH_ (relaunch sets those itself), got RELAUNCH_INSTANCE_ID'],
    ['RELAUNCH_JOB_ID', 'expected a name that does not start with RELAUNCH_ (relaunch sets those itself), got RELAUNCH_JOB_ID'],
    ['UID', "expected a name the job's shell does not use itself, got UID"],
    ['SHELLOPTS', "expected a name the job's shell does not use itself, got SHELLOPTS"],
    ['BASH_ENV', "expected a name the job's shell does not use itself, got BASH_ENV"],
    ['IFS', "expected a name the job's shell does not use itself, got IFS"],
  ])('refuses %s at submit, naming the field and its line', (name, message) => {
    expect(rejectedIssues(() => parseTaskFile(`run: x\nenvs:\n  ${name}: v\n`))).toEqual([`envs.${name}: ${message} (line 3)`]);
    expect(rejectedIssues(() => parseTaskObject({ run: 'x', envs: { [name]: 'v' } }))).toEqual([`envs.${name}: ${message}`]);
  });

  it('takes PATH, as SkyPilot does, and refuses it as a secret', () => {
    expect(parseTaskObject({ run: 'x', envs: { PATH: '/custom/bin:/usr/bin:/bin' } }).spec.envs).toEqual({ PATH: '/custom/bin:/usr/bin:/bin' });
    expect(rejectedIssues(() => parseTaskObject({ run: 'x', secrets: { RELAUNCH_X: 'v' } }))).toEqual([
      'secrets.RELAUNCH_X: expected a name that does not start with RELAUNCH_ (relaunch sets those itself), got RELAUNCH_X',
    ]);
  });
});

describe("names the job's shell uses itself", () => {
  it.each(['IFS', 'PATH', 'UID', 'BASH_ENV', 'SHELLOPTS'])('refuses %s as a secret, in the file or given at submit', (name) => {
    expect(rejectedIssues(() => parseTaskObject({ run: 'x', secrets: { [name]: 'v' } }))).toEqual([
      `secrets.${name}: expected a name the job's shell does not use itself, got ${name}`,
    ]);
    const parsed = parseTaskObject({ run: 'x' });
    expect(rejectedIssues(() => resolveSecrets(parsed.spec, parsed.secrets, { [name]: 'v' }))[0]).toMatch(/does not use itself, got .* \(given with --secret\)$/);
  });
});
