// workdir and file_mounts: every form SkyPilot writes, normalized; every hostile one refused by name.

import { describe, expect, it } from 'vitest';
import { formatIssue, InvalidTaskSpecError } from '../../../../lib/errors.ts';
import { parseTaskFile } from '../../../../lib/task-file/parse.ts';
import { bucketNameProblem, transientMounts, uploadedWorkdir, uploadReference } from '../../../../lib/task-file/mounts.ts';

function issuesOf(text: string): string[] {
  try {
    parseTaskFile(text);
  } catch (error) {
    if (error instanceof InvalidTaskSpecError) return error.issues.map(formatIssue);
    throw error;
  }
  throw new Error('expected the task to be refused');
}

const SHA = 'ab'.repeat(32);

describe('file_mounts', () => {
  it('reads every form: a local path, an s3 URI, a storage mapping, an upload reference', () => {
    const { spec } = parseTaskFile(
      [
        'file_mounts:',
        '  /data: s3://datasets/imagenet/train',
        '  /bucket: s3://whole-bucket',
        '  ~/cfg: ./cfg',
        '  notes.txt: /etc/hostname',
        '  /ckpt: {name: my-ckpts}',
        '  /cache: {source: s3://datasets/cache, mode: mount_cached}',
        '  /copied: {source: ./folder, mode: COPY}',
        '  /kept: {store: S3, persistent: true}',
        `  /up: upload:dir:sha256:${SHA}`,
        'run: x',
      ].join('\n'),
    );
    expect(spec.fileMounts).toEqual([
      { path: '/data', source: { kind: 's3', bucket: 'datasets', key: 'imagenet/train' }, mode: 'COPY' },
      { path: '/bucket', source: { kind: 's3', bucket: 'whole-bucket', key: '' }, mode: 'COPY' },
      { path: '~/cfg', source: { kind: 'local', path: './cfg' }, mode: 'COPY' },
      { path: 'notes.txt', source: { kind: 'local', path: '/etc/hostname' }, mode: 'COPY' },
      { path: '/ckpt', source: { kind: 'bucket', name: 'my-ckpts', persistent: true }, mode: 'MOUNT' },
      { path: '/cache', source: { kind: 's3', bucket: 'datasets', key: 'cache' }, mode: 'MOUNT_CACHED' },
      { path: '/copied', source: { kind: 'local', path: './folder' }, mode: 'COPY' },
      { path: '/kept', source: { kind: 'bucket', name: null, persistent: true }, mode: 'MOUNT' },
      { path: '/up', source: { kind: 'upload', entry: 'dir', sha256: SHA }, mode: 'COPY' },
    ]);
  });

  it('leaves fileMounts out when there are none, so a task without them stores as before', () => {
    expect(parseTaskFile('file_mounts: {}\nrun: x\n').spec).not.toHaveProperty('fileMounts');
    expect(parseTaskFile('run: x\n').spec).not.toHaveProperty('fileMounts');
  });

  it('takes keys that are names of Object.prototype as plain paths', () => {
    const { spec } = parseTaskFile('file_mounts:\n  __proto__: ./x\n  constructor: s3://abc\nrun: x\n');
    expect(spec.fileMounts?.map((mount) => mount.path)).toEqual(['__proto__', 'constructor']);
  });

  it.each([
    ['another cloud', '  /d: gs://bucket/x', 'file_mounts["/d"]: expected a local path or s3://bucket/prefix (relaunch runs on AWS), got "gs://bucket/x" (line 2)'],
    ['an https URL', '  /d: https://example.com/x', 'file_mounts["/d"]: expected a local path or s3://bucket/prefix (relaunch runs on AWS), got "https://example.com/x" (line 2)'],
    ['a bad bucket in an s3 URI', '  /d: s3://Bad_Bucket/x', 'file_mounts["/d"]: expected an S3 bucket name (3 to 63 lowercase letters, digits, dots and hyphens, a letter or digit at each end), got "Bad_Bucket" in "s3://Bad_Bucket/x" (line 2)'],
    ['an S3 key the agent would read as none', '  /d: s3://bucket/-', 'file_mounts["/d"]: expected an S3 prefix other than "-", got "s3://bucket/-" (line 2)'],
    ['an S3 key with a tab', '  /d: "s3://bucket/a\\tb"', 'file_mounts["/d"]: expected an S3 URI without tabs, line breaks or other control characters in "s3://bucket/a\\tb" (line 2)'],
    ['a system folder as destination', '  /etc: ./x', 'file_mounts["/etc"]: expected a path that is not a system folder or relaunch\'s own (/opt/relaunch), got "/etc" (line 2)'],
    ["relaunch's own folder as destination", '  /opt/relaunch/x: ./x', 'file_mounts["/opt/relaunch/x"]: expected a path that is not a system folder or relaunch\'s own (/opt/relaunch), got "/opt/relaunch/x" (line 2)'],
    ['a folder above it', '  /opt/: ./x', 'file_mounts["/opt/"]: expected a path that is not a system folder or relaunch\'s own (/opt/relaunch), got "/opt/" (line 2)'],
    ['the kernel\'s files', '  /proc/self/x: ./x', 'file_mounts["/proc/self/x"]: expected a path that is not a system folder or relaunch\'s own (/opt/relaunch), got "/proc/self/x" (line 2)'],
    ['a destination climbing out with ..', '  /a/../../etc: ./x', 'file_mounts["/a/../../etc"]: expected a path on the node without .. in it, got "/a/../../etc" (line 2)'],
    ['the root as destination', '  /: ./x', 'file_mounts["/"]: expected a path below / or the home folder, got "/" (line 2)'],
    ['the home folder as destination', '  ~/: ./x', 'file_mounts["~/"]: expected a path below / or the home folder, got "~/" (line 2)'],
    ['a number as source', '  /d: 5', 'file_mounts["/d"]: expected a local path, s3://bucket/prefix or a mapping {name, source, mode}, got 5 (line 2)'],
    ['an empty source', "  /d: ''", 'file_mounts["/d"]: expected a local file or folder, got "" (line 2)'],
    ['an unknown storage key', '  /d: {name: abc, sources: ./x}', 'file_mounts["/d"].sources: unknown key (a storage mapping takes name, source, store, mode, persistent) (line 2)'],
    ['another store', '  /d: {name: abc, store: gcs}', 'file_mounts["/d"].store: expected s3 (relaunch runs on AWS), got "gcs" (line 2)'],
    ['an unknown mode', '  /d: {name: abc, mode: RCLONE}', 'file_mounts["/d"].mode: expected one of COPY, MOUNT, MOUNT_CACHED, got "RCLONE" (line 2)'],
    ['persistent not a boolean', '  /d: {name: abc, persistent: "no"}', 'file_mounts["/d"].persistent: expected true or false, got "no" (line 2)'],
    ['a name that is not the source bucket', '  /d: {name: abc, source: s3://xyz}', 'file_mounts["/d"].name: expected xyz (the bucket source names) or no name, got "abc" (line 2)'],
    ['a local source mounted', '  /d: {source: ./x, mode: MOUNT}', 'file_mounts["/d"].mode: expected COPY for a local source (relaunch copies local files onto each node; to share what the job writes, give a bucket name without source), got MOUNT (line 2)'],
  ])('refuses %s, naming the mount', (_name, line, issue) => {
    expect(issuesOf(`file_mounts:\n${line}\nrun: x\n`)).toEqual([issue]);
  });

  it('takes a local source above the task file (..): it is the submitter\'s own file to read', () => {
    expect(parseTaskFile('workdir: ..\nfile_mounts:\n  /tmp/data: ../data\nrun: x\n').spec).toMatchObject({ workdir: '..', fileMounts: [{ path: '/tmp/data', source: { kind: 'local', path: '../data' } }] });
  });

  it('reads a malformed upload reference as a local path, which run then finds missing', () => {
    const { spec } = parseTaskFile('file_mounts:\n  /d: upload:dir:sha256:xyz\nrun: x\n');
    expect(spec.fileMounts?.[0]?.source).toEqual({ kind: 'local', path: 'upload:dir:sha256:xyz' });
  });

  it('refuses a list and more mounts than it takes', () => {
    expect(issuesOf('file_mounts: [/a, /b]\nrun: x\n')).toEqual([
      'file_mounts: expected a mapping of paths on the node to a local path, s3://bucket/prefix or {name, source, mode}, got a list (line 1)',
    ]);
    const many = Array.from({ length: 65 }, (_, i) => `  /m${i}: ./x`).join('\n');
    expect(issuesOf(`file_mounts:\n${many}\nrun: x\n`)).toEqual(['file_mounts: expected at most 64 file mounts, got 65 (line 1)']);
  });

  it('reports every bad mount at once', () => {
    expect(issuesOf('file_mounts:\n  /a: gs://x\n  /b: {mode: SYNC}\nrun: x\n')).toHaveLength(2);
  });

  it("refuses a path with a colon in a task that runs in a Docker container: docker run -v splits on it", () => {
    const task = (image: string) => `resources:\n  image_id: ${image}\nfile_mounts:\n  /data/a:b: s3://datasets/x\n  ~/ok: s3://datasets/y\nrun: x\n`;
    expect(issuesOf(task('docker:ubuntu:22.04'))).toEqual([
      'file_mounts["/data/a:b"]: expected a path without ":" in a task that runs in a Docker container (resources.image_id docker:ubuntu:22.04): docker run -v would split /data/a:b at it (line 4)',
    ]);
    // On the machine itself a colon is only a character of the path.
    expect(parseTaskFile(task('ami-0123456789abcdef0')).spec.fileMounts?.map((mount) => mount.path)).toEqual(['/data/a:b', '~/ok']);
  });

  it('warns of a placeholder bucket name, a nameless storage, a name beside a local source, and persistent: false', () => {
    const { warnings } = parseTaskFile(
      'file_mounts:\n  /a: {name: YOUR_BUCKET, mode: MOUNT}\n  /b: {mode: MOUNT}\n  /c: {name: abc, source: ./x, mode: COPY}\n  /d: {name: tmp-bkt, persistent: false}\nrun: x\n',
    );
    expect(warnings.map((warning) => warning.path)).toEqual(['file_mounts["/a"].name', 'file_mounts["/b"]', 'file_mounts["/c"].name', 'file_mounts["/d"].persistent']);
    expect(warnings[0]?.message).toMatch(/run refuses it/);
    expect(warnings[3]?.message).toBe('false deletes bucket tmp-bkt and its data when the job ends, if run creates it for this job; a bucket that already exists is kept');
  });
});

