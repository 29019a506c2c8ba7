// The Lambda catalog (what the CDK deploys and grants) against the handlers themselves: a
// handler that starts using a port must get its variables and IAM, and no folder is missed.

import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { handlerEntry, LAMBDA_NAMES, LAMBDA_NEEDS } from '../../../infra/lambda-catalog.ts';

const source = (name: (typeof LAMBDA_NAMES)[number]) => readFileSync(handlerEntry(name), 'utf8');

describe('the Lambda catalog', () => {
  it('lists every handler folder under functions/', () => {
    const folders = readdirSync(new URL('../../../functions/', import.meta.url), { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && entry.name !== 'shared')
      .map((entry) => entry.name);
    expect([...LAMBDA_NAMES].sort()).toEqual(folders.sort());
  });

  it.each(LAMBDA_NAMES)('grants %s exactly the ports its handler builds', (name) => {
    const code = source(name);
    const needs = LAMBDA_NEEDS[name];
    expect(/\bworkflow\(\)/.test(code), 'workflow()').toBe(needs.workflow.length > 0);
    expect(/\bcompute\(\)/.test(code), 'compute()').toBe(needs.compute !== false);
    // Only LaunchAttempt starts instances; the others may only release them.
    expect(/\blaunchAttempt\(/.test(code), 'launchAttempt()').toBe(needs.compute === 'launch');
    // Launching (a standby, or the attempt that takes or retires one) writes standbys.
    expect(/\blaunch(Attempt|Standby)\(/.test(code), 'standbys').toBe(needs.writesStandbys === true);
    expect(/\bstore\(\)/.test(code), 'store()').toBe(true);
    expect(/\bdeadLetters\(\)/.test(code), 'deadLetters()').toBe(needs.deadLetters === true);
    expect(/\blaunchTemplates\(\)/.test(code), 'launchTemplates()').toBe(needs.sweepsLaunchTemplates === true);
  });
});
