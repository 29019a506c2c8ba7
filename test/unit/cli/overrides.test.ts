// What the CLI sends an API for `--env` and `--secret`: the task file with the values
// written into every task (a pipeline's header is not a task), comments and all kept.

import { describe, expect, it } from 'vitest';
import { withOverrides } from '../../../cli/jobs-client.ts';
import { parseJobFile } from '../../../lib/task-file/parse.ts';

describe('withOverrides', () => {
  it("writes the values into a one-task file's envs and secrets", () => {
    const body = withOverrides('# keep me\nrun: x\nsecrets:\n  T: null\n', { envs: { MODE: 'm' }, secrets: { T: 't' } });

    expect(body).toContain('# keep me');
    expect(parseJobFile(body).tasks[0]?.secrets).toEqual({ T: 't' });
    expect(parseJobFile(body).tasks[0]?.spec.envs).toEqual({ MODE: 'm' });
  });

  it("writes them into every task of a pipeline, never into its header", () => {
    const body = withOverrides('name: p\n---\nrun: a\nsecrets:\n  T: null\n---\nrun: b\n', { envs: { MODE: 'm' }, secrets: { T: 't' } });

    const job = parseJobFile(body);
    expect(job.pipeline).toEqual({ name: 'p' });
    expect(job.tasks.map((task) => [task.spec.envs, task.secrets])).toEqual([
      [{ MODE: 'm' }, { T: 't' }],
      [{ MODE: 'm' }, { T: 't' }],
    ]);
  });

  it('keeps values the text given (yes, on, 0x10), and fills sections the file left empty', () => {
    const body = withOverrides('run: x\nenvs:\nsecrets: ~\n---\n', { envs: { A: 'yes', B: '0x10' }, secrets: { S: 'on' } });

    const [task] = parseJobFile(body).tasks;
    expect(task?.spec.envs).toEqual({ A: 'yes', B: '0x10' });
    expect(task?.secrets).toEqual({ S: 'on' });
  });

  it('leaves a file it cannot read as it is, for the API to refuse with its lines', () => {
    expect(withOverrides('run: [unclosed\n', { envs: { A: '1' }, secrets: {} })).toBe('run: [unclosed\n');
    expect(withOverrides('run: x\n', { envs: {}, secrets: {} })).toBe('run: x\n');
  });
});
