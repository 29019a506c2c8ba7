// The optional WAF on the agent routes, from CDK context: off unless set, validated like every key.

import { describe, expect, it } from 'vitest';
import { configFromContext, ContextKey } from '../../../infra/config.ts';

const minimal = { [ContextKey.vpcId]: 'vpc-0123456789abcdef0', [ContextKey.subnets]: { 'us-east-1a': 'subnet-0123456789abcdef0' } };
const from = (context: Record<string, unknown>) => () => configFromContext((key) => context[key]);

describe('context relaunch:agentWafRateLimit', () => {
  it('is off when not set', () => {
    expect(from(minimal)().agentWafRateLimit).toBeUndefined();
  });

  it.each([
    [2000, 2000],
    ['2000', 2000],
    [' 10 ', 10],
  ])('takes %j (cdk.json number, or -c text) as a limit of %i', (value, expected) => {
    expect(from({ ...minimal, [ContextKey.agentWafRateLimit]: value })().agentWafRateLimit).toBe(expected);
  });

  it.each([
    [9, 'expected an integer of at least 10'],
    ['0', 'expected an integer of at least 10'],
    [12.5, 'expected an integer of at least 10'],
    ['lots', 'expected an integer of at least 10'],
    [true, 'expected an integer of at least 10'],
    ['-100', 'expected an integer of at least 10'],
    [3_000_000_000, 'expected at most 2000000000'],
  ])('refuses %j, naming the key', (value, message) => {
    expect(from({ ...minimal, [ContextKey.agentWafRateLimit]: value })).toThrow(`context relaunch:agentWafRateLimit: ${message}`);
  });
});
