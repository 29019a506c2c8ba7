// Reading a chaos file from disk: the file it names, and every way the file itself is refused.

import { mkdir, mkdtemp, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readChaosFile } from '../../../cli/chaos-file.ts';
import { InvalidInputError, type InputIssue } from '../../../lib/errors.ts';

async function issuesOfAsync(parse: () => Promise<unknown>): Promise<readonly InputIssue[]> {
  const error: unknown = await parse().then(
    () => new Error('expected the input to be refused'),
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(InvalidInputError);
  return (error as InvalidInputError).issues;
}

describe('readChaosFile', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'relaunch-chaos-'));
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads and parses a file', async () => {
    const file = join(dir, 'ok.yaml');
    await writeFile(file, 'faults:\n  - attempt: 1\n    lose: {}\n');
    expect(await readChaosFile(file)).toEqual({
      faults: [{ kind: 'lose', attempt: 1, node: 0, afterMs: 0, source: { index: 0, line: 2 } }],
    });
  });

  it('refuses a missing file, naming it', async () => {
    const file = join(dir, 'missing.yaml');
    expect(await issuesOfAsync(() => readChaosFile(file))).toEqual([{ path: file, message: 'no such file' }]);
  });

  it('refuses a directory, naming it', async () => {
    const folder = join(dir, 'folder');
    await mkdir(folder);
    expect(await issuesOfAsync(() => readChaosFile(folder))).toEqual([{ path: folder, message: 'is a directory, expected a chaos file' }]);
  });

  it('refuses a file over 256 KiB without reading it', async () => {
    const file = join(dir, 'huge.yaml');
    await writeFile(file, '');
    await truncate(file, 4 * 1024 * 1024 * 1024); // sparse: 4 GiB that would not fit in a string
    expect(await issuesOfAsync(() => readChaosFile(file))).toEqual([
      { path: file, message: 'expected a chaos file of at most 262144 bytes, got 4294967296 bytes' },
    ]);
  });

  it('refuses bytes that are not UTF-8, naming the file', async () => {
    const file = join(dir, 'latin1.yaml');
    await writeFile(file, Buffer.concat([Buffer.from('faults:\n  # caf'), Buffer.from([0xe9]), Buffer.from('\n  - {attempt: 1, lose: {}}\n')]));
    expect(await issuesOfAsync(() => readChaosFile(file))).toEqual([
      { path: file, message: expect.stringContaining('UTF-8') as string },
    ]);
  });
});
