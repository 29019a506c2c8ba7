// `npm run build`, which `npm ci` runs too (the `prepare` script): the CLI bundled into
// dist/cli/. Run from source, every `relaunch` loads some 3,300 modules, its own through
// tsx, a second or more of CPU before it does anything; built, it takes a fifth to a third
// of that (`npm run bench -- cli-start`). cli/bin.js runs the build while it is newer than
// every file it was built from (cli/built.js), and the sources otherwise.

import { statSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, extname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { ESM_REQUIRE_BANNER, sdkSchemaKeys } from '../infra/bundle.ts';
import { BUILD_DIR, BUILD_ENTRY, BUILD_MANIFEST, CHUNK_FILE, type BuildManifest } from './built.js';
import { REPO_ROOT } from '../infra/lambda-catalog.ts';
import { writeWhole } from '../local/write-whole.ts';

/**
 * Packages that must be loaded from node_modules as they are: classic-level is native code,
 * dynalite requires its actions by computed names, and esbuild runs its own binary from
 * beside its package (the dashboard bundles its page with it).
 */
const EXTERNAL = ['classic-level', 'dynalite', 'esbuild'];

/**
 * Files whose change makes a build stale besides the sources it holds: the dependencies
 * (npm writes node_modules/.package-lock.json on every install) and the package itself.
 */
const ALSO_STALE_ON = ['package.json', 'package-lock.json', 'node_modules/.package-lock.json'];

/**
 * A project source that reads a file beside itself (`new URL('./agent.sh', import.meta.url)`)
 * would look beside the bundle instead: in each one, `import.meta.url` becomes the source's
 * own address, relative to the bundle so that a moved checkout still finds its files.
 */
function ownAddresses(outdir: string): esbuild.Plugin {
  return {
    name: 'relaunch-own-addresses',
    setup(build) {
      build.onLoad({ filter: /\.ts$/ }, async (args) => {
        if (args.path.includes('/node_modules/')) return undefined;
        const source = await readFile(args.path, 'utf8');
        if (!source.includes('import.meta.url')) return undefined;
        const address = relative(outdir, args.path).split(sep).map(encodeURIComponent).join('/');
        const own = `new URL(${JSON.stringify(address)}, import.meta.url).href`;
        return { contents: source.replaceAll('import.meta.url', own), loader: 'ts' };
      });
    },
  };
}

/** A chunk's file name (CHUNK_FILE): beside the entry, where a source's own address (ownAddresses) holds from either. */
const CHUNK_NAMES = 'chunk-[hash]';
/**
 * How long a chunk no build lists is kept: a `relaunch` started from an older build may
 * load one of its chunks late (the local runtime's, once another command has finished).
 */
const OLD_CHUNK_KEPT_MS = 24 * 60 * 60 * 1000;

/**
 * Bundles a Node program (`entry`, a project source) into ES modules: `outfile` (a .mjs),
 * and beside it chunks for what the program imports only when it is called (`relaunch
 * check` and the AWS SDK clients only it uses, the local runtime, the SDK's other
 * credential sources), so that a command reads only its own. Every dependency is inside
 * but EXTERNAL's, which load from the node_modules above `outfile` (so it belongs under
 * the root). Each file is written whole, then renamed into place, chunks before the
 * entry: a program starting meanwhile loads the old entry or the new one, with the chunks
 * of either there. Returns esbuild's metafile and the chunks' file names. The tests bundle
 * the processes they start by the dozen the same way.
 */
export async function bundleProgram(entry: string, outfile: string, root: string = REPO_ROOT): Promise<{ metafile: esbuild.Metafile; chunks: string[] }> {
  if (extname(outfile) !== '.mjs') throw new Error(`the bundle's file name must end in .mjs, got ${outfile}`);
  const outdir = dirname(outfile);
  const result = await esbuild.build({
    entryPoints: [entry],
    outdir,
    entryNames: basename(outfile, '.mjs'),
    chunkNames: CHUNK_NAMES,
    outExtension: { '.js': '.mjs' },
    splitting: true,
    write: false,
    absWorkingDir: root,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'esm',
    mainFields: ['module', 'main'],
    external: EXTERNAL,
    banner: { js: ESM_REQUIRE_BANNER },
    plugins: [sdkSchemaKeys, ownAddresses(outdir)],
    metafile: true,
    logLevel: 'error',
  });
  const entryPath = resolve(root, outfile);
  const chunks = result.outputFiles.filter((file) => file.path !== entryPath);
  await mkdir(dirname(entryPath), { recursive: true });
  for (const file of chunks) writeWhole(file.path, file.contents);
  const entryFile = result.outputFiles.find((file) => file.path === entryPath);
  if (entryFile === undefined) throw new Error(`esbuild wrote no ${outfile}`);
  writeWhole(entryFile.path, entryFile.contents);
  return { metafile: result.metafile, chunks: chunks.map((file) => basename(file.path)) };
}

/**
 * Builds the CLI into `<root>/dist/cli`: the bundle first, then the manifest that makes it
 * current. Chunks that this build did not write are removed once OLD_CHUNK_KEPT_MS old.
 * Returns the manifest.
 */
export async function buildCli(root: string = REPO_ROOT): Promise<BuildManifest> {
  const outdir = join(root, BUILD_DIR);
  await mkdir(outdir, { recursive: true });
  // The build's start, on the file system's own clock: any input changed from now on
  // (even while esbuild reads it) is newer than this and makes the build stale.
  const stamp = join(outdir, `.started.${process.pid}`);
  await writeFile(stamp, '');
  const startedMs = statSync(stamp).mtimeMs;
  await rm(stamp);
  const { metafile, chunks } = await bundleProgram(join(root, 'cli/main.ts'), join(outdir, BUILD_ENTRY), root);
  const sources = Object.keys(metafile.inputs).filter((path) => !path.startsWith('node_modules/'));
  const manifest: BuildManifest = { entry: BUILD_ENTRY, startedMs, inputs: [...sources, ...ALSO_STALE_ON].sort(), chunks: chunks.sort() };
  writeWhole(join(outdir, BUILD_MANIFEST), `${JSON.stringify(manifest, null, 1)}\n`);
  const files = (await readdir(outdir)).map((name) => ({ name, mtimeMs: statSync(join(outdir, name), { throwIfNoEntry: false })?.mtimeMs ?? startedMs }));
  for (const file of staleChunks(files, chunks, startedMs)) await rm(join(outdir, file), { force: true });
  return manifest;
}

/** The chunk files among `files` that the build of `listed` did not write and that are OLD_CHUNK_KEPT_MS older than `nowMs`. */
export function staleChunks(files: readonly { readonly name: string; readonly mtimeMs: number }[], listed: readonly string[], nowMs: number): string[] {
  const kept = new Set(listed);
  return files.filter((file) => CHUNK_FILE.test(file.name) && !kept.has(file.name) && file.mtimeMs < nowMs - OLD_CHUNK_KEPT_MS).map((file) => file.name);
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const manifest = await buildCli();
  process.stdout.write(`built ${join(BUILD_DIR, manifest.entry)} from ${manifest.inputs.length} files\n`);
}
