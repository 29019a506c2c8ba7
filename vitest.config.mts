import { configDefaults, defineConfig } from 'vitest/config';
import LongestFirst from './test/sequencer.ts';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The browser tests need Chromium: `npm run test:browser` (vitest.browser.config.mts); the
    // AWS contract suite, relaunch check's tests among them, needs moto_server and cfn-lint:
    // `npm run test:aws` (vitest.aws.config.mts).
    exclude: [...configDefaults.exclude, 'test/browser/**', 'test/aws/**'],
    setupFiles: ['test/setup.ts'],
    // Many files wait on real processes (a 90 s job, a 60 s wait for capacity) rather than
    // use the CPU: they start first (test/sequencer.ts), and five workers let the files
    // that do use it run beside them on two cores.
    sequence: { sequencer: LongestFirst },
    maxWorkers: 5,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    coverage: {
      provider: 'v8',
      include: ['lib/**/*.ts'],
      reporter: ['text', 'text-summary'],
      thresholds: {
        'lib/spec/**': { lines: 100, branches: 100 },
        'lib/policy/**': { lines: 100, branches: 100 },
      },
    },
  },
});
