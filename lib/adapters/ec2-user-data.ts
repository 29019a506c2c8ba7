// EC2 user data: the agent script gzipped, as launches send it, and the checks a submit can
// make of it before any launch. No SDK client here: the API reads this at submit.

import { gzipSync } from 'node:zlib';
import { renderAgentScript } from '../agent/script.ts';
import { agentSecretPath, ssmEndpoint } from '../agent/secret-parameter.ts';
import type { InputIssue } from '../errors.ts';
import type { TaskSpec } from '../spec/types.ts';
import { HEARTBEAT_INTERVAL_SECONDS } from '../workflow/contract.ts';

/** EC2 user data is at most 16 KB before base64; the script goes gzipped (cloud-init inflates it). */
export const USER_DATA_MAX_BYTES = 16_384;

/** The agent script, gzipped as user data carries it. */
export function packedAgent(params: Parameters<typeof renderAgentScript>[0]): Buffer {
  return gzipSync(renderAgentScript(params), { level: 9 });
}

/** As long as any AWS region's name (ap-southeast-5, us-gov-west-1: 14 and 13 characters). */
const LONGEST_REGION = 'xx-xxxxxxxxx-9';

export function tooLargeForUserData(bytes: number): string {
  return `setup, run and envs are too large for EC2 user data: ${bytes} bytes compressed, at most ${USER_DATA_MAX_BYTES}`;
}

/**
 * What EC2 cannot run, found at submit instead of at the first launch: a `workdir` (its
 * contents are not uploaded to instances yet), and an agent too large for user data. The
 * agent is rendered with the longest values its launch could put in: a 200-character API
 * URL, attempt 999999, the longest name prefix and region, 8 GPUs.
 */
export function ec2TaskProblems(spec: TaskSpec): InputIssue[] {
  const problems: InputIssue[] = [];
  if (spec.workdir !== null) {
    problems.push({
      path: 'workdir',
      message: 'expected no workdir on AWS: its contents are not uploaded to the instances yet (locally it runs); put the files in the image or fetch them in setup',
    });
  }
  if (spec.gitWorkdir !== undefined) {
    problems.push({ path: 'workdir', message: 'expected a local folder or none: relaunch does not clone a git workdir on AWS yet; clone it in setup' });
  }
  if (spec.fileMounts !== undefined) {
    problems.push({ path: 'file_mounts', message: 'expected no file_mounts on AWS: relaunch does not upload or mount them there yet; fetch the data in setup' });
  }
  const packed = packedAgent({
    apiUrl: `https://${'x'.repeat(160)}.execute-api.us-east-1.amazonaws.com/v1/`,
    jobId: 'j-xxxxxxxxx-xxxxxx',
    attempt: 999_999,
    secretSource: { path: agentSecretPath('x'.repeat(32)), region: LONGEST_REGION, endpoint: ssmEndpoint(LONGEST_REGION) },
    spec,
    heartbeatSeconds: HEARTBEAT_INTERVAL_SECONDS,
    gpusPerNode: 8,
  });
  if (packed.length > USER_DATA_MAX_BYTES) problems.push({ path: 'run', message: tooLargeForUserData(packed.length) });
  return problems;
}
