// Reports a node wrote in its folder that the database never took: read back by the next
// runtime when it is the agent's own report of that node and phase, and nothing else is.

import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { JobStore } from '../../../lib/ports.ts';
import { leftReports } from '../../../local/left-reports.ts';
import { linkNodeDir, nodeDir } from '../../../local/paths.ts';
import { attemptRecord } from '../../support/fixtures/records.ts';
import { stored, useLocalRuntimes, waitFor, waitUntilAwaiting, yaml } from '../../support/local-harness.ts';

const AT = '2026-03-01T12:00:00.000Z';
const JOB = 'j-00left000-report';
const instance = (nodeRank: number) => ({ instanceId: `local-${JOB}-1-${nodeRank}`, nodeRank, privateIp: '127.0.0.1' });

let dataDir: string;
beforeEach(() => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'relaunch-left-'));
});
afterEach(() => {
  rmSync(dataDir, { recursive: true, force: true });
});

function write(rank: number, phase: string, content: string | object, kind: 'report' | 'stopped' = 'report'): void {
  const dir = nodeDir(dataDir, JOB, 1, rank);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, `${phase}.${kind}.json`), typeof content === 'string' ? content : JSON.stringify(content));
}

describe('leftReports', () => {
  it("reads each node's setup and run reports that the attempt lacks, setup first", () => {
    write(0, 'setup', { nodeRank: 0, phase: 'setup', exitCode: 0, setupMs: 4_250, outputTail: '' });
    write(0, 'run', { nodeRank: 0, phase: 'run', exitCode: 3, outputTail: 'boom\n' });
    write(1, 'run', { nodeRank: 1, phase: 'run', exitCode: 0, outputTail: '' });
    const attempt = attemptRecord(JOB, 1, AT, {
      instances: [instance(0), instance(1)],
      reports: [{ nodeRank: 1, phase: 'setup', exitCode: 0, outputTail: '', reportedAt: AT }],
    });
    expect(leftReports(dataDir, attempt, 2, AT)).toEqual([
      // How long setup ran comes with it, so the timeline dates setup's start as the API would.
      { nodeRank: 0, phase: 'setup', exitCode: 0, setupMs: 4_250, outputTail: '', reportedAt: AT },
      { nodeRank: 0, phase: 'run', exitCode: 3, outputTail: 'boom\n', reportedAt: AT },
      { nodeRank: 1, phase: 'run', exitCode: 0, outputTail: '', reportedAt: AT },
    ]);
  });

  it("reads a phase's stopped report (its cause and last lines, no code) when the phase left no exit code", () => {
    write(0, 'setup', { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: '' });
    write(0, 'run', { nodeRank: 0, phase: 'run', stopped: 'interruption', outputTail: 'step 41\nstep 42\n' }, 'stopped');
    const attempt = attemptRecord(JOB, 1, AT, { instances: [instance(0)] });
    expect(leftReports(dataDir, attempt, 1, AT)).toEqual([
      { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: '', reportedAt: AT },
      { nodeRank: 0, phase: 'run', stopped: 'interruption', outputTail: 'step 41\nstep 42\n', reportedAt: AT },
    ]);
  });

  it("keeps a phase's exit code over a stopped report of the same phase, and skips a stopped report already stored", () => {
    write(0, 'run', { nodeRank: 0, phase: 'run', exitCode: 7, outputTail: '' });
    write(0, 'run', { nodeRank: 0, phase: 'run', stopped: 'shutdown', outputTail: '' }, 'stopped');
    write(0, 'setup', { nodeRank: 0, phase: 'setup', stopped: 'shutdown', outputTail: '' }, 'stopped');
    const attempt = attemptRecord(JOB, 1, AT, { instances: [instance(0)], reports: [{ nodeRank: 0, phase: 'setup', stopped: 'shutdown', outputTail: '', reportedAt: AT }] });
    expect(leftReports(dataDir, attempt, 1, AT)).toEqual([{ nodeRank: 0, phase: 'run', exitCode: 7, outputTail: '', reportedAt: AT }]);
  });

  it.each([
    ['a cause the agent never gives', { nodeRank: 0, phase: 'run', stopped: 'bored', outputTail: '' }],
    ['an exit code beside it', { nodeRank: 0, phase: 'run', stopped: 'shutdown', exitCode: 0, outputTail: '' }],
    ['another node', { nodeRank: 1, phase: 'run', stopped: 'shutdown', outputTail: '' }],
  ])('takes no stopped report from a file with %s', (_what, content) => {
    write(0, 'run', content, 'stopped');
    expect(leftReports(dataDir, attemptRecord(JOB, 1, AT, { instances: [instance(0)] }), 1, AT)).toEqual([]);
  });

  it("reads a kept node's report of each attempt from its one folder: attempt 1's renamed when it moved on, attempt 2's through the link", () => {
    write(0, 'run', { nodeRank: 0, phase: 'run', exitCode: 3, outputTail: 'attempt 1\n' });
    const dir = nodeDir(dataDir, JOB, 1, 0);
    linkNodeDir(dataDir, JOB, 2, 0, dir);
    const second = attemptRecord(JOB, 2, AT, { instances: [{ ...instance(0), reusedFrom: 1 }] });
    // Moved by the compute, not yet by its agent: attempt 1's report is not attempt 2's.
    expect(leftReports(dataDir, second, 1, AT)).toEqual([]);
    renameSync(path.join(dir, 'run.report.json'), path.join(dir, 'run.attempt-1.report.json'));
    writeFileSync(path.join(dir, 'attempt'), '2\n');
    write(0, 'run', { nodeRank: 0, phase: 'run', exitCode: 0, outputTail: 'attempt 2\n' });
    const first = attemptRecord(JOB, 1, AT, { instances: [instance(0)] });
    expect(leftReports(dataDir, first, 1, AT)).toEqual([{ nodeRank: 0, phase: 'run', exitCode: 3, outputTail: 'attempt 1\n', reportedAt: AT }]);
    expect(leftReports(dataDir, second, 1, AT)).toEqual([{ nodeRank: 0, phase: 'run', exitCode: 0, outputTail: 'attempt 2\n', reportedAt: AT }]);
  });

  it('skips a report the attempt has already stored', () => {
    write(0, 'run', { nodeRank: 0, phase: 'run', exitCode: 1, outputTail: '' });
    const attempt = attemptRecord(JOB, 1, AT, { instances: [instance(0)], reports: [{ nodeRank: 0, phase: 'run', exitCode: 0, outputTail: '', reportedAt: AT }] });
    expect(leftReports(dataDir, attempt, 1, AT)).toEqual([]);
  });

  it.each([
    ['not JSON', '{"nodeRank": 0,'],
    ['another node', { nodeRank: 1, phase: 'run', exitCode: 0, outputTail: '' }],
    ['another phase', { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: '' }],
    ['an exit code no process has', { nodeRank: 0, phase: 'run', exitCode: 300, outputTail: '' }],
    ['no output tail', { nodeRank: 0, phase: 'run', exitCode: 0 }],
    ['over a MiB', JSON.stringify({ nodeRank: 0, phase: 'run', exitCode: 0, outputTail: 'x'.repeat(1024 * 1024) })],
  ])('takes no report from a file that is %s', (_what, content) => {
    write(0, 'run', content);
    expect(leftReports(dataDir, attemptRecord(JOB, 1, AT, { instances: [instance(0)] }), 1, AT)).toEqual([]);
  });

  it('neither blocks on nor reads a FIFO put where a report would be', () => {
    const dir = nodeDir(dataDir, JOB, 1, 0);
    mkdirSync(dir, { recursive: true });
    spawnSync('mkfifo', [path.join(dir, 'run.report.json')]);
    expect(leftReports(dataDir, attemptRecord(JOB, 1, AT, { instances: [instance(0)] }), 1, AT)).toEqual([]);
  });
});

