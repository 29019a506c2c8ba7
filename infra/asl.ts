// The controller as plain ASL JSON, with no deploy: the local runtime runs exactly the
// definition `cdk deploy` ships, binding each Task state to a local handler by name.

import { App, Stack } from 'aws-cdk-lib';
import { Construct } from 'constructs';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { TASK_STATES, type TaskStateName } from '../lib/workflow/contract.ts';
import { buildControllerDefinition, type ControllerTasks } from './workflow.ts';
import { FEATURE_FLAGS } from './feature-flags.ts';

/** The account, region and partition the placeholder ARNs use. */
const LOCAL = { account: '000000000000', region: 'us-east-1', partition: 'aws' } as const;

/** The placeholder ARN of a Task state's function; the local runtime never calls it. */
export function localFunctionArn(state: TaskStateName): string {
  return `arn:${LOCAL.partition}:lambda:${LOCAL.region}:${LOCAL.account}:function:relaunch-${state}`;
}

/** A state machine definition as Amazon States Language (JSON-compatible). */
export interface AslDefinition {
  readonly StartAt: string;
  readonly States: Record<string, Record<string, unknown>>;
  readonly [key: string]: unknown;
}

/**
 * Renders the controller's definition without synthesizing an app: the chain from
 * buildControllerDefinition, resolved, with CloudFormation intrinsics (`Ref`, `Fn::Join`,
 * `Fn::GetAtt`) replaced by local placeholder values.
 */
export function renderControllerAsl(): AslDefinition {
  const stack = new Stack(new App({ context: FEATURE_FLAGS }), 'RelaunchAsl', { env: { account: LOCAL.account, region: LOCAL.region } });
  const functions = new Construct(stack, 'Functions');
  const fns = Object.fromEntries(
    TASK_STATES.map((state) => [state, lambda.Function.fromFunctionArn(functions, state, localFunctionArn(state))]),
  ) as ControllerTasks;
  const chain = buildControllerDefinition(stack, fns);
  const graph = new sfn.StateGraph(chain.startState, 'relaunch controller');
  return withoutIntrinsics(stack.resolve(graph.toGraphJson())) as AslDefinition;
}

/** Replaces what CloudFormation would have resolved at deploy time. */
function withoutIntrinsics(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutIntrinsics);
  if (value === null || typeof value !== 'object') return value;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  if (keys.length === 1) {
    const [key] = keys as [string];
    const arg = record[key];
    if (key === 'Ref') return pseudoParameter(String(arg));
    if (key === 'Fn::Join') {
      const [separator, parts] = arg as [string, unknown[]];
      return parts.map((part) => String(withoutIntrinsics(part))).join(separator);
    }
    if (key === 'Fn::GetAtt') return `arn:${LOCAL.partition}:local:${LOCAL.region}:${LOCAL.account}:${(arg as string[]).join('/')}`;
  }
  return Object.fromEntries(keys.map((key) => [key, withoutIntrinsics(record[key])]));
}

function pseudoParameter(name: string): string {
  switch (name) {
    case 'AWS::Partition':
      return LOCAL.partition;
    case 'AWS::Region':
      return LOCAL.region;
    case 'AWS::AccountId':
      return LOCAL.account;
    case 'AWS::URLSuffix':
      return 'amazonaws.com';
    default:
      return `local-${name}`;
  }
}
