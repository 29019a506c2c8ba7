// `workdir` and `file_mounts`: what a task's nodes find on disk before setup, in every form
// SkyPilot writes them, normalized to one list of mounts.
//
// A mount's data comes from a local file or folder (uploaded at submit into relaunch's own
// store, then copied onto every node of every attempt), from an S3 bucket or prefix
// (copied, or mounted with mountpoint-s3), or from a bucket that holds what the job writes
// (MOUNT: a checkpoint written by one attempt is there for the next).

import { describe, expectedGot, type Problem } from '../located-yaml/messages.ts';
import { fromParser, isMapping, type Report } from '../located-yaml/fields.ts';
import { MAX_WORKDIR_LENGTH } from './limits.ts';
import { formatPath } from '../located-yaml/path.ts';

/** How a mount reaches the node: copied before setup, or a bucket mounted (with a local cache). */
export const MOUNT_MODES = ['COPY', 'MOUNT', 'MOUNT_CACHED'] as const;
export type MountMode = (typeof MOUNT_MODES)[number];

/** Where a mount's data comes from. */
export type MountSource =
  /** A file or folder on the machine that submits, as the file names it. */
  | { readonly kind: 'local'; readonly path: string }
  /** A local source after `run` put it in relaunch's store: one archive, named by its SHA-256. */
  | { readonly kind: 'upload'; readonly entry: 'file' | 'dir'; readonly sha256: string }
  /** `s3://bucket/key`: an object, a prefix, or (key '') the whole bucket. */
  | { readonly kind: 's3'; readonly bucket: string; readonly key: string }
  /**
   * A bucket for what the job writes: named (created when missing, deleted after the job
   * unless persistent), or null for a folder of relaunch's own bucket kept for this job.
   */
  | { readonly kind: 'bucket'; readonly name: string | null; readonly persistent: boolean };

/** One entry of `file_mounts` (or the workdir): a path on the node and what is there. */
export interface FileMount {
  /** As the file writes it: absolute (`/data`) or under the home folder (`~/data`, `data`). */
  readonly path: string;
  readonly source: MountSource;
  readonly mode: MountMode;
}

/** SkyPilot's git workdir: the repository every node clones, at `ref` (a branch, tag or commit). */
export interface GitWorkdir {
  readonly url: string;
  readonly ref: string | null;
}

/** Where SkyPilot puts the workdir on a node, and where setup and run start when there is one. */
export const WORKDIR_PATH = '~/sky_workdir';

/** The most entries `file_mounts` may have. */
export const MAX_FILE_MOUNTS = 64;

/** A local source once uploaded: `upload:dir:sha256:<hex>` or `upload:file:sha256:<hex>`. */
const UPLOAD_REFERENCE = /^upload:(file|dir):sha256:([0-9a-f]{64})$/;
/** S3's rule for bucket names (general purpose buckets): 3 to 63 of a-z 0-9 . -, alphanumeric at both ends. */
const S3_BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
/** URI schemes of other clouds' storage, named in the error. */
const OTHER_STORES = /^(gs|gcs|r2|cos|oci|az|azure|https?|nebius|cw):\/\//i;
const GIT_URL = /^(https:\/\/|http:\/\/|ssh:\/\/|git@)[^\s]+$/;

/** The reference a local source becomes once uploaded. */
export function uploadReference(entry: 'file' | 'dir', sha256: string): string {
  return `upload:${entry}:sha256:${sha256}`;
}

/** An upload's name in a store (a folder, or a prefix of the stack's bucket): `<sha256>.tar.gz`. */
export function archiveName(sha256: string): string {
  return `${sha256}.tar.gz`;
}

/** Why a name cannot be an S3 bucket's, or undefined when it can. */
export function bucketNameProblem(name: string): string | undefined {
  if (S3_BUCKET.test(name) && !name.includes('..') && !/^\d+\.\d+\.\d+\.\d+$/.test(name)) return undefined;
  return expectedGot('an S3 bucket name (3 to 63 lowercase letters, digits, dots and hyphens, a letter or digit at each end)', name);
}

