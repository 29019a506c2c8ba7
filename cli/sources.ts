// Local sources at submit: each workdir and local file mount packed into one archive, named
// by its SHA-256 and put in relaunch's store (a folder of the data folder locally, the
// stack's bucket on AWS) unless the store has it already. The task then names the archive
// (`upload:dir:sha256:<hex>`), and every node of every attempt fetches it by that name.

import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, realpath, rename, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as tar from 'tar';
import { isMap, isScalar, parseAllDocuments, type Document } from 'yaml';
import { InvalidInputError, type InputIssue } from '../lib/errors.ts';
import { isPipelineHeader, type ParsedJob } from '../lib/task-file/parse.ts';
import { taskPath } from '../lib/located-yaml/path.ts';
import { archiveName, mountField, uploadedWorkdir, uploadReference } from '../lib/task-file/mounts.ts';
import type { Io } from './exit.ts';
import { folderExclusions, type ExclusionSource, type Exclusions } from './exclusions.ts';

/** Where archives go: has one by name, or takes one. */
export interface SourceStore {
  /** What the store is, for messages: `.relaunch/sources`, `s3://bucket/sources`. */
  readonly where: string;
  has(sha256: string): Promise<boolean>;
  /** Stores the archive file under its name; `progress` is told the bytes sent so far. */
  put(sha256: string, archive: string, bytes: number, progress: (sent: number) => void): Promise<void>;
}

/**
 * A store that remembers what it was given, so that a submit refused afterwards takes
 * those archives back (what was there before stays: it may be another job's).
 */
export class RecordingSourceStore implements SourceStore {
  readonly stored: string[] = [];

  constructor(private readonly store: LocalSourceStore) {}

  get where(): string {
    return this.store.where;
  }

  has(sha256: string): Promise<boolean> {
    return this.store.has(sha256);
  }

  async put(sha256: string, archive: string, bytes: number, progress: (sent: number) => void): Promise<void> {
    await this.store.put(sha256, archive, bytes, progress);
    this.stored.push(sha256);
  }

  /** Removes every archive this store was given. */
  async removeStored(): Promise<void> {
    for (const sha256 of this.stored.splice(0)) await this.store.remove(sha256);
  }
}

/** An archive of one local source. */
export interface PackedSource {
  readonly entry: 'file' | 'dir';
  readonly sha256: string;
  readonly bytes: number;
  /** The archive's file, in a temporary folder the caller removes. */
  readonly archive: string;
  /** Files (and symbolic links) in it, folders not counted. */
  readonly files: number;
  /** For a folder: the ignore file whose rules applied (null: none), and how many paths they (and the data folder) left out. */
  readonly ignored: { readonly by: ExclusionSource; readonly paths: number } | null;
  /** What the user should know about the rules: a `.gitignore` that could not apply. */
  readonly warnings: readonly string[];
}

/** The store in a local data folder: `<dataDir>/sources/<sha256>.tar.gz`. */
export class LocalSourceStore implements SourceStore {
  readonly where: string;

  constructor(private readonly dir: string) {
    this.where = dir;
  }

  async has(sha256: string): Promise<boolean> {
    return stat(path.join(this.dir, archiveName(sha256))).then(
      (info) => info.isFile(),
      () => false,
    );
  }

  async put(sha256: string, archive: string, bytes: number, progress: (sent: number) => void): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const target = path.join(this.dir, archiveName(sha256));
    // Copied beside it, then renamed: a store never holds half an archive under its name.
    const partial = `${target}.${process.pid}.partial`;
    await copyFile(archive, partial);
    await rename(partial, target);
    progress(bytes);
  }

  /** Removes an archive (none there: nothing to do). */
  async remove(sha256: string): Promise<void> {
    await rm(path.join(this.dir, archiveName(sha256)), { force: true });
  }
}

/** A path of a packed tree, relative to its top. */
interface TreeEntry {
  readonly name: string;
  readonly folder: boolean;
}

/**
 * Every path under `root` that `exclusions` keeps, relative, sorted so that the same tree
 * always packs the same bytes. A folder left out is not entered; `left` counts what was
 * left out (a folder as one).
 */
async function treeEntries(root: string, exclusions: Exclusions, left: { count: number }, relative = ''): Promise<TreeEntry[]> {
  const entries = await readdir(path.join(root, relative), { withFileTypes: true });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const out: TreeEntry[] = [];
  for (const entry of entries) {
    const name = relative === '' ? entry.name : `${relative}/${entry.name}`;
    const folder = entry.isDirectory();
    // Sockets, FIFOs and devices are left out: no node could use them.
    if (!folder && !entry.isFile() && !entry.isSymbolicLink()) continue;
    if (exclusions.excludes(name, folder)) {
      left.count += 1;
      continue;
    }
    if (folder) out.push({ name, folder: true }, ...(await treeEntries(root, exclusions, left, name)));
    else out.push({ name, folder: false });
  }
  return out;
}

