// The stack's data on S3: its own bucket (uploaded sources, nameless mounts) and the
// buckets a deployment lets tasks mount or copy from.

import { agentMounts, type AgentMount, type MountPlaces } from '../agent/mounts.ts';
import type { AgentScriptParams } from '../agent/script.ts';
import type { TaskSpec } from '../task-file/types.ts';
import { InvalidInputError, type InputIssue } from '../errors.ts';
import { archiveName, mountKey, namedBuckets, type FileMount } from '../task-file/mounts.ts';
import { MOUNTS_PREFIX, SOURCES_PREFIX, type DataConfig } from '../workflow/resources.ts';

/**
 * Whether a task may name a bucket: one the deployment allows by name or pattern, never
 * the stack's own, which holds every job's uploads and nameless mounts (a task reaches its
 * own folder of it with a mount that has no name).
 */
export function bucketAllowed(bucket: string, data: DataConfig): boolean {
  if (bucket === data.bucket) return false;
  return data.allowedBuckets.some((allowed) => (allowed.endsWith('*') ? bucket.startsWith(allowed.slice(0, -1)) : bucket === allowed));
}

/** Why a bucket a task may not name is refused, and what to do instead. */
export function notAllowedBucket(bucket: string, data: DataConfig): string {
  if (bucket === data.bucket) {
    return `expected a bucket other than the stack's own (${bucket}), which holds every job's uploads and mounts: give the mount no name for a folder of it for this job`;
  }
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

/**
 * What an EC2 node's agent is given to put the task's workdir and mounts in place; with
 * any S3 step, it asks the API for the job's data credentials first (jobDataPolicy).
 */
export function s3AgentMounts(spec: TaskSpec, jobId: string, data: DataConfig): Pick<AgentScriptParams, 'mounts' | 'sourcesUrl' | 'dataCredentials'> {
  const mounts = agentMounts(spec, jobId, s3MountPlaces(data));
  return { mounts, sourcesUrl: sourcesUrl(data), dataCredentials: mounts.some((step) => S3_STEPS.has(step.kind)) };
}

/** The steps that reach S3 (an upload, on EC2, is fetched from the stack's bucket). */
const S3_STEPS: ReadonlySet<AgentMount['kind']> = new Set(['upload', 's3-copy', 's3-mount']);

/** The session policy of job `jobId`'s nodes on EC2 (jobDataPolicy of its steps); null when its task touches no S3. */
export function jobDataPolicyOf(spec: TaskSpec, jobId: string, data: DataConfig): IamPolicy | null {
  return jobDataPolicy(agentMounts(spec, jobId, s3MountPlaces(data)), jobId, data);
}

/** IAM's limit on the plain text of a session policy (AssumeRole's `Policy`), in characters. */
export const SESSION_POLICY_MAX_CHARS = 2048;

/** An IAM policy document, as a session policy is written. */
export interface IamPolicy {
  readonly Version: '2012-10-17';
  readonly Statement: readonly IamStatement[];
}

interface IamStatement {
  readonly Effect: 'Allow';
  readonly Action: string | readonly string[];
  readonly Resource: string | readonly string[];
  readonly Condition?: { readonly StringLike: { readonly 's3:prefix': readonly string[] } };
}

/** What a MOUNT needs on its objects (mountpoint-s3 with --allow-delete and --allow-overwrite). */
const MOUNT_OBJECT_ACTIONS = ['s3:GetObject', 's3:PutObject', 's3:DeleteObject', 's3:AbortMultipartUpload'];

/**
 * What one job's nodes may do in S3, as the session policy of the credentials the API
 * gives them (POST .../data-credentials): read its own uploads and COPY sources, read and
 * write the prefixes it mounts (a nameless mount's folder is its own job's), and list only
 * under those. IAM grants the intersection of this and the access role's own policy, the
 * stack-wide ceiling (infra JobData), so no job reaches another's data through the stack's
 * grants. Null when the steps touch no S3.
 */
export function jobDataPolicy(steps: readonly AgentMount[], jobId: string, data: DataConfig): IamPolicy | null {
  // `pattern` is IAM's: a key in it goes through iamLiteral first.
  const arn = (bucket: string, pattern?: string) => `arn:${data.partition ?? 'aws'}:s3:::${bucket}${pattern === undefined ? '' : `/${pattern}`}`;
  // A second guard behind submit's (bucketAllowed): in the stack's bucket a job copies or
  // mounts nothing but its own folder.
  const ownFolder = `${MOUNTS_PREFIX}/${jobId}/`;
  const ownFolderOnly = (bucket: string, key: string) => {
    if (bucket === data.bucket && !`${key}/`.startsWith(ownFolder)) {
      throw new InvalidInputError([{ path: 'file_mounts', message: notAllowedBucket(bucket, data) }]);
    }
  };
  const reads = new Set<string>();
  const writes = new Set<string>();
  /** Per bucket, the s3:prefix patterns it may be listed under; null: all of it. */
  const lists = new Map<string, Set<string> | null>();
  const listable = (bucket: string, pattern: string | null) => {
    const known = lists.get(bucket);
    if (known === null) return;
    if (pattern === null) lists.set(bucket, null);
    else lists.set(bucket, (known ?? new Set<string>()).add(pattern));
  };
  for (const step of steps) {
    switch (step.kind) {
      case 'upload':
        reads.add(arn(data.bucket, `${SOURCES_PREFIX}/${iamLiteral(archiveName(step.sha256))}`));
        break;
      case 's3-copy': {
        ownFolderOnly(step.bucket, step.key);
        // A key is an object (read by name) or a prefix (aws s3 sync lists under `key/`);
        // `key*` would also take the siblings `key-old/` and `key2`.
        const folder = step.key.replace(/\/+$/, '');
        if (folder === '') {
          reads.add(arn(step.bucket, '*'));
          listable(step.bucket, null);
          break;
        }
        if (!step.key.endsWith('/')) reads.add(arn(step.bucket, iamLiteral(step.key)));
        reads.add(arn(step.bucket, `${iamLiteral(folder)}/*`));
        listable(step.bucket, `${iamLiteral(folder)}/*`);
        break;
      }
      case 's3-mount':
        ownFolderOnly(step.bucket, step.prefix);
        writes.add(arn(step.bucket, step.prefix === '' ? '*' : `${iamLiteral(step.prefix)}/*`));
        listable(step.bucket, step.prefix === '' ? null : `${iamLiteral(step.prefix)}/*`);
        break;
      case 'link':
      case 'copy-dir':
      case 'git':
        break;
    }
  }
  if (reads.size === 0 && writes.size === 0) return null;
  const statements: IamStatement[] = [];
  if (reads.size > 0) statements.push({ Effect: 'Allow', Action: 's3:GetObject', Resource: [...reads] });
  if (writes.size > 0) statements.push({ Effect: 'Allow', Action: MOUNT_OBJECT_ACTIONS, Resource: [...writes] });
  for (const [bucket, patterns] of lists) {
    statements.push(
      patterns === null
        ? { Effect: 'Allow', Action: 's3:ListBucket', Resource: arn(bucket) }
        : { Effect: 'Allow', Action: 's3:ListBucket', Resource: arn(bucket), Condition: { StringLike: { 's3:prefix': [...patterns] } } },
    );
  }
  return { Version: '2012-10-17', Statement: statements };
}

/**
 * A key as IAM reads it literally: its `*`, `?` and `$` escaped as IAM's `${*}`, `${?}`
 * and `${$}`. A run of characters past U+00FF, which a session policy may not hold
 * (STS takes U+0020-U+00FF, tab and line breaks), becomes `*`: the grant widens there,
 * never past the ASCII part before it (`mounts/<job id>/`, a bucket's prefix).
 */
function iamLiteral(key: string): string {
  return key.replace(/[*?$]/g, (char) => `\${${char}}`).replace(/[^\t\n\r\u0020-\u00ff]+/gu, '*');
}

/**
 * Mounts an EC2 deployment cannot give: any, when the stack has no data bucket; a bucket
 * outside `relaunch:dataBuckets` (the deployer adds it), or the stack's own.
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
      message: notAllowedBucket(bucket, data),
    }));
}
