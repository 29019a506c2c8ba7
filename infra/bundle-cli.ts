// `node --import tsx infra/bundle-cli.ts <lambda> <outdir>`: bundles one Lambda (or copies
// its cached bundle when none of its sources changed: infra/bundle.ts). The CDK
// construct runs it at synth; asset bundling is synchronous and esbuild's plugins need
// its asynchronous API, so the build runs in this child process.

import { LAMBDA_NAMES, type LambdaName } from './lambda-catalog.ts';
import { bundleLambdaCached } from './bundle.ts';

const [name, outdir] = process.argv.slice(2);
if (!LAMBDA_NAMES.includes(name as LambdaName) || outdir === undefined) {
  console.error(`usage: bundle-cli.ts <${LAMBDA_NAMES.join('|')}> <outdir>`);
  process.exit(2);
}
await bundleLambdaCached(name as LambdaName, outdir);
