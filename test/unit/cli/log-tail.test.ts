// LogTail (cli/follow.ts), what `relaunch logs` and `run`'s live output read: only what a
// phase's log gained since the last look, each line named by its node when there are
// several, and a note where a log stops because the disk was full.

import { appendFileSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LogTail } from '../../../cli/follow.ts';
import type { PhaseLog } from '../../../local/paths.ts';

const dir = mkdtempSync(join(tmpdir(), 'relaunch-log-tail-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function phaseLog(name: string, rank: number): PhaseLog {
  return { key: `${name}/${rank}`, rank, phase: 'run', file: join(dir, `${name}.log`), truncatedMark: join(dir, `${name}.truncated`) };
}

describe('LogTail', () => {
  it("passes a single node's log on exactly as written, then only what it gained", () => {
    const log = phaseLog('single', 0);
    writeFileSync(log.file, 'one\n\n  two\r\nthree');
    const tail = new LogTail();
    expect(tail.read([log])).toBe('one\n\n  two\r\nthree');
    expect(tail.read([log])).toBe('');
    appendFileSync(log.file, ' and more\nfour\n');
    expect(tail.read([log])).toBe(' and more\nfour\n');
  });

  it("names the node of a job of several nodes when asked, though only one node's log is read", () => {
    const worker = phaseLog('lone-worker', 1);
    writeFileSync(worker.file, 'x\n');
    expect(new LogTail().read([worker], 2, true)).toBe('(attempt 2, node 1) x\n');
    expect(new LogTail().read([worker], 2)).toBe('(attempt 2) x\n');
  });

  it("names each node's lines, empty ones aside, and carries a line cut between two looks on without naming it again", () => {
    const head = phaseLog('head', 0);
    const worker = phaseLog('worker', 1);
    writeFileSync(head.file, 'a\n\nb');
    const tail = new LogTail();
    expect(tail.read([head, worker])).toBe('(node 0) a\n\n(node 0) b');
    appendFileSync(head.file, ' ends\nc\n');
    writeFileSync(worker.file, 'x\n');
    expect(tail.read([head, worker])).toBe(' ends\n(node 0) c\n(node 1) x\n');
  });

  it('notes once where a log stops because the agent could not write it, on a line of its own', () => {
    const log = phaseLog('full', 0);
    writeFileSync(log.file, 'written before the disk filled');
    writeFileSync(log.truncatedMark, '');
    const tail = new LogTail();
    const note = "relaunch: node 0's run output stops here: its log could not be written (is the disk full?); the job went on\n";
    expect(tail.read([log])).toBe(`written before the disk filled\n${note}`);
    expect(tail.read([log])).toBe('');
  });

  it('names the attempt too when given one, with or without several nodes', () => {
    const head = phaseLog('attempt-head', 0);
    const worker = phaseLog('attempt-worker', 1);
    writeFileSync(head.file, 'a\n');
    writeFileSync(worker.file, 'b\n');
    expect(new LogTail().read([head, worker], 2)).toBe('(attempt 2, node 0) a\n(attempt 2, node 1) b\n');
    expect(new LogTail().read([head], 3)).toBe('(attempt 3) a\n');
  });

  it("leaves out bash's bare Terminated lines when asked (run's live output), never a line that only contains the word", () => {
    const log = phaseLog('terminated', 0);
    writeFileSync(log.file, 'working\nTerminated\nTerminated\nstopping: Terminated\nlast');
    const live = new LogTail({ dropShellNotices: true });
    expect(live.read([log])).toBe('working\nstopping: Terminated\nlast');
    appendFileSync(log.file, ' words\nTerminated\n');
    expect(live.read([log])).toBe(' words\n');
    expect(new LogTail().read([log])).toBe('working\nTerminated\nTerminated\nstopping: Terminated\nlast words\nTerminated\n');
  });

  it('follows a log by its key, not its file: renamed when its node moves on to the next attempt, it is not read again from its start', () => {
    const before = phaseLog('moving', 0);
    writeFileSync(before.file, 'attempt 1 line\n');
    const tail = new LogTail();
    expect(tail.read([before])).toBe('attempt 1 line\n');
    const after = { ...before, file: join(dir, 'moving.attempt-1.log') };
    renameSync(before.file, after.file);
    expect(tail.read([after])).toBe('');
    appendFileSync(after.file, 'last line\n');
    expect(tail.read([after])).toBe('last line\n');
  });
});