describe('transientMounts', () => {
  const specOf = (mounts: string) => parseTaskFile(`file_mounts:\n${mounts}run: x\n`).spec;

  it('names the buckets and nameless folders a job end deletes, across a pipeline', () => {
    const first = specOf('  /a: {name: tmp-a, persistent: false}\n  /b: {mode: MOUNT, persistent: false}\n  /c: {name: kept-c}\n');
    const second = specOf('  /d: {name: tmp-d, persistent: false}\n  /b: {mode: MOUNT, persistent: false}\n  /e: {mode: MOUNT}\n');
    expect(transientMounts([first, second])).toEqual({ buckets: ['tmp-a', 'tmp-d'], folders: ['/b'] });
  });

  it('keeps a bucket any of the job\'s mounts keeps, in any task', () => {
    const first = specOf('  /a: {name: shared, persistent: false}\n');
    const second = specOf('  /z: {name: shared}\n');
    expect(transientMounts([first, second])).toEqual({ buckets: [], folders: [] });
    expect(transientMounts([second, first])).toEqual({ buckets: [], folders: [] });
  });

  it('keeps a nameless folder a kept mount shares, lies inside, or holds, in any task', () => {
    const spec = specOf(
      '  /data: {mode: MOUNT, persistent: false}\n  /data/keep: {mode: MOUNT}\n' +
        '  ~/x: {mode: MOUNT, persistent: false}\n  x: {mode: MOUNT}\n' +
        '  /out/run: {mode: MOUNT, persistent: false}\n  /out: {mode: MOUNT}\n' +
        '  /tmp-a: {mode: MOUNT, persistent: false}\n  /tmp-ab: {mode: MOUNT}\n',
    );
    expect(transientMounts([spec])).toEqual({ buckets: [], folders: ['/tmp-a'] });
    const keeps = specOf('  /ckpt: {mode: MOUNT}\n');
    const drops = specOf('  /ckpt/: {mode: MOUNT, persistent: false}\n');
    expect(transientMounts([drops, keeps])).toEqual({ buckets: [], folders: [] });
  });

  it('never names an s3:// source or a local one, whatever they say', () => {
    expect(transientMounts([specOf('  /a: s3://team-data/x\n  /b: {source: s3://team-data, mode: COPY, persistent: false}\n')])).toEqual({ buckets: [], folders: [] });
  });
});

