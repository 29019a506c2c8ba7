// The folder-cycle check of `npm run lint` (scripts/folder-cycles.ts): trees written to a temp
// folder with and without cycles, what it counts as an import, and this repository itself.

import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { describeCycle, folderCycles, relativeImports, type FolderCycle } from '../../../scripts/folder-cycles.ts';

const REPO_ROOT = fileURLToPath(new URL('../../..', import.meta.url));

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** A tree of files (path from the root: text) in a fresh temp folder; its root. */
function tree(files: Readonly<Record<string, string>>): string {
  const root = mkdtempSync(join(tmpdir(), 'relaunch-cycles-'));
  roots.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

describe('folderCycles', () => {
  it('reports two top-level folders that import each other, naming the imports', () => {
    const root = tree({
      'local/chaos.ts': "import { readTaskFile } from '../cli/task-file.ts';\n",
      'cli/task-file.ts': 'export const readTaskFile = 1;\n',
      'cli/run.ts': "import { plan } from '../local/plan.ts';\n",
      'local/plan.ts': 'export const plan = 1;\n',
    });
    const cycles = folderCycles(root);
    expect(cycles).toHaveLength(1);
    expect(describeCycle(cycles[0] as FolderCycle)).toBe(
      [
        'folder cycle: cli -> local -> cli (folders: cli, local)',
        "  cli -> local: cli/run.ts imports '../local/plan.ts'",
        "  local -> cli: local/chaos.ts imports '../cli/task-file.ts'",
      ].join('\n'),
    );
  });

  it('reports a loop of three lib/ subfolders, with every edge among them', () => {
    const root = tree({
      'lib/adapters/store.ts': "import { run } from '../usecases/run.ts';\n",
      'lib/usecases/run.ts': "import type { State } from '../workflow/contract.ts';\nexport const run = 1;\n",
      'lib/workflow/contract.ts': "export type State = string;\nexport const load = () => import('../adapters/store.ts');\n",
      'lib/task-file/parse.ts': "import { run } from '../usecases/run.ts';\n",
    });
    const [cycle, ...more] = folderCycles(root);
    expect(more).toEqual([]);
    expect(cycle?.folders).toEqual(['lib/adapters', 'lib/usecases', 'lib/workflow']);
    expect(cycle?.loop.map((edge) => edge.from)).toEqual(['lib/adapters', 'lib/usecases', 'lib/workflow']);
    expect(describeCycle(cycle as FolderCycle).split('\n')[0]).toBe(
      'folder cycle: lib/adapters -> lib/usecases -> lib/workflow -> lib/adapters (folders: lib/adapters, lib/usecases, lib/workflow)',
    );
  });

  it('reports cycles at any depth, each on its own', () => {
    const root = tree({
      'a/x/one.ts': "import '../y/two.ts';\n",
      'a/y/two.ts': "export * from '../x/one.ts';\n",
      'b/p/three.ts': "const t = require('../q/four.js');\n",
      'b/q/four.js': "import '../p/three.ts';\n",
    });
    expect(folderCycles(root).map((cycle) => cycle.folders)).toEqual([
      ['a/x', 'a/y'],
      ['b/p', 'b/q'],
    ]);
  });

  it("finds none between a folder's own files and its subfolders, nor in a one-way tree", () => {
    const root = tree({
      'cli/main.ts': "import { run } from './commands/run.ts';\n",
      'cli/commands/run.ts': "import { context } from '../context.ts';\nimport { parse } from '../../lib/spec/parse.ts';\nexport const run = 1;\n",
      'cli/context.ts': "import { parse } from '../lib/spec/parse.ts';\nexport const context = parse;\n",
      'lib/task-file/parse.ts': "import { z } from 'zod';\nimport { errors } from '../errors.ts';\nexport const parse = z;\n",
      'lib/errors.ts': "import { Problem } from './spec/messages.ts';\nexport const errors = 1;\n",
      'lib/located-yaml/messages.ts': 'export type Problem = string;\n',
      'node_modules/pkg/index.ts': "import '../../cli/main.ts';\n",
      'dist/cli/relaunch.ts': "import '../../cli/main.ts';\n",
    });
    expect(folderCycles(root)).toEqual([]);
  });

  it('finds none in this repository', () => {
    expect(folderCycles(REPO_ROOT)).toEqual([]);
  });
});

describe('relativeImports', () => {
  it('reads static, type-only, re-exported, dynamic and required imports, not packages or comments', () => {
    const text = [
      "import { a } from './a.ts';",
      "import type { B } from '../b.ts';",
      "export { c } from './c.ts';",
      "const d = await import('./d.ts');",
      "const e = require('./e.js');",
      "import { z } from 'zod';",
      "// import { f } from './f.ts';",
      "const g = 'import { h } from \"./h.ts\"';",
    ].join('\n');
    expect(relativeImports(text)).toEqual(['./a.ts', '../b.ts', './c.ts', './d.ts', './e.js']);
  });
});

describe('the lint script', () => {
  it('exits 1 and prints the cycle for a tree with one', () => {
    const root = tree({ 'a/one.ts': "import '../b/two.ts';\n", 'b/two.ts': "import '../a/one.ts';\n" });
    const script = join(REPO_ROOT, 'scripts', 'folder-cycles.ts');
    let failure: { status: number; stderr: string } | undefined;
    try {
      execFileSync(process.execPath, ['--import', 'tsx', script, root], { cwd: REPO_ROOT, encoding: 'utf8', stdio: 'pipe' });
    } catch (error) {
      failure = error as { status: number; stderr: string };
    }
    expect(failure?.status).toBe(1);
    expect(failure?.stderr).toContain('folder cycle: a -> b -> a (folders: a, b)');
    expect(failure?.stderr).toContain('1 folder cycle:');
  });

  it('exits 0 and prints nothing for a tree without one', () => {
    const root = tree({ 'a/one.ts': "import '../b/two.ts';\n", 'b/two.ts': 'export {};\n' });
    const script = join(REPO_ROOT, 'scripts', 'folder-cycles.ts');
    expect(execFileSync(process.execPath, ['--import', 'tsx', script, root], { cwd: REPO_ROOT, encoding: 'utf8', stdio: 'pipe' })).toBe('');
  });
});
