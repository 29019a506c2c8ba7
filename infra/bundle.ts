// How a Lambda is bundled: one esbuild build, run by the CDK construct at synth (through
// infra/bundle-cli.ts) and by the bundle benchmark, so the benchmark measures what deploys.

import { readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
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
