// The order `npm test` and `npm run test:system` start their files in: longest first, so
// the files that wait on real processes (a 90 s job, a 60 s wait for capacity, twenty
// kill -9 rounds) start at once and the short ones fill the workers beside them, instead of
// one long file starting last and running alone. A file's length is its duration in
// vitest's own cache (the last run on this machine), else in test/durations.json (measured
// by `npm run test:durations`, for a fresh clone such as CI's), else unknown, and an
// unknown file goes first: it may be long.

import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** Where the measured durations are kept: test file (from the root) to milliseconds. */
export const DURATIONS_FILE = new URL('./durations.json', import.meta.url);

function measuredDurations(): Readonly<Record<string, number>> {
  try {
    return JSON.parse(readFileSync(DURATIONS_FILE, 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const measured = measuredDurations();
    const root = this.ctx.config.root;
    const duration = (file: TestSpecification): number => {
      const path = relative(root, file.moduleId);
      return this.ctx.cache.getFileTestResults(`${file.project.name}:${path}`)?.duration ?? measured[path] ?? Number.POSITIVE_INFINITY;
    };
    return [...files].sort((a, b) => duration(b) - duration(a));
  }
}
