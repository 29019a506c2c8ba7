// Lint: the recommended TypeScript rules, type-aware where it pays (floating promises).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'cdk.out/', '.relaunch/', 'coverage/', 'cli/bin.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts', '**/*.mts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // zod comes from lib/zod.ts, as a namespace, or classic zod creeps back into every Lambda bundle.
    files: ['**/*.ts', '**/*.mts'],
    ignores: ['lib/zod.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ regex: '^zod(/.*)?$', message: "Import * as z from lib/zod.ts (zod/mini with English messages), not from 'zod'." }] },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "ImportDeclaration[source.value=/(^|\\/)zod\\.ts$/] > ImportSpecifier[imported.name='z']",
          message: 'Import * as z from lib/zod.ts: its `z` export is all of zod/mini, which bundles cannot tree-shake.',
        },
      ],
    },
  },
);
