// The suite's global setup: without moto_server and cfn-lint nothing in it can run, so it
// stops before any test with the one command that installs both.

import { requireAwsTools } from './moto.ts';

export default function setup(): void {
  requireAwsTools();
}
