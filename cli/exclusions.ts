// What a folder source leaves out when it is packed: SkyPilot's rules for syncing a workdir or
// a folder mount to a bucket (sky/data/storage_utils.py, get_excluded_files, and the stores'
// get_dir_sync_command in sky/data/storage.py), plus relaunch's own data folder.
//
// - A `.skyignore` at the folder's top wins outright: `.gitignore` is then not read at all.
//   Only that one file counts (nested `.skyignore` files are ordinary files). Each line is a
//   Python glob: `/x` is anchored at the top, anything else matches at any depth; a match
//   that is a folder takes all beneath it. `!` negates nothing, and wildcards never match a
//   name that starts with a dot, as Python's glob does.
// - Otherwise git itself decides, in the folder and each submodule under it: untracked files
//   that `.gitignore` (at any depth), `.git/info/exclude` or the global excludes ignore.
//   Outside a git repository, or without git, `.gitignore` means nothing (with a warning),
//   and a folder that git ignores as a whole is packed whole.
// - The top `.git` folder is always left out, whichever file decided.

import { execFile } from 'node:child_process';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import ignore, { type Ignore } from 'ignore';

/** SkyPilot's own ignore file (sky/skylet/constants.py, SKY_IGNORE_FILE). */
export const SKY_IGNORE_FILE = '.skyignore';
/** git's (sky/skylet/constants.py, GIT_IGNORE_FILE). */
export const GIT_IGNORE_FILE = '.gitignore';

/** Which rules decided what a folder leaves out. */
export type ExclusionSource = typeof SKY_IGNORE_FILE | typeof GIT_IGNORE_FILE | null;

/** What a folder leaves out: a test per path, and where the rules came from. */
export interface Exclusions {
  readonly source: ExclusionSource;
  /** True when `relative` (with `/` between names; `folder` for a folder) is left out. */
  excludes(relative: string, folder: boolean): boolean;
  /** What the user should know: a `.gitignore` that could not be honoured, say. */
  readonly warnings: readonly string[];
}

/** One `.skyignore` line as a matcher, with what Python's glob adds to it. */
interface SkyPattern {
  readonly matcher: Ignore;
  /** The pattern's names that start with a dot: the only ones that can match a hidden name. */
  readonly dotted: readonly Ignore[];
}

/**
 * The rules of `folder` (an absolute path). `alsoExclude` lists absolute paths left out
 * whatever the rules say (relaunch's data folder when it lies inside).
 */
export async function folderExclusions(folder: string, alsoExclude: readonly string[] = []): Promise<Exclusions> {
  const own = new Set(
    alsoExclude
      .map((absolute) => path.relative(folder, absolute))
      .filter((relative) => relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative))
      .map((relative) => relative.split(path.sep).join('/')),
  );
  const alwaysOut = (relative: string, isFolder: boolean): boolean => own.has(relative) || (isFolder && relative === '.git');
  const skyignore = await readFile(path.join(folder, SKY_IGNORE_FILE), 'utf8').catch(() => undefined);
  if (skyignore !== undefined) {
    const patterns = skyPatterns(skyignore);
    return {
      source: SKY_IGNORE_FILE,
      warnings: [],
      excludes: (relative, isFolder) => alwaysOut(relative, isFolder) || patterns.some((pattern) => skyMatches(pattern, relative, isFolder)),
    };
  }
  const fromGit = await gitIgnored(folder);
  return {
    source: fromGit.ignored === null ? null : GIT_IGNORE_FILE,
    warnings: fromGit.warnings,
    excludes: (relative, isFolder) => alwaysOut(relative, isFolder) || (fromGit.ignored?.has(relative) ?? false),
  };
}

/** `.skyignore` lines as SkyPilot reads them: trimmed, blank and `#` lines skipped. */
function skyPatterns(text: string): SkyPattern[] {
  const patterns: SkyPattern[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    // `/x` is `./x` to SkyPilot (anchored); anything else is `**/x` (any depth). Written
    // that way for `ignore` too, so a `!` or `#` inside is a name, never git's syntax.
    const glob = line.startsWith('/') ? line : `**/${line}`;
    const names = glob.split('/').filter((name) => name !== '' && name !== '**');
    patterns.push({
      matcher: ignore().add(escapeGitSyntax(glob)),
      dotted: names.filter((name) => name.startsWith('.')).map((name) => ignore().add(escapeGitSyntax(name))),
    });
  }
  return patterns;
}

/** A leading `!` or `#` is git's syntax, never Python glob's: taken as the character. */
function escapeGitSyntax(glob: string): string {
  return /^[!#]/.test(glob) ? `\\${glob}` : glob;
}

/**
 * A path matches when the glob does and every hidden name in the path is matched by a
 * name of the pattern that itself starts with a dot: Python's glob never lets `*`, `?`,
 * `[...]` or `**` match a name that starts with one.
 */
function skyMatches(pattern: SkyPattern, relative: string, isFolder: boolean): boolean {
  if (!pattern.matcher.ignores(isFolder ? `${relative}/` : relative)) return false;
  return relative
    .split('/')
    .filter((name) => name.startsWith('.'))
    .every((name) => pattern.dotted.some((dotted) => dotted.ignores(name)));
}

interface GitIgnored {
  /** Paths git ignores (a folder given once for all beneath it), or null when git had no say. */
  readonly ignored: ReadonlySet<string> | null;
  readonly warnings: readonly string[];
}

/** The untracked paths git ignores in `folder` and each submodule under it. */
async function gitIgnored(folder: string): Promise<GitIgnored> {
  const gitignore = await stat(path.join(folder, GIT_IGNORE_FILE)).then(
    () => true,
    () => false,
  );
  const skyHint = `write a ${SKY_IGNORE_FILE} to leave files out instead`;
  let submodules: string[];
  try {
    const listed = await git(folder, ['submodule', 'foreach', '--quiet', 'printf "%s\\0" "$displaypath"']);
    submodules = listed.split('\0').filter((name) => name !== '' && !name.startsWith('../'));
  } catch (error) {
    const { code, stderr } = error as { code?: unknown; stderr?: string };
    if (code === 'ENOENT') {
      return { ignored: null, warnings: gitignore ? [`${folder} has a ${GIT_IGNORE_FILE}, but git is not installed: nothing is left out by it (${skyHint})`] : [] };
    }
    if (typeof stderr === 'string' && stderr.includes('not a git repository')) {
      return { ignored: null, warnings: gitignore ? [`${folder} has a ${GIT_IGNORE_FILE} but is not in a git repository: nothing is left out by it (${skyHint})`] : [] };
    }
    throw error;
  }
  const ignored = new Set<string>();
  for (const repo of ['', ...submodules]) {
    const listed = await git(path.join(folder, repo), ['ls-files', '-z', '--others', '--ignored', '--exclude-standard', '--directory']);
    for (const item of listed.split('\0')) {
      if (item === '') continue;
      if (repo === '' && item === './') {
        return { ignored: null, warnings: [`git ignores all of ${folder}, so none of its ${GIT_IGNORE_FILE} rules apply (${skyHint})`] };
      }
      ignored.add(path.posix.join(repo, item).replace(/\/$/, ''));
    }
  }
  return { ignored, warnings: [] };
}

function git(cwd: string, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('git', ['-C', cwd, ...args], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error === null) resolve(stdout);
      else reject(Object.assign(error, { stderr }));
    });
  });
}
