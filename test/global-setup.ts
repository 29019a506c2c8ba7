// Before any test: a current build of the CLI (cli/build.ts), so that the tests drive the
// binary as `npm ci` leaves it. `npm ci` built it already; after an edit it is built again.

import { buildCli } from '../cli/build.ts';
import { currentBuild } from '../cli/built.js';
import { REPO_ROOT } from '../infra/lambda-catalog.ts';

let built: Promise<unknown> | undefined;

export default async function setup(): Promise<void> {
  built ??= currentBuild(REPO_ROOT) === undefined ? buildCli(REPO_ROOT) : Promise.resolve();
  await built;
}
