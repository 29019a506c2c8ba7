import { defineConfig } from 'vitest/config';

// `npm run test:aws`: the stack against moto_server (a second implementation of the AWS
// APIs) and cfn-lint. Kept apart from `npm test`, which needs neither.
export default defineConfig({
  test: {
    include: ['test/contract/aws/**/*.test.ts'],
    setupFiles: ['test/setup.ts'],
    // Stops at once, naming the install command, where moto_server or cfn-lint is missing.
    globalSetup: ['test/contract/aws/tools.ts'],
    // Each file starts its own moto_server; two at a time leave the machine's second core free.
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
