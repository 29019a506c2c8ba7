// The API function reads jobs' output and the controller's lines for `relaunch logs`: its
// role may read the deployment's job log group and the controller functions' log groups,
// and nothing else of CloudWatch Logs; no other function may read them.

import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { LAMBDA_NAMES, LambdaName } from '../../../infra/lambda-catalog.ts';
import { RelaunchStack } from '../../../infra/relaunch-stack.ts';
import { EnvVar } from '../../../lib/workflow/env.ts';
import { flat } from '../../support/fixtures/cfn.ts';

process.env.CDK_VALIDATION = 'false';

type Resource = { Type: string; Properties: Record<string, unknown> };
type Statement = { Action: string | string[]; Resource: unknown };

let resources: Record<string, Resource>;

beforeAll(() => {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const stack = new RelaunchStack(app, 'Test', {
    relaunch: { vpcId: 'vpc-0123456789abcdef0', subnetsByZone: { 'us-east-1a': 'subnet-0123456789abcdef0' }, namePrefix: 'team-a' },
  });
  resources = Template.fromStack(stack).toJSON().Resources as Record<string, Resource>;
});

function functionId(name: LambdaName): string {
  const found = Object.keys(resources).find((id) => resources[id]?.Type === 'AWS::Lambda::Function' && id.startsWith(`RelaunchFunctions${name.replaceAll('-', '')}`));
  if (found === undefined) throw new Error(`no function ${name}`);
  return found;
}

function logStatementsOf(name: LambdaName): Statement[] {
  const roleId = ((resources[functionId(name)]?.Properties.Role as { 'Fn::GetAtt': string[] })['Fn::GetAtt'])[0];
  return Object.values(resources)
    .filter((r) => r.Type === 'AWS::IAM::Policy' && (r.Properties.Roles as { Ref: string }[]).some((role) => role.Ref === roleId))
    .flatMap((r) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement)
    .filter((s) => (Array.isArray(s.Action) ? s.Action : [s.Action]).some((action) => action.startsWith('logs:')));
}

/** The log group's logical id of a function, from its LoggingConfig. */
function logGroupIdOf(name: LambdaName): string {
  const config = resources[functionId(name)]?.Properties.LoggingConfig as { LogGroup: { Ref: string } };
  return config.LogGroup.Ref;
}

describe("the API function's reading of logs", () => {
  it("may read only the deployment's job log group and the controller functions' groups, with the three read actions", () => {
    const statements = logStatementsOf(LambdaName.api);
    expect(statements.flatMap((s) => s.Action).sort()).toEqual(['logs:DescribeLogStreams', 'logs:FilterLogEvents', 'logs:GetLogEvents']);
    const resourcesRead = statements.flatMap((s) => (Array.isArray(s.Resource) ? s.Resource : [s.Resource])).map((r) => flat(r));
    expect(resourcesRead).toContain('arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/team-a/jobs');
    expect(resourcesRead).toContain('arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/team-a/jobs:*');
    for (const name of LAMBDA_NAMES.filter((other) => other !== LambdaName.api)) {
      expect(resourcesRead.some((r) => r.includes(logGroupIdOf(name))), name).toBe(true);
    }
    expect(resourcesRead.some((r) => r.includes(logGroupIdOf(LambdaName.api)))).toBe(false);
    expect(resourcesRead.every((r) => r !== '*' && !r.endsWith('log-group:*'))).toBe(true);
  });

  it('is told which groups those are; no other function reads logs', () => {
    const variables = (resources[functionId(LambdaName.api)]?.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
    const config = flat(variables[EnvVar.jobLogs]);
    expect(config).toContain('"namePrefix":"team-a"');
    for (const name of LAMBDA_NAMES.filter((other) => other !== LambdaName.api)) expect(config).toContain(`"${name}"`);
    for (const name of LAMBDA_NAMES.filter((other) => other !== LambdaName.api)) expect(logStatementsOf(name), name).toEqual([]);
  });
});