/** Non-empty text without NUL or other control characters, of at most PATH_MAX: what both ends of a mount must be. */
function pathProblem(value: unknown, what: string): string | undefined {
  if (typeof value !== 'string' || value.trim() === '') return expectedGot(what, value);
  if (value.length > MAX_WORKDIR_LENGTH) return `expected ${what} of at most ${MAX_WORKDIR_LENGTH} characters, got ${value.length} characters`;
  if (value.includes('\0')) return `expected ${what} without NUL characters`;
  return controlProblem(value, what);
}

function controlProblem(value: string, what: string): string | undefined {
  if ([...value].some((char) => char < ' ' || char === '\u007f')) return `expected ${what} without tabs, line breaks or other control characters`;
  return undefined;
}

/**
 * Where no mount may go on a node: the system's own folders, and the agent's
 * (/opt/relaunch, where its scripts and logs are) or a folder above it.
 */
const RESERVED_PATHS = ['/bin', '/boot', '/dev', '/etc', '/home', '/lib', '/lib64', '/opt', '/proc', '/root', '/run', '/sbin', '/sys', '/tmp', '/usr', '/var'];
const RESERVED_TREES = ['/dev/', '/opt/relaunch', '/proc/', '/sys/'];

/** The destination of a mount: absolute, `~/...`, or relative to the home folder; not `/` nor the home folder itself. */
function destinationProblem(dest: string): string | undefined {
  const problem = pathProblem(dest, 'a path on the node');
  if (problem !== undefined) return problem;
  if (dest.split('/').includes('..')) return `expected a path on the node without .. in it, got ${describe(dest)}`;
  const trimmed = dest.replace(/\/+$/, '').replace(/\/+/g, '/').replace(/\/\.(?=\/|$)/g, '');
  if (trimmed === '' || trimmed === '~' || trimmed === '.' || trimmed === '~/.') {
    return `expected a path below / or the home folder, got ${describe(dest)}`;
  }
  if (RESERVED_PATHS.includes(trimmed) || RESERVED_TREES.some((tree) => `${trimmed}/`.startsWith(tree.endsWith('/') ? tree : `${tree}/`))) {
    return `expected a path that is not a system folder or relaunch's own (/opt/relaunch), got ${describe(dest)}`;
  }
  return undefined;
}

/** A source written as text: a local path, `s3://...`, or a reference `run` made. */
function textSource(text: string, report: Report, path: readonly (string | number)[] = []): MountSource | undefined {
  const upload = UPLOAD_REFERENCE.exec(text);
  if (upload !== null) return { kind: 'upload', entry: upload[1] as 'file' | 'dir', sha256: upload[2] as string };
  if (/^s3:\/\//i.test(text)) {
    const [bucket = '', ...rest] = text.slice('s3://'.length).split('/');
    const problem = bucketNameProblem(bucket) ?? controlProblem(text, 'an S3 URI');
    if (problem !== undefined) return report(`${problem} in ${describe(text)}`, [...path]);
    const key = rest.join('/');
    // The agent reads '-' as "no key" (agent/mounts.ts); no real dataset is named so.
    if (key === '-') return report(`expected an S3 prefix other than "-", got ${describe(text)}`, [...path]);
    return { kind: 's3', bucket, key };
  }
  if (OTHER_STORES.test(text)) {
    return report(`expected a local path or s3://bucket/prefix (relaunch runs on AWS), got ${describe(text)}`, [...path]);
  }
  const problem = pathProblem(text, 'a local file or folder');
  if (problem !== undefined) return report(problem, [...path]);
  return { kind: 'local', path: text };
}

const STORAGE_KEYS = ['name', 'source', 'store', 'mode', 'persistent'];

