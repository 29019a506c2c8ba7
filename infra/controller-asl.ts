// The controller's definition as the local runtime loads it: infra/controller.asl.json, the
// ASL that asl.ts renders from the same chain `cdk deploy` ships, written by `npm run asl`.
// Reading the file spares every local start the CDK import and the render (about 0.7 s of
// CPU per `relaunch` command); test/unit/infra/asl-file.test.ts keeps the file equal to the render.

import { readFileSync } from 'node:fs';
import type { AslDefinition } from './asl.ts';

/** Where the rendered definition is kept, beside this module. */
export const CONTROLLER_ASL_FILE = new URL('./controller.asl.json', import.meta.url);

/** The controller's definition, read from CONTROLLER_ASL_FILE (a fresh copy each call). */
export function readControllerAsl(): AslDefinition {
  return JSON.parse(readFileSync(CONTROLLER_ASL_FILE, 'utf8')) as AslDefinition;
}

/** The file's text for a definition: what `npm run asl` writes and the test compares. */
export function controllerAslText(asl: AslDefinition): string {
  return `${JSON.stringify(asl, null, 2)}\n`;
}