async function sha256Of(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/**
 * Packs a file or folder into a gzipped tar in `tmpDir`. Portable and without times, in
 * sorted order, so packing the same content twice makes the same archive (and the same
 * name): a resubmit finds it stored and sends nothing.
 *
 * A folder leaves out what SkyPilot leaves out (cli/exclusions.ts: `.skyignore`, else
 * `.gitignore`, and the top `.git`), and `exclude`, absolute paths that are never packed
 * (relaunch's data folder, which would otherwise grow the archive on every run). A file
 * given as the source is packed whatever the ignore files say, as SkyPilot does.
 */
export async function packSource(source: string, tmpDir: string, exclude: readonly string[] = []): Promise<PackedSource> {
  const info = await stat(source);
  const archive = path.join(tmpDir, `${createHash('sha256').update(source).digest('hex').slice(0, 16)}.tar.gz`);
  const options = { gzip: { level: 6 }, portable: true, noMtime: true, noDirRecurse: true, file: archive } as const;
  let files: number;
  let ignored: PackedSource['ignored'] = null;
  let warnings: readonly string[] = [];
  if (info.isDirectory()) {
    const exclusions = await folderExclusions(await realpath(source), await Promise.all(exclude.map(async (given) => realpath(given).catch(() => path.resolve(given)))));
    const left = { count: 0 };
    const entries = await treeEntries(source, exclusions, left);
    ignored = { by: exclusions.source, paths: left.count };
    warnings = exclusions.warnings;
    files = entries.filter((entry) => !entry.folder).length;
    // An empty folder is still a folder: its archive holds just `.`.
    await tar.create({ ...options, cwd: source }, entries.length === 0 ? ['.'] : entries.map((entry) => entry.name));
  } else if (info.isFile()) {
    files = 1;
    // A link given as the source is followed (its file is what the task asked for); links
    // inside a folder stay links, as rsync -a keeps them.
    const file = await realpath(source);
    await tar.create({ ...options, cwd: path.dirname(file) }, [path.basename(file)]);
  } else {
    throw new Error('not a regular file or a folder');
  }
  const sha256 = await sha256Of(archive);
  return { entry: info.isDirectory() ? 'dir' : 'file', sha256, bytes: (await stat(archive)).size, archive, files, ignored, warnings };
}

/** A local source as the file writes it, resolved: `~` is the home folder, relative is from `base`. */
export function resolveLocal(given: string, base: string): string {
  if (given === '~') return os.homedir();
  if (given.startsWith('~/')) return path.join(os.homedir(), given.slice(2));
  return path.resolve(base, given);
}

/** A size for people: 512 B, 3.4 kB, 12.0 MB. */
export function formatBytes(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  const units = ['kB', 'MB', 'GB', 'TB'];
  let value = bytes / 1000;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/** One line of progress: `uploading ./data  [######------]  52%  1.2 MB of 2.3 MB`. */
export function progressLine(label: string, sent: number, total: number): string {
  const width = 24;
  const fraction = total === 0 ? 1 : Math.min(1, sent / total);
  const filled = Math.round(fraction * width);
  const bar = `${'#'.repeat(filled)}${'-'.repeat(width - filled)}`;
  return `${label}  [${bar}] ${String(Math.round(fraction * 100)).padStart(3)}%  ${formatBytes(sent)} of ${formatBytes(total)}`;
}

/** Where a local source sits in a task file: `workdir`, or a mount's entry (or its `source`). */
interface SourceSite {
  readonly document: Document;
  readonly key: readonly string[];
  /** The path a problem is named by: `workdir`, `task 2: file_mounts["/data"]`. */
  readonly field: string;
  readonly given: string;
  /** A workdir must be a folder. */
  readonly folderOnly: boolean;
}

/** The local sources of every task of the file, where each is written. */
function sourceSites(text: string, job: ParsedJob): { documents: Document[]; sites: SourceSite[] } {
  const documents = parseAllDocuments(text) as Document[];
  const tasks = documents.filter((doc) => !(doc.contents === null || (isScalar(doc.contents) && doc.contents.value === null)));
  const taskDocs = isPipelineHeader(tasks[0]?.toJS(), tasks.length) ? tasks.slice(1) : tasks;
  const sites: SourceSite[] = [];
  job.tasks.forEach(({ spec }, index) => {
    const document = taskDocs[index] as Document;
    const at = (field: string): string => (job.pipeline === null ? field : taskPath(index, field));
    if (spec.workdir !== null && uploadedWorkdir(spec.workdir) === null) {
      sites.push({ document, key: ['workdir'], field: at('workdir'), given: spec.workdir, folderOnly: true });
    }
    for (const mount of spec.fileMounts ?? []) {
      if (mount.source.kind !== 'local') continue;
      const entry = document.getIn(['file_mounts', mount.path]);
      const key = isMap(entry) ? ['file_mounts', mount.path, 'source'] : ['file_mounts', mount.path];
      sites.push({ document, key, field: at(mountField(mount.path)), given: mount.source.path, folderOnly: false });
    }
  });
  return { documents, sites };
}

/**
 * Packs and stores every local source of the job's tasks, and returns the file's text with
 * each one replaced by its archive's reference (the text as it was when there is none).
 * Paths are resolved from `base` and `~`; `base` is the folder the command runs in, where
 * SkyPilot resolves them too (sky/task.py: `os.path.abspath` of the path as written), not
 * the task file's. `exclude` names absolute paths never packed (the data folder). Progress
 * goes to stderr.
 *
 * @throws InvalidInputError naming every source that is missing, unreadable, or not a
 *   folder where one is needed; nothing is stored then.
 */
export async function uploadSources(
  text: string,
  job: ParsedJob,
  base: string,
  store: SourceStore,
  io: Io,
  exclude: readonly string[] = [],
): Promise<string> {
  const { documents, sites } = sourceSites(text, job);
  if (sites.length === 0) return text;
  const checked = await Promise.all(
    sites.map(async (site): Promise<{ absolute: string; issue?: InputIssue }> => {
      const absolute = resolveLocal(site.given, base);
      const info = await stat(absolute).catch(() => undefined);
      const problem =
        info === undefined
          ? `expected an existing local ${site.folderOnly ? 'folder' : 'file or folder'}, got ${site.given} (${absolute} does not exist)`
          : site.folderOnly && !info.isDirectory()
            ? `expected a local folder, got ${site.given} (${absolute} is not a folder)`
            : !info.isDirectory() && !info.isFile()
              ? `expected a regular file or a folder, got ${site.given}`
              : undefined;
      return problem === undefined ? { absolute } : { absolute, issue: { path: site.field, message: problem } };
    }),
  );
  const issues = checked.flatMap(({ issue }) => (issue === undefined ? [] : [issue]));
  if (issues.length > 0) throw new InvalidInputError(issues);
  const resolved = checked.map(({ absolute }) => absolute);
  const tmpDir = await mkdtemp(path.join(os.tmpdir(), 'relaunch-sources-'));
  try {
    // One archive per distinct path: a file mounted at two places is packed once.
    const packed = new Map<string, PackedSource>();
    for (const [index, site] of sites.entries()) {
      const absolute = resolved[index] as string;
      let source = packed.get(absolute);
      if (source === undefined) {
        try {
          source = await packSource(absolute, tmpDir, exclude);
        } catch (error) {
          throw new InvalidInputError([{ path: site.field, message: `could not read ${site.given}: ${(error as Error).message}` }]);
        }
        packed.set(absolute, source);
        await storeOne(site.given, source, store, io);
      }
      site.document.setIn(site.key, uploadReference(source.entry, source.sha256));
    }
  } finally {
    await rm(tmpDir, { recursive: true, force: true });
  }
  return documents.map((doc) => doc.toString()).join('');
}

/** `, 3 left out by .skyignore`: what the ignore rules (and the data folder) kept out of a folder. */
function leftOut(source: PackedSource): string {
  if (source.ignored === null || source.ignored.paths === 0) return '';
  const paths = `${source.ignored.paths} path${source.ignored.paths === 1 ? '' : 's'}`;
  return source.ignored.by === null ? `, ${paths} left out` : `, ${paths} left out by ${source.ignored.by}`;
}

async function storeOne(given: string, source: PackedSource, store: SourceStore, io: Io): Promise<void> {
  for (const warning of source.warnings) io.err(`warning: ${warning}`);
  const what = `${given} (${source.files} file${source.files === 1 ? '' : 's'}${leftOut(source)}, ${formatBytes(source.bytes)} packed, sha256:${source.sha256.slice(0, 12)})`;
  if (await store.has(source.sha256)) {
    io.err(`${what}: already in ${store.where}`);
    return;
  }
  const live = process.stderr.isTTY === true;
  let shown = -1;
  await store.put(source.sha256, source.archive, source.bytes, (sent) => {
    const percent = source.bytes === 0 ? 100 : Math.floor((100 * sent) / source.bytes);
    if (!live || percent === shown) return;
    shown = percent;
    process.stderr.write(`\r${progressLine(`uploading ${given}`, sent, source.bytes)}`);
  });
  if (live) process.stderr.write('\n');
  io.err(`${what}: stored in ${store.where}`);
}
