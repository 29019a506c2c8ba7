// Pipelines end to end with the real binary: tasks run in order as real bash jobs, each
// with its own recovery budget; a task that fails for good ends the job with its status and
// the tasks after it are CANCELLED; run --json, status and logs --task show each task.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { JobView } from '../../../lib/views.ts';
import { killStrayClis, parseStdout, removeTempDirs, runCli, runInProcess, SLOW, tempDir, writeTask } from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

/**
 * Three tasks sharing the job's work folder. `prepare` and `train` each fail their first
 * try with exit 3 and allow one restart: the budget is per task, so both get theirs.
 */
const PIPELINE = `name: three-steps
---
name: prepare
resources:
  job_recovery:
    max_restarts_on_errors: 1
run: |
  if [ ! -f prepare-tried ]; then touch prepare-tried; echo "prepare: first try fails"; exit 3; fi
  echo data > prepared.txt
---
name: train
resources:
  job_recovery:
    max_restarts_on_errors: 1
run: |
  if [ ! -f train-tried ]; then touch train-tried; echo "train: first try fails"; exit 3; fi
  echo "train read $(cat prepared.txt)"
---
name: evaluate
run: echo "evaluate ran as attempt $RELAUNCH_ATTEMPT"
`;

describe('a pipeline', () => {
  it(
    'runs its tasks in order, each restarting within its own budget, and shows every task and attempt',
    async () => {
      const dir = await tempDir('pipeline');
      const file = await writeTask(dir, 'pipeline.yaml', PIPELINE);
      const data = join(dir, 'data');

      const run = await runCli(['run', file, '--json', '--data-dir', data], { cwd: dir });

      expect(run.code, run.stderr).toBe(0);
      const view = parseStdout<JobView>(run);
      expect(view).toMatchObject({ name: 'three-steps', status: 'SUCCEEDED' });
      expect(view.tasks).toEqual([
        { task: 0, name: 'prepare', status: 'SUCCEEDED' },
        { task: 1, name: 'train', status: 'SUCCEEDED' },
        { task: 2, name: 'evaluate', status: 'SUCCEEDED' },
      ]);
      expect(view.attempts.map((a) => [a.attempt, a.task, a.exitCodes[0], a.decision])).toEqual([
        [1, 0, 3, 'RESTART'],
        [2, 0, 0, 'NEXT_TASK'],
        [3, 1, 3, 'RESTART'],
        [4, 1, 0, 'NEXT_TASK'],
        [5, 2, 0, 'SUCCEED'],
      ]);
      expect(view.attempts[1]?.reason).toBe('task 1 of 3 (prepare) succeeded; task 2 of 3 (train) starts');
      expect(readFileSync(join(data, 'jobs', view.jobId, 'prepared.txt'), 'utf8')).toBe('data\n');

      const train = await runInProcess(['logs', view.jobId, '--task', '2', '--data-dir', data]);
      const firstTry = await runInProcess(['logs', view.jobId, '--attempt', '3', '--data-dir', data]);
      const status = await runInProcess(['status', view.jobId, '--data-dir', data]);
      expect(train.stdout).toContain('train read data');
      expect(firstTry.stdout).toContain('train: first try fails');
      expect(status.stdout).toMatch(/TASK\s+NAME\s+STATUS\n1\s+prepare\s+SUCCEEDED\n2\s+train\s+SUCCEEDED\n3\s+evaluate\s+SUCCEEDED/);
    },
    SLOW,
  );

  it(
    'ends with the status of a task that fails for good, and CANCELLED for the tasks after it',
    async () => {
      const dir = await tempDir('pipeline-fails');
      const file = await writeTask(dir, 'pipeline.yaml', 'run: echo first\n---\nsetup: exit 5\nrun: echo never\n---\nrun: touch third-ran\n');
      const data = join(dir, 'data');

      const run = await runCli(['run', file, '--json', '--data-dir', data], { cwd: dir });

      expect(run.code).toBe(1);
      const view = parseStdout<JobView>(run);
      expect(view.status).toBe('FAILED_SETUP');
      expect(view.tasks?.map((task) => task.status)).toEqual(['SUCCEEDED', 'FAILED_SETUP', 'CANCELLED']);
      expect(view.attempts.map((a) => a.task)).toEqual([0, 1]);
      const logs = await runInProcess(['logs', view.jobId, '--task', '3', '--data-dir', data]);
      expect(logs.code).toBe(2);
      expect(logs.stderr).toContain('--task: task 3 has not started yet');
    },
    SLOW,
  );

  it('is refused as a job group (execution: parallel), naming the key, with nothing run', async () => {
    const dir = await tempDir('pipeline-group');
    const file = await writeTask(dir, 'group.yaml', 'name: g\nexecution: parallel\n---\nrun: echo a\n---\nrun: echo b\n');

    const result = await runCli(['run', file, '--data-dir', join(dir, 'data')], { cwd: dir });

    expect(result.code).toBe(2);
    expect(result.stderr).toContain('execution: expected serial or nothing');
    expect(result.stderr).toContain('job groups (execution: parallel) are not supported (line 2)');
  });
});
