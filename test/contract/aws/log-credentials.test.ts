// A node's credentials for its own CloudWatch Logs streams, on a stack deployed onto moto:
// the API's log-credentials route gives a session of the stack's access role narrowed by
// the node's session policy, and IAM's own evaluation (@cloud-copilot/iam-simulate, which
// has no session policies: a session may do what both its role and its session policy
// allow) says that session may put into the node's own streams of its attempt and nowhere
// else, and that the instance role has nothing of CloudWatch Logs at all.

import { beforeAll, describe, expect, it } from 'vitest';
import { nodeLogPolicy } from '../../../lib/adapters/sts-data-access.ts';
import { jobLogGroupName, jobLogStreamName } from '../../../lib/job-log-names.ts';
import { resolveCfn, type CfnResource } from '../../support/cfn-intrinsics.ts';
import type { PolicyStatement } from './deploy.ts';
import { evaluate } from './iam.ts';
import { recordedCalls } from './recorder.ts';
import { useWorld, type StackInWorld } from './world.ts';

const world = useWorld();
let stack: StackInWorld;
let ami: string;

beforeAll(async () => {
  stack = await world().deploy({ config: { namePrefix: 'logs', logRetentionDays: 90 } });
  ami = await world().amazonLinuxAmi();
});

/** The resolved statements of every inline policy on the role `roleId` (a logical id). */
function roleStatements(roleId: string): PolicyStatement[] {
  return Object.values(stack.deployment.template.Resources)
    .filter((resource) => resource.Type === 'AWS::IAM::Policy' && ((resource.Properties?.Roles ?? []) as { Ref?: string }[]).some((role) => role.Ref === roleId))
    .flatMap((resource) => resolveCfn((resource.Properties?.PolicyDocument as { Statement: unknown }).Statement, stack.deployment.values) as PolicyStatement[]);
}

/** The logical id of the one role that `matches`. */
function roleId(matches: (resource: CfnResource, logicalId: string) => boolean): string {
  const found = Object.entries(stack.deployment.template.Resources).filter(([logicalId, resource]) => resource.Type === 'AWS::IAM::Role' && matches(resource, logicalId));
  expect(found.map(([logicalId]) => logicalId)).toHaveLength(1);
  return found[0]![0];
}

const streamArn = (group: string, stream: string) => `arn:aws:logs:${stack.deployment.region}:${stack.deployment.account}:log-group:${group}:log-stream:${stream}`;

