// `relaunch run` against a deployed API: local sources go to the stack's bucket (S3
// mocked, asserting what was sent), only when not there yet; a MOUNT's bucket is created
// when missing; the API is given the task with each source named by its upload.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  CreateBucketCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  PutBucketTaggingCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { runTask } from '../../../cli/commands/run.ts';
import { ensureBuckets, S3SourceStore } from '../../../cli/s3-sources.ts';
import { InvalidInputError } from '../../../lib/errors.ts';
import { parseJobFile } from '../../../lib/task-file/parse.ts';
import { bufferIo } from '../../support/cli.ts';
import { removeTempDirs, tempDir } from '../../support/cli.ts';

const s3 = mockClient(S3Client);
const LOCATION = { bucket: 'relaunch-data-9', prefix: 'sources', region: 'eu-west-1', allowedBuckets: ['team-*'] };
const IN_US_EAST_1 = { ...LOCATION, region: 'us-east-1' };

/** An S3 error as the SDK throws it for a HEAD: a name and a status, no body. */
function s3Error(name: string, status: number): S3ServiceException {
  return new S3ServiceException({ name, $fault: 'client', $metadata: { httpStatusCode: status }, message: name });
}

beforeEach(() => {
  s3.reset();
});

afterAll(async () => {
  await removeTempDirs();
});

describe('S3SourceStore', () => {
  it('sends an archive under sources/<sha256>.tar.gz with its SHA-256 for S3 to check, and knows one it has', async () => {
    const dir = await tempDir('s3-store');
    const archive = join(dir, 'a.tar.gz');
    await writeFile(archive, 'archive bytes');
    const sha = 'ab'.repeat(32);
    s3.on(HeadObjectCommand).rejectsOnce(s3Error('NotFound', 404)).resolvesOnce({ LastModified: new Date() }).resolves({ LastModified: new Date(Date.now() - 31 * 24 * 3600 * 1000) });
    s3.on(PutObjectCommand).resolves({});
    const store = new S3SourceStore(new S3Client({ region: 'eu-west-1' }), LOCATION);
    const seen: number[] = [];

    expect(await store.has(sha)).toBe(false);
    await store.put(sha, archive, 13, (sent) => seen.push(sent));
    expect(await store.has(sha)).toBe(true);
    // Older than 30 days: sent again, so the bucket's 90-day expiry never catches a new job.
    expect(await store.has(sha)).toBe(false);

    const put = s3.commandCalls(PutObjectCommand)[0]?.args[0].input;
    expect(put).toMatchObject({ Bucket: 'relaunch-data-9', Key: `sources/${sha}.tar.gz`, ContentLength: 13, ChecksumSHA256: Buffer.from(sha, 'hex').toString('base64') });
    expect(s3.commandCalls(HeadObjectCommand).map((call) => call.args[0].input)).toEqual(Array(3).fill({ Bucket: 'relaunch-data-9', Key: `sources/${sha}.tar.gz` }));
  });

  it('lets an error other than not-found through (no access is not "absent")', async () => {
    s3.on(HeadObjectCommand).rejects(s3Error('Forbidden', 403));
    await expect(new S3SourceStore(new S3Client({ region: 'eu-west-1' }), LOCATION).has('ab'.repeat(32))).rejects.toThrow('Forbidden');
  });
});

