// The real `cdk synth`, spawned as a user runs it: offline, no credentials, esbuild
// bundling (no Docker). Slow (tens of seconds with bundling), so there is only this one.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LAMBDA_NAMES } from '../../../infra/lambda-catalog.ts';

const out = mkdtempSync(join(tmpdir(), 'relaunch-synth-'));
/**
 * A limit against a hang: the synth took 165 s on a 2-CPU machine with the suite and two
 * busy loops beside it, eleven esbuild bundles among its work.
 */
const SYNTH_TIMEOUT_MS = 480_000;
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe('npx cdk synth', () => {
  it('synthesizes offline with no AWS credentials and bundles every Lambda; -c job ports open them to the VPC', () => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('AWS_')));
    const ports = ['-c', 'relaunch:jobPorts=8080-8090,30000', '-c', 'relaunch:vpcCidr=10.0.0.0/16'];
    const run = spawnSync('npx', ['cdk', 'synth', '-q', '--output', out, ...ports], {
      cwd: new URL('../../..', import.meta.url).pathname,
      env: { ...env, CDK_VALIDATION: 'false', CDK_DISABLE_VERSION_CHECK: '1', AWS_EC2_METADATA_DISABLED: 'true' },
      encoding: 'utf8',
      timeout: SYNTH_TIMEOUT_MS,
    });
    expect(run.status, run.stderr).toBe(0);
    const template = JSON.parse(readFileSync(join(out, 'Relaunch.template.json'), 'utf8')) as {
      Resources: Record<string, { Type: string; Metadata?: Record<string, string>; Properties?: Record<string, unknown> }>;
    };
    const ingress = Object.values(template.Resources).filter((r) => r.Type === 'AWS::EC2::SecurityGroupIngress' && r.Properties?.CidrIp !== undefined);
    expect(ingress.map((r) => [r.Properties?.FromPort, r.Properties?.ToPort, r.Properties?.CidrIp, r.Properties?.IpProtocol])).toEqual([
      [8080, 8090, '10.0.0.0/16', 'tcp'],
      [30000, 30000, '10.0.0.0/16', 'tcp'],
    ]);
    const functions = Object.values(template.Resources).filter((r) => r.Type === 'AWS::Lambda::Function');
    expect(functions).toHaveLength(LAMBDA_NAMES.length);
    for (const fn of functions) {
      const asset = fn.Metadata?.['aws:asset:path'];
      expect(asset !== undefined && existsSync(join(out, asset, 'index.mjs')), asset).toBe(true);
    }
  }, SYNTH_TIMEOUT_MS);
});
