// Every fixture task file: valid ones normalize to their .json exactly, invalid ones fail with their .expected lines exactly.

import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { formatIssue, InvalidTaskSpecError } from '../../../../lib/errors.ts';
import { parseJobFile, parseTaskFile } from '../../../../lib/task-file/parse.ts';
import { rejectionOf } from '../../../support/task-file-rejection.ts';

const FIXTURES = fileURLToPath(new URL('../../../support/fixtures/tasks/', import.meta.url));

function yamlFiles(kind: 'valid' | 'invalid'): string[] {
  return readdirSync(`${FIXTURES}${kind}`)
    .filter((file) => file.endsWith('.yaml'))
    .sort();
}

function read(kind: 'valid' | 'invalid', file: string): string {
  return readFileSync(`${FIXTURES}${kind}/${file}`, 'utf8');
}

/** The error a parse throws; fails the test when it does not throw. */
function rejection(text: string): InvalidTaskSpecError {
  return rejectionOf(() => parseJobFile(text));
}

describe('valid task files', () => {
  const files = yamlFiles('valid');

  it('are at least ten', () => {
    expect(files.length).toBeGreaterThanOrEqual(10);
  });

  it.each(files)('%s normalizes to exactly its .json (spec and warnings)', (file) => {
    const expected: unknown = JSON.parse(read('valid', file.replace(/\.yaml$/, '.json')));
    const { spec, warnings } = parseTaskFile(read('valid', file));
    expect({ spec, warnings }).toEqual(expected);
  });
});

describe('invalid task files', () => {
  const files = yamlFiles('invalid');

  it('are at least forty', () => {
    expect(files.length).toBeGreaterThanOrEqual(40);
  });

  it.each(files)('%s is rejected with exactly the issues in its .expected', (file) => {
    const expected = read('invalid', file.replace(/\.yaml$/, '.expected')).trimEnd().split('\n');
    const error = rejection(read('invalid', file));
    expect(error.issues.map(formatIssue)).toEqual(expected);
    expect(error.message).toBe(expected.join('\n'));
  });
});