describe('ensureBuckets', () => {
  const job = parseJobFile('file_mounts:\n  /ckpt: {name: team-ckpt, mode: MOUNT}\n  /more: {name: team-ckpt}\n  /own: {mode: MOUNT}\nrun: x\n');

  it('creates a missing bucket once, in the region, tagged as relaunch\'s', async () => {
    s3.on(HeadBucketCommand).rejects(s3Error('NotFound', 404));
    const io = bufferIo();

    await ensureBuckets(job, new S3Client({ region: 'eu-west-1' }), LOCATION, io);

    expect(s3.commandCalls(CreateBucketCommand).map((call) => call.args[0].input)).toEqual([{ Bucket: 'team-ckpt', CreateBucketConfiguration: { LocationConstraint: 'eu-west-1' } }]);
    expect(s3.commandCalls(PutBucketTaggingCommand)[0]?.args[0].input).toEqual({ Bucket: 'team-ckpt', Tagging: { TagSet: [{ Key: 'relaunch:created-by', Value: 'relaunch run' }] } });
    expect(io.stderr).toEqual(['created bucket team-ckpt in eu-west-1 for file_mounts["/ckpt"].name']);
  });

  it('creates nothing for a bucket that exists; in us-east-1 a new one has no location constraint', async () => {
    s3.on(HeadBucketCommand).resolves({});
    await ensureBuckets(job, new S3Client({ region: 'us-east-1' }), IN_US_EAST_1, bufferIo());
    expect(s3.commandCalls(CreateBucketCommand)).toEqual([]);

    s3.reset();
    s3.on(HeadBucketCommand).rejects(s3Error('NotFound', 404));
    await ensureBuckets(job, new S3Client({ region: 'us-east-1' }), IN_US_EAST_1, bufferIo());
    expect(s3.commandCalls(CreateBucketCommand)[0]?.args[0].input).toEqual({ Bucket: 'team-ckpt' });
  });

  it('refuses, before asking S3, a bucket the stack does not let instances use, and one in another region', async () => {
    const other = parseJobFile('file_mounts:\n  /ckpt: {name: elsewhere, mode: MOUNT}\nrun: x\n');
    await expect(ensureBuckets(other, new S3Client({ region: 'eu-west-1' }), LOCATION, bufferIo())).rejects.toMatchObject({
      issues: [{ path: 'file_mounts["/ckpt"].name', message: expect.stringContaining('add it to the context key relaunch:dataBuckets') }],
    });
    expect(s3.commandCalls(HeadBucketCommand)).toEqual([]);

    s3.on(HeadBucketCommand).rejects(s3Error('PermanentRedirect', 301));
    await expect(ensureBuckets(job, new S3Client({ region: 'eu-west-1' }), LOCATION, bufferIo())).rejects.toMatchObject({
      issues: [{ path: 'file_mounts["/ckpt"].name', message: 'expected a bucket in eu-west-1 (the stack\'s region, where its instances mount it), but team-ckpt is in another region' }],
    });
  });

  it("refuses a bucket that exists but is another account's, naming the field", async () => {
    s3.on(HeadBucketCommand).rejects(s3Error('Forbidden', 403));
    const refused = ensureBuckets(job, new S3Client({ region: 'eu-west-1' }), LOCATION, bufferIo());
    await expect(refused).rejects.toThrow(InvalidInputError);
    await expect(refused).rejects.toMatchObject({ issues: [{ path: 'file_mounts["/ckpt"].name', message: expect.stringContaining('refuses it (403)') }] });
    expect(s3.commandCalls(CreateBucketCommand)).toEqual([]);
  });

  it('counts as not created, so never deleted for this job, a bucket another run made between the HEAD and the create', async () => {
    s3.on(HeadBucketCommand).rejects(s3Error('NotFound', 404));
    s3.on(CreateBucketCommand).rejects(s3Error('BucketAlreadyOwnedByYou', 409));
    expect(await ensureBuckets(job, new S3Client({ region: 'eu-west-1' }), LOCATION, bufferIo())).toEqual([]);
    expect(s3.commandCalls(PutBucketTaggingCommand)).toEqual([]);
  });

  it('refuses, naming the field, a name another account took meanwhile', async () => {
    s3.on(HeadBucketCommand).rejects(s3Error('NotFound', 404));
    s3.on(CreateBucketCommand).rejects(s3Error('BucketAlreadyExists', 409));
    await expect(ensureBuckets(job, new S3Client({ region: 'eu-west-1' }), LOCATION, bufferIo())).rejects.toMatchObject({
      issues: [{ path: 'file_mounts["/ckpt"].name', message: expect.stringContaining('team-ckpt is taken (S3 bucket names are global)') }],
    });
  });
});

