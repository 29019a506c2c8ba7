// cfn-lint (CloudFormation's own linter, with AWS's resource specifications) on the
// templates relaunch synthesizes: the default deployment, one with every option on, and one
// failing over to three more regions (with their event forwarder stacks). No error; each
// warning left is one explained below.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { afterAll, describe, expect, it } from 'vitest';
import type { RelaunchConfig } from '../../../infra/config.ts';
import { addDeployment } from '../../../infra/relaunch-stack.ts';
import { FEATURE_FLAGS } from '../../../infra/feature-flags.ts';

const out = mkdtempSync(join(tmpdir(), 'relaunch-cfn-lint-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

const NETWORK = { vpcId: 'vpc-0123456789abcdef0', subnetsByZone: { 'us-east-1a': 'subnet-0123456789abcdef0', 'us-east-1b': 'subnet-0123456789abcdef1' } };

/** The deployments linted, by name. */
const DEPLOYMENTS: Readonly<Record<string, RelaunchConfig>> = {
  default: NETWORK,
  'full-options': {
    ...NETWORK,
    namePrefix: 'relaunch-full',
    allowedInstanceTypes: ['m6i.large', 'g5.xlarge', 'p4d.24xlarge'],
    nodeToNodeTraffic: false,
    jobPorts: [{ from: 8080, to: 8090 }, { from: 30000, to: 30000 }],
    vpcCidr: '10.0.0.0/16',
    agentWafRateLimit: 200,
    alarmTopicArn: 'arn:aws:sns:us-east-1:123456789012:team-pager',
    jobNotifications: true,
    dataBuckets: ['team-data', 'team-ckpts-*'],
    launchPace: { burst: 200, perSecond: 1 },
    ecrRepositories: ['team/trainer', 'team-base-*'],
    apiGatewayAccountRole: false,
  },
  'multi-region': {
    ...NETWORK,
    namePrefix: 'relaunch-global',
    otherRegions: ['us-west-2', 'eu-west-1', 'ap-northeast-1'].map((region, index) => ({
      region,
      subnetsByZone: { [`${region}a`]: `subnet-0123456789abcdef${index + 2}`, [`${region}b`]: `subnet-0123456789abcde${index + 1}0` },
      securityGroupIds: [`sg-0123456789abcdef${index}`],
    })),
  },
};

/**
 * Warnings cfn-lint gives that stand, each with why. Anything else fails the test.
 */
const EXPLAINED: Readonly<Record<string, string>> = {
  W3005:
    "A Lambda function (and the state machine) DependsOn its role as well as reading the role's ARN: aws-cdk-lib's Function and StateMachine add " +
    'the dependency on the role and its default policy together, so that the policy exists before the first invocation. The one on the role is ' +
    'redundant with the GetAtt, and CloudFormation orders the resources the same either way.',
};

interface Finding {
  readonly Rule: { readonly Id: string };
  readonly Level: 'Error' | 'Warning' | 'Informational';
  readonly Message: string;
  readonly Filename: string;
}

function synthesize(name: string, config: RelaunchConfig): string[] {
  process.env.CDK_VALIDATION = 'false';
  const outdir = join(out, name);
  const app = new App({ outdir, context: { ...FEATURE_FLAGS, 'aws:cdk:bundling-stacks': [] } });
  addDeployment(app, config);
  app.synth();
  return readdirSync(outdir)
    .filter((file) => file.endsWith('.template.json'))
    .map((file) => join(outdir, file));
}

describe('cfn-lint', () => {
  it('finds no error in the default, the full-options and the multi-region templates, and only the warnings explained', () => {
    const templates = Object.entries(DEPLOYMENTS).flatMap(([name, config]) => synthesize(name, config));
    // The stack, plus one forwarder per failover region.
    expect(templates).toHaveLength(1 + 1 + 4);
    const run = spawnSync('cfn-lint', ['--format', 'json', ...templates], { encoding: 'utf8', timeout: 240_000 });
    // 0: nothing; 4: warnings; 2, 6, 8, 10, 12, 14: errors (with or without others). Anything else is cfn-lint failing.
    expect(run.error, run.stderr).toBeUndefined();
    const findings = JSON.parse(run.stdout === '' ? '[]' : run.stdout) as Finding[];
    const describe = (finding: Finding) => `${finding.Level} ${finding.Rule.Id} ${finding.Filename.replace(out, '')}: ${finding.Message}`;
    expect(findings.filter((finding) => finding.Level === 'Error').map(describe)).toEqual([]);
    expect(findings.filter((finding) => EXPLAINED[finding.Rule.Id] === undefined).map(describe)).toEqual([]);
    expect(run.status, run.stderr).toBe(findings.length === 0 ? 0 : 4);
  }, 300_000);
});