describe('workdir', () => {
  it('reads a local folder and a git repository', () => {
    expect(parseTaskFile('workdir: ./src\nrun: x\n').spec).toMatchObject({ workdir: './src' });
    const git = parseTaskFile('workdir:\n  url: git@github.com:org/repo.git\n  ref: 0123abc\nrun: x\n').spec;
    expect(git.workdir).toBeNull();
    expect(git.gitWorkdir).toEqual({ url: 'git@github.com:org/repo.git', ref: '0123abc' });
    expect(parseTaskFile('workdir: {url: https://example.com/r.git}\nrun: x\n').spec.gitWorkdir).toEqual({ url: 'https://example.com/r.git', ref: null });
    // SSH's user is no secret: ssh://git@host is how SSH URLs are written.
    expect(parseTaskFile('workdir: {url: "ssh://git@example.com/r.git"}\nrun: x\n').spec.gitWorkdir?.url).toBe('ssh://git@example.com/r.git');
  });

  it.each([
    ['a NUL', 'workdir: "a\\0b"', 'workdir: expected a local directory path without NUL characters (line 1)'],
    ['a list', 'workdir: [a]', 'workdir: expected a local directory path, or {url, ref} for a git repository, got a list (line 1)'],
    ['a git URL with spaces', 'workdir: {url: "https://x y"}', 'workdir.url: expected a git repository URL (https://, ssh:// or git@host:path), got "https://x y" (line 1)'],
    ['a ref git would read as an option', 'workdir: {url: "https://x/y", ref: "-c core.x=y"}', 'workdir.ref: expected a branch, tag or commit, got "-c core.x=y" (line 1)'],
    ['an unknown key', 'workdir: {url: "https://x/y", branch: main}', 'workdir.branch: unknown key (a git workdir takes url and ref) (line 1)'],
    ['a token in the URL', 'workdir: {url: "https://user:ghp_abc@github.com/org/r.git"}', 'workdir.url: expected a URL without a user or token in it: the task is stored and shown as written; give the token in secrets instead (line 1)'],
  ])('refuses %s', (_name, line, issue) => {
    expect(issuesOf(`${line}\nrun: x\n`)).toEqual([issue]);
  });
});

describe('helpers', () => {
  it('knows an uploaded workdir from a local one', () => {
    expect(uploadedWorkdir(uploadReference('dir', SHA))).toEqual({ sha256: SHA });
    expect(uploadedWorkdir(uploadReference('file', SHA))).toBeNull();
    expect(uploadedWorkdir('./w')).toBeNull();
  });

  it.each([
    ['abc', true],
    ['my.bucket-1', true],
    ['ab', false],
    ['a'.repeat(64), false],
    ['UPPER', false],
    ['-start', false],
    ['a..b', false],
    ['192.168.1.1', false],
  ])('bucket name %s valid: %s', (name, valid) => {
    expect(bucketNameProblem(name) === undefined).toBe(valid);
  });
});