/** A storage mapping `{name, source, store, mode, persistent}`, SkyPilot's meaning for each key. */
function storageMount(dest: string, given: Readonly<Record<string, unknown>>, report: Report): FileMount | undefined {
  let failed = false;
  const fail = (message: string, key: string): undefined => {
    failed = true;
    return report(message, [dest, key]);
  };
  for (const key of Object.keys(given)) {
    if (!STORAGE_KEYS.includes(key)) fail(`unknown key (a storage mapping takes ${STORAGE_KEYS.join(', ')})`, key);
  }
  const modeText = given.mode == null ? 'MOUNT' : typeof given.mode === 'string' ? given.mode.toUpperCase() : given.mode;
  const mode = (MOUNT_MODES as readonly unknown[]).includes(modeText) ? (modeText as MountMode) : fail(expectedGot(`one of ${MOUNT_MODES.join(', ')}`, given.mode), 'mode');
  if (given.store != null && (typeof given.store !== 'string' || given.store.toLowerCase() !== 's3')) {
    fail(`${expectedGot('s3 (relaunch runs on AWS)', given.store)}`, 'store');
  }
  const persistent = given.persistent == null ? true : typeof given.persistent === 'boolean' ? given.persistent : fail(expectedGot('true or false', given.persistent), 'persistent');
  const name = given.name == null ? null : typeof given.name === 'string' && given.name.trim() !== '' ? given.name : fail(expectedGot('a bucket name', given.name), 'name');
  let source: MountSource | undefined;
  if (given.source == null) {
    source = { kind: 'bucket', name: name ?? null, persistent: persistent ?? true };
  } else if (typeof given.source !== 'string') {
    fail(expectedGot('a local path or s3://bucket/prefix', given.source), 'source');
  } else {
    source = textSource(given.source, (message) => fail(message, 'source'));
    if (source?.kind === 's3' && name != null && name !== source.bucket) {
      fail(`expected ${source.bucket} (the bucket source names) or no name, got ${describe(name)}`, 'name');
    }
    if ((source?.kind === 'local' || source?.kind === 'upload') && mode !== undefined && mode !== 'COPY') {
      fail(`expected COPY for a local source (relaunch copies local files onto each node; to share what the job writes, give a bucket name without source), got ${mode}`, 'mode');
    }
  }
  if (failed || mode === undefined || source === undefined) return undefined;
  return { path: dest, source, mode };
}

/**
 * `file_mounts`: a mapping of node paths to a local path, an `s3://` URI (copied), or a
 * storage mapping. Every problem is reported under its destination.
 */
export const fileMountsSchema = fromParser<readonly FileMount[]>((value, report) => {
  if (!isMapping(value)) return report(expectedGot('a mapping of paths on the node to a local path, s3://bucket/prefix or {name, source, mode}', value));
  const entries = Object.entries(value);
  if (entries.length > MAX_FILE_MOUNTS) return report(`expected at most ${MAX_FILE_MOUNTS} file mounts, got ${entries.length}`);
  const mounts: FileMount[] = [];
  let failed = false;
  for (const [dest, given] of entries) {
    const problem = destinationProblem(dest);
    if (problem !== undefined) {
      failed = true;
      report(problem, [dest]);
      continue;
    }
    const mount = isMapping(given)
      ? storageMount(dest, given, report)
      : typeof given === 'string'
        ? copyMount(dest, textSource(given, report, [dest]))
        : report(expectedGot('a local path, s3://bucket/prefix or a mapping {name, source, mode}', given), [dest]);
    if (mount === undefined) failed = true;
    else mounts.push(mount);
  }
  return failed ? undefined : mounts;
});

function copyMount(dest: string, source: MountSource | undefined): FileMount | undefined {
  return source === undefined ? undefined : { path: dest, source, mode: 'COPY' };
}

/** What `workdir` is: a local folder (or its upload), or a git repository. */
export type WorkdirSource = { readonly kind: 'path'; readonly path: string } | { readonly kind: 'git'; readonly git: GitWorkdir };

/** `workdir`: a local folder, or SkyPilot's `{url, ref}` for a git repository. */
export const workdirSchema = fromParser<WorkdirSource>((value, report) => {
  if (typeof value === 'string') {
    const problem = pathProblem(value, 'a local directory path');
    return problem === undefined ? { kind: 'path', path: value } : report(problem);
  }
  if (!isMapping(value)) return report(expectedGot('a local directory path, or {url, ref} for a git repository', value));
  let failed = false;
  for (const key of Object.keys(value)) {
    if (key !== 'url' && key !== 'ref') {
      failed = true;
      report('unknown key (a git workdir takes url and ref)', [key]);
    }
  }
  const { url, ref } = value;
  if (typeof url !== 'string' || !GIT_URL.test(url)) {
    failed = true;
    report(expectedGot('a git repository URL (https://, ssh:// or git@host:path)', url), ['url']);
  } else if (/^https?:\/\/[^/@]+@/i.test(url)) {
    // A token in the URL would be stored with the job and shown wherever the task is.
    failed = true;
    report('expected a URL without a user or token in it: the task is stored and shown as written; give the token in secrets instead', ['url']);
  }
  if (ref != null && (typeof ref !== 'string' || !/^[A-Za-z0-9._/-]{1,255}$/.test(ref) || ref.startsWith('-'))) {
    failed = true;
    report(expectedGot('a branch, tag or commit', ref), ['ref']);
  }
  if (failed) return undefined;
  return { kind: 'git', git: { url: url as string, ref: (ref as string | null | undefined) ?? null } };
});

