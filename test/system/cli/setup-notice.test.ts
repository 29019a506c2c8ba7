// A local run of a task with a `setup` says, once per data folder and before the setup's own
// output, that the setup runs on the user's own machine and Python.

import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killStrayClis, removeTempDirs, runCli, SLOW, tempDir, writeTask } from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

const WITH_SETUP = 'name: sky-style\nsetup: echo "setup ran"\nrun: echo "run ran"\n';
const WITHOUT_SETUP = 'name: plain\nrun: echo "run ran"\n';
const NOTICE = /relaunch: this run is local, so the task's setup \(echo "setup ran"\) runs on this machine, as you, with your own shell and Python/;

describe('the notice that a local setup runs on this machine', { timeout: SLOW }, () => {
  it('is shown before the first local run of a task with a setup, then never again for that data folder', async () => {
    const dir = await tempDir('setup-notice');
    const data = join(dir, 'data');
    const plain = await writeTask(dir, 'plain.yaml', WITHOUT_SETUP);
    const withSetup = await writeTask(dir, 'setup.yaml', WITH_SETUP);

    const first = await runCli(['run', plain, '--data-dir', data], { cwd: dir });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).not.toMatch(/runs on this machine/);

    const second = await runCli(['run', withSetup, '--data-dir', data], { cwd: dir });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toMatch(NOTICE);
    expect(second.stderr).toContain(`relaunch:   said once for ${data}.`);
    expect(second.stdout).toContain('setup ran');

    const third = await runCli(['run', withSetup, '--data-dir', data], { cwd: dir });
    expect(third.code, third.stderr).toBe(0);
    expect(third.stderr).not.toMatch(/runs on this machine/);

    const elsewhere = await runCli(['run', withSetup, '--data-dir', join(dir, 'other')], { cwd: dir });
    expect(elsewhere.stderr).toMatch(NOTICE);
  });
});