const open = useLocalRuntimes();

describe('a runtime opening a folder whose job left a report unstored', () => {
  it('stores it, applies the policy, and ends the job FAILED_CONTROLLER when the policy would relaunch: the codes and decision stay on record', async () => {
    const first = await open({ inMemory: false });
    const { jobId } = await first.runtime.submit(yaml`
      resources:
        job_recovery:
          recover_on_exit_codes: [29]
      run: sleep 60
    `);
    await waitUntilAwaiting(first, jobId, 1);
    // Its setup report stored: only the run's report is left in the node's folder.
    await waitFor('the setup report to be stored', async () => ((await first.runtime.deps.store.getAttempt(jobId, 1)).reports.some((r) => r.phase === 'setup') ? true : undefined));
    await first.runtime.close();
    // What the agent had written before its report could reach the database.
    writeFileSync(path.join(nodeDir(first.dataDir, jobId, 1, 0), 'run.report.json'), JSON.stringify({ nodeRank: 0, phase: 'run', exitCode: 29, outputTail: '' }));

    const second = await open({ inMemory: false, dataDir: first.dataDir });
    const job = await stored(second, jobId);
    expect(job.job.status).toBe('FAILED_CONTROLLER');
    expect(job.attempts[0]).toMatchObject({ outcome: { kind: 'EXITED' }, decision: { action: 'RESTART' } });
    expect(job.attempts[0]?.reports.map((r) => `${r.phase}:${r.exitCode}`)).toContain('run:29');
    expect(second.notices).toEqual([`job ${jobId}: attempt 1 had ended before its runtime stopped (run exit code 29 on node 0, found in its nodes' folders): RECOVERING`]);
  });
});

