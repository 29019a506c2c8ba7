// A SkyPilot project as its users have it (test/support/fixtures/sky-project.ts), run as they run
// it: from the project's top, with the task file in `configs/`. The workdir the job sees is
// the project SkyPilot would sync, and runs that follow each other pack the same archive.

import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildSkyProject, SYNCED_FILES } from '../../support/fixtures/sky-project.ts';
import { killStrayClis, removeTempDirs, runCli, SLOW, stateHome, tempDir } from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

/** The job's own output lines that are paths of its workdir (`find . -type f` prints `./x`). */
function listedFiles(stdout: string): string[] {
  return stdout
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.startsWith('./'))
    .map((line) => line.slice(2));
}

describe('a SkyPilot project run from its top', () => {
  it(
    'ships the whole project for `workdir: .` in configs/train.yaml, without what its ignore files name or relaunch\'s data folder',
    async () => {
      const dir = await tempDir('sky-project');
      buildSkyProject(dir);

      const first = await runCli(['run', 'configs/train.yaml'], { cwd: dir });
      expect(first.code, first.stderr).toBe(0);
      expect(listedFiles(first.stdout).sort()).toEqual(SYNCED_FILES);
      expect(first.stderr).toMatch(/\. \(9 files, \d+ paths left out by \.gitignore, /);
      // envs reach the job as the file writes them.
      expect(first.stdout).toContain('LR=1e-4 WARMUP=1.0');
      // The last line names the counters as status does: used of allowed.
      expect(first.stdout).toMatch(/ SUCCEEDED after 1 attempt; recoveries: 0, restarts on errors: 0 of 0\n$/);

      // The user's data folder (the test's own XDG_STATE_HOME) now holds the first run's
      // archive and state: the second run packs exactly the same archive again.
      const second = await runCli(['run', 'configs/train.yaml'], { cwd: dir });
      expect(second.code, second.stderr).toBe(0);
      expect(second.stderr).toMatch(/already in /);
      expect(readdirSync(join(stateHome(dir), 'relaunch', 'sources'))).toHaveLength(1);
    },
    SLOW,
  );
});
