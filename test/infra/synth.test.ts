// The real `cdk synth`, spawned as a user runs it: offline, no credentials, esbuild
// bundling (no Docker). Slow (tens of seconds with bundling), so there is only this one.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LAMBDA_NAMES } from '../../infra/lambda-catalog.ts';

const out = mkdtempSync(join(tmpdir(), 'relaunch-synth-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe('npx cdk synth', () => {
  it('synthesizes offline with no AWS credentials and bundles every Lambda', () => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('AWS_')));
    const run = spawnSync('npx', ['cdk', 'synth', '-q', '--output', out], {
      cwd: new URL('../..', import.meta.url).pathname,
      env: { ...env, CDK_VALIDATION: 'false', CDK_DISABLE_VERSION_CHECK: '1', AWS_EC2_METADATA_DISABLED: 'true' },
      encoding: 'utf8',
      timeout: 240_000,
    });
    expect(run.status, run.stderr).toBe(0);
    const template = JSON.parse(readFileSync(join(out, 'Relaunch.template.json'), 'utf8')) as {
      Resources: Record<string, { Type: string; Metadata?: Record<string, string> }>;
    };
    const functions = Object.values(template.Resources).filter((r) => r.Type === 'AWS::Lambda::Function');
    expect(functions).toHaveLength(LAMBDA_NAMES.length);
    for (const fn of functions) {
      const asset = fn.Metadata?.['aws:asset:path'];
      expect(asset !== undefined && existsSync(join(out, asset, 'index.mjs')), asset).toBe(true);
    }
  }, 240_000);
});
