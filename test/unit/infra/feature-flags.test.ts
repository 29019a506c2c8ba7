// cdk.json sets every feature flag aws-cdk-lib recommends for a new app (so `cdk synth`
// has none "not configured"), each at its recommended value unless LEFT_OFF says why not;
// apps built without cdk.json get the same ones from infra/feature-flags.ts.

import { readFileSync } from 'node:fs';
import { CURRENTLY_RECOMMENDED_FLAGS } from 'aws-cdk-lib/cx-api';
import { App, FeatureFlags, Stack } from 'aws-cdk-lib';
import { describe, expect, it } from 'vitest';
import { FEATURE_FLAGS, isFeatureFlag, LEFT_OFF } from '../../../infra/feature-flags.ts';

const context = (JSON.parse(readFileSync(new URL('../../../cdk.json', import.meta.url), 'utf8')) as { context: Record<string, unknown> }).context;

describe("the app's feature flags", () => {
  it('cdk.json sets every recommended flag, at its recommended value unless left off with a reason', () => {
    const expected = { ...CURRENTLY_RECOMMENDED_FLAGS, ...Object.fromEntries(Object.entries(LEFT_OFF).map(([flag, { value }]) => [flag, value])) };
    const flags = Object.fromEntries(Object.entries(context).filter(([key]) => isFeatureFlag(key)));
    expect(flags).toEqual(expected);
    for (const { why } of Object.values(LEFT_OFF)) expect(why.length).toBeGreaterThan(20);
  });

  it('take effect in an app built without cdk.json that is given them, as the tests build theirs', () => {
    const stackOf = (context: Record<string, unknown>) => new Stack(new App({ context }), 'Flags');
    for (const flag of ['@aws-cdk/aws-iam:minimizePolicies', '@aws-cdk/core:enablePartitionLiterals']) {
      expect(FeatureFlags.of(stackOf({})).isEnabled(flag)).toBe(false);
      expect(FeatureFlags.of(stackOf({ ...FEATURE_FLAGS })).isEnabled(flag)).toBe(true);
    }
  });
});
