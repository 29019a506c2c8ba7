// What EC2 cannot run, found at submit: a workdir, and an agent too large for user data.

import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ec2TaskProblems, USER_DATA_MAX_BYTES } from '../../../../lib/adapters/ec2-user-data.ts';
import { parseTaskFile } from '../../../../lib/task-file/parse.ts';

const spec = (yaml: string) => parseTaskFile(yaml).spec;

/** The stack's bucket and the buckets its deployer allowed. */
const DATA = { bucket: 'relaunch-data-123', allowedBuckets: ['team-data', 'ckpt-*'] };

describe('ec2TaskProblems', () => {
  it('finds nothing in an ordinary task', () => {
    expect(ec2TaskProblems(spec('setup: pip install -r requirements.txt\nrun: python train.py\n'))).toEqual([]);
  });

  it('refuses a workdir that relaunch run did not upload, saying what to do instead', () => {
    expect(ec2TaskProblems(spec('workdir: .\nrun: python train.py\n'), DATA)).toEqual([
      { path: 'workdir', message: expect.stringMatching(/^expected the local folder \. uploaded into relaunch's store first: submit the file with relaunch run/) },
    ]);
  });

  it('takes uploads and the buckets the stack allows; refuses others, naming the context key', () => {
    const sha = 'c'.repeat(64);
    const task = `workdir: upload:dir:sha256:${sha}\nfile_mounts:\n  /a: s3://team-data/x\n  /b: {name: ckpt-7, mode: MOUNT}\n  /c: {mode: MOUNT}\n  /d: s3://other/y\nrun: x\n`;
    expect(ec2TaskProblems(spec(task), DATA)).toEqual([
      { path: 'file_mounts["/d"]', message: 'expected a bucket job instances may use, got other: add it to the context key relaunch:dataBuckets and redeploy (cdk deploy -c relaunch:dataBuckets=other)' },
    ]);
  });

  it("refuses S3 data whose nodes' access would not fit in one IAM session policy, naming both sizes", () => {
    // Each upload is one resource of about 100 characters: 16 of them fit, 25 do not.
    const uploads = (count: number) => Array.from({ length: count }, (_, n) => `  /in/${n}: upload:file:sha256:${n.toString(16).padStart(64, '0')}`).join('\n');
    expect(ec2TaskProblems(spec(`file_mounts:\n${uploads(16)}\nrun: x\n`), DATA)).toEqual([]);
    expect(ec2TaskProblems(spec(`file_mounts:\n${uploads(25)}\nrun: x\n`), DATA)).toEqual([
      { path: 'file_mounts', message: expect.stringMatching(/^expected S3 data whose access fits one IAM session policy \(at most 2048 characters\), got \d{4}: put local files in one folder/) },
    ]);
  });

  it("refuses a task naming the stack's own bucket, which holds every job's uploads and mounts", () => {
    const task = 'file_mounts:\n  /all: {source: s3://relaunch-data-123/mounts, mode: MOUNT}\n  /up: s3://relaunch-data-123/sources/\n  /b: {name: relaunch-data-123, mode: MOUNT}\nrun: x\n';
    expect(ec2TaskProblems(spec(task), DATA).map(({ path, message }) => [path, message.slice(0, 46)])).toEqual([
      ['file_mounts["/all"]', "expected a bucket other than the stack's own ("],
      ['file_mounts["/up"]', "expected a bucket other than the stack's own ("],
      ['file_mounts["/b"].name', "expected a bucket other than the stack's own ("],
    ]);
  });

  it('refuses mounts on a stack without a data bucket, saying to redeploy', () => {
    expect(ec2TaskProblems(spec('file_mounts:\n  /c: {mode: MOUNT}\nrun: x\n'))).toEqual([{ path: 'file_mounts', message: expect.stringContaining('redeploy relaunch') }]);
  });

  it('refuses a run script that would not fit in user data, naming both sizes and how much ordinary shell fits', () => {
    // Random hex compresses to about half: 40,000 characters stay well over 16 KiB.
    const run = `echo ${randomBytes(20_000).toString('hex')}`;
    const [problem, ...rest] = ec2TaskProblems(spec(`run: ${run}\n`));
    expect(rest).toEqual([]);
    expect(problem?.path).toBe('run');
    expect(problem?.message).toMatch(
      new RegExp(`^setup, run and envs are too large for EC2 user data: \\d+ bytes compressed, at most ${USER_DATA_MAX_BYTES} \\(about 13 KB of ordinary shell fits beside relaunch's agent\\)$`),
    );
  });
});
