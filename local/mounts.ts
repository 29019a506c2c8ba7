// The local runtime's side of workdirs and file mounts: where buckets are (folders of the
// data folder, or S3 itself through mountpoint-s3), and what it cannot do here, said at submit.

import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import os from 'node:os';
import { MOUNTS_PREFIX } from '../lib/workflow/resources.ts';
import { type MountPlaces } from '../lib/agent/mounts.ts';
import { PrecheckError, type InputIssue } from '../lib/errors.ts';
import { archiveName, bucketNameProblem, mountField, mountKey, mountProblems, uploadsOf } from '../lib/task-file/mounts.ts';
import type { TaskSpec } from '../lib/task-file/types.ts';
import { dockerProblems } from './docker.ts';
import { bucketDir, LOCAL_OWN_BUCKET, sourcesDir } from './paths.ts';

/**
 * Buckets as the local runtime has them: a named one is a folder of the data folder (what
 * one attempt writes there the next one reads, as from S3); a nameless one a folder per
 * job and path; an `s3://` source mounted is S3 itself, through mountpoint-s3.
 */
export function localMountPlaces(dataDir: string): MountPlaces {
  return {
    bucket(source, jobId, path) {
      if (source.name === null) return { dir: localJobFolder(dataDir, jobId, path) };
      // Checked at submit; checked again here, since the name becomes part of a path.
      const problem = bucketNameProblem(source.name);
      if (problem !== undefined) throw new PrecheckError(`${mountField(path, 'name')}: ${problem}`);
      return { dir: bucketDir(dataDir, source.name) };
    },
  };
}

/** A nameless mount's folder: the job's folder of relaunch's own bucket, under the path's key. */
export function localJobFolder(dataDir: string, jobId: string, path: string): string {
  return join(jobMountsDir(dataDir, jobId), mountKey(path));
}

/** The folder of a job's nameless mounts, in relaunch's own bucket as the data folder has it. */
export function jobMountsDir(dataDir: string, jobId: string): string {
  return join(bucketDir(dataDir, LOCAL_OWN_BUCKET), MOUNTS_PREFIX, jobId);
}

/** What the local runtime cannot run of a task, at submit: its mounts' problems, then Docker's. */
export function localTaskProblems(dataDir: string): (spec: TaskSpec) => Promise<InputIssue[]> {
  return async (spec) => [...localMountProblems(spec, dataDir), ...(await dockerProblems(spec))];
}

/** Whether a command is on PATH. */
function onPath(command: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((dir) => dir !== '' && existsSync(join(dir, command)));
}

/** Whether this machine has AWS credentials the AWS CLI would find, without asking the network. */
export function hasAwsCredentials(environment: NodeJS.ProcessEnv = process.env): boolean {
  if ((environment.AWS_ACCESS_KEY_ID ?? '') !== '' || (environment.AWS_PROFILE ?? '') !== '' || (environment.AWS_WEB_IDENTITY_TOKEN_FILE ?? '') !== '') return true;
  const home = environment.HOME ?? os.homedir();
  return existsSync(environment.AWS_SHARED_CREDENTIALS_FILE ?? join(home, '.aws', 'credentials')) || existsSync(environment.AWS_CONFIG_FILE ?? join(home, '.aws', 'config'));
}

/**
 * What the local runtime cannot give a task's workdir and mounts, at submit: those every
 * runtime refuses; an upload its store does not have; an `s3://` source without AWS
 * credentials and the AWS CLI; an `s3://` mount without mountpoint-s3.
 */
export function localMountProblems(spec: TaskSpec, dataDir: string): InputIssue[] {
  const problems: InputIssue[] = mountProblems(spec);
  for (const { field, sha256 } of uploadsOf(spec)) {
    if (!existsSync(join(sourcesDir(dataDir), archiveName(sha256)))) {
      problems.push({ path: field, message: `expected an upload in ${sourcesDir(dataDir)}, but sha256:${sha256} is not there: submit the file with relaunch run, which puts it there` });
    }
  }
  for (const mount of spec.fileMounts ?? []) {
    if (mount.source.kind !== 's3') continue;
    const at = mountField(mount.path);
    const uri = `s3://${mount.source.bucket}/${mount.source.key}`;
    if (!hasAwsCredentials()) problems.push({ path: at, message: `expected AWS credentials to read ${uri} from this machine (none in the environment or ~/.aws); give some, or run on AWS` });
    else if (mount.mode === 'COPY' && !onPath('aws')) problems.push({ path: at, message: `expected the AWS CLI (aws) on PATH to copy ${uri} here` });
    else if (mount.mode !== 'COPY' && !onPath('mount-s3')) problems.push({ path: at, message: `expected mountpoint-s3 (mount-s3) on PATH to mount ${uri} here; or use mode: COPY` });
  }
  return problems;
}
