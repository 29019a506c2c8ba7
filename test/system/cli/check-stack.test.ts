// `relaunch check`'s stack, when --stack is not given: the one `cdk deploy` of the shipped
// app makes for cdk.json's prefix, so a second deployment is checked, not the default one.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { localSettings, stackName } from '../../../cli/check-context.ts';
import { InvalidInputError } from '../../../lib/errors.ts';

const folders: string[] = [];
afterEach(async () => {
  await Promise.all(folders.splice(0).map((folder) => rm(folder, { recursive: true, force: true })));
});

/** A folder whose cdk.json holds `context`. */
async function withCdkJson(context: Record<string, unknown> | null): Promise<string> {
  const folder = await mkdtemp(join(tmpdir(), 'relaunch-check-stack-'));
  folders.push(folder);
  if (context !== null) await writeFile(join(folder, 'cdk.json'), JSON.stringify({ app: 'true', context }));
  return folder;
}

const NETWORK = { 'relaunch:vpcId': 'vpc-0123456789abcdef0', 'relaunch:subnets': { 'us-east-1a': 'subnet-0123456789abcdef0' } };

describe('relaunch check --stack, not given', () => {
  it.each([
    ['cdk.json names the prefix prod', { ...NETWORK, 'relaunch:namePrefix': 'prod' }, 'prod-relaunch'],
    ['cdk.json gives the default prefix', { ...NETWORK, 'relaunch:namePrefix': 'relaunch' }, 'Relaunch'],
    ['cdk.json gives no prefix', NETWORK, 'Relaunch'],
    ['there is no cdk.json', null, 'Relaunch'],
    ["cdk.json's context is not valid", { 'relaunch:namePrefix': 'prod' }, 'Relaunch'],
  ])('is the shipped app\'s stack of the deployment when %s', async (_, context, expected) => {
    const local = await localSettings(await withCdkJson(context));
    expect(stackName(undefined, local)).toBe(expected);
  });

  it('is what --stack says when given, whatever cdk.json names', async () => {
    const local = await localSettings(await withCdkJson({ ...NETWORK, 'relaunch:namePrefix': 'prod' }));
    expect(stackName('Relaunch', local)).toBe('Relaunch');
    expect(() => stackName('1bad', local)).toThrow(InvalidInputError);
  });
});
