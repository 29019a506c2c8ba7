// Whether dist/cli holds a build of the CLI that is current: read by cli/bin.js on every
// start, so plain JavaScript, the file system only, and a few milliseconds at most.

import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

/** The build's folder, from the project root. */
export const BUILD_DIR = 'dist/cli';
/** The bundle's file name in the build folder. */
export const BUILD_ENTRY = 'relaunch.mjs';
/** What the build was made from, and when (cli/build.ts writes it after the bundle). */
export const BUILD_MANIFEST = 'manifest.json';
/** A chunk's file name, in the build folder beside the bundle. */
export const CHUNK_FILE = /^chunk-[A-Z0-9]+\.mjs$/;

/**
 * @typedef {object} BuildManifest
 * @property {string} entry the bundle's file name, in the build folder
 * @property {number} startedMs when the build began, as the file system's clock reads it
 * @property {string[]} inputs the project's files it holds or depends on, relative to the project root
 * @property {string[]} chunks the files beside the entry that it imports, by name
 */

/**
 * The address of the build in `buildDir` when every file it was made from is still there
 * and none has changed since it began, and its chunks are there; `undefined` when there is
 * no build, or it is stale or missing a chunk, or its manifest cannot be read. A stale
 * build is never used: the caller runs the sources.
 *
 * @param {string} root the project root, against which the manifest's inputs are read
 * @param {string} [buildDir] the build folder, BUILD_DIR under the root unless given
 * @returns {URL | undefined}
 */
export function currentBuild(root, buildDir = join(root, BUILD_DIR)) {
  /** @type {BuildManifest} */
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(join(buildDir, BUILD_MANIFEST), 'utf8'));
  } catch {
    return undefined;
  }
  if (typeof manifest?.startedMs !== 'number' || !Array.isArray(manifest.inputs) || manifest.entry !== BUILD_ENTRY) return undefined;
  for (const input of manifest.inputs) {
    const stat = typeof input === 'string' ? statSync(join(root, input), { throwIfNoEntry: false }) : undefined;
    if (stat === undefined || stat.mtimeMs >= manifest.startedMs) return undefined;
  }
  const chunks = manifest.chunks ?? [];
  if (!Array.isArray(chunks)) return undefined;
  for (const chunk of chunks) {
    if (typeof chunk !== 'string' || !CHUNK_FILE.test(chunk) || statSync(join(buildDir, chunk), { throwIfNoEntry: false }) === undefined) return undefined;
  }
  const entry = join(buildDir, BUILD_ENTRY);
  return statSync(entry, { throwIfNoEntry: false }) === undefined ? undefined : pathToFileURL(entry);
}
