// `relaunch check` on a machine with no AWS credentials at all (no AWS_* variable, a HOME
// with no ~/.aws): the shipped cdk.json's example ids, the task's fit and the region are
// still judged, and the report says which checks need AWS and how to give credentials.

import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../support/cli.ts';

const CDK_JSON = fileURLToPath(new URL('../../../cdk.json', import.meta.url));
let folder = '';

/** The environment of a machine that never had AWS set up: no AWS_ variable, an empty home. */
function bare(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('AWS_')));
  return { ...env, HOME: join(folder, 'home'), ...extra };
}

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), 'relaunch-check-offline-'));
  await mkdir(join(folder, 'home'));
  await copyFile(CDK_JSON, join(folder, 'cdk.json'));
  await writeFile(join(folder, 'task.yaml'), 'resources:\n  cloud: aws\nrun: python train.py\n');
});
afterAll(() => rm(folder, { recursive: true, force: true }));

describe('relaunch check with no AWS credentials', () => {
  it('judges cdk.json and the task offline, then names what needs credentials (exit 1)', async () => {
    const run = await runCli(['check', 'task.yaml'], { cwd: folder, env: bare() });
    expect(run.code, run.stderr).toBe(1);
    const lines = run.stdout.split('\n');
    expect(lines[0]).toBe('relaunch check: us-east-1, stack Relaunch');
    expect(lines.filter((line) => /^ {2}(ok|warn|fail) /.test(line)).map((line) => line.trim().split(/\s+/).slice(0, 2).join(' '))).toEqual([
      'ok region',
      'fail credentials',
      'fail settings',
      'ok task',
      'warn offline',
    ]);
    expect(run.stdout).toContain('no AWS credentials found');
    expect(run.stdout).toContain('cdk.json still holds the example ids: a deploy would fail');
    expect(run.stdout).toMatch(/not checked: stack, version, .*launch/);
    expect(run.stdout).toContain('fix: give credentials (aws configure, aws sso login, AWS_PROFILE=<profile>, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)');
    expect(run.stdout.trimEnd().split('\n').at(-1)).toBe('2 checks failed, 1 warning');
  });

  it("fails cdk.json's subnets of another region than AWS_REGION's, in --json too", async () => {
    const own = join(folder, 'own');
    await mkdir(own);
    const context = { 'relaunch:vpcId': 'vpc-0123456789abcdef0', 'relaunch:subnets': { 'us-east-1a': 'subnet-0123456789abcdef0' } };
    await writeFile(join(own, 'cdk.json'), JSON.stringify({ app: 'true', context }));
    const run = await runCli(['check', '--json'], { cwd: own, env: bare({ AWS_REGION: 'eu-west-1' }) });
    expect(run.code, run.stderr).toBe(1);
    const report = JSON.parse(run.stdout) as { ok: boolean; checks: { id: string; status: string; message: string }[] };
    expect(report.ok).toBe(false);
    expect(report.checks.map(({ id, status }) => `${status} ${id}`)).toEqual(['ok region', 'fail credentials', 'fail settings', 'warn offline']);
    expect(report.checks[2]?.message).toBe("cdk.json's subnets are in us-east-1, but the stack would deploy to eu-west-1 (from AWS_REGION)");
  });
});
