// `npm run build`, which `npm ci` runs too (the `prepare` script): the CLI as one file in
// dist/cli/. Run from source, every `relaunch` loads some 3,300 modules, its own through
// tsx, a second or more of CPU before it does anything; built, it takes about a third of
// that (`npm run bench -- cli-start`). cli/bin.js runs the build while it is newer than
// every file it was built from (cli/built.js), and the sources otherwise.

import { statSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { ESM_REQUIRE_BANNER, sdkSchemaKeys } from '../infra/bundle.ts';
import { BUILD_DIR, BUILD_ENTRY, BUILD_MANIFEST, type BuildManifest } from './built.js';
import { REPO_ROOT } from '../infra/lambda-catalog.ts';


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

/**
 * Bundles a Node program (`entry`, a project source) into one ES module, `outfile`, as the
 * CLI is built: every dependency inside but EXTERNAL's, which load from the node_modules
 * above `outfile` (so it belongs under the root). The tests bundle the processes they
 * start by the dozen the same way.
 */
export async function bundleProgram(entry: string, outfile: string, root: string = REPO_ROOT): Promise<esbuild.Metafile> {
  const result = await esbuild.build({
    entryPoints: [entry],
    outfile,
    absWorkingDir: root,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'esm',
    mainFields: ['module', 'main'],
    external: EXTERNAL,
    banner: { js: ESM_REQUIRE_BANNER },
    plugins: [sdkSchemaKeys, ownAddresses(dirname(outfile))],
    metafile: true,
    logLevel: 'error',
  });
  return result.metafile;
}

/**
 * Builds the CLI into `<root>/dist/cli`: the bundle first, then the manifest that makes it
 * current (each written whole, then renamed into place, so a `relaunch` starting meanwhile
 * reads either the old pair or the new one). Returns the manifest.
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
  const temporary = join(outdir, `${BUILD_ENTRY}.${process.pid}.tmp`);
  const metafile = await bundleProgram(join(root, 'cli/main.ts'), temporary, root);
  const sources = Object.keys(metafile.inputs).filter((path) => !path.startsWith('node_modules/'));
  const manifest: BuildManifest = { entry: BUILD_ENTRY, startedMs, inputs: [...sources, ...ALSO_STALE_ON].sort() };
  await rename(temporary, join(outdir, BUILD_ENTRY));
  const manifestTemporary = join(outdir, `${BUILD_MANIFEST}.${process.pid}.tmp`);
  await writeFile(manifestTemporary, `${JSON.stringify(manifest, null, 1)}\n`);
  await rename(manifestTemporary, join(outdir, BUILD_MANIFEST));
  return manifest;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const manifest = await buildCli();
  process.stdout.write(`built ${join(BUILD_DIR, manifest.entry)} from ${manifest.inputs.length} files\n`);
}
