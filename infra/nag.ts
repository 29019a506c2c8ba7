// The wildcards in relaunch's IAM policies, each acknowledged for cdk-nag with why it is as
// narrow as the service allows. A wildcard no reason below covers stays a finding.

import { Stack, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { Construct } from 'constructs';

/** Why a wildcard resource stands, by the shape of the resource. */
const WILDCARD_REASONS: readonly (readonly [pattern: RegExp, reason: string])[] = [
  [/^\*$/, 'EC2 Describe*, X-Ray PutTraceSegments, Session Manager\'s instance actions and Step Functions\' SendTask* (scoped by their task token) take no resource but `*`.'],
  [/\.Arn>\/index\/\*$/, "The jobs table's two indexes (job list and instance lookup), queried by the store."],
  [
    /:(instance|volume|network-interface|spot-instances-request|launch-template|fleet)\/\*$/,
    "Conditioned on relaunch's job tag (terminate, tag, launch templates, fleets) or on CreateFleet/RunInstances creating the resource (launch): see infra/permissions.ts.",
  ],
  [/:ecr:\*:<AWS::AccountId>:repository\/\*$/, "The account's ECR repositories, from which a task's Docker image may be pulled (read actions only)."],
  [/::(image|snapshot)\/\*$/, 'Any AMI a task names (`image_id`), and its snapshots, may be launched from.'],
  [/:(\*)?:parameter\/aws\/service\/\*$/, "AWS's public catalogue of current AMIs, read for the default images; AWS names these parameters with no account, any account stands for that form and the reference's, and only AWS can own a parameter under /aws/."],
  [
    /:parameter\/[\w-]+\/agent-secrets\/\*$/,
    "The agents' secrets, one per instance and named after it: the launcher writes them, releases delete them, and an instance reads only the one tagged with its own ARN.",
  ],
  [/:parameter\/[\w-]+\/job-secrets\/\*$/, "Jobs' secrets, one parameter per job named after it: written at submit, read at launch, deleted when the job ends."],
  [/DataBucket\w*\.Arn>\/(sources|mounts)\/\*$/, "The stack's bucket, as the data access role's ceiling: nodes fetch uploaded sources (read) and use nameless mounts (read and write), each session narrowed to its own job's objects."],
  [/^arn:<AWS::Partition>:s3:::[a-z0-9.-]+\*?(\/\*)?$/, "The buckets a deployer allowed tasks to mount (relaunch:dataBuckets), as the data access role's ceiling: their objects, or every bucket of a name prefix they gave; each session is narrowed to its own job's."],
  [/:execution:[\w-]+:\*$/, "The executions of relaunch's own state machine: read one's history and stop it on a cancel."],
  [/\.Arn>:\*$/, 'Each task function and its versions, which the state machine invokes.'],
  [/:execute-api:.*\/jobs\/\*(\/logs|\/controller-log)?$/, "A job route's path parameter (the id of any job a teammate submits), on this API's stage and one method; the agents' routes are not granted."],
  [/:log-group:\/[\w-]+\/jobs:log-stream:\*$/, "The streams of the deployment's job log group: the ceiling of the sessions the API gives nodes to ship their output, each narrowed by its session policy to its own node's streams of its attempt."],
  [/:log-group:\/[\w-]+\/jobs:\*$/, "The streams of the deployment's job log group (one per job, attempt, node and phase), read by the API for `relaunch logs`."],
];

/**
 * A CloudFormation value flattened to text as cdk-nag names it in a finding: `{Ref: X}`
 * → `<X>`, `{Fn::GetAtt: [X, Arn]}` → `<X.Arn>`, a list joined with commas.
 */
export function renderCfn(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value.map(renderCfn).join(',');
  const record = value as Record<string, unknown>;
  if ('Fn::Join' in record) {
    const [separator, parts] = record['Fn::Join'] as [string, unknown[]];
    return parts.map(renderCfn).join(separator);
  }
  if ('Ref' in record) return `<${String(record.Ref)}>`;
  if ('Fn::GetAtt' in record) return `<${(record['Fn::GetAtt'] as string[]).join('.')}>`;
  return JSON.stringify(value);
}

/**
 * Acknowledges AwsSolutions-IAM5 for each wildcard resource of every policy under `scope`
 * that a reason above covers. Call it once every grant is made. A role's default policy is
 * acknowledged on its role: a policy past IAM's inline size is split at synth into the
 * role's overflow managed policies, which then carry some of its statements.
 */
export function acknowledgeWildcards(scope: Construct): void {
  const stack = Stack.of(scope);
  for (const policy of scope.node.findAll().filter((c): c is iam.Policy | iam.ManagedPolicy => c instanceof iam.Policy || c instanceof iam.ManagedPolicy)) {
    const document = stack.resolve(policy.document.toJSON()) as { Statement?: { Resource?: unknown }[] } | undefined;
    const resources = new Set((document?.Statement ?? []).flatMap((s) => [s.Resource ?? []].flat().map(renderCfn)));
    const owner = policy.node.scope instanceof iam.Role ? policy.node.scope : policy;
    for (const resource of resources) {
      const reason = WILDCARD_REASONS.find(([pattern]) => resource.includes('*') && pattern.test(resource))?.[1];
      if (reason !== undefined) Validations.of(owner).acknowledge({ id: `AwsSolutions-IAM5[Resource::${resource}]`, reason });
    }
  }
}