describe('a runtime opening a folder whose attempt has its reports stored and no decision', () => {
  /** A job whose run is under way when `stop` runs against the first runtime's store, which then closes. */
  async function stoppedBetweenReportAndPolicy(stop: (store: JobStore, jobId: string, at: string) => Promise<void>) {
    const first = await open({ inMemory: false });
    const { jobId } = await first.runtime.submit(yaml`
      run: sleep 60
    `);
    await waitUntilAwaiting(first, jobId, 1);
    await waitFor('the setup report to be stored', async () => ((await first.runtime.deps.store.getAttempt(jobId, 1)).reports.some((r) => r.phase === 'setup') ? true : undefined));
    // What the report's use case had done when the runtime died, before the policy's step.
    await stop(first.runtime.deps.store, jobId, new Date().toISOString());
    await first.runtime.close();
    const second = await open({ inMemory: false, dataDir: first.dataDir });
    return { job: await stored(second, jobId), notices: second.notices, jobId };
  }

  it('decides a stored exit 0 that never ended the attempt: SUCCEEDED, not FAILED_CONTROLLER', async () => {
    const { job, notices, jobId } = await stoppedBetweenReportAndPolicy(async (store, jobId, at) => {
      await store.addReport(jobId, 1, { nodeRank: 0, phase: 'run', exitCode: 0, outputTail: 'done\n', reportedAt: at });
    });
    expect(job.job.status).toBe('SUCCEEDED');
    expect(job.attempts[0]).toMatchObject({ outcome: { kind: 'EXITED' }, decision: { action: 'SUCCEED' } });
    expect(notices).toEqual([`job ${jobId}: attempt 1 had ended before its runtime stopped (its reports stored, its decision not yet made): SUCCEEDED`]);
  });

  it('decides an attempt the exit 0 had ended, whose policy step never ran: SUCCEEDED', async () => {
    const { job } = await stoppedBetweenReportAndPolicy(async (store, jobId, at) => {
      await store.addReport(jobId, 1, { nodeRank: 0, phase: 'run', exitCode: 0, outputTail: 'done\n', reportedAt: at });
      await store.endAttempt(jobId, 1, { kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 0 }] }, at);
    });
    expect(job.job.status).toBe('SUCCEEDED');
    expect(job.attempts[0]?.decision).toMatchObject({ action: 'SUCCEED' });
  });
});
