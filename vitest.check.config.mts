import { defineConfig } from 'vitest/config';

// `npm run test:check`: relaunch check against moto_server (its own process, started by
// the tests on 127.0.0.1), apart from `npm test` so that needs no moto.
export default defineConfig({
  test: {
    include: ['test/check/**/*.test.ts'],
    setupFiles: ['test/setup.ts'],
    // Each file starts its own moto_server: two at a time on two cores.
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
