// The folder-cycle check of `npm run lint`: no two sibling folders may import each other,
// directly or round a loop, at any depth (cli/ and local/, lib/adapters/ and lib/workflow/).
// A folder's own files are not a node: cli/main.ts may import cli/commands/ while the
// commands import cli/context.ts. Every relative import counts, type-only and dynamic ones
// too: a layer that needs another's types depends on it.

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

/** Folders never scanned: dependencies, build output, and hidden folders (`.git`, `.ci`). */
const SKIPPED = new Set(['node_modules', 'dist', 'cdk.out', 'coverage']);

/** The files whose imports count. */
const SOURCE = /\.(?:[cm]?ts|[cm]?js)$/;

/** One import that makes a folder depend on another: the importing file and what it wrote. */
export interface FolderEdge {
  readonly from: string;
  readonly to: string;
  /** The importing file, from the root, and the specifier it imports. */
  readonly file: string;
  readonly specifier: string;
}

/** Sibling folders that depend on each other: one loop through them, and every edge among them. */
export interface FolderCycle {
  /** Every folder of the strongly connected set, sorted. */
  readonly folders: readonly string[];
  /** A shortest loop from the first folder back to it, one import for each step. */
  readonly loop: readonly FolderEdge[];
  /** Every edge between two of the folders (one import each): cutting enough of them ends the cycle. */
  readonly edges: readonly FolderEdge[];
}

/** The relative specifiers a source file imports, re-exports, `import()`s or `require`s. */
export function relativeImports(text: string): string[] {
  return ts
    .preProcessFile(text, true, true)
    .importedFiles.map((imported) => imported.fileName)
    .filter((specifier) => specifier.startsWith('./') || specifier.startsWith('../'));
}

/** Every source file under `root`, as paths from it with `/` separators. */
export function sourceFiles(root: string): string[] {
  const found: string[] = [];
  const walk = (folder: string): void => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      if (entry.name.startsWith('.') || SKIPPED.has(entry.name)) continue;
      const path = join(folder, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile() && SOURCE.test(entry.name) && !entry.name.endsWith('.d.ts')) found.push(relative(root, path).split(sep).join('/'));
    }
  };
  walk(root);
  return found.sort();
}

/**
 * The folder edge an import makes, or undefined: the first folders where the two paths part
 * must both be folders (not a file of their common parent), and differ.
 */
function edgeOf(file: string, specifier: string): FolderEdge | undefined {
  const target = posix.normalize(posix.join(posix.dirname(file), specifier));
  if (target.startsWith('../')) return undefined;
  const from = file.split('/');
  const to = target.split('/');
  let shared = 0;
  while (shared < from.length - 1 && shared < to.length - 1 && from[shared] === to[shared]) shared += 1;
  if (shared === from.length - 1 || shared === to.length - 1) return undefined;
  const parent = from.slice(0, shared);
  return { from: [...parent, from[shared]].join('/'), to: [...parent, to[shared]].join('/'), file, specifier };
}

/** Every folder edge under `root`, the first import found standing for each pair of folders. */
export function folderEdges(root: string): FolderEdge[] {
  const edges = new Map<string, FolderEdge>();
  for (const file of sourceFiles(root)) {
    for (const specifier of relativeImports(readFileSync(join(root, file), 'utf8'))) {
      const edge = edgeOf(file, specifier);
      const key = edge === undefined ? '' : `${edge.from}\n${edge.to}`;
      if (edge !== undefined && !edges.has(key)) edges.set(key, edge);
    }
  }
  return [...edges.values()];
}

/** The strongly connected sets of two or more folders (Tarjan's algorithm). */
function stronglyConnected(next: ReadonlyMap<string, readonly FolderEdge[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const sets: string[][] = [];
  const visit = (folder: string): void => {
    index.set(folder, index.size);
    low.set(folder, index.get(folder) as number);
    stack.push(folder);
    onStack.add(folder);
    for (const { to } of next.get(folder) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(folder, Math.min(low.get(folder) as number, low.get(to) as number));
      } else if (onStack.has(to)) {
        low.set(folder, Math.min(low.get(folder) as number, index.get(to) as number));
      }
    }
    if (low.get(folder) !== index.get(folder)) return;
    const set: string[] = [];
    for (let member = stack.pop(); member !== undefined; member = stack.pop()) {
      onStack.delete(member);
      set.push(member);
      if (member === folder) break;
    }
    if (set.length > 1) sets.push(set.sort());
  };
  for (const folder of [...next.keys()].sort()) if (!index.has(folder)) visit(folder);
  return sets;
}

/** A shortest loop from `start` back to it through `members` (breadth first). */
function shortestLoop(start: string, members: ReadonlySet<string>, next: ReadonlyMap<string, readonly FolderEdge[]>): FolderEdge[] {
  const cameBy = new Map<string, FolderEdge>();
  const queue = [start];
  for (let folder = queue.shift(); folder !== undefined; folder = queue.shift()) {
    for (const edge of next.get(folder) ?? []) {
      if (!members.has(edge.to) || cameBy.has(edge.to)) continue;
      cameBy.set(edge.to, edge);
      if (edge.to === start) {
        const loop: FolderEdge[] = [];
        for (let step = cameBy.get(start); step !== undefined; step = step.from === start ? undefined : cameBy.get(step.from)) loop.unshift(step);
        return loop;
      }
      queue.push(edge.to);
    }
  }
  throw new Error(`no loop through ${start}, though it is in a strongly connected set`);
}

/** The folder cycles among `edges`, each with one loop to show; none: []. */
export function cyclesOf(edges: readonly FolderEdge[]): FolderCycle[] {
  const next = new Map<string, FolderEdge[]>();
  for (const edge of [...edges].sort((a, b) => a.to.localeCompare(b.to))) next.set(edge.from, [...(next.get(edge.from) ?? []), edge]);
  return stronglyConnected(next)
    .map((folders) => {
      const members = new Set(folders);
      const inside = edges.filter((edge) => members.has(edge.from) && members.has(edge.to));
      return { folders, loop: shortestLoop(folders[0] as string, members, next), edges: inside.sort((a, b) => `${a.from} ${a.to}`.localeCompare(`${b.from} ${b.to}`)) };
    })
    .sort((a, b) => (a.folders[0] as string).localeCompare(b.folders[0] as string));
}

/** Every folder cycle under `root`. */
export function folderCycles(root: string): FolderCycle[] {
  return cyclesOf(folderEdges(root));
}

/** A cycle as the lines the check prints: a loop, then every edge among its folders, each with an import behind it. */
export function describeCycle(cycle: FolderCycle): string {
  const loop = [...cycle.loop.map((edge) => edge.from), cycle.loop[0]?.from].join(' -> ');
  const edges = cycle.edges.map((edge) => `  ${edge.from} -> ${edge.to}: ${edge.file} imports '${edge.specifier}'`);
  return [`folder cycle: ${loop} (folders: ${cycle.folders.join(', ')})`, ...edges].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  // The repository this script is in, unless a folder is named (the tests name a temp tree).
  const root = process.argv[2] === undefined ? resolve(dirname(fileURLToPath(import.meta.url)), '..') : resolve(process.argv[2]);
  const cycles = folderCycles(root);
  for (const cycle of cycles) console.error(describeCycle(cycle));
  if (cycles.length > 0) {
    console.error(`${cycles.length} folder cycle${cycles.length === 1 ? '' : 's'}: a folder may not import a sibling that imports it back (docs/architecture.md)`);
    process.exitCode = 1;
  }
}
