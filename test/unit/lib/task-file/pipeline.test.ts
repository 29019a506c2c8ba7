// parseJobFile: one task, or a SkyPilot pipeline (several documents, an optional header).

import { describe, expect, it } from 'vitest';
import { MAX_PIPELINE_TASKS, parseJobFile, parseTaskFile } from '../../../../lib/task-file/parse.ts';
import { rejectedIssues } from '../../../support/task-file-rejection.ts';

describe('parseJobFile', () => {
  it('reads one document as one task, no pipeline', () => {
    const job = parseJobFile('name: t\nrun: x\n');
    expect(job.pipeline).toBeNull();
    expect(job.tasks.map((task) => task.spec.name)).toEqual(['t']);
  });

  it('reads a header with only a name, then the tasks in order', () => {
    const job = parseJobFile('name: p\n---\nname: a\nrun: x\n---\nname: b\nrun: y\nnum_nodes: 2\n');
    expect(job.pipeline).toEqual({ name: 'p' });
    expect(job.tasks.map((task) => [task.spec.name, task.spec.numNodes])).toEqual([
      ['a', 1],
      ['b', 2],
    ]);
  });

  it('reads documents without a header as tasks, and takes execution: serial', () => {
    expect(parseJobFile('run: x\n---\nrun: y\n').pipeline).toEqual({ name: null });
    expect(parseJobFile('name: p\nexecution: serial\n---\nrun: x\n---\nrun: y\n').tasks).toHaveLength(2);
  });

  it("puts every task's problems under task N (from 1), with the file's lines, all at once", () => {
    expect(rejectedIssues(() => parseJobFile('name: p\n---\nrun: x\nresources:\n  cpus: lots\n---\nrun: y\nnum_nodes: 0\n'))).toEqual([
      expect.stringMatching(/^task 1: resources\.cpus: .*\(line 5\)$/),
      expect.stringMatching(/^task 2: num_nodes: .*\(line 8\)$/),
    ]);
  });

  it("puts each task's warnings under task N (from 1)", () => {
    const job = parseJobFile('run: x\n---\nresources:\n  job_recovery:\n    recover_on_exit_codes: [137]\nrun: y\n');
    expect(job.warnings.map((warning) => warning.path)).toEqual(['task 2: resources.job_recovery.recover_on_exit_codes']);
  });

  it('refuses a job group, a bad header name and too many tasks, naming each', () => {
    expect(rejectedIssues(() => parseJobFile('name: g\nexecution: parallel\nprimary_tasks: [a]\n---\nrun: x\n---\nrun: y\n'))).toEqual([
      expect.stringMatching(/^execution: expected serial or nothing .* job groups \(execution: parallel\) are not supported \(line 2\)$/),
      expect.stringMatching(/^primary_tasks: not supported by relaunch: .*\(line 3\)$/),
    ]);
    expect(rejectedIssues(() => parseJobFile('name: "has spaces"\n---\nrun: x\n---\nrun: y\n'))[0]).toMatch(/^name: /);
    const many = Array.from({ length: MAX_PIPELINE_TASKS + 1 }, (_, i) => `run: echo ${i}\n`).join('---\n');
    expect(rejectedIssues(() => parseJobFile(many))).toEqual([`expected a pipeline of at most ${MAX_PIPELINE_TASKS} tasks, got ${MAX_PIPELINE_TASKS + 1}`]);
  });

  it('refuses a pipeline whose tasks are too large together, though each alone fits', () => {
    const big = `run: |\n  ${'x'.repeat(60_000)}\n`;
    const issues = rejectedIssues(() => parseJobFile([big, big, big].join('---\n')));
    expect(issues).toEqual([expect.stringMatching(/^expected the tasks' envs, setup and run to take at most 163840 bytes together/)]);
  });

  it('leaves parseTaskFile to one task: a pipeline is named as such', () => {
    expect(rejectedIssues(() => parseTaskFile('run: x\n---\nrun: y\n'))).toEqual([
      'this file holds 2 YAML documents, a SkyPilot pipeline; this command takes one task (line 3)',
    ]);
  });
});
