// LocalJobBuckets: the data folder's bucket folders deleted at a job's end only when `run`
// marked them as created for that job; and a job cancelled in its backoff, on the real
// runtime, leaves no nameless persistent: false folder behind.

import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { markCreatedBuckets } from '../../../cli/local-buckets.ts';
import { LocalJobBuckets } from '../../../local/job-buckets.ts';
import { jobMountsDir } from '../../../local/mounts.ts';
import { StateName } from '../../../lib/workflow/contract.ts';
import { waitFor } from '../../support/fixtures/wait.ts';
import { finish, runToEnd, useLocalRuntimes, yaml } from '../../support/local-harness.ts';

const JOB = 'j-00mm8abcd-local01';
const made: string[] = [];

afterAll(async () => {
  await Promise.all(made.map((dir) => rm(dir, { recursive: true, force: true })));
});

async function emptyDataDir(): Promise<string> {
  const dataDir = await mkdtemp(join(tmpdir(), 'relaunch-buckets-'));
  made.push(dataDir);
  return dataDir;
}

async function dataDirWith(bucket: string): Promise<string> {
  const dataDir = await emptyDataDir();
  await mkdir(join(dataDir, 'buckets', bucket), { recursive: true });
  await writeFile(join(dataDir, 'buckets', bucket, 'data'), 'x');
  return dataDir;
}

describe('LocalJobBuckets', () => {
  it('deletes a bucket folder marked as created for the job, with its mark', async () => {
    const dataDir = await dataDirWith('tmp-a');
    await markCreatedBuckets(dataDir, ['tmp-a'], JOB);
    expect(await new LocalJobBuckets(dataDir).deleteCreatedBucket('tmp-a', JOB)).toBe('deleted');
    expect(existsSync(join(dataDir, 'buckets', 'tmp-a'))).toBe(false);
    expect(await readdir(join(dataDir, 'buckets', '.created'))).toEqual([]);
  });

  it('keeps one marked for another job, one with no mark, and says a missing one is gone', async () => {
    const dataDir = await dataDirWith('tmp-a');
    await mkdir(join(dataDir, 'buckets', 'tmp-b'));
    await markCreatedBuckets(dataDir, ['tmp-a'], 'j-00mm8abcd-other1');
    const buckets = new LocalJobBuckets(dataDir);
    expect(await buckets.deleteCreatedBucket('tmp-a', JOB)).toBe('kept');
    expect(await buckets.deleteCreatedBucket('tmp-b', JOB)).toBe('kept');
    expect(await buckets.deleteCreatedBucket('tmp-c', JOB)).toBe('gone');
    expect(existsSync(join(dataDir, 'buckets', 'tmp-a', 'data'))).toBe(true);
  });

  it('never deletes outside the buckets folder, whatever name it is given', async () => {
    const dataDir = await dataDirWith('tmp-a');
    await writeFile(join(dataDir, 'precious'), 'x');
    const buckets = new LocalJobBuckets(dataDir);
    for (const name of ['..', '../..', '.created', 'a/../../x', '/etc']) expect(await buckets.deleteCreatedBucket(name, JOB)).toBe('kept');
    expect(existsSync(join(dataDir, 'precious'))).toBe(true);
  });

  it("removes a nameless mount's folder and the job's folders it leaves empty, not another mount's", async () => {
    const dataDir = await emptyDataDir();
    const root = jobMountsDir(dataDir, JOB);
    await mkdir(join(root, 'root', 'scratch', 'deep'), { recursive: true });
    await mkdir(join(root, 'root', 'kept'), { recursive: true });
    await writeFile(join(root, 'root', 'kept', 'f'), 'x');
    const buckets = new LocalJobBuckets(dataDir);

    await buckets.deleteJobFolder(JOB, '/scratch');
    expect(await readdir(join(root, 'root'))).toEqual(['kept']);
    await buckets.deleteJobFolder(JOB, '/kept');
    expect(existsSync(root)).toBe(false);
    // Again (a repeated end): nothing left to do, no error.
    await buckets.deleteJobFolder(JOB, '/kept');
  });
});

const open = useLocalRuntimes();

describe('a job cancelled in its backoff', () => {
  it('leaves no folder for its nameless persistent: false mount once it is CANCELLED', async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(yaml`
      file_mounts:
        /scratch:
          mode: MOUNT
          persistent: false
      resources:
        job_recovery:
          recover_on_exit_codes: [29]
          restart_backoff:
            initial_seconds: 3600
            factor: 1
            max_seconds: 3600
            jitter: none
      run: |
        echo wrote > "$RELAUNCH_MOUNT_ROOT/scratch/out"
        exit 29
    `);
    await waitFor('the backoff wait', () => (t.transitions.some((x) => x.state === StateName.WaitBeforeRelaunch) ? true : undefined));
    expect(existsSync(join(jobMountsDir(t.dataDir, jobId), 'root', 'scratch', 'out'))).toBe(true);

    await t.runtime.cancel(jobId);
    const job = await finish(t, jobId);

    expect(job.view.status).toBe('CANCELLED');
    expect(existsSync(jobMountsDir(t.dataDir, jobId))).toBe(false);
    expect(t.errors).toEqual([]);
  });
});

describe('a deletion that fails', () => {
  it('is reported once and left: the job ends and its runtime does not wait on it', async () => {
    const t = await open();
    const refused = vi.spyOn(LocalJobBuckets.prototype, 'deleteJobFolder').mockRejectedValue(new Error("EACCES: permission denied, rmdir 'scratch/ro'"));
    try {
      const job = await runToEnd(
        t,
        yaml`
          file_mounts:
            /scratch:
              mode: MOUNT
              persistent: false
          run: echo kept > "$RELAUNCH_MOUNT_ROOT/scratch/out"
        `,
      );
      expect(job.view.status).toBe('SUCCEEDED');
      expect(refused).toHaveBeenCalledTimes(1);
      expect(t.errors.map(String)).toEqual([
        `Error: could not delete the persistent: false mounts of ${job.jobId}, which stay in ${t.dataDir}: EACCES: permission denied, rmdir 'scratch/ro'`,
      ]);
      expect(existsSync(join(jobMountsDir(t.dataDir, job.jobId), 'root', 'scratch', 'out'))).toBe(true);
    } finally {
      refused.mockRestore();
    }
  });
});
