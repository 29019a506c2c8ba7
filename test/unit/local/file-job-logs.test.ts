// The local runtime's job log reader: a node's phase log read a page at a time from a byte
// offset, pages cut at whole lines (or whole characters), never a byte lost or read twice.

import { appendFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../../lib/errors.ts';
import { FileJobLogs } from '../../../local/file-job-logs.ts';
import { linkNodeDir, nodeDir } from '../../../local/paths.ts';

const JOB = 'j-00file0000-logs00';
const STREAM = { jobId: JOB, attempt: 1, nodeRank: 1, phase: 'run' } as const;

let dataDir: string;
let file: string;
beforeEach(() => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'relaunch-file-logs-'));
  mkdirSync(nodeDir(dataDir, JOB, 1, 1), { recursive: true });
  file = path.join(nodeDir(dataDir, JOB, 1, 1), 'run.log');
});
afterEach(() => {
  rmSync(dataDir, { recursive: true, force: true });
});

async function pages(logs: FileJobLogs, maxBytes: number, from: string | null = null): Promise<{ texts: string[]; position: string }> {
  const texts: string[] = [];
  let position = from;
  for (;;) {
    const page = await logs.read(STREAM, position, maxBytes);
    position = page.position;
    if (page.text === '') return { texts, position };
    texts.push(page.text);
  }
}

describe('FileJobLogs', () => {
  it('reads a log not written yet as nothing, then everything from where it stood', async () => {
    const logs = new FileJobLogs(dataDir);
    const empty = await logs.read(STREAM, null, 1024);
    expect(empty).toEqual({ text: '', position: '0' });
    writeFileSync(file, 'step 1\nstep 2\n');
    const first = await pages(logs, 1024, empty.position);
    expect(first.texts).toEqual(['step 1\nstep 2\n']);
    appendFileSync(file, 'step 3\n');
    expect((await pages(logs, 1024, first.position)).texts).toEqual(['step 3\n']);
  });

  it('cuts a page at its last whole line, and a line longer than a page at a whole character', async () => {
    const text = `aaaa\nbbbb\n${'é'.repeat(10)}\nz`;
    writeFileSync(file, text);
    const { texts } = await pages(new FileJobLogs(dataDir), 8);
    expect(texts.join('')).toBe(text);
    expect(texts.slice(0, 2)).toEqual(['aaaa\n', 'bbbb\n']);
    expect(texts.every((page) => !page.includes('\uFFFD'))).toBe(true);
  });

  it.each([
    ['not an offset', 'abc'],
    ['a negative offset', '-1'],
    ['an offset past the end', '100'],
  ])('refuses a position that is %s as a bad cursor', async (_what, position) => {
    writeFileSync(file, 'short\n');
    const refused = await new FileJobLogs(dataDir).read(STREAM, position, 1024).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(InvalidInputError);
    expect((refused as InvalidInputError).issues[0]?.path).toBe('cursor');
  });

  it("reads a kept node's log of each attempt, before and after it moved on: never the other attempt's", async () => {
    const logs = new FileJobLogs(dataDir);
    const next = { ...STREAM, attempt: 2 };
    const dir = nodeDir(dataDir, JOB, 1, 1);
    writeFileSync(file, 'attempt 1\n');
    linkNodeDir(dataDir, JOB, 2, 1, dir);
    // Moved by the compute, not yet by its agent: attempt 2 has no output.
    expect((await logs.read(next, null, 1024)).text).toBe('');
    renameSync(file, path.join(dir, 'run.attempt-1.log'));
    writeFileSync(path.join(dir, 'attempt'), '2\n');
    writeFileSync(file, 'attempt 2\n');
    expect((await logs.read(STREAM, null, 1024)).text).toBe('attempt 1\n');
    expect((await logs.read(next, null, 1024)).text).toBe('attempt 2\n');
  });

  it('has no console page', () => {
    expect(new FileJobLogs(dataDir).consoleUrl()).toBeNull();
  });
});
