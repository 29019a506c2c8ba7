// How a Lambda is bundled: one esbuild build, run by the CDK construct at synth (through
// infra/bundle-cli.ts) and by the bundle benchmark, so the benchmark measures what deploys.

import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import * as esbuild from 'esbuild';
import { BUNDLE_ENTRY, handlerEntry, REPO_ROOT, type LambdaName } from './lambda-catalog.ts';

/**
 * ESM bundles need `require` for the few CommonJS modules among the dependencies; this
 * banner provides it, as AWS recommends for ESM bundles on Lambda.
 */
export const ESM_REQUIRE_BANNER = "import{createRequire as __cr}from'module';const require=__cr(import.meta.url);";

/** A service client's schema module: every shape of the service, one exported array each. */
const SDK_SCHEMA_MODULE = /[\\/]@aws-sdk[\\/]client-[^\\/]+[\\/]dist-es[\\/]schemas[\\/]schemas_\d+\.js$/;
/** A module-level string constant, `const _xN = "xmlName";`, as the SDK's generator writes them. */
const STRING_CONSTANT = /^const (_\w+) = ("(?:[^"\\]|\\.)*");$/gm;
/** A computed property key naming one identifier, `{ [_xN]:` or `, [_xN]:` (not `a ? b[_x]: c`). */
const COMPUTED_KEY = /([{,]\s*)\[(_\w+)\]:/g;

/**
 * Rewrites an SDK schema module's computed keys (`{ [_xN]: _tS }`) into the string
 * literals they name (`{ "xmlName": _tS }`), which is the same object. esbuild cannot
 * prove a computed key free of side effects, so a module that uses them is kept whole:
 * EC2's (its Query protocol names shapes this way) then adds every shape EC2 has, about
 * 530 KiB, to any bundle that sends one command. With literal keys, the shapes a bundle
 * does not use are shaken out.
 */
export function literalSchemaKeys(source: string): string {
  const constants = new Map([...source.matchAll(STRING_CONSTANT)].map((match) => [match[1] as string, match[2] as string]));
  return source.replace(COMPUTED_KEY, (key, before: string, name: string) => {
    const literal = constants.get(name);
    return literal === undefined ? key : `${before}${literal}:`;
  });
}

export const sdkSchemaKeys: esbuild.Plugin = {
  name: 'relaunch-sdk-schema-keys',
  setup(build) {
    build.onLoad({ filter: SDK_SCHEMA_MODULE }, async (args) => ({
      contents: literalSchemaKeys(await readFile(args.path, 'utf8')),
      loader: 'js',
    }));
  },
};

/**
 * The agent's shell program: lib/agent/agent-source.ts reads agent.sh beside itself, where a
 * bundle has no such file, so the bundle gets the text itself in place of that module.
 */
const agentSource: esbuild.Plugin = {
  name: 'relaunch-agent-source',
  setup(build) {
    build.onLoad({ filter: /[\\/]lib[\\/]agent[\\/]agent-source\.ts$/ }, async (args) => ({
      contents: `export const AGENT_SOURCE = ${JSON.stringify(await readFile(join(dirname(args.path), 'agent.sh'), 'utf8'))};`,
      loader: 'js',
    }));
  },
};

/**
 * Builds one entry as every Lambda is built, into `outdir`: minified ESM for Node 22 with
 * the AWS SDK clients bundled (only the commands a handler uses ship, at the pinned
 * version, not the runtime's), no source maps (they double the size; the logs carry error
 * and stack). The entry is `index.mjs`; what the code imports only dynamically goes to
 * `chunks/` and loads only if called. The SDK loads its credential sources that way (SSO,
 * profiles, web identity, and the STS and SSO clients they use), and Lambda's credentials
 * come from the environment, so none of that is read at cold start.
 */
export async function bundle(source: Pick<esbuild.BuildOptions, 'entryPoints' | 'stdin'>, outdir: string): Promise<BundleOutput> {
  const result = await esbuild.build({
    ...source,
    outdir,
    // Metafile paths are relative to this; fixed, so they do not depend on the caller's cwd.
    absWorkingDir: REPO_ROOT,
    entryNames: BUNDLE_ENTRY.file.replace(/\.mjs$/, ''),
    chunkNames: 'chunks/[name]-[hash]',
    outExtension: { '.js': '.mjs' },
    splitting: true,
    bundle: true,
    platform: 'node',
    target: 'node22',
    format: 'esm',
    minify: true,
    sourcemap: false,
    mainFields: ['module', 'main'],
    banner: { js: ESM_REQUIRE_BANNER },
    plugins: [sdkSchemaKeys, agentSource],
    metafile: true,
    logLevel: 'error',
  });
  const { outputs } = result.metafile;
  const entry = resolve(REPO_ROOT, outdir, BUNDLE_ENTRY.file);
  const entryOutput = Object.keys(outputs).find((path) => resolve(REPO_ROOT, path) === entry);
  if (entryOutput === undefined) throw new Error(`esbuild wrote no ${BUNDLE_ENTRY.file} in ${outdir}`);
  const loaded = staticClosure(entryOutput, outputs);
  return {
    entry,
    bytes: sum(Object.keys(outputs), outputs),
    loadedFiles: [...loaded].map((path) => resolve(REPO_ROOT, path)),
    loadedBytes: sum(loaded, outputs),
    lazyChunks: Object.entries(outputs)
      .filter(([path, output]) => path !== entryOutput && output.entryPoint !== undefined && !output.entryPoint.includes('node_modules/'))
      .map(([path]) => resolve(REPO_ROOT, path)),
    metafile: result.metafile,
  };
}

function sum(paths: Iterable<string>, outputs: esbuild.Metafile['outputs']): number {
  let bytes = 0;
  for (const path of paths) bytes += outputs[path]?.bytes ?? 0;
  return bytes;
}

/** The output files an entry loads when imported: itself and its static imports, transitively. */
function staticClosure(entry: string, outputs: esbuild.Metafile['outputs']): Set<string> {
  const loaded = new Set<string>();
  const visit = (path: string) => {
    if (loaded.has(path) || outputs[path] === undefined) return;
    loaded.add(path);
    for (const imported of outputs[path].imports) if (imported.kind === 'import-statement') visit(imported.path);
  };
  visit(entry);
  return loaded;
}

/** What a build wrote. */
export interface BundleOutput {
  /** The entry file (BUNDLE_ENTRY.file), as an absolute path. */
  readonly entry: string;
  /** Every file written (entry and chunks), in bytes: what the deployment package holds. */
  readonly bytes: number;
  /** What importing the entry reads: the entry and the chunks it imports statically, transitively. */
  readonly loadedFiles: readonly string[];
  /** Their size in bytes. */
  readonly loadedBytes: number;
  /** relaunch's own code that loads when first called (the API's task parser), as files. */
  readonly lazyChunks: readonly string[];
  readonly metafile: esbuild.Metafile;
}

/** Bundles one Lambda into `outdir` (its entry file and chunks/). */
export async function bundleLambda(name: LambdaName, outdir: string): Promise<BundleOutput> {
  return bundle({ entryPoints: [handlerEntry(name)] }, outdir);
}

// --- the bundle cache -------------------------------------------------------------------
// Every synth bundles every Lambda (the asset hash is the output's), and each bundle is a
// Node process with tsx and an esbuild build: most of a synth's time. A bundle depends only
// on its sources, so each Lambda's last bundle is kept with the SHA-256 of every file
// esbuild read for it (the metafile's inputs, node_modules included), of agent.sh (read
// by a plugin) and of this file (the build's options); when all still match, the bundle
// is copied instead of built.

/** Where bundles are kept between synths (RELAUNCH_BUNDLE_CACHE moves it). */
export const BUNDLE_CACHE_DIR = process.env.RELAUNCH_BUNDLE_CACHE ?? join(REPO_ROOT, 'node_modules', '.cache', 'relaunch-bundles');

/** Sources a bundle depends on that esbuild does not list as inputs. */
const BUILD_SOURCES = ['infra/bundle.ts', 'lib/agent/agent.sh'];

/** What the cache keeps beside a bundle: its sources' hashes, by path from the repository root. */
interface CacheManifest {
  readonly esbuild: string;
  readonly sources: Readonly<Record<string, string>>;
}

function sha256(path: string): string | null {
  try {
    return createHash('sha256').update(readFileSync(join(REPO_ROOT, path))).digest('hex');
  } catch {
    return null;
  }
}

/**
 * Copies the cached bundle of `name` into `outdir` when every source it was built from is
 * unchanged; false (and nothing copied) when there is none, or any source differs or is
 * gone. Synchronous, for CDK's local bundling.
 */
export function restoreCachedBundle(name: LambdaName, outdir: string, cacheDir: string = BUNDLE_CACHE_DIR): boolean {
  const manifestPath = join(cacheDir, name, 'manifest.json');
  if (!existsSync(manifestPath)) return false;
  let manifest: CacheManifest;
  try {
    manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as CacheManifest;
  } catch {
    return false;
  }
  if (manifest.esbuild !== esbuild.version) return false;
  for (const [path, hash] of Object.entries(manifest.sources)) if (sha256(path) !== hash) return false;
  cpSync(join(cacheDir, name, 'bundle'), outdir, { recursive: true });
  return true;
}

/** Keeps the bundle just built in `outdir`, with the hashes of the sources its metafile lists. */
function saveToCache(name: LambdaName, outdir: string, metafile: esbuild.Metafile, cacheDir: string): void {
  const paths = [...new Set([...Object.keys(metafile.inputs), ...BUILD_SOURCES])].filter((path) => !path.startsWith('<'));
  const sources: Record<string, string> = {};
  for (const path of paths) {
    const relativePath = relative(REPO_ROOT, resolve(REPO_ROOT, path));
    const hash = sha256(relativePath);
    // A source that cannot be read again cannot be checked next time: keep no cache.
    if (hash === null) return;
    sources[relativePath] = hash;
  }
  // Written aside, then renamed: a synth that dies midway leaves no half cache.
  const staging = join(cacheDir, `.${name}-${process.pid}`);
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  cpSync(outdir, join(staging, 'bundle'), { recursive: true });
  writeFileSync(join(staging, 'manifest.json'), JSON.stringify({ esbuild: esbuild.version, sources } satisfies CacheManifest));
  rmSync(join(cacheDir, name), { recursive: true, force: true });
  renameSync(staging, join(cacheDir, name));
}

/**
 * Bundles one Lambda into `outdir`, from the cache when none of its sources changed since
 * it was cached, else built and cached.
 */
export async function bundleLambdaCached(name: LambdaName, outdir: string, cacheDir: string = BUNDLE_CACHE_DIR): Promise<{ readonly fromCache: boolean }> {
  if (restoreCachedBundle(name, outdir, cacheDir)) return { fromCache: true };
  const { metafile } = await bundleLambda(name, outdir);
  saveToCache(name, outdir, metafile, cacheDir);
  return { fromCache: false };
}
