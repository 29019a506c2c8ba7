#!/usr/bin/env node
// Entry point for `npx relaunch`: runs the TypeScript CLI from source through tsx.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const { register } = await import('tsx/esm/api');
register();
const { main } = await import('./main.ts');
process.exitCode = await main(process.argv);
