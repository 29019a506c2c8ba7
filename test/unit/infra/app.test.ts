// The shipped CDK app as `cdk synth` runs it (node infra/app.ts, context in CDK_CONTEXT_JSON),
// given a bad -c value: the message alone on stderr, no stack trace, a non-zero exit.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const out = mkdtempSync(join(tmpdir(), 'relaunch-app-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

/** The app, run as the CDK CLI runs it; `region` is the one the CLI found in the profile or AWS_REGION. */
function runApp(context: Record<string, unknown>, region?: string) {
  const env: NodeJS.ProcessEnv = { ...process.env, CDK_CONTEXT_JSON: JSON.stringify(context), CDK_OUTDIR: out, CDK_VALIDATION: 'false' };
  delete env.CDK_DEFAULT_REGION;
  if (region !== undefined) env.CDK_DEFAULT_REGION = region;
  return spawnSync(process.execPath, ['--import', 'tsx', 'infra/app.ts'], {
    cwd: new URL('../../..', import.meta.url).pathname,
    env,
    encoding: 'utf8',
    timeout: 120_000,
  });
}

describe('infra/app.ts, given a bad setting', () => {
  it.each([
    [
      "the README's literal vpc-0abc...",
      { 'relaunch:vpcId': 'vpc-0abc...', 'relaunch:subnets': 'us-east-1a=subnet-0123456789abcdef0' },
      'context relaunch:vpcId: expected a VPC id like vpc-0123456789abcdef0',
    ],
    [
      'zones of two regions',
      { 'relaunch:vpcId': 'vpc-0123456789abcdef0', 'relaunch:subnets': 'us-east-1a=subnet-0123456789abcdef0,us-west-2a=subnet-0123456789abcdef1' },
      'context relaunch:subnets: expected zones of one region',
    ],
  ])('prints the message alone and exits 1: %s', (_, context, message) => {
    const run = runApp(context);
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(message);
    expect(run.stderr).not.toMatch(/^\s+at /m);
    expect(run.stderr).not.toContain('Error:');
  }, 120_000);

  it("refuses a deploy region that is not the subnets' region, saying both and where the region came from", () => {
    const run = runApp({ 'relaunch:vpcId': 'vpc-0123456789abcdef0', 'relaunch:subnets': 'us-east-1a=subnet-0123456789abcdef0' }, 'eu-west-1');
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(
      'relaunch:subnets are zones of us-east-1, but cdk deploys to eu-west-1 (AWS_REGION, else your AWS profile\'s region, else us-east-1): set AWS_REGION=us-east-1, or give subnets of eu-west-1',
    );
    expect(run.stderr).not.toMatch(/^\s+at /m);
  }, 120_000);
});
