// workdir and file_mounts end to end with the real binary and real bash jobs: local sources
// uploaded at submit and on every node of every attempt, a checkpoint in a bucket read back
// by the next attempt, and every bad source refused (exit 2) before anything is submitted.

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { JobView } from '../../../lib/views.ts';
import { killStrayClis, parseStdout, runCli, runInProcess, SLOW, tempDir, writeTask } from '../../support/cli.ts';
import { waitFor } from '../../support/fixtures/wait.ts';

afterAll(() => {
  killStrayClis();
});

/** A project folder beside the task file: code for the workdir, a config file and a data folder to mount. */
async function project(dir: string): Promise<void> {
  await mkdir(join(dir, 'code', 'lib'), { recursive: true });
  await writeFile(join(dir, 'code', 'train.sh'), 'echo "training with $(cat ~/config.json)"\n');
  await writeFile(join(dir, 'code', 'lib', 'util.sh'), 'echo util\n');
  await writeFile(join(dir, 'config.json'), '{"lr": 0.1}\n');
  await mkdir(join(dir, 'data'));
  await writeFile(join(dir, 'data', 'shard-0'), 'rows\n');
}

describe('workdir and file_mounts of local files', () => {
  it(
    'are on every node of every attempt, for setup and run, as copies the job cannot change at the source',
    async () => {
      const dir = await tempDir('mounts');
      await project(dir);
      const file = await writeTask(
        dir,
        'task.yaml',
        `num_nodes: 2
workdir: ./code
file_mounts:
  ~/config.json: ./config.json
  /datasets/train: ./data
resources:
  job_recovery:
    recover_on_exit_codes: [29]
setup: |
  test -f lib/util.sh && test -f ~/config.json && test -f "$RELAUNCH_MOUNT_ROOT/datasets/train/shard-0" || exit 7
  echo "setup found everything in $(pwd)"
run: |
  bash train.sh
  cat "$RELAUNCH_MOUNT_ROOT/datasets/train/shard-0"
  echo changed > train.sh
  if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then
    # Neither node ends the attempt before both have printed: a code 29 stops the other node.
    touch "${dir}/attempt-1-ran-$RELAUNCH_NODE_RANK"
    until [ -e "${dir}/attempt-1-ran-0" ] && [ -e "${dir}/attempt-1-ran-1" ]; do sleep 0.1; done
    exit 29
  fi
`,
      );

      const run = await runCli(['run', file, '--json', '--data-dir', join(dir, 'state')], { cwd: dir });

      expect(run.code, run.stderr).toBe(0);
      const view = parseStdout<JobView>(run);
      expect(view.status).toBe('SUCCEEDED');
      expect(view.attempts).toHaveLength(2);
      for (const attempt of ['1', '2']) {
        const logs = await runInProcess(['logs', view.jobId, '--attempt', attempt, '--data-dir', join(dir, 'state')]);
        // Each node of each attempt found the sources fresh: the change attempt 1 made to train.sh is gone.
        expect(logs.stdout.match(/setup found everything in \S+\/sky_workdir/g), logs.stdout).toHaveLength(2);
        // Where each path is here, said once per node.
        expect(logs.stdout.match(/relaunch: \/datasets\/train is \S+\/root\/datasets\/train on this machine/g)).toHaveLength(2);
        expect(logs.stdout.match(/training with \{"lr": 0\.1\}\n\(node \d\) rows/g), logs.stdout).toHaveLength(2);
      }
      expect(readFileSync(join(dir, 'code', 'train.sh'), 'utf8')).toBe('echo "training with $(cat ~/config.json)"\n');
      expect(run.stderr).toMatch(/\.\/code \(2 files, [0-9.]+ [kM]?B packed, sha256:[0-9a-f]{12}\): stored in /);
      expect(run.stderr).toContain('./data (1 file,');
    },
    SLOW,
  );

  it(
    'are uploaded once: a second run of the same files sends nothing',
    async () => {
      const dir = await tempDir('mounts-again');
      await project(dir);
      const file = await writeTask(dir, 'task.yaml', 'workdir: ./code\nrun: bash train.sh\nfile_mounts:\n  ~/config.json: ./config.json\n');
      const state = join(dir, 'state');

      const first = await runCli(['run', file, '--data-dir', state], { cwd: dir });
      const second = await runCli(['run', file, '--data-dir', state], { cwd: dir });

      expect(first.code, first.stderr).toBe(0);
      expect(second.code, second.stderr).toBe(0);
      expect(first.stderr.match(/: stored in /g)).toHaveLength(2);
      expect(second.stderr.match(/: already in /g)).toHaveLength(2);
      expect(readdirSync(join(state, 'sources'))).toHaveLength(2);
    },
    SLOW,
  );
});

