// The CDK app: `cdk synth` / `cdk deploy` run this (cdk.json). Offline: no lookups, no
// account or region needed; settings come from context (see config.ts).

import { App, Annotations } from 'aws-cdk-lib';
import { configFromContext, ContextKey } from './config.ts';
import { addRelaunchStacks } from './relaunch-stack.ts';

const app = new App();
const config = configFromContext((key) => app.node.tryGetContext(key));
const { relaunch: stack } = addRelaunchStacks(app, 'Relaunch', config);

// cdk.json ships all-zero example ids so a fresh clone synthesizes; deploying them fails.
if (/^vpc-0+$/.test(config.vpcId)) {
  Annotations.of(stack).addWarningV2(
    'relaunch:placeholder-network',
    `${ContextKey.vpcId} and ${ContextKey.subnets} are cdk.json's examples: set your own before cdk deploy`,
  );
}
app.synth();
