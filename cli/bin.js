#!/usr/bin/env node
// Entry point for `npx relaunch`: runs the CLI's build (dist/cli, written by `npm ci` or
// `npm run build`) while it is current, and the TypeScript sources through tsx otherwise,
// or always with RELAUNCH_FROM_SOURCE=1 (for a debugger's stack traces, say).
import { fileURLToPath } from 'node:url';
import { currentBuild } from './built.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const root = fileURLToPath(new URL('..', import.meta.url));
const build = process.env.RELAUNCH_FROM_SOURCE === '1' ? undefined : currentBuild(root);
const { main } = build === undefined ? await fromSource() : await import(build.href);
process.exitCode = await main(process.argv);

async function fromSource() {
  const { register } = await import('tsx/esm/api');
  register();
  return import('./main.ts');
}