describe('relaunch run --api with local sources', () => {
  let server: Server;
  let api: string;
  let submitted: string[];
  let sourcesStatus: number;
  let acceptJobs: boolean;

  beforeEach(async () => {
    submitted = [];
    sourcesStatus = 200;
    acceptJobs = false;
    server = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      request.on('end', () => {
        if (request.method === 'GET' && request.url === '/sources') {
          response.writeHead(sourcesStatus, { 'content-type': 'application/json' }).end(JSON.stringify(sourcesStatus === 200 ? LOCATION : { error: 'none' }));
          return;
        }
        if (request.method === 'POST' && request.url === '/jobs') {
          submitted.push(body);
          if (acceptJobs) {
            response.writeHead(202, { 'content-type': 'application/json' }).end(JSON.stringify({ jobId: 'j-00mm8abcd-s3tag1', status: 'PENDING', warnings: [] }));
            return;
          }
          // Refused, so run stops here: what was sent is what the test reads.
          response.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'stop', issues: [{ path: 'run', message: 'stopped by the test' }] }));
          return;
        }
        response.writeHead(404).end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    api = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterEach(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it('uploads each source the bucket lacks, creates the MOUNT bucket, and submits the task naming the uploads', async () => {
    const dir = await tempDir('run-api');
    await mkdir(join(dir, 'code'));
    await writeFile(join(dir, 'code', 'train.py'), 'print(1)\n');
    await writeFile(join(dir, 'cfg.json'), '{}\n');
    const file = join(dir, 'task.yaml');
    await writeFile(file, 'workdir: ./code\nfile_mounts:\n  ~/cfg.json: ./cfg.json\n  /ckpt:\n    name: team-ckpt\n    mode: MOUNT\nrun: python train.py\n');
    s3.on(HeadObjectCommand).rejects(s3Error('NotFound', 404));
    s3.on(PutObjectCommand).resolves({});
    s3.on(HeadBucketCommand).rejects(s3Error('NotFound', 404));
    const io = bufferIo();
    // Relative sources are read from where the command runs (SkyPilot's rule): the task's folder here.
    const cwd = vi.spyOn(process, 'cwd').mockReturnValue(dir);

    try {
      expect(await runTask(file, { api, dataDir: join(dir, 'state') }, io)).toBe(2);
    } finally {
      cwd.mockRestore();
    }

    const keys = s3.commandCalls(PutObjectCommand).map((call) => call.args[0].input.Key);
    expect(keys).toHaveLength(2);
    const [sent] = submitted;
    for (const key of keys) expect(sent).toContain(`upload:${key === keys[0] ? 'dir' : 'file'}:sha256:${/sources\/([0-9a-f]{64})\.tar\.gz/.exec(key ?? '')?.[1]}`);
    expect(sent).not.toContain('./code');
    expect(sent).toContain('name: team-ckpt');
    expect(s3.commandCalls(CreateBucketCommand)).toHaveLength(1);
    expect(io.stderr.filter((line) => line.includes('stored in s3://relaunch-data-9/sources'))).toHaveLength(2);
  });

  it('tags the bucket it created with the job the submit named, so its end can delete it (persistent: false)', async () => {
    acceptJobs = true;
    const dir = await tempDir('run-api-tag');
    const file = join(dir, 'task.yaml');
    await writeFile(file, 'file_mounts:\n  /ckpt:\n    name: team-scratch\n    mode: MOUNT\n    persistent: false\n  /kept: {name: team-kept, mode: MOUNT}\nrun: x\n');
    s3.on(HeadBucketCommand, { Bucket: 'team-scratch' }).rejects(s3Error('NotFound', 404));
    s3.on(HeadBucketCommand, { Bucket: 'team-kept' }).resolves({});
    const io = bufferIo();

    expect(await runTask(file, { api, dataDir: join(dir, 'state'), detach: true }, io)).toBe(0);

    expect(io.stdout).toEqual(['j-00mm8abcd-s3tag1']);
    // Created untagged for a job first, then tagged once the submit named it; the bucket that was there is left alone.
    expect(s3.commandCalls(PutBucketTaggingCommand).map((call) => call.args[0].input)).toEqual([
      { Bucket: 'team-scratch', Tagging: { TagSet: [{ Key: 'relaunch:created-by', Value: 'relaunch run' }] } },
      { Bucket: 'team-scratch', Tagging: { TagSet: [{ Key: 'relaunch:created-by', Value: 'relaunch run' }, { Key: 'relaunch:job', Value: 'j-00mm8abcd-s3tag1' }] } },
    ]);
  });

  it('warns, and still answers with the job, when the tagging fails: the job runs, the bucket is kept after it', async () => {
    acceptJobs = true;
    const dir = await tempDir('run-api-tag-fails');
    const file = join(dir, 'task.yaml');
    await writeFile(file, 'file_mounts:\n  /ckpt: {name: team-scratch, mode: MOUNT, persistent: false}\nrun: x\n');
    s3.on(HeadBucketCommand).rejects(s3Error('NotFound', 404));
    s3.on(PutBucketTaggingCommand).resolvesOnce({}).rejects(s3Error('AccessDenied', 403));
    const io = bufferIo();

    expect(await runTask(file, { api, dataDir: join(dir, 'state'), detach: true }, io)).toBe(0);

    expect(io.stdout).toEqual(['j-00mm8abcd-s3tag1']);
    expect(io.stderr.join('\n')).toContain('warning: could not mark the buckets run created as made for j-00mm8abcd-s3tag1, so its end keeps them');
  });

  it('says to use --data-dir when the API keeps no uploads (a local server), and submits nothing', async () => {
    sourcesStatus = 404;
    const dir = await tempDir('run-api-local');
    await mkdir(join(dir, 'code'));
    const file = join(dir, 'task.yaml');
    await writeFile(file, 'workdir: ./code\nrun: x\n');
    const io = bufferIo();

    expect(await runTask(file, { api, dataDir: join(dir, 'state') }, io)).toBe(2);

    expect(io.stderr.join('\n')).toContain('--api: expected an API that takes uploads');
    expect(submitted).toEqual([]);
  });
});
