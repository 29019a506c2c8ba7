// `sky jobs launch`'s options on `relaunch run` and `validate`: overrides of the task file
// that validate shows and the job keeps, `--env KEY` from the caller's shell, `--yes`, and
// `relaunch --version`.

import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { parseEnvs } from '../../../cli/commands/run.ts';
import { InvalidInputError } from '../../../lib/errors.ts';
import type { TaskSpec } from '../../../lib/task-file/types.ts';
import type { JobView } from '../../../lib/views.ts';
import { killStrayClis, parseStdout, removeTempDirs, runCli, runInProcess, SLOW, tempDir, writeTask } from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

const TASK = `# a task with every field the options override
name: from-file
num_nodes: 1
resources:
  cpus: 2
  use_spot: false
  any_of:
    - {region: us-east-1, cpus: 2}
    - {region: us-west-2}
run: echo "job sees $FROM_SHELL"
`;

async function validated(args: readonly string[], task = TASK): Promise<{ code: number | null; spec: TaskSpec; stdout: string }> {
  const dir = await tempDir('overrides');
  const file = await writeTask(dir, 'task.yaml', task);
  const result = await runInProcess(['validate', file, '--json', ...args]);
  const body = JSON.parse(result.stdout) as { spec: TaskSpec };
  return { code: result.code, spec: body.spec, stdout: result.stdout };
}

describe('launch overrides on validate', () => {
  it('show the task the options make, each over the file', async () => {
    const { code, spec } = await validated([
      '-n', 'from-flags', '--num-nodes', '2', '--gpus', 'A100:8', '--cpus', '8+', '--memory', '64', '--instance-type', 'p4d.24xlarge', '--use-spot',
    ]);

    expect(code).toBe(0);
    expect(spec.name).toBe('from-flags');
    expect(spec.numNodes).toBe(2);
    expect(spec.resources).toMatchObject({
      accelerators: [{ name: 'A100', count: 8 }],
      cpus: { value: 8, orMore: true },
      memoryGb: { value: 64, orMore: false },
      instanceType: 'p4d.24xlarge',
      useSpot: true,
    });
    // An any_of entry that sets the key takes the override too; one that does not keeps inheriting it.
    expect(spec.resources.alternatives?.options.map((entry) => entry.cpus)).toEqual([{ value: 8, orMore: true }, undefined]);
  });

  it('--no-use-spot is on-demand, whatever the file says', async () => {
    expect((await validated(['--no-use-spot'], TASK.replace('use_spot: false', 'use_spot: true'))).spec.resources.useSpot).toBe(false);
  });

  it('write into a file with no resources at all', async () => {
    expect((await validated(['--cpus', '4'], 'run: x\n')).spec.resources.cpus).toEqual({ value: 4, orMore: false });
  });

  it.each([
    ['a bad value, named by its option', ['--cpus', 'many'], '--cpus (resources.cpus)'],
    ['a node count that is not a whole number', ['--num-nodes', '0'], '--num-nodes'],
  ])('refuse %s (exit 2)', async (_name, args, path) => {
    const dir = await tempDir('overrides');
    const file = await writeTask(dir, 'task.yaml', TASK);

    const result = await runInProcess(['validate', file, ...args]);

    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`error: ${path}: expected`);
  });

  it('refuse a pipeline, which of its tasks they mean being unsaid (exit 2)', async () => {
    const dir = await tempDir('overrides');
    const file = await writeTask(dir, 'task.yaml', 'name: p\n---\nrun: a\n---\nrun: b\n');

    const result = await runInProcess(['validate', file, '--gpus', 'T4']);

    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--gpus: expected a file of one task, got a pipeline of 2');
  });
});

describe('--env on run', () => {
  it('takes KEY=VALUE as given and KEY alone from the caller\'s shell', () => {
    expect(parseEnvs(['A=1', 'B', 'C='], { B: 'from shell' })).toEqual({ A: '1', B: 'from shell', C: '' });
  });

  it('refuses a KEY the shell does not set, saying how to give it', () => {
    expect(() => parseEnvs(['MISSING'], {})).toThrow(InvalidInputError);
    expect(() => parseEnvs(['MISSING'], {})).toThrow('expected "MISSING" to be set in this environment (--env KEY takes your shell\'s value): export it, or give --env MISSING=VALUE');
  });
});

describe('run with launch overrides', () => {
  it(
    'stores the overridden task with the job, and passes --env KEY from the shell, with -y taken',
    async () => {
      const dir = await tempDir('overrides-run');
      const file = await writeTask(dir, 'task.yaml', TASK);

      const run = await runCli(['run', file, '--json', '-y', '--name', 'renamed', '--num-nodes', '2', '--env', 'FROM_SHELL'], {
        cwd: dir,
        env: { FROM_SHELL: 'hello' },
      });

      expect(run.code, run.stderr).toBe(0);
      const view = parseStdout<JobView>(run);
      expect(view.name).toBe('renamed');
      expect(view.attempts[0]?.exitCodes).toEqual([0, 0]);
      const logs = await runCli(['logs', view.jobId], { cwd: dir });
      expect(logs.stdout).toContain('job sees hello');
    },
    SLOW,
  );
});

describe('relaunch --version', () => {
  it('prints the package version', async () => {
    const { version } = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };

    const result = await runInProcess(['--version']);

    expect(result.code).toBe(0);
    expect(result.stdout.trim()).toBe(version);
  });
});
