// `relaunch check` when the account cannot be read (no credentials, refused ones, STS out
// of reach): what a task file says on its own (it fits EC2's user data, its buckets are
// among the deployment's), and the line naming every check that needs AWS and how to give
// it credentials. cdk.json's own settings are judged by run-checks' settings check.

import { ec2TaskProblems } from '../adapters/ec2-user-data.ts';
import { uploadReference, type FileMount } from '../task-file/mounts.ts';
import type { TaskSpec } from '../task-file/types.ts';
import type { DeploymentSettings } from './deployment.ts';
import type { CheckResult } from './report.ts';

/** The checks (by id, or id prefix) that read the account, skipped when it cannot be read. */
export const CHECKS_NEEDING_AWS = ['stack', 'version', 'bootstrap:<region>', 'api', 'forwarder:<region>', 'spot-role', 'quota:…', 'subnet:<zone>', 'bucket:<name>', 'launch'] as const;

/** A stand-in for the digest of what `relaunch run` would upload: only its length matters to the user data's size. */
const SAMPLE_SHA256 = '0'.repeat(64);

/**
 * The task as `relaunch run` submits it: its local workdir and mounts replaced by the
 * upload references the API sees (a local path is refused at submit, never sent).
 */
function asSubmitted(spec: TaskSpec): TaskSpec {
  const fileMounts = spec.fileMounts?.map((mount): FileMount => (mount.source.kind === 'local' ? { ...mount, source: { kind: 'upload', entry: 'dir', sha256: SAMPLE_SHA256 } } : mount));
  const workdir = spec.workdir === null || spec.workdir.startsWith('upload:') ? spec.workdir : uploadReference('dir', SAMPLE_SHA256);
  return { ...spec, workdir, ...(fileMounts === undefined ? {} : { fileMounts }) };
}

/**
 * What the API would refuse of each task at submit, known without AWS: setup, run and envs
 * too large for EC2's user data beside the agent, and a bucket outside the deployment's
 * `relaunch:dataBuckets` (with no settings to read, every bucket is taken as allowed).
 * One check per task: `task`, or `task:N` in a pipeline (N from 1, as every task number relaunch prints).
 */
export function taskChecks(specs: readonly TaskSpec[], pipeline: boolean, settings: DeploymentSettings | null): CheckResult[] {
  const data = { bucket: settings?.dataBucket ?? '', allowedBuckets: settings === null ? ['*'] : settings.dataBuckets };
  return specs.map((spec, index): CheckResult => {
    const id = pipeline ? `task:${index + 1}` : 'task';
    const problems = ec2TaskProblems(asSubmitted(spec), data);
    if (problems.length === 0) return { id, status: 'ok', message: 'fits EC2 user data beside the agent, and names no bucket the deployment refuses' };
    return {
      id,
      status: 'fail',
      message: problems.map((problem) => `${problem.path}: ${problem.message}`).join('; '),
      fix: problems.some((problem) => problem.path === 'run')
        ? 'move long scripts into the workdir (uploaded by relaunch run) and call them from setup and run'
        : `allow the bucket: npx cdk deploy -c relaunch:dataBuckets=...`,
    };
  });
}

/** The last line of an offline report: what was not checked, and how to let check read the account. */
export function needsAwsCheck(why: string): CheckResult {
  return {
    id: 'offline',
    status: 'warn',
    message: `checked without AWS (${why}): cdk.json's settings and the task file only; not checked: ${CHECKS_NEEDING_AWS.join(', ')}`,
    fix: 'give credentials (aws configure, aws sso login, AWS_PROFILE=<profile>, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), then run relaunch check again',
  };
}
