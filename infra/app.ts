// The CDK app: `cdk synth` / `cdk deploy` run this (cdk.json). Offline: no lookups, no
// account or region needed; settings come from context (see config.ts), and the stacks are
// named from relaunch:namePrefix (lib/deployment-names.ts). A bad setting is the user's to
// fix: its message alone, never a stack trace around it, and a non-zero exit.

import { App } from 'aws-cdk-lib';
import { ConfigurationError } from '../lib/errors.ts';
import { configFromContext } from './config.ts';
import { addDeployment } from './relaunch-stack.ts';

const app = new App();
try {
  // The CLI sets CDK_DEFAULT_REGION from AWS_REGION or the profile: where the env-agnostic stack goes.
  addDeployment(app, configFromContext((key) => app.node.tryGetContext(key)), process.env.CDK_DEFAULT_REGION);
} catch (error) {
  if (!(error instanceof ConfigurationError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
}
app.synth();
