// What EC2 cannot run, found at submit: a workdir, and an agent too large for user data.

import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ec2TaskProblems, USER_DATA_MAX_BYTES } from '../../../lib/adapters/ec2-user-data.ts';
import { parseTaskFile } from '../../../lib/spec/parse.ts';

const spec = (yaml: string) => parseTaskFile(yaml).spec;

describe('ec2TaskProblems', () => {
  it('finds nothing in an ordinary task', () => {
    expect(ec2TaskProblems(spec('setup: pip install -r requirements.txt\nrun: python train.py\n'))).toEqual([]);
  });

  it('refuses a workdir, saying it is not uploaded and what to do instead', () => {
    expect(ec2TaskProblems(spec('workdir: .\nrun: python train.py\n'))).toEqual([
      { path: 'workdir', message: expect.stringMatching(/^expected no workdir on AWS: its contents are not uploaded/) },
    ]);
  });

  it('refuses a run script that would not fit in user data, naming both sizes', () => {
    // Random hex compresses to about half: 40,000 characters stay well over 16 KiB.
    const run = `echo ${randomBytes(20_000).toString('hex')}`;
    const [problem, ...rest] = ec2TaskProblems(spec(`run: ${run}\n`));
    expect(rest).toEqual([]);
    expect(problem?.path).toBe('run');
    expect(problem?.message).toMatch(new RegExp(`^setup, run and envs are too large for EC2 user data: \\d+ bytes compressed, at most ${USER_DATA_MAX_BYTES}$`));
  });
});
