// The CDK feature flags of relaunch's app, as cdk.json holds them for `cdk synth` and
// `cdk deploy`: every flag aws-cdk-lib recommends for a new app (what `cdk init` writes),
// none left off. Apps built without cdk.json (the tests', infra/asl.ts) take them from here,
// so they synthesize what the shipped app does.
//
// What they change in relaunch's templates (checked flag by flag against a synth without
// any, with every setting of the app on): `@aws-cdk/aws-iam:minimizePolicies` merges the
// statements of each IAM policy that differ only in actions or resources, and sorts them
// (the same permissions); `@aws-cdk/aws-apigateway:logGroupDestinationArnWithoutWildcard`
// names the access log group by its ARN without `:*`; `@aws-cdk/core:enablePartitionLiterals`
// writes `aws` instead of `Ref AWS::Partition` in a stack with an explicit region (the
// failover regions' forwarders). Each is an in-place update of a policy, the API stage or
// a rule: none replaces a resource, and none touches the jobs table or the data bucket.
// A flag that would replace either (a new logical id, a changed physical name) would be
// left off here, in LEFT_OFF, with why.

import cdkJson from '../cdk.json' with { type: 'json' };

/** A context key that is a feature flag (`@aws-cdk/...`, `@aws-cdk-containers/...`). */
export function isFeatureFlag(key: string): boolean {
  return key.startsWith('@aws-cdk/') || key.startsWith('@aws-cdk-containers/');
}

/**
 * Recommended flags kept at their old value, each with why: the value cdk.json holds for
 * it, so the CLI counts it as configured. None today.
 */
export const LEFT_OFF: Readonly<Record<string, { readonly value: unknown; readonly why: string }>> = {};

/** The feature flags cdk.json gives the app, for an App built without it. */
export const FEATURE_FLAGS: Readonly<Record<string, unknown>> = Object.fromEntries(Object.entries(cdkJson.context).filter(([key]) => isFeatureFlag(key)));
