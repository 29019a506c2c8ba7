import { configDefaults, defineConfig } from 'vitest/config';
import LongestFirst from './test/sequencer.ts';

/** The test files of whole folders of test/: each kind of test is a folder, never a file name. */
const folders = (...names: string[]): string[] => names.map((name) => `test/${name}/**/*.test.ts`);

/**
 * `npm test`: the unit tests, mirroring the tree (test/unit/lib/launch-plan.test.ts tests
 * lib/launch-plan.ts), and the documentation's links. Those of these folders share a worker's
 * modules (see `projects` below); every other unit test file gets a worker of its own.
 */
const UNIT = folders('unit');
const UNIT_SHARED = [
  'test/unit/lib/*.test.ts',
  ...folders('unit/lib/agent', 'unit/lib/chaos-file', 'unit/lib/check', 'unit/lib/http', 'unit/lib/located-yaml', 'unit/lib/policy', 'unit/lib/task-file', 'unit/lib/usecases', 'unit/lib/workflow'),
  ...folders('unit/infra', 'unit/local', 'unit/bench', 'unit/scripts', 'docs'),
];

/**
 * `npm run test:system`: the files that start real processes at length, the `relaunch`
 * binary and the faults injected into its runs (a worker each, as below), and the local
 * runtime end to end and the real `cdk synth` (sharing modules).
 */
const SYSTEM_ISOLATED = folders('system/cli', 'system/faults');
const SYSTEM_SHARED = folders('system/local', 'system/infra');

export default defineConfig({
  test: {
    // The browser tests need Chromium: `npm run test:browser` (vitest.browser.config.mts); the
    // AWS contract suite, relaunch check's tests among them, needs moto_server and cfn-lint:
    // `npm run test:aws` (vitest.aws.config.mts).
    exclude: [...configDefaults.exclude, 'test/browser/**', 'test/contract/**'],
    setupFiles: ['test/setup.ts'],
    globalSetup: ['test/global-setup.ts'],
    // `npm test` runs the first two projects, `npm run test:system` the last two, and
    // `npx vitest run` all four.
    projects: [
      // Files that run the code in this process (units, the CDK assertions, the local
      // runtime's own tests) share a worker's modules from file to file: the SDK, the CDK and
      // zod load once per worker instead of once per file, about a minute of CPU. Spies are
      // restored before each test so that none outlives its file.
      { extends: true, test: { name: 'shared', include: UNIT_SHARED, isolate: false, restoreMocks: true } },
      // A worker each for the files that mock an SDK client class for the whole file (the
      // adapters, the Lambda handlers, the CLI's uploads), and any unit folder not listed above.
      { extends: true, test: { name: 'isolated', include: UNIT, exclude: UNIT_SHARED } },
      // The system tests that share modules as above: the local runtime end to end, the synth.
      { extends: true, test: { name: 'system-shared', include: SYSTEM_SHARED, isolate: false, restoreMocks: true } },
      // And those with a worker each: the ones that drive the real binary and break real processes.
      { extends: true, test: { name: 'system-isolated', include: SYSTEM_ISOLATED } },
    ],
    // Many files wait on real processes (a 90 s job, a 60 s wait for capacity) rather than
    // use the CPU: they start first (test/sequencer.ts), and five workers let the files
    // that do use it run beside them on two cores.
    sequence: { sequencer: LongestFirst },
    maxWorkers: 5,
    // Limits against a hang, not waits: on one 2-CPU machine, tests of real processes that
    // took 10-14 s beside the rest of the suite took up to 24 s with two busy loops as well.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    coverage: {
      provider: 'v8',
      include: ['lib/**/*.ts'],
      reporter: ['text', 'text-summary'],
      thresholds: {
        'lib/task-file/**': { lines: 100, branches: 100 },
        'lib/located-yaml/**': { lines: 100, branches: 100 },
        'lib/policy/**': { lines: 100, branches: 100 },
      },
    },
  },
});
