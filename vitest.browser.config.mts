// `npm run test:browser`: the jobs page driven in Debian's Chromium (playwright-core; no
// browser is downloaded). Apart from `npm test`, which needs no browser.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/browser/**/*.test.ts'],
    setupFiles: ['test/setup.ts'],
    // One browser at a time on two cores.
    maxWorkers: 1,
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
