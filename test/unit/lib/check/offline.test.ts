// `relaunch check` when the account cannot be read (no credentials, refused ones, STS out
// of reach): what cdk.json and the task file say on their own, then which checks need AWS.

import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { AccountReader } from '../../../../lib/check/account-reader-port.ts';
import type { DeploymentSettings } from '../../../../lib/check/deployment.ts';
import { CHECKS_NEEDING_AWS } from '../../../../lib/check/offline.ts';
import type { CheckReport } from '../../../../lib/check/report.ts';
import { runChecks, type CheckInput, type LocalSettings } from '../../../../lib/check/run-checks.ts';
import { parseTaskFile } from '../../../../lib/task-file/parse.ts';

/** What the SDK throws when the default chain finds no credentials. */
function noCredentials(): Error {
  const error = new Error('Could not load credentials from any providers');
  error.name = 'CredentialsProviderError';
  return error;
}

/** An account no read reaches: any call but identity() is a fault of the code under test. */
const UNREADABLE = new Proxy({} as AccountReader, {
  get: (_target, name) =>
    name === 'identity'
      ? () => Promise.reject(noCredentials())
      : () => {
          throw new Error(`${String(name)} was read without credentials`);
        },
});
const API = { sources: () => Promise.reject(new Error('the API was probed without credentials')) };

const SETTINGS: DeploymentSettings = {
  namePrefix: 'relaunch',
  vpcId: 'vpc-0123456789abcdef0',
  regions: [{ region: 'us-east-1', subnetsByZone: { 'us-east-1a': 'subnet-0123456789abcdef0' } }],
  allowedInstanceTypes: null,
  dataBuckets: ['team-data'],
  dataBucket: null,
};
const LOCAL: LocalSettings = { kind: 'settings', source: 'cdk.json', settings: SETTINGS, placeholder: false };

function input(local: LocalSettings, task: string | null = null, region = 'us-east-1'): CheckInput {
  return {
    region,
    regionSource: region === 'us-east-1' ? "cdk.json's subnets" : 'AWS_REGION',
    stackName: 'Relaunch',
    apiUrl: null,
    local,
    task: task === null ? null : { specs: [parseTaskFile(task).spec], pipeline: false },
  };
}

async function offline(given: CheckInput): Promise<CheckReport> {
  return runChecks(given, { reader: UNREADABLE, api: API });
}

const byId = (report: CheckReport, id: string) => report.checks.find((check) => check.id === id);

describe('relaunch check without credentials', () => {
  it("says cdk.json still holds the example ids, after the credentials' failure", async () => {
    const report = await offline(input({ ...LOCAL, placeholder: true }));
    expect(report.checks.map((check) => check.id)).toEqual(['region', 'credentials', 'settings', 'offline']);
    expect(byId(report, 'settings')).toMatchObject({ status: 'fail', message: 'cdk.json still holds the example ids: a deploy would fail' });
    expect(report.ok).toBe(false);
  });

  it("fails subnets of another region than the one it would deploy to", async () => {
    const report = await offline(input(LOCAL, null, 'eu-west-1'));
    expect(byId(report, 'settings')).toMatchObject({ status: 'fail', message: "cdk.json's subnets are in us-east-1, but the stack would deploy to eu-west-1 (from AWS_REGION)", fix: 'deploy and check with the region of the subnets: AWS_REGION=us-east-1 (or --region us-east-1)' });
  });

  it('names a bad relaunch:* value of cdk.json', async () => {
    const report = await offline(input({ kind: 'invalid', source: 'cdk.json', message: 'relaunch:launchPace: expected {burst, perSecond}' }));
    expect(byId(report, 'settings')).toMatchObject({ status: 'fail', message: 'cdk.json: relaunch:launchPace: expected {burst, perSecond}' });
  });

  it('fails a task too large for EC2 user data, naming run', async () => {
    // Hex digests gzip to about half: 40 KB of them cannot fit 16 KiB beside the agent.
    const huge = Array.from({ length: 600 }, (_, index) => `echo ${createHash('sha256').update(String(index)).digest('hex')}`).join('\n');
    const task = `resources:\n  cloud: aws\nrun: |\n${huge.split('\n').map((line) => `  ${line}`).join('\n')}\n`;
    const check = byId(await offline(input(LOCAL, task)), 'task');
    expect(check?.status).toBe('fail');
    expect(check?.message).toMatch(/^run: setup, run and envs are too large for EC2 user data: \d+ bytes compressed, at most 16384/);
  });

  it('passes a task that fits, its local workdir counted as relaunch run would upload it', async () => {
    const check = byId(await offline(input(LOCAL, 'workdir: .\nresources:\n  cloud: aws\nrun: python train.py\n')), 'task');
    expect(check).toMatchObject({ status: 'ok' });
  });

  it('fails a bucket outside relaunch:dataBuckets, as the API would refuse it', async () => {
    const task = 'file_mounts:\n  /data: s3://other-data/x\nrun: ls /data\n';
    const check = byId(await offline(input(LOCAL, task)), 'task');
    expect(check?.status).toBe('fail');
    expect(check?.message).toContain('file_mounts["/data"]: expected a bucket job instances may use, got other-data');
    expect(check?.message).toContain('other-data');
  });

  it('ends by naming every check that needs AWS, and how to give credentials', async () => {
    const check = byId(await offline(input(LOCAL)), 'offline');
    expect(check?.status).toBe('warn');
    for (const id of CHECKS_NEEDING_AWS) expect(check?.message).toContain(id);
    expect(check?.fix).toContain('aws configure');
    expect(check?.fix).toContain('AWS_PROFILE');
  });
});
