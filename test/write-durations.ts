// `npm run test:durations`, after `npm test` and `npm run test:system`: writes each test
// file's duration, from vitest's cache of those runs, to test/durations.json, the order a
// fresh clone starts its files in (test/sequencer.ts).

import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DURATIONS_FILE } from './sequencer.ts';

const cacheRoot = fileURLToPath(new URL('../node_modules/.vite/vitest/', import.meta.url));
if (!existsSync(cacheRoot)) {
  process.stderr.write(`no test durations to write: ${cacheRoot} is absent (run \`npm test\` and \`npm run test:system\` first)\n`);
  process.exit(1);
}
const durations: Record<string, number> = {};
for (const project of readdirSync(cacheRoot)) {
  const { results } = JSON.parse(readFileSync(join(cacheRoot, project, 'results.json'), 'utf8')) as { results: [string, { duration?: number }][] };
  for (const [key, result] of results) {
    const file = key.slice(key.indexOf(':') + 1);
    if (result.duration !== undefined && file.startsWith('test/') && !file.startsWith('test/browser/') && !file.startsWith('test/contract/')) {
      durations[file] = Math.round(result.duration / 100) * 100;
    }
  }
}
const sorted = Object.fromEntries(Object.entries(durations).sort(([a], [b]) => a.localeCompare(b)));
writeFileSync(DURATIONS_FILE, `${JSON.stringify(sorted, null, 2)}\n`);
process.stdout.write(`wrote ${Object.keys(sorted).length} durations to ${fileURLToPath(DURATIONS_FILE)}\n`);