/** The upload a workdir names, when `run` has uploaded it. */
export function uploadedWorkdir(workdir: string | null): { readonly sha256: string } | null {
  const match = workdir === null ? null : UPLOAD_REFERENCE.exec(workdir);
  return match === null || match[1] !== 'dir' ? null : { sha256: match[2] as string };
}

/**
 * What a valid `file_mounts` may still get wrong: a bucket name S3 refuses (a placeholder
 * left in, as SkyPilot's examples have them: `run` refuses it), a storage mapping without
 * a name, and a name beside a local source, which relaunch does not use.
 */
export function mountWarnings(task: Readonly<Record<string, unknown>>, fileMounts: readonly FileMount[]): Problem[] {
  const given = isMapping(task.file_mounts) ? task.file_mounts : {};
  const warnings: Problem[] = [];
  for (const mount of fileMounts) {
    const raw = given[mount.path];
    const at = ['file_mounts', mount.path];
    if (mount.source.kind === 'bucket' && mount.source.name !== null && !mount.source.persistent) {
      warnings.push({ path: [...at, 'persistent'], message: `false deletes bucket ${mount.source.name} and its data when the job ends, if run creates it for this job; a bucket that already exists is kept` });
    }
    if (mount.source.kind === 'bucket' && mount.source.name !== null) {
      const problem = bucketNameProblem(mount.source.name);
      if (problem !== undefined) warnings.push({ path: [...at, 'name'], message: `${problem}: run refuses it; fill in your bucket's name` });
    } else if (mount.source.kind === 'bucket') {
      warnings.push({ path: at, message: "no bucket name: relaunch keeps this mount's data in a folder of its own bucket for this job, shared by its attempts" });
    } else if (mount.source.kind === 'local' && isMapping(raw) && raw.name != null) {
      warnings.push({ path: [...at, 'name'], message: 'not used: relaunch copies a local source from its own store, so no bucket is made for it' });
    }
  }
  return warnings;
}

/** Where a mount's data comes from, in words: `s3://bucket/key`, `./data (local)`, `bucket ckpt (kept)`. */
export function describeSource(source: MountSource): string {
  switch (source.kind) {
    case 'local':
      return `${source.path} (local, uploaded at submit)`;
    case 'upload':
      return `uploaded ${source.entry === 'dir' ? 'folder' : 'file'} sha256:${source.sha256.slice(0, 12)}`;
    case 's3':
      return `s3://${source.bucket}${source.key === '' ? '' : `/${source.key}`}`;
    case 'bucket':
      if (source.name === null) return "a folder of relaunch's own bucket for this job";
      return `bucket ${source.name} (${source.persistent ? 'kept after the job' : 'deleted after the job'})`;
  }
}

/**
 * A mount path as a key under a bucket prefix, absolute and home paths apart:
 * `/data/ckpt` is `root/data/ckpt`; `~/x` and `x` (the same folder) are `home/x`.
 */
export function mountKey(path: string): string {
  const trimmed = path.replace(/\/+$/, '');
  const key = trimmed.startsWith('~/') ? `home/${trimmed.slice(2)}` : trimmed.startsWith('/') ? `root${trimmed}` : `home/${trimmed}`;
  return key.replace(/\/+/g, '/');
}

/**
 * What a job's end deletes (`persistent: false`), in every task of a pipeline: the named
 * buckets every mount of which says so (one mount that keeps a bucket keeps it), and the
 * paths of nameless mounts that say so (their folders of relaunch's own bucket), unless
 * a kept nameless mount shares the folder (`~/x` and `x`), lies inside it or holds it.
 */
