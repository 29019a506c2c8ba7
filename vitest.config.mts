import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The browser tests need Chromium: `npm run test:browser` (vitest.browser.config.mts);
    // relaunch check's need moto_server: `npm run test:check` (vitest.check.config.mts); the
    // AWS contract suite needs moto_server and cfn-lint: `npm run test:aws` (vitest.aws.config.mts).
    exclude: [...configDefaults.exclude, 'test/browser/**', 'test/check/**', 'test/aws/**'],
    setupFiles: ['test/setup.ts'],
    // Many tests wait on real processes (a 90 s job, a 60 s wait for capacity) rather
    // than use the CPU: three workers let them wait beside the others on two cores.
    maxWorkers: 3,
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
