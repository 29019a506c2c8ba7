// Mounts on EC2: which steps a node's agent is given for each kind of mount, and which
// buckets a deployment lets tasks use.

import { describe, expect, it } from 'vitest';
import { bucketAllowed, jobDataPolicy, s3AgentMounts, s3MountPlaces } from '../../../../lib/adapters/s3-data.ts';
import { agentMounts } from '../../../../lib/agent/mounts.ts';
import { mountLines } from '../../../../lib/agent/mounts.ts';
import { renderAgentScript } from '../../../../lib/agent/script.ts';
import { InvalidInputError, PrecheckError } from '../../../../lib/errors.ts';
import { parseTaskFile } from '../../../../lib/task-file/parse.ts';
import { agentSetting } from '../../../support/fixtures/agent-settings.ts';

const DATA = { bucket: 'relaunch-data-7', allowedBuckets: ['team-data', 'ckpt-*'] };
const SHA = 'e'.repeat(64);
const spec = (yaml: string) => parseTaskFile(yaml).spec;

describe('s3AgentMounts', () => {
  it('fetches uploads from the stack bucket, copies or mounts S3, and keeps a nameless mount per job and path', () => {
    const task = spec(
      [
        `workdir: upload:dir:sha256:${SHA}`,
        'file_mounts:',
        `  ~/cfg.json: upload:file:sha256:${SHA}`,
        '  /imagenet: {source: s3://team-data/imagenet/}',
        '  /raw: s3://team-data/raw',
        '  /checkpoint: {name: ckpt-bert, mode: MOUNT}',
        '  /scratch: {mode: MOUNT_CACHED}',
        'run: x',
      ].join('\n'),
    );

    const { mounts, sourcesUrl } = s3AgentMounts(task, 'j-42', DATA);

    expect(sourcesUrl).toBe('s3://relaunch-data-7/sources');
    expect(mounts).toEqual([
      { kind: 'upload', entry: 'dir', sha256: SHA, dest: '~/sky_workdir' },
      { kind: 'upload', entry: 'file', sha256: SHA, dest: '~/cfg.json' },
      { kind: 's3-mount', bucket: 'team-data', prefix: 'imagenet', cached: false, dest: '/imagenet' },
      { kind: 's3-copy', bucket: 'team-data', key: 'raw', dest: '/raw' },
      { kind: 's3-mount', bucket: 'ckpt-bert', prefix: '', cached: false, dest: '/checkpoint' },
      { kind: 's3-mount', bucket: 'relaunch-data-7', prefix: 'mounts/j-42/root/scratch', cached: true, dest: '/scratch' },
    ]);
    // What the agent reads: one tab-separated line per step, in user data.
    const script = renderAgentScript({ apiUrl: 'https://api', jobId: 'j-42', attempt: 1, secretSource: { path: '/p', region: 'us-east-1', endpoint: 'https://ssm' }, spec: task, heartbeatSeconds: 30, mounts, sourcesUrl });
    expect(agentSetting(script, 'MOUNTS')).toBe(mountLines(mounts ?? []));
    expect(agentSetting(script, 'SOURCES_URL')).toBe('s3://relaunch-data-7/sources');
    expect(mountLines(mounts ?? []).split('\n')[4]).toBe('s3-mount\tckpt-bert\t-\t-\t/checkpoint');
  });

  it('refuses a local path no upload replaced: the launch fails its prechecks', () => {
    expect(() => s3AgentMounts(spec('workdir: ./src\nrun: x\n'), 'j-1', DATA)).toThrow(PrecheckError);
    expect(() => s3AgentMounts(spec('file_mounts:\n  /a: ./a\nrun: x\n'), 'j-1', DATA)).toThrow(/was never uploaded/);
  });
});