export function transientMounts(specs: readonly { readonly fileMounts?: readonly FileMount[] }[]): { readonly buckets: string[]; readonly folders: string[] } {
  const keptBuckets = new Set<string>();
  const buckets = new Set<string>();
  const keptKeys: string[] = [];
  const folders = new Map<string, string>();
  for (const mount of specs.flatMap((spec) => spec.fileMounts ?? [])) {
    if (mount.source.kind !== 'bucket') continue;
    if (mount.source.name !== null) {
      (mount.source.persistent ? keptBuckets : buckets).add(mount.source.name);
    } else if (mount.source.persistent) {
      keptKeys.push(mountKey(mount.path));
    } else if (!folders.has(mountKey(mount.path))) {
      folders.set(mountKey(mount.path), mount.path);
    }
  }
  const overlaps = (a: string, b: string): boolean => a === b || a.startsWith(`${b}/`) || b.startsWith(`${a}/`);
  return {
    buckets: [...buckets].filter((name) => !keptBuckets.has(name)),
    folders: [...folders].filter(([key]) => !keptKeys.some((kept) => overlaps(key, kept))).map(([, path]) => path),
  };
}

/** How a mount's field is named in messages: `file_mounts["/data"]`, `file_mounts["/data"].name`. */
export function mountField(path: string, ...keys: string[]): string {
  return formatPath(['file_mounts', path, ...keys]);
}

/** Every bucket a task's mounts name, with the field that names it. */
export function namedBuckets(spec: { readonly fileMounts?: readonly FileMount[] }): { readonly field: string; readonly bucket: string; readonly mount: FileMount }[] {
  return (spec.fileMounts ?? []).flatMap((mount) => {
    if (mount.source.kind === 's3') return [{ field: mountField(mount.path), bucket: mount.source.bucket, mount }];
    if (mount.source.kind === 'bucket' && mount.source.name !== null) return [{ field: mountField(mount.path, 'name'), bucket: mount.source.name, mount }];
    return [];
  });
}

/**
 * What every runtime refuses at submit: a local path `run` did not upload (the task came
 * another way, such as a plain POST), and a bucket name S3 would refuse.
 */
export function mountProblems(spec: { readonly workdir: string | null; readonly fileMounts?: readonly FileMount[] }): { path: string; message: string }[] {
  const problems: { path: string; message: string }[] = [];
  const notUploaded = (what: string) => `expected ${what} uploaded into relaunch's store first: submit the file with relaunch run, which packs local sources and names them upload:...`;
  if (spec.workdir !== null && uploadedWorkdir(spec.workdir) === null) problems.push({ path: 'workdir', message: notUploaded(`the local folder ${spec.workdir}`) });
  for (const mount of spec.fileMounts ?? []) {
    if (mount.source.kind === 'local') problems.push({ path: mountField(mount.path), message: notUploaded(`the local path ${mount.source.path}`) });
  }
  for (const { field, bucket } of namedBuckets(spec)) {
    const problem = bucketNameProblem(bucket);
    if (problem !== undefined) problems.push({ path: field, message: problem });
  }
  return problems;
}

/**
 * A task that runs in a Docker container gets each mount with `docker run -v PATH:PATH`,
 * which splits at every `:`: a path holding one would fail at the container's start, on
 * every attempt, after its instances were paid for. Refused at submit, each by its path.
 */
export function containerMountProblems(fileMounts: readonly FileMount[], containerImage: string | undefined): { path: string[]; message: string }[] {
  if (containerImage === undefined) return [];
  return fileMounts
    .filter((mount) => mount.path.includes(':'))
    .map((mount) => ({
      path: ['file_mounts', mount.path],
      message: `expected a path without ":" in a task that runs in a Docker container (resources.image_id docker:${containerImage}): docker run -v would split ${mount.path} at it`,
    }));
}

/** The uploads a task names (workdir and file mounts), each once. */
export function uploadsOf(spec: { readonly workdir: string | null; readonly fileMounts?: readonly FileMount[] }): { readonly field: string; readonly sha256: string }[] {
  const uploads: { field: string; sha256: string }[] = [];
  const workdir = uploadedWorkdir(spec.workdir);
  if (workdir !== null) uploads.push({ field: 'workdir', sha256: workdir.sha256 });
  for (const mount of spec.fileMounts ?? []) {
    if (mount.source.kind === 'upload') uploads.push({ field: mountField(mount.path), sha256: mount.source.sha256 });
  }
  return uploads.filter((upload, index) => uploads.findIndex((other) => other.sha256 === upload.sha256) === index);
}