describe('a checkpoint in a MOUNT bucket', () => {
  it(
    'written by attempt 1 is read back by attempt 2, which resumes from it',
    async () => {
      const dir = await tempDir('checkpoint');
      const file = await writeTask(
        dir,
        'train.yaml',
        `file_mounts:
  /checkpoint:
    name: team-checkpoints
    mode: MOUNT
  /scratch:
    mode: MOUNT
resources:
  job_recovery:
    recover_on_exit_codes: [29]
run: |
  ckpt="$RELAUNCH_MOUNT_ROOT/checkpoint/step"
  step=0
  if [ -f "$ckpt" ]; then step=$(cat "$ckpt"); echo "resuming at step $step"; fi
  while [ "$step" -lt 6 ]; do
    step=$((step + 1))
    echo "$step" > "$ckpt"
    if [ "$RELAUNCH_ATTEMPT" -eq 1 ] && [ "$step" -eq 3 ]; then echo "crashed at step 3"; exit 29; fi
  done
  echo "attempt $RELAUNCH_ATTEMPT" >> "$RELAUNCH_MOUNT_ROOT/scratch/attempts"
  echo "done at step $step"
`,
      );
      const state = join(dir, 'state');

      const run = await runCli(['run', file, '--json', '--data-dir', state], { cwd: dir });

      expect(run.code, run.stderr).toBe(0);
      const view = parseStdout<JobView>(run);
      expect(view.attempts.map((a) => a.exitCodes)).toEqual([[29], [0]]);
      const second = await runInProcess(['logs', view.jobId, '--attempt', '2', '--data-dir', state]);
      expect(second.stdout).toContain('resuming at step 3');
      expect(second.stdout).toContain('done at step 6');
      // The bucket outlives the job, as a persistent S3 bucket does.
      expect(readFileSync(join(state, 'buckets', 'team-checkpoints', 'step'), 'utf8')).toBe('6\n');
      // A nameless mount is this job's folder of relaunch's own bucket, under its path.
      expect(readFileSync(join(state, 'buckets', 'relaunch-local', 'mounts', view.jobId, 'root', 'scratch', 'attempts'), 'utf8')).toBe('attempt 2\n');
    },
    SLOW,
  );
});

describe('persistent: false', () => {
  it(
    'deletes, when the job ends, the bucket run created for it and its nameless folder, but never a bucket that was there before',
    async () => {
      const dir = await tempDir('transient');
      const state = join(dir, 'state');
      // A bucket that exists before the job: persistent: false must not take it.
      await mkdir(join(state, 'buckets', 'team-shared'), { recursive: true });
      await writeFile(join(state, 'buckets', 'team-shared', 'keep-me'), 'older data\n');
      const file = await writeTask(
        dir,
        'train.yaml',
        `file_mounts:
  /checkpoint:
    name: scratch-ckpt-7
    mode: MOUNT
    persistent: false
  /shared:
    name: team-shared
    mode: MOUNT
    persistent: false
  /tmpdata:
    mode: MOUNT
    persistent: false
resources:
  job_recovery:
    recover_on_exit_codes: [29]
run: |
  root="$RELAUNCH_MOUNT_ROOT"
  if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then
    echo 3 > "$root/checkpoint/step"; echo a1 > "$root/tmpdata/seen"; echo written > "$root/shared/by-job"; exit 29
  fi
  echo "resumed at $(cat "$root/checkpoint/step") after $(cat "$root/tmpdata/seen")"
`,
      );

      const run = await runCli(['run', file, '--json', '--data-dir', state], { cwd: dir });

      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr).toContain('created bucket folder scratch-ckpt-7');
      const view = parseStdout<JobView>(run);
      expect(view.status).toBe('SUCCEEDED');
      // Kept between attempts: the second read what the first wrote.
      const second = await runInProcess(['logs', view.jobId, '--attempt', '2', '--data-dir', state]);
      expect(second.stdout).toContain('resumed at 3 after a1');
      // Gone after the job: the bucket run created for it, its mark, and the nameless folder.
      // The background runtime deletes them once the job's execution has ended, as the stack's
      // EventBridge rule does, which may be a moment after `run` has seen the job end.
      const left = [join(state, 'buckets', 'scratch-ckpt-7'), join(state, 'buckets', '.created', 'scratch-ckpt-7'), join(state, 'buckets', 'relaunch-local', 'mounts', view.jobId)];
      await waitFor('the job\'s persistent: false mounts to be deleted', () => (left.some((folder) => existsSync(folder)) ? undefined : true));
      expect(existsSync(join(state, 'buckets', 'scratch-ckpt-7'))).toBe(false);
      expect(existsSync(join(state, 'buckets', '.created', 'scratch-ckpt-7'))).toBe(false);
      expect(existsSync(join(state, 'buckets', 'relaunch-local', 'mounts', view.jobId))).toBe(false);
      // Kept: the bucket that was there before, with what the job wrote in it.
      expect(readdirSync(join(state, 'buckets', 'team-shared')).sort()).toEqual(['by-job', 'keep-me']);
    },
    SLOW,
  );
});

describe('bad sources, refused before anything is submitted (exit 2)', () => {
  it.each([
    ['a missing local path', 'file_mounts:\n  /data: ./nowhere\nrun: x\n', 'file_mounts["/data"]: expected an existing local file or folder, got ./nowhere'],
    ['a workdir that is a file', 'workdir: ./task.yaml\nrun: x\n', 'workdir: expected a local folder, got ./task.yaml'],
    ['a placeholder bucket name', 'file_mounts:\n  /ckpt: {name: YOUR_BUCKET, mode: MOUNT}\nrun: x\n', 'file_mounts["/ckpt"].name: expected an S3 bucket name'],
    ['an S3 source with no AWS credentials here', 'file_mounts:\n  /data: s3://datasets/train\nrun: x\n', 'file_mounts["/data"]: expected AWS credentials to read s3://datasets/train from this machine'],
  ])('%s', async (_name, task, message) => {
    const dir = await tempDir('bad-mounts');
    const file = await writeTask(dir, 'task.yaml', task);
    const home = join(dir, 'home');
    await mkdir(home);

    const run = await runCli(['run', file, '--data-dir', join(dir, 'state')], {
      cwd: dir,
      env: { HOME: home, AWS_ACCESS_KEY_ID: '', AWS_PROFILE: '', AWS_WEB_IDENTITY_TOKEN_FILE: '', AWS_SHARED_CREDENTIALS_FILE: '', AWS_CONFIG_FILE: '' },
    });

    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toContain(message);
    expect(existsSync(join(dir, 'state', 'nodes'))).toBe(false);
  });
});