describe('jobDataPolicy', () => {
  const policyOf = (yaml: string, data: Parameters<typeof jobDataPolicy>[2] = DATA) => jobDataPolicy(agentMounts(spec(yaml), 'j-42', s3MountPlaces(data)), 'j-42', data);

  it("reads the job's uploads and copies, reads and writes what it mounts, and lists only under those: never another job's folder", () => {
    const policy = policyOf(
      [
        `workdir: upload:dir:sha256:${SHA}`,
        'file_mounts:',
        '  /raw: s3://team-data/raw',
        '  /imagenet: {source: s3://team-data/imagenet/}',
        '  /checkpoint: {name: ckpt-bert, mode: MOUNT}',
        '  /scratch: {mode: MOUNT_CACHED}',
        '  /labels: {source: s3://team-data/labels/train.csv, mode: COPY}',
        'run: x',
      ].join('\n'),
    );
    expect(policy).toEqual({
      Version: '2012-10-17',
      Statement: [
        {
          Effect: 'Allow',
          Action: 's3:GetObject',
          Resource: [
            `arn:aws:s3:::relaunch-data-7/sources/${SHA}.tar.gz`,
            'arn:aws:s3:::team-data/raw',
            'arn:aws:s3:::team-data/raw/*',
            'arn:aws:s3:::team-data/labels/train.csv',
            'arn:aws:s3:::team-data/labels/train.csv/*',
          ],
        },
        {
          Effect: 'Allow',
          Action: ['s3:GetObject', 's3:PutObject', 's3:DeleteObject', 's3:AbortMultipartUpload'],
          Resource: ['arn:aws:s3:::team-data/imagenet/*', 'arn:aws:s3:::ckpt-bert/*', 'arn:aws:s3:::relaunch-data-7/mounts/j-42/root/scratch/*'],
        },
        { Effect: 'Allow', Action: 's3:ListBucket', Resource: 'arn:aws:s3:::team-data', Condition: { StringLike: { 's3:prefix': ['raw/*', 'imagenet/*', 'labels/train.csv/*'] } } },
        { Effect: 'Allow', Action: 's3:ListBucket', Resource: 'arn:aws:s3:::ckpt-bert' },
        { Effect: 'Allow', Action: 's3:ListBucket', Resource: 'arn:aws:s3:::relaunch-data-7', Condition: { StringLike: { 's3:prefix': ['mounts/j-42/root/scratch/*'] } } },
      ],
    });
  });

  it("takes IAM's wildcards in a key literally, and names the stack's partition", () => {
    const policy = policyOf('file_mounts:\n  /a: {source: s3://team-data/run*?$x/, mode: MOUNT}\n  /b: {source: s3://team-data/q?, mode: COPY}\nrun: x\n', { ...DATA, partition: 'aws-cn' });
    expect(policy?.Statement).toEqual([
      { Effect: 'Allow', Action: 's3:GetObject', Resource: ['arn:aws-cn:s3:::team-data/q${?}', 'arn:aws-cn:s3:::team-data/q${?}/*'] },
      { Effect: 'Allow', Action: ['s3:GetObject', 's3:PutObject', 's3:DeleteObject', 's3:AbortMultipartUpload'], Resource: ['arn:aws-cn:s3:::team-data/run${*}${?}${$}x/*'] },
      { Effect: 'Allow', Action: 's3:ListBucket', Resource: 'arn:aws-cn:s3:::team-data', Condition: { StringLike: { 's3:prefix': ['run${*}${?}${$}x/*', 'q${?}/*'] } } },
    ]);
  });

  it('widens a run of characters a session policy cannot hold (past U+00FF) to *, never past the job\'s own folder', () => {
    const policy = policyOf('file_mounts:\n  /数据/x: {mode: MOUNT}\n  /b: {source: s3://team-data/ckpt/😀/run, mode: MOUNT}\nrun: x\n');
    expect(policy?.Statement[0]).toEqual({
      Effect: 'Allow',
      Action: ['s3:GetObject', 's3:PutObject', 's3:DeleteObject', 's3:AbortMultipartUpload'],
      Resource: ['arn:aws:s3:::relaunch-data-7/mounts/j-42/root/*/x/*', 'arn:aws:s3:::team-data/ckpt/*/run/*'],
    });
    expect(JSON.stringify(policy)).toMatch(/^[\t\n\r\u0020-\u00ff]*$/);
  });

  it("never copies a key's siblings: s3://b/run-1 is neither run-10 nor run-1-old", () => {
    const policy = policyOf('file_mounts:\n  /a: s3://team-data/run-1\n  /b: s3://team-data/logs/\nrun: x\n');
    expect(policy?.Statement).toEqual([
      { Effect: 'Allow', Action: 's3:GetObject', Resource: ['arn:aws:s3:::team-data/run-1', 'arn:aws:s3:::team-data/run-1/*', 'arn:aws:s3:::team-data/logs/*'] },
      { Effect: 'Allow', Action: 's3:ListBucket', Resource: 'arn:aws:s3:::team-data', Condition: { StringLike: { 's3:prefix': ['run-1/*', 'logs/*'] } } },
    ]);
  });

  it("refuses any step in the stack's bucket outside the job's own folder, even one submit let through", () => {
    const foreign = [{ kind: 's3-mount' as const, bucket: 'relaunch-data-7', prefix: 'mounts', cached: false, dest: '/all' }];
    const sources = [{ kind: 's3-copy' as const, bucket: 'relaunch-data-7', key: 'mounts/j-41/root/x/', dest: '/theirs' }];
    expect(() => jobDataPolicy(foreign, 'j-42', DATA)).toThrow(/expected a bucket other than the stack's own/);
    expect(() => jobDataPolicy(sources, 'j-42', DATA)).toThrow(InvalidInputError);
    expect(jobDataPolicy([{ ...sources[0], key: 'mounts/j-42/root/x/' } as (typeof sources)[0]], 'j-42', DATA)).not.toBeNull();
  });

  it('lists a whole bucket once one step takes all of it, and is null for a task that touches no S3', () => {
    const policy = policyOf('file_mounts:\n  /a: s3://team-data/x\n  /b: {source: s3://team-data, mode: COPY}\nrun: x\n');
    expect(policy?.Statement.filter((statement) => statement.Action === 's3:ListBucket')).toEqual([{ Effect: 'Allow', Action: 's3:ListBucket', Resource: 'arn:aws:s3:::team-data' }]);
    expect(policyOf('run: x\n')).toBeNull();
    expect(s3AgentMounts(spec('run: x\n'), 'j-1', DATA).dataCredentials).toBe(false);
    expect(s3AgentMounts(spec(`workdir: upload:dir:sha256:${SHA}\nrun: x\n`), 'j-1', DATA).dataCredentials).toBe(true);
  });
});

describe('bucketAllowed', () => {
  it.each([
    // The stack's own holds every job's data: never a task's to name, whatever a pattern says.
    ['relaunch-data-7', false],
    ['team-data', true],
    ['team-data-2', false],
    ['ckpt-', true],
    ['ckpt-bert', true],
    ['ckp', false],
    ['other', false],
  ])('%s: %s', (bucket, allowed) => {
    expect(bucketAllowed(bucket, DATA)).toBe(allowed);
  });

  it("refuses the stack's own bucket even where an allowed pattern covers it", () => {
    expect(bucketAllowed('relaunch-data-7', { ...DATA, allowedBuckets: ['relaunch-*'] })).toBe(false);
  });
});
