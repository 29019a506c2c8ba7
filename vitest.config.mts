import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    setupFiles: ['test/setup.ts'],
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
