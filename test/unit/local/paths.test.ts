// Where a node's files of an attempt are when a node serves more than one attempt (restart in
// place): the node's folder is the one it was launched in, a later attempt's folder a link to
// it; on moving on, its agent renames the ended attempt's files `<phase>.attempt-<n>.<rest>`
// and writes the attempt it serves into `attempt`.

import { lstatSync, mkdirSync, mkdtempSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attemptFile, attemptLogs, linkNodeDir, nodeDir, servesAttempt } from '../../../local/paths.ts';

const JOB = 'j-00paths00-kept00';

let dataDir: string;
beforeEach(() => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'relaunch-paths-'));
});
afterEach(() => {
  rmSync(dataDir, { recursive: true, force: true });
});

/** Node 0 launched for attempt 1, with its run log and report of attempt 1. */
function launched(): string {
  const dir = nodeDir(dataDir, JOB, 1, 0);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'run.log'), 'attempt 1\n');
  writeFileSync(path.join(dir, 'run.report.json'), '{"attempt":1}');
  return dir;
}

/** What the agent does on moving to `to` from `from`: the renames, the mark, then `to`'s run. */
function moveOn(dir: string, from: number, to: number): void {
  renameSync(path.join(dir, 'run.log'), path.join(dir, `run.attempt-${from}.log`));
  renameSync(path.join(dir, 'run.report.json'), path.join(dir, `run.attempt-${from}.report.json`));
  writeFileSync(path.join(dir, 'attempt'), `${to}\n`);
  writeFileSync(path.join(dir, 'run.log'), `attempt ${to}\n`);
  writeFileSync(path.join(dir, 'run.report.json'), `{"attempt":${to}}`);
}

const runLog = (attempt: number) => attemptFile(dataDir, JOB, attempt, 0, 'run', 'log');

describe('attemptFile', () => {
  it("is the plain name in the node's own launch folder before it ever moved", () => {
    const dir = launched();
    expect(runLog(1)).toBe(path.join(dir, 'run.log'));
    expect(attemptFile(dataDir, JOB, 1, 0, 'run', 'report.json')).toBe(path.join(dir, 'run.report.json'));
    expect(servesAttempt(dataDir, JOB, 1, 0)).toBe(true);
  });

  it("in the window between the compute's move (the link) and the agent's (no mark yet), the old attempt's files stay its own and the new attempt has none", () => {
    const dir = launched();
    linkNodeDir(dataDir, JOB, 2, 0, dir);
    expect(runLog(1)).toBe(path.join(dir, 'run.log'));
    expect(servesAttempt(dataDir, JOB, 2, 0)).toBe(false);
    // Not attempt 1's run.log through the link: the attempt-2 name, which does not exist yet.
    expect(runLog(2)).toBe(path.join(nodeDir(dataDir, JOB, 2, 0), 'run.attempt-2.log'));
  });

  it('after the move, the old attempt reads its renamed files and the new one the plain names through the link', () => {
    const dir = launched();
    linkNodeDir(dataDir, JOB, 2, 0, dir);
    moveOn(dir, 1, 2);
    expect(runLog(1)).toBe(path.join(dir, 'run.attempt-1.log'));
    expect(attemptFile(dataDir, JOB, 1, 0, 'run', 'report.json')).toBe(path.join(dir, 'run.attempt-1.report.json'));
    expect(runLog(2)).toBe(path.join(nodeDir(dataDir, JOB, 2, 0), 'run.log'));
    expect(servesAttempt(dataDir, JOB, 1, 0)).toBe(false);
    expect(servesAttempt(dataDir, JOB, 2, 0)).toBe(true);
    // A file the old attempt never wrote is not the new attempt's.
    expect(attemptFile(dataDir, JOB, 1, 0, 'setup', 'log')).toBe(path.join(dir, 'setup.attempt-1.log'));
  });

  it("a folder whose mark names another attempt gives none of its plain files to this one, at either end", () => {
    const dir = launched();
    linkNodeDir(dataDir, JOB, 2, 0, dir);
    linkNodeDir(dataDir, JOB, 3, 0, dir);
    moveOn(dir, 1, 2);
    // Attempt 3's link while the node still serves 2.
    expect(runLog(3)).toBe(path.join(nodeDir(dataDir, JOB, 3, 0), 'run.attempt-3.log'));
    moveOn(dir, 2, 3);
    expect(runLog(2)).toBe(path.join(nodeDir(dataDir, JOB, 2, 0), 'run.attempt-2.log'));
    expect(runLog(3)).toBe(path.join(nodeDir(dataDir, JOB, 3, 0), 'run.log'));
    expect(runLog(1)).toBe(path.join(dir, 'run.attempt-1.log'));
  });

  it('a folder that does not exist yet is the plain name (a node not started)', () => {
    expect(runLog(1)).toBe(path.join(nodeDir(dataDir, JOB, 1, 0), 'run.log'));
  });
});

describe('attemptLogs', () => {
  it("lists a kept node's linked folder, each phase's file and truncated mark resolved, keyed by attempt, node and phase", () => {
    const dir = launched();
    mkdirSync(nodeDir(dataDir, JOB, 2, 1), { recursive: true });
    linkNodeDir(dataDir, JOB, 2, 0, dir);
    moveOn(dir, 1, 2);
    const logs = attemptLogs(dataDir, JOB, 2);
    expect(logs.map((log) => [log.key, log.rank, log.phase])).toEqual([
      ['2/0/setup', 0, 'setup'],
      ['2/0/run', 0, 'run'],
      ['2/1/setup', 1, 'setup'],
      ['2/1/run', 1, 'run'],
    ]);
    expect(logs[1]).toMatchObject({ file: path.join(nodeDir(dataDir, JOB, 2, 0), 'run.log'), truncatedMark: path.join(nodeDir(dataDir, JOB, 2, 0), 'run.log.truncated') });
    expect(attemptLogs(dataDir, JOB, 1)[1]).toMatchObject({ file: path.join(dir, 'run.attempt-1.log'), truncatedMark: path.join(dir, 'run.attempt-1.log.truncated') });
  });
});

describe('linkNodeDir', () => {
  it('links relatively, is safe said again, re-points a link to another folder, and never replaces a real folder', () => {
    const dir = launched();
    const link = nodeDir(dataDir, JOB, 2, 0);
    linkNodeDir(dataDir, JOB, 2, 0, dir);
    linkNodeDir(dataDir, JOB, 2, 0, dir);
    expect(readlinkSync(link)).toBe(path.join('..', '1', '0'));
    const other = nodeDir(dataDir, JOB, 1, 1);
    mkdirSync(other, { recursive: true });
    linkNodeDir(dataDir, JOB, 2, 0, other);
    expect(readlinkSync(link)).toBe(path.join('..', '1', '1'));
    const real = nodeDir(dataDir, JOB, 3, 0);
    mkdirSync(real, { recursive: true });
    linkNodeDir(dataDir, JOB, 3, 0, dir);
    expect(lstatSync(real).isDirectory()).toBe(true);
  });
});
