// A full disk, for real: the data folder on a small tmpfs (this needs root, as CI has).
// A job whose output fills it keeps running with its log cut short and a note in `logs`;
// a database write that fails ends only the job whose step it was, once the janitor can
// write again; the runtime stays up for every other job. A real `relaunch serve` stopped
// with SIGTERM while the disk is full exits at once, and an exit code its database could
// not take then is not lost: the next runtime finds it where the node wrote it.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LogTail } from '../../../cli/follow.ts';
import { StateName } from '../../../lib/workflow/contract.ts';
import { attemptLogs, jobWorkDir, nodeDir } from '../../../local/paths.ts';
import { killStrayClis } from '../../support/cli.ts';
import { finish, statusTrail, stored, useLocalRuntimes, waitFor, waitUntilAwaiting, yaml } from '../../support/local-harness.ts';
import { processesOfJob, serve } from './world.ts';

const open = useLocalRuntimes();
const mounts: string[] = [];

/** A fresh tmpfs of `size` (e.g. `96m`) mounted on a new folder; null where mounting is not allowed. */
function smallDisk(size: string): string | null {
  const dir = mkdtempSync(path.join(tmpdir(), 'relaunch-disk-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'ignore' });
  } catch {
    rmSync(dir, { recursive: true, force: true });
    return null;
  }
  mounts.push(dir);
  return dir;
}

const CAN_MOUNT = (() => {
  const dir = smallDisk('1m');
  if (dir === null) return false;
  execFileSync('umount', [dir]);
  mounts.pop();
  rmSync(dir, { recursive: true, force: true });
  return true;
})();

/**
 * A limit against a hang: filling a disk through a job's log is CPU work, and one of these
 * tests took 119 s of a 120 s limit on a 2-CPU machine with the suite and two busy loops beside it.
 */
const DISK_TEST_TIMEOUT_MS = 300_000;

afterEach(() => {
  killStrayClis();
  for (const dir of mounts.splice(0)) {
    execFileSync('umount', ['-l', dir]);
    rmSync(dir, { recursive: true, force: true });
  }
});

describe.skipIf(!CAN_MOUNT)('a full disk', () => {
  it('keeps a job whose output fills the disk running, its log cut short with a note, and the runtime up', { timeout: DISK_TEST_TIMEOUT_MS }, async () => {
    const dataDir = smallDisk('96m') as string;
    const t = await open({ inMemory: false, dataDir });
    const job = await finish(
      t,
      (
        await t.runtime.submit(yaml`
          run: |
            head -c 40000000 /dev/zero > ballast
            echo "writing more than the disk holds"
            yes x | head -c 80000000
            echo
            rm ballast
            echo "still running after the disk filled"
            touch survived
        `)
      ).jobId,
    );

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', attempts: [{ outcome: 'EXITED', exitCodes: [0] }] });
    expect(existsSync(path.join(jobWorkDir(dataDir, job.jobId), 'survived'))).toBe(true);
    const logs = new LogTail().read(attemptLogs(dataDir, job.jobId, 1));
    expect(logs).toContain('writing more than the disk holds');
    expect(logs).toContain("relaunch: node 0's run output stops here: its log could not be written (is the disk full?); the job went on");
    expect(logs).not.toContain('still running after the disk filled');
    // Writes refused while the disk was full were refused, not crashes.
    for (const error of t.errors) expect(String(error)).toContain("the local database's disk is full");
    expect(processesOfJob(job.jobId)).toEqual([]);
  });

  it('ends the job whose step could not be written FAILED_CONTROLLER, and runs the others on', { timeout: DISK_TEST_TIMEOUT_MS }, async () => {
    const dataDir = smallDisk('96m') as string;
    const t = await open({ inMemory: false, dataDir });
    const { jobId: other } = await t.runtime.submit(yaml`
      run: |
        while [ ! -f go ]; do sleep 0.1; done
        echo "other job done"
    `);
    await waitUntilAwaiting(t, other, 1);
    const { jobId } = await t.runtime.submit(yaml`
      resources:
        job_recovery:
          recover_on_exit_codes: [29]
          restart_backoff: {initial_seconds: 2, factor: 1, max_seconds: 2, jitter: none}
      run: exit 29
    `);
    await waitFor('the backoff', () => (t.transitions.some((x) => x.execution === jobId && x.state === StateName.WaitBeforeRelaunch) ? true : undefined));

    // The disk fills while the job waits: its next launch cannot be written.
    const ballast = path.join(dataDir, 'ballast');
    const { bavail, bsize } = statfsSync(dataDir);
    writeFileSync(ballast, Buffer.alloc(Math.max(0, bavail * bsize - 1024 * 1024)));
    await waitFor('the controller to fail', () => (t.transitions.some((x) => x.execution === jobId && x.state === StateName.ControllerFailed) ? true : undefined));
    rmSync(ballast);

    const failed = await finish(t, jobId);
    expect(failed.view.status).toBe('FAILED_CONTROLLER');
    expect(failed.view.failureReason).toContain("the local database's disk is full");

    writeFileSync(path.join(jobWorkDir(dataDir, other), 'go'), '');
    const done = await finish(t, other);
    expect(done.view).toMatchObject({ status: 'SUCCEEDED', attempts: [{ outcome: 'EXITED', exitCodes: [0] }] });
    expect(processesOfJob(jobId)).toEqual([]);
    expect(processesOfJob(other)).toEqual([]);
  });

  it('SIGTERM of serve while the disk is full: it exits at once, and the exit code its database refused is stored by the next runtime', { timeout: DISK_TEST_TIMEOUT_MS }, async () => {
    const dataDir = smallDisk('96m') as string;
    const server = await serve(dataDir);
    const jobId = await server.submit(yaml`
      run: |
        touch started
        while [ ! -f go ]; do sleep 0.1; done
        echo "through"
    `);
    // Its setup report stored and acknowledged, its run going.
    await waitFor('the job to run', () => (existsSync(path.join(jobWorkDir(dataDir, jobId), 'started')) ? true : undefined));

    // The disk fills; the job then exits 0, and its report finds the database refusing writes.
    const ballast = path.join(dataDir, 'ballast');
    const { bavail, bsize } = statfsSync(dataDir);
    writeFileSync(ballast, Buffer.alloc(Math.max(0, bavail * bsize - 1024 * 1024)));
    writeFileSync(path.join(jobWorkDir(dataDir, jobId), 'go'), '');
    const reportFile = path.join(nodeDir(dataDir, jobId, 1, 0), 'run.report.json');
    await waitFor('the node to write its report', () => (existsSync(reportFile) ? true : undefined));
    // Written before it is sent: with the database refusing writes, it is stored nowhere else.
    expect((await server.job(jobId)).status).toBe('RUNNING');

    server.cli.child.kill('SIGTERM');
    const ended = await server.cli.finished;
    expect(ended.signal).toBeNull();
    expect(processesOfJob(jobId)).toEqual([]);

    rmSync(ballast);
    const t = await open({ inMemory: false, dataDir });
    const job = await stored(t, jobId);
    expect(job.job.status).toBe('SUCCEEDED');
    expect(job.attempts).toMatchObject([{ attempt: 1, outcome: { kind: 'EXITED' }, reports: [{ phase: 'setup', exitCode: 0 }, { phase: 'run', exitCode: 0 }], decision: { action: 'SUCCEED' } }]);
    expect(statusTrail(job.events)).toEqual(['PENDING', 'STARTING', 'RUNNING', 'SUCCEEDED']);
    expect(t.notices).toEqual([expect.stringContaining(`job ${jobId}: attempt 1 had ended before its runtime stopped`)]);
  });
});
