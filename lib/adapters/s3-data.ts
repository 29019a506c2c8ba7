// The stack's data on S3: its own bucket (uploaded sources, nameless mounts) and the
// buckets a deployment lets tasks mount or copy from.

import { agentMounts, type MountPlaces } from '../agent/mounts.ts';
import type { AgentScriptParams } from '../agent/script.ts';
import type { TaskSpec } from '../spec/types.ts';
import type { InputIssue } from '../errors.ts';
import { mountKey, namedBuckets, type FileMount } from '../spec/mounts.ts';

/** Prefix of uploaded sources in the stack's bucket: `sources/<sha256>.tar.gz`. */
export const SOURCES_PREFIX = 'sources';
/** Prefix of nameless mounts in the stack's bucket: `mounts/<jobId>/<path>/`. */
export const MOUNTS_PREFIX = 'mounts';

/** What the stack says about S3 (DATA_CONFIG, and COMPUTE_CONFIG's `data`). */
export interface DataConfig {
  /** The stack's own bucket. */
  readonly bucket: string;
  /**
   * Other buckets job instances may read and write (`relaunch:dataBuckets`): names, or
   * prefixes of names ending in `*`.
   */
  readonly allowedBuckets: readonly string[];
}

/** Whether a bucket is one the instance role may use: the stack's own, or one allowed by name or pattern. */
export function bucketAllowed(bucket: string, data: DataConfig): boolean {
  if (bucket === data.bucket) return true;
  return data.allowedBuckets.some((allowed) => (allowed.endsWith('*') ? bucket.startsWith(allowed.slice(0, -1)) : bucket === allowed));
}

/** Why a bucket the stack does not let instances use is refused, and what the deployer does. */
export function notAllowedBucket(bucket: string): string {
  return `expected a bucket job instances may use, got ${bucket}: add it to the context key relaunch:dataBuckets and redeploy (cdk deploy -c relaunch:dataBuckets=${bucket})`;
}

/** Buckets on EC2: a named one is itself, a nameless one a prefix of the stack's bucket per job and path. */
export function s3MountPlaces(data: DataConfig): MountPlaces {
  return {
    bucket: (source, jobId, path) => (source.name === null ? s3JobFolder(data, jobId, path) : { bucket: source.name, prefix: '' }),
  };
}

/** A nameless mount's folder: `mounts/<jobId>/<path key>` in the stack's bucket. */
export function s3JobFolder(data: DataConfig, jobId: string, path: string): { readonly bucket: string; readonly prefix: string } {
  return { bucket: data.bucket, prefix: `${MOUNTS_PREFIX}/${jobId}/${mountKey(path)}` };
}

/** The URL the agent fetches uploads under. */
export function sourcesUrl(data: DataConfig): string {
  return `s3://${data.bucket}/${SOURCES_PREFIX}`;
}

/** What an EC2 node's agent is given to put the task's workdir and mounts in place. */
export function s3AgentMounts(spec: TaskSpec, jobId: string, data: DataConfig): Pick<AgentScriptParams, 'mounts' | 'sourcesUrl'> {
  return { mounts: agentMounts(spec, jobId, s3MountPlaces(data)), sourcesUrl: sourcesUrl(data) };
}

/**
 * Mounts an EC2 deployment cannot give: any, when the stack has no data bucket; a bucket
 * the instance role may not use (the deployer adds it to `relaunch:dataBuckets`).
 */
export function s3MountProblems(spec: { readonly workdir: string | null; readonly fileMounts?: readonly FileMount[] }, data: DataConfig | undefined): InputIssue[] {
  const hasData = spec.workdir !== null || (spec.fileMounts ?? []).length > 0;
  if (!hasData) return [];
  if (data === undefined) {
    return [{ path: spec.workdir === null ? 'file_mounts' : 'workdir', message: 'expected a stack with a data bucket: redeploy relaunch (cdk deploy) to upload workdirs and file mounts' }];
  }
  return namedBuckets(spec)
    .filter(({ bucket }) => !bucketAllowed(bucket, data))
    .map(({ field, bucket }) => ({
      path: field,
      message: notAllowedBucket(bucket),
    }));
}