describe("a node's log credentials", () => {
  it("the stack keeps jobs' output in one log group, for relaunch:logRetentionDays", () => {
    const groups = Object.values(stack.deployment.template.Resources).filter(
      (resource) => resource.Type === 'AWS::Logs::LogGroup' && resource.Properties?.LogGroupName === jobLogGroupName('logs'),
    );
    expect(groups.map((group) => group.Properties?.RetentionInDays)).toEqual([90]);
  });

  it("are a session of the access role narrowed to the node's own streams, which IAM lets it put into and nothing else", async () => {
    const jobId = await stack.submit(`name: logs\nnum_nodes: 2\nresources:\n  cpus: 2\n  image_id: ${ami}\nrun: train\n`);
    await stack.awaiting(jobId, 1, 'AwaitBoot');
    const agents = await stack.agents(jobId, 1);
    for (const agent of agents) await agent.heartbeat();
    await stack.awaiting(jobId, 1, 'AwaitAttempt');
    const node = agents[1]!;

    const answer = await stack.api('POST', `/jobs/${jobId}/attempts/1/log-credentials`, {
      body: JSON.stringify({ nodeRank: 1 }),
      headers: { authorization: `Bearer ${node.secret}` },
      caller: null,
    });

    expect(answer.statusCode).toBe(200);
    expect(answer.headers['cache-control']).toBe('no-store');
    expect(answer.body).toMatchObject({ Version: 1, AccessKeyId: expect.any(String), SecretAccessKey: expect.any(String), SessionToken: expect.any(String) });
    const assumed = recordedCalls().filter((call) => call.service === 'STS' && call.operation === 'AssumeRole');
    expect(assumed).toHaveLength(1);
    const roleArn = String(assumed[0]?.input.RoleArn);
    expect(roleArn).toBe(stack.deployment.functions.api.environment.DATA_ACCESS_ROLE_ARN);
    const session = JSON.parse(String(assumed[0]?.input.Policy)) as { Statement: PolicyStatement[] };
    expect(session).toEqual(nodeLogPolicy(JSON.parse(stack.deployment.functions.api.environment.JOB_LOGS as string), { jobId, attempt: 1, nodeRank: 1 }));

    const accessRole = roleStatements(roleId((_, logicalId) => logicalId.includes('DataAccessRole')));
    const group = jobLogGroupName('logs');
    const own = (phase: 'setup' | 'run') => streamArn(group, jobLogStreamName({ jobId, attempt: 1, nodeRank: 1, phase }));
    const allowed = async (action: string, resource: string) => {
      const authorization = { action, resource, context: {} };
      const byRole = await evaluate(roleArn, accessRole, authorization, stack.deployment.account);
      const bySession = await evaluate(roleArn, session.Statement, authorization, stack.deployment.account);
      return byRole === 'Allowed' && bySession === 'Allowed' ? 'Allowed' : `refused (role: ${byRole}, session: ${bySession})`;
    };
    const cases: [string, string, string][] = [
      ['its run stream', 'logs:PutLogEvents', own('run')],
      ['its setup stream', 'logs:PutLogEvents', own('setup')],
      ['its run stream', 'logs:CreateLogStream', own('run')],
      ['another node', 'logs:PutLogEvents', streamArn(group, jobLogStreamName({ jobId, attempt: 1, nodeRank: 0, phase: 'run' }))],
      ['a node whose rank starts with its own', 'logs:PutLogEvents', streamArn(group, jobLogStreamName({ jobId, attempt: 1, nodeRank: 10, phase: 'run' }))],
      ['another attempt', 'logs:PutLogEvents', streamArn(group, jobLogStreamName({ jobId, attempt: 2, nodeRank: 1, phase: 'run' }))],
      ['another job', 'logs:PutLogEvents', streamArn(group, jobLogStreamName({ jobId: `${jobId}x`, attempt: 1, nodeRank: 1, phase: 'run' }))],
      ["another deployment's group", 'logs:PutLogEvents', streamArn(jobLogGroupName('other'), jobLogStreamName({ jobId, attempt: 1, nodeRank: 1, phase: 'run' }))],
      ['its stream, deleted', 'logs:DeleteLogStream', own('run')],
      ['its stream, read', 'logs:GetLogEvents', own('run')],
    ];
    const results = await Promise.all(cases.map(async ([what, action, resource]): Promise<[string, string, string]> => [what, action, await allowed(action, resource)]));

    expect(results.map(([what, action, result]) => [what, action, result === 'Allowed'])).toEqual([
      ['its run stream', 'logs:PutLogEvents', true],
      ['its setup stream', 'logs:PutLogEvents', true],
      ['its run stream', 'logs:CreateLogStream', true],
      ['another node', 'logs:PutLogEvents', false],
      ['a node whose rank starts with its own', 'logs:PutLogEvents', false],
      ['another attempt', 'logs:PutLogEvents', false],
      ['another job', 'logs:PutLogEvents', false],
      ["another deployment's group", 'logs:PutLogEvents', false],
      ['its stream, deleted', 'logs:DeleteLogStream', false],
      ['its stream, read', 'logs:GetLogEvents', false],
    ]);
    // Every refusal is IAM's answer, not a request the simulator could not read.
    expect(results.filter(([, , result]) => result.includes('not evaluated'))).toEqual([]);
  });

  it('are refused to a node whose secret is not its attempt\'s', async () => {
    const jobId = await stack.submit(`name: logs\nresources:\n  cpus: 2\n  image_id: ${ami}\nrun: train\n`);
    await stack.awaiting(jobId, 1, 'AwaitBoot');

    const answer = await stack.api('POST', `/jobs/${jobId}/attempts/1/log-credentials`, {
      body: JSON.stringify({ nodeRank: 0 }),
      headers: { authorization: `Bearer ${'0'.repeat(64)}` },
      caller: null,
    });

    expect(answer.statusCode).toBe(401);
  });

  it('leave the instance role without any CloudWatch Logs action', async () => {
    const instanceRole = roleId((resource) => JSON.stringify(resource.Properties?.AssumeRolePolicyDocument ?? {}).includes('ec2.amazonaws.com'));
    const statements = roleStatements(instanceRole);
    const actions = statements.flatMap((statement) => (typeof statement.Action === 'string' ? [statement.Action] : [...statement.Action]));
    expect(actions.filter((action) => /^(logs:|\*$)/.test(action))).toEqual([]);
    // Its managed policies are Session Manager's core, which has no CloudWatch Logs action.
    const managed = resolveCfn(stack.deployment.template.Resources[instanceRole]?.Properties?.ManagedPolicyArns ?? [], stack.deployment.values) as string[];
    expect(managed.every((arn) => arn.endsWith(':policy/AmazonSSMManagedInstanceCore'))).toBe(true);
    const roleArn = `arn:aws:iam::${stack.deployment.account}:role/instance`;
    const put = { action: 'logs:PutLogEvents', resource: streamArn(jobLogGroupName('logs'), 'job/attempt-1/node-0/run'), context: {} };
    expect(await evaluate(roleArn, statements, put, stack.deployment.account)).not.toBe('Allowed');
  });
});
