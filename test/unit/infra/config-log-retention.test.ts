// How long the deployment's job log group keeps jobs' output, from CDK context: 30 days
// unless set, one of CloudWatch Logs' retentions, validated like every key.

import { describe, expect, it } from 'vitest';
import { configFromContext, ContextKey } from '../../../infra/config.ts';

const minimal = { [ContextKey.vpcId]: 'vpc-0123456789abcdef0', [ContextKey.subnets]: { 'us-east-1a': 'subnet-0123456789abcdef0' } };
const from = (context: Record<string, unknown>) => () => configFromContext((key) => context[key]);
const expected = 'expected one of the retentions CloudWatch Logs offers, in days: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653';

describe('context relaunch:logRetentionDays', () => {
  it('is unset (the stack keeps 30 days) when not given', () => {
    expect(from(minimal)().logRetentionDays).toBeUndefined();
  });

  it.each([
    [7, 7],
    ['90', 90],
    [' 3653 ', 3653],
  ])('takes %j (cdk.json number, or -c text) as %i days', (value, days) => {
    expect(from({ ...minimal, [ContextKey.logRetentionDays]: value })().logRetentionDays).toBe(days);
  });

  it.each([[0], [2], ['31'], [12.5], ['a month'], [true], [-7]])('refuses %j, naming the key and the retentions there are', (value) => {
    expect(from({ ...minimal, [ContextKey.logRetentionDays]: value })).toThrow(`context relaunch:logRetentionDays: ${expected}`);
  });
});
