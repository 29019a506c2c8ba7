// Bad options of the job commands: a clear message naming the option, exit status 2, and
// nothing opened or written (these run in this process through main()).

import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../../cli/main.ts';
import { bufferIo } from '../../support/cli.ts';

let dir: string;
let aFile: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'relaunch-bad-input-'));
  aFile = join(dir, 'not-a-folder');
  await writeFile(aFile, '');
});

describe('bad options of the job commands', () => {
  it.each([
    [['status', '--api', 'http://a b'], 'error: --api: expected an http(s) URL, got "http://a b"'],
    [['status', '--api', 'ftp://example.com'], 'error: --api: expected an http(s) URL, got "ftp://example.com"'],
    [['logs', 'j-1', '--attempt', 'abc'], 'error: --attempt: expected an attempt number (1-based), got "abc"'],
    [['logs', 'j-1', '--attempt', '1,3'], 'error: --attempt: expected an attempt number (1-based), got "1,3"'],
    [['status', 'j'.repeat(2048)], `error: <job>: expected a job id such as j-0m8x2k1qz-4fz0aa or a job's name such as train-llama, got "${'j'.repeat(40)}"... (2048 characters)`],
    [['cancel', '../../etc'], 'error: <job>: expected a job id such as j-0m8x2k1qz-4fz0aa or a job\'s name such as train-llama, got "../../etc"'],
    [['logs', 'a b'], 'error: <job>: expected a job id such as j-0m8x2k1qz-4fz0aa or a job\'s name such as train-llama, got "a b"'],
    [['cancel'], 'error: <job>: expected a job id or name, or --all for every job that has not ended'],
  ])('relaunch %j names the option and exits 2', async (args, message) => {
    const io = bufferIo();
    const status = await main(['node', 'relaunch', ...args, '--data-dir', join(dir, 'unused')], io);
    expect(status).toBe(2);
    expect(io.stderr).toEqual([message]);
    expect(io.stdout).toEqual([]);
  });

  it('names RELAUNCH_API_URL, not --api, when the bad URL came from the environment', async () => {
    vi.stubEnv('RELAUNCH_API_URL', 'ftp://example.com');
    try {
      for (const command of [['status', '--data-dir', join(dir, 'unused')], ['check']]) {
        const io = bufferIo();
        const status = await main(['node', 'relaunch', ...command], io);
        expect(status).toBe(2);
        expect(io.stderr.join('\n')).toContain('RELAUNCH_API_URL: expected an http(s) URL, got "ftp://example.com"');
      }
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it('refuses a data folder that is a file, naming it', async () => {
    const io = bufferIo();
    const status = await main(['node', 'relaunch', 'status', '--data-dir', aFile], io);
    expect(status).toBe(2);
    expect(io.stderr).toEqual([`error: --data-dir: expected a folder relaunch can write, got "${aFile}", which is a file`]);
  });
});
