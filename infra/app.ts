// The CDK app: `cdk synth` / `cdk deploy` run this (cdk.json). Offline: no lookups, no
// account or region needed; settings come from context (see config.ts), and the stacks are
// named from relaunch:namePrefix (lib/deployment-names.ts).

import { App } from 'aws-cdk-lib';
import { configFromContext } from './config.ts';
import { addDeployment } from './relaunch-stack.ts';

const app = new App();
addDeployment(app, configFromContext((key) => app.node.tryGetContext(key)));
app.synth();
