// A local run of a task with a `setup` runs that setup on the user's own machine: said once
// per data folder, before the first such run, since a SkyPilot file's `pip install -r
// requirements.txt` meant for a fresh instance installs into the user's own Python here.

import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ParsedJob } from '../lib/task-file/parse.ts';

/** The file in a data folder that says the notice was shown there. */
export const SETUP_NOTICE_MARK = 'setup-notice-shown';

/**
 * The notice for a local run of `job`, or null when none is due: no task has a setup, or
 * this data folder's runs have shown it before.
 */
export function setupNotice(job: ParsedJob, dataDir: string): string | null {
  const withSetup = job.tasks.filter(({ spec }) => (spec.setup ?? '').trim() !== '');
  if (withSetup.length === 0 || existsSync(join(dataDir, SETUP_NOTICE_MARK))) return null;
  const first = (withSetup[0]?.spec.setup ?? '').trim().split('\n')[0] ?? '';
  const shown = first.length > 60 ? `${first.slice(0, 60)}...` : first;
  return [
    `relaunch: this run is local, so the task's setup (${shown}) runs on this machine, as you, with your own shell and Python:`,
    'relaunch:   what it installs goes into the Python on your PATH (use a virtualenv, or --api to run on EC2).',
    `relaunch:   said once for ${dataDir}.`,
  ].join('\n');
}

/** Remembers, in the data folder, that the notice was shown. */
export function markSetupNoticeShown(dataDir: string): void {
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(join(dataDir, SETUP_NOTICE_MARK), `${new Date().toISOString()}\n`);
}
