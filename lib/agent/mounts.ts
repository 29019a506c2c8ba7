// What the agent puts on disk before setup: the task's workdir and file mounts as steps,
// the same on AWS and locally except where a bucket is (S3, or a folder standing in for it).

import { PrecheckError } from '../errors.ts';
import { mountField, WORKDIR_PATH, uploadedWorkdir, type FileMount, type MountSource } from '../task-file/mounts.ts';
import type { TaskSpec } from '../task-file/types.ts';

/** One step of the agent's preparation; `dest` as the task writes it (`/data`, `~/x`, `x`). */
export type AgentMount =
  /** Fetch the archive from the store, check its SHA-256, unpack it at dest. */
  | { readonly kind: 'upload'; readonly entry: 'file' | 'dir'; readonly sha256: string; readonly dest: string }
  /** Copy an object or a prefix from S3 (`aws s3 cp`, or `aws s3 sync` for a prefix). */
  | { readonly kind: 's3-copy'; readonly bucket: string; readonly key: string; readonly dest: string }
  /** Mount a bucket (or a prefix of it) with mountpoint-s3; `cached` keeps a local cache. */
  | { readonly kind: 's3-mount'; readonly bucket: string; readonly prefix: string; readonly cached: boolean; readonly dest: string }
  /** A folder that stands in for a bucket (the local runtime): linked at dest. */
  | { readonly kind: 'link'; readonly dir: string; readonly dest: string }
  /** Such a folder's files, copied to dest (a bucket with mode COPY, locally). */
  | { readonly kind: 'copy-dir'; readonly dir: string; readonly dest: string }
  /** Clone a git repository at dest, at ref. */
  | { readonly kind: 'git'; readonly url: string; readonly ref: string | null; readonly dest: string };

/** Where a bucket mount's data lives: a bucket and prefix, or (locally) a folder. */
export type BucketPlace = { readonly bucket: string; readonly prefix: string } | { readonly dir: string };

/**
 * What a compute knows that the task does not: where each `bucket` source's data lives.
 * An `s3://` source is S3 itself on every runtime.
 */
export interface MountPlaces {
  /**
   * A `bucket` source's place: its named bucket, or for a nameless one a folder of
   * relaunch's own bucket, per job and mount path (`mounts/<jobId>/<path>/`).
   */
  bucket(source: Extract<MountSource, { kind: 'bucket' }>, jobId: string, path: string): BucketPlace;
}


/** A bucket's place as a step: mounted (MOUNT, MOUNT_CACHED), or its files copied (COPY). */
function bucketStep(place: BucketPlace, mount: FileMount): AgentMount {
  if ('dir' in place) return mount.mode === 'COPY' ? { kind: 'copy-dir', dir: place.dir, dest: mount.path } : { kind: 'link', dir: place.dir, dest: mount.path };
  if (mount.mode === 'COPY') return { kind: 's3-copy', bucket: place.bucket, key: place.prefix === '' ? '' : `${place.prefix}/`, dest: mount.path };
  return { kind: 's3-mount', bucket: place.bucket, prefix: place.prefix, cached: mount.mode === 'MOUNT_CACHED', dest: mount.path };
}

function mountStep(mount: FileMount, jobId: string, places: MountPlaces): AgentMount {
  const { source } = mount;
  switch (source.kind) {
    case 'upload':
      return { kind: 'upload', entry: source.entry, sha256: source.sha256, dest: mount.path };
    case 's3':
      // A COPY keeps the key as written: `data/` is a prefix, `data.csv` may be an object.
      if (mount.mode === 'COPY') return { kind: 's3-copy', bucket: source.bucket, key: source.key, dest: mount.path };
      return bucketStep({ bucket: source.bucket, prefix: source.key.replace(/\/+$/, '') }, mount);
    case 'bucket':
      return bucketStep(places.bucket(source, jobId, mount.path), mount);
    case 'local':
      // `run` uploads every local source before it submits; one left means a bypassed CLI.
      throw new PrecheckError(`${mountField(mount.path)}: the local path ${source.path} was never uploaded (submit with relaunch run)`);
  }
}

/**
 * The steps for a task: the workdir into ~/sky_workdir first (an upload, or a git clone),
 * then each file mount in the file's order.
 *
 * @throws PrecheckError for a local path no upload replaced.
 */
export function agentMounts(spec: TaskSpec, jobId: string, places: MountPlaces): AgentMount[] {
  const steps: AgentMount[] = [];
  if (spec.gitWorkdir !== undefined) steps.push({ kind: 'git', url: spec.gitWorkdir.url, ref: spec.gitWorkdir.ref, dest: WORKDIR_PATH });
  else if (spec.workdir !== null) {
    const upload = uploadedWorkdir(spec.workdir);
    if (upload === null) throw new PrecheckError(`workdir: the local folder ${spec.workdir} was never uploaded (submit with relaunch run)`);
    steps.push({ kind: 'upload', entry: 'dir', sha256: upload.sha256, dest: WORKDIR_PATH });
  }
  for (const mount of spec.fileMounts ?? []) steps.push(mountStep(mount, jobId, places));
  return steps;
}

/**
 * An optional field as the agent reads it: '-' for none, since bash's read folds adjacent
 * tabs and an empty field would vanish. So '-' itself cannot be a value.
 */
function optional(value: string | null, dest: string): string {
  if (value === '-') throw new PrecheckError(`file_mounts: ${dest}: a key, prefix or ref of just "-" cannot be used`);
  return value === null || value === '' ? '-' : value;
}

/**
 * The steps as the agent reads them: one line each, fields split by tabs (kind, three
 * arguments, dest). No field may hold a tab or a line break.
 */
export function mountLines(steps: readonly AgentMount[]): string {
  const fields = (step: AgentMount): string[] => {
    switch (step.kind) {
      case 'upload':
        return [step.kind, step.entry, step.sha256, '-', step.dest];
      case 's3-copy':
        return [step.kind, step.bucket, optional(step.key, step.dest), '-', step.dest];
      case 's3-mount':
        return [step.kind, step.bucket, optional(step.prefix, step.dest), step.cached ? 'cached' : '-', step.dest];
      case 'link':
      case 'copy-dir':
        return [step.kind, step.dir, '-', '-', step.dest];
      case 'git':
        return [step.kind, step.url, optional(step.ref, step.dest), '-', step.dest];
    }
  };
  return steps
    .map((step) => {
      const row = fields(step);
      if (row.some((field) => /[\t\n\r]/.test(field))) throw new PrecheckError(`file_mounts: ${step.dest}: a path with a tab or a line break cannot be mounted`);
      return `${row.join('\t')}\n`;
    })
    .join('');
}
