// Every relative link and #anchor in README.md, BENCHMARKS.md and docs/*.md resolves, and so
// does every Markdown file a source file names: a moved section must not leave a dead link.

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

const DOCS = [
  'README.md',
  'BENCHMARKS.md',
  ...readdirSync(path.join(REPO_ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

/** Folders whose source may name a Markdown file (an error message, a comment). */
const SOURCE_FOLDERS = ['bench', 'cli', 'examples', 'functions', 'infra', 'lib', 'local', 'test', 'types', 'web', '.ci'];

/** The lines of a Markdown text outside fenced code blocks (``` or ~~~), which hold no headings or links. */
function proseLines(markdown: string): string[] {
  const lines: string[] = [];
  let fence: string | undefined;
  for (const line of markdown.split('\n')) {
    const opening = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence === undefined && opening !== undefined) fence = opening;
    else if (fence !== undefined && opening !== undefined && opening[0] === fence[0] && opening.length >= fence.length && line.trim() === opening) fence = undefined;
    else if (fence === undefined) lines.push(line);
  }
  return lines;
}

/** A line with its code spans removed: `[a](b)` inside backticks is text, not a link. */
function withoutCodeSpans(line: string): string {
  return line.replace(/(`+)(?:(?!\1)[\s\S])*?\1/g, '');
}

/** A heading's anchor by GitHub's rules: its text lowercased, punctuation but - and _ removed, each space a -. */
function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

/** Every anchor a Markdown text's headings make, a repeated one suffixed -1, -2, ... as GitHub does. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  for (const line of proseLines(markdown)) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const base = slug(heading);
    let anchor = base;
    for (let n = 1; anchors.has(anchor); n += 1) anchor = `${base}-${n}`;
    anchors.add(anchor);
  }
  return anchors;
}

/** The target of every inline link and image of a Markdown text, outside code. */
function linksOf(markdown: string): string[] {
  const targets: string[] = [];
  for (const line of proseLines(markdown)) {
    for (const match of withoutCodeSpans(line).matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      targets.push(match[1] as string);
    }
  }
  return targets;
}

/**
 * Why a link from `fromFile` (relative to the repository) does not resolve, or undefined
 * when it does. A link with a scheme (https:, mailto:) is not followed: the tests stay off
 * the network.
 */
function brokenLink(fromFile: string, target: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined;
  const [rawPath = '', anchor] = target.split('#', 2);
  const file = rawPath === '' ? path.join(REPO_ROOT, fromFile) : path.resolve(path.dirname(path.join(REPO_ROOT, fromFile)), decodeURIComponent(rawPath));
  if (!existsSync(file)) return `${target}: no file ${path.relative(REPO_ROOT, file)}`;
  if (anchor === undefined) return undefined;
  if (!statSync(file).isFile() || !file.endsWith('.md')) return `${target}: an anchor into something that is not a Markdown file`;
  const anchors = anchorsOf(readFileSync(file, 'utf8'));
  return anchors.has(anchor) ? undefined : `${target}: ${path.relative(REPO_ROOT, file)} has no heading #${anchor}`;
}

function sourceFiles(folder: string): string[] {
  const absolute = path.join(REPO_ROOT, folder);
  if (!existsSync(absolute)) return [];
  return readdirSync(absolute, { recursive: true, encoding: 'utf8' })
    .map((name) => path.join(folder, name))
    .filter((name) => /\.(ts|mts|js|mjs|sh|yaml|css|html)$/.test(name) || path.basename(name) === 'run')
    .filter((name) => statSync(path.join(REPO_ROOT, name)).isFile());
}

describe('GitHub anchors', () => {
  it.each([
    ['The `relaunch` command', 'the-relaunch-command'],
    ["SkyPilot's own task files", 'skypilots-own-task-files'],
    ['What relaunch rejects, and how errors read', 'what-relaunch-rejects-and-how-errors-read'],
    ['Worked example: `max_restarts_on_errors: 3` is 4 attempts', 'worked-example-max_restarts_on_errors-3-is-4-attempts'],
    ['Candidate resources (`any_of`, `ordered`, accelerator sets), `ports` and `network_tier`', 'candidate-resources-any_of-ordered-accelerator-sets-ports-and-network_tier'],
    ['See [Recovery](recovery.md) first', 'see-recovery-first'],
    ['Spaces  stay - doubled', 'spaces--stay---doubled'],
  ])('%s -> #%s', (heading, anchor) => {
    expect(slug(heading)).toBe(anchor);
  });

  it('suffixes a repeated heading -1, -2 and ignores headings inside code blocks', () => {
    const markdown = ['# Notes', '## Notes', '```sh', '# Notes', '```', '### Notes', '~~~', '## Hidden', '~~~'].join('\n');
    expect([...anchorsOf(markdown)]).toEqual(['notes', 'notes-1', 'notes-2']);
  });

  it('finds links and images, but none inside code spans or code blocks', () => {
    const markdown = ['See [a](a.md#x) and ![b](b.png "title").', 'Not `[c](c.md)`.', '```', '[d](d.md)', '```'].join('\n');
    expect(linksOf(markdown)).toEqual(['a.md#x', 'b.png']);
  });
});

describe('links in the documentation', () => {
  it.each(DOCS)('every link in %s resolves', (file) => {
    const links = linksOf(readFileSync(path.join(REPO_ROOT, file), 'utf8'));
    const broken = links.flatMap((target) => brokenLink(file, target) ?? []);
    expect(broken).toEqual([]);
  });

  it('the README links to every page of docs/', () => {
    const linked = new Set(linksOf(readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8')).map((target) => target.split('#')[0]));
    const pages = DOCS.filter((file) => file.startsWith('docs/'));
    expect(pages.filter((page) => !linked.has(page))).toEqual([]);
    expect(pages.length).toBeGreaterThan(0);
  });

  it('every Markdown file a source file names, with its anchor, resolves', () => {
    const broken: string[] = [];
    for (const file of SOURCE_FOLDERS.flatMap(sourceFiles)) {
      const text = readFileSync(path.join(REPO_ROOT, file), 'utf8');
      for (const match of text.matchAll(/\b((?:docs\/[\w-]+|README|BENCHMARKS)\.md)(#[\w-]+)?/g)) {
        const target = `${match[1] as string}${match[2] ?? ''}`;
        const problem = brokenLink('README.md', target);
        if (problem !== undefined) broken.push(`${file}: ${problem}`);
      }
    }
    expect(broken).toEqual([]);
  });
});
