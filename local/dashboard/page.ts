// The jobs page: its HTML, script and style, and the full log of an attempt, answered on
// the local API's own port (and by `relaunch dashboard` for a deployed API). The script is
// TypeScript under web/dashboard, bundled by esbuild on the first request and kept in
// memory, so a fresh clone serves the page with no build step.

import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { isJobId } from '../../lib/ids.ts';
import { JobNotFoundError } from '../../lib/errors.ts';
import { json } from '../../lib/http/responses.ts';
import type { ApiResponse } from '../../lib/http/types.ts';
import type { JobStore } from '../../lib/ports.ts';
import { attemptLogs, readLogFrom } from '../paths.ts';
import { PAGE_TOKEN_HEADER } from './page-token.ts';

const WEB_DIR = fileURLToPath(new URL('../../web/dashboard/', import.meta.url));

/** Where the full logs of attempts are: the local runtime's data folder and its store. */
export interface LocalLogs {
  readonly dataDir: string;
  readonly store: Pick<JobStore, 'getJob'>;
}

/** What the page is served with. */
export interface PageOptions {
  /** This server's page token (page-token.ts), written into the HTML for the Cancel button. */
  readonly token: string;
  /** The full logs, locally; null where only each phase's last lines are kept (a deployed API). */
  readonly logs: LocalLogs | null;
  /** How often the page asks the API again, in ms. */
  readonly pollMs: number;
  /** What the page says it shows: `local`, or the deployed API's URL. */
  readonly where: string;
}

/** How often a page of the local runtime asks again: nothing throttles it, and a second reads as live. */
export const LOCAL_POLL_MS = 1000;

/** The most bytes of one phase's log the log route answers: its end, with a note of the cut. */
export const MAX_LOG_BYTES_PER_PHASE = 4 * 1024 * 1024;

/**
 * Security headers of every page answer: the page runs only its own script and style,
 * talks only to its own origin, and cannot be framed (no other site can overlay its
 * Cancel button), and the browser never guesses a type.
 */
const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

/**
 * Answers a request for the page (`/`, `/dashboard.js`, `/dashboard.css`) or an attempt's
 * full log (`/jobs/{id}/attempts/{n}/log`); null for any other path, which the API answers.
 */
export async function answerPageRequest(request: { readonly method: string; readonly path: string }, options: PageOptions): Promise<ApiResponse | null> {
  const path = request.path.split('?', 1)[0] ?? '';
  const asset = ASSETS[path];
  const log = /^\/jobs\/([^/]+)\/attempts\/([^/]+)\/log$/.exec(path);
  if (asset === undefined && log === null) return null;
  if (request.method.toUpperCase() !== 'GET') return json(405, { error: `${request.method.toUpperCase()} is not allowed here` }, { allow: 'GET' });
  if (asset !== undefined) return { statusCode: 200, headers: { ...PAGE_HEADERS, 'content-type': asset.type }, body: await asset.body(options) };
  return attemptLog(decoded(log?.[1] ?? ''), decoded(log?.[2] ?? ''), options.logs);
}

interface Asset {
  readonly type: string;
  body(options: PageOptions): Promise<string>;
}

const ASSETS: Readonly<Record<string, Asset>> = {
  '/': { type: 'text/html; charset=utf-8', body: async (options) => pageHtml(options) },
  '/dashboard.js': { type: 'text/javascript; charset=utf-8', body: () => dashboardScript() },
  '/dashboard.css': { type: 'text/css; charset=utf-8', body: () => dashboardStyle() },
};

/** The page. Only the token (hex), a number and a URL checked by the caller go into it, each attribute-escaped. */
export function pageHtml(options: PageOptions): string {
  const meta = (name: string, value: string): string => `<meta name="${name}" content="${escapeAttribute(value)}">`;
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="color-scheme" content="light dark">',
    '<title>relaunch jobs</title>',
    meta('relaunch-page-token', options.token),
    meta('relaunch-token-header', PAGE_TOKEN_HEADER),
    meta('relaunch-logs', options.logs === null ? 'none' : 'local'),
    meta('relaunch-poll-ms', String(options.pollMs)),
    meta('relaunch-where', options.where),
    '<link rel="stylesheet" href="/dashboard.css">',
    '<script src="/dashboard.js" defer></script>',
    '</head>',
    '<body>',
    '<header class="top"><a class="brand" href="#/">relaunch</a><span class="where" id="where"></span><span class="live" id="live" aria-live="off"></span></header>',
    '<main id="main" tabindex="-1"><p class="muted">Loading…</p></main>',
    '<noscript>This page needs JavaScript; <code>relaunch status</code> shows the same jobs in a terminal.</noscript>',
    '</body>',
    '</html>',
    '',
  ].join('\n');
}

function escapeAttribute(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

let script: Promise<string> | null = null;

/** The page's script, bundled once per process; a failed build is tried again on the next request. */
export function dashboardScript(): Promise<string> {
  script ??= bundle().catch((error: unknown) => {
    script = null;
    throw error;
  });
  return script;
}

async function bundle(): Promise<string> {
  // Loaded only here: a runtime whose page nobody opens never loads esbuild.
  const { build } = await import('esbuild');
  const result = await build({
    entryPoints: [`${WEB_DIR}main.ts`],
    bundle: true,
    write: false,
    format: 'iife',
    target: 'es2022',
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
  });
  const [output] = result.outputFiles;
  if (output === undefined) throw new Error('esbuild produced no script for the page');
  return output.text;
}

let style: Promise<string> | null = null;

function dashboardStyle(): Promise<string> {
  style ??= readFile(`${WEB_DIR}style.css`, 'utf8').catch((error: unknown) => {
    style = null;
    throw error;
  });
  return style;
}

/** `GET /jobs/{id}/attempts/{n}/log`: every node's setup and run output of one attempt, as text. */
async function attemptLog(jobId: string, attemptText: string, logs: LocalLogs | null): Promise<ApiResponse> {
  if (logs === null) {
    return json(404, { error: "this API keeps no full logs: each phase's last lines are on the job (GET /jobs/{id}, attempts[].outputTails)" });
  }
  if (!isJobId(jobId)) return json(404, { error: `no job with id ${JSON.stringify(jobId.slice(0, 64))}` });
  if (!/^[1-9][0-9]{0,8}$/.test(attemptText)) {
    return json(400, { error: 'the request is not valid (1 issue)', issues: [{ path: 'attempt', message: `expected a positive integer in the path, got ${JSON.stringify(attemptText.slice(0, 40))}` }] });
  }
  let attemptCount: number;
  try {
    attemptCount = (await logs.store.getJob(jobId)).attemptCount;
  } catch (error) {
    if (error instanceof JobNotFoundError) return json(404, { error: error.message });
    throw error;
  }
  const attempt = Number(attemptText);
  if (attempt > attemptCount) return json(404, { error: `job ${jobId} has no attempt ${attempt} (it has ${attemptCount})` });
  const parts = attemptLogs(logs.dataDir, jobId, attempt).flatMap((log) => {
    const text = readEnd(log.file);
    return text === null || text === '' ? [] : [`==> node ${log.rank}, ${log.phase} <==\n${text}${text.endsWith('\n') || text === '' ? '' : '\n'}`];
  });
  const body = parts.length === 0 ? `(attempt ${attempt} wrote no output)\n` : parts.join('\n');
  return { statusCode: 200, headers: { ...PAGE_HEADERS, 'content-type': 'text/plain; charset=utf-8' }, body };
}

/** A log's text, its last MAX_LOG_BYTES_PER_PHASE bytes when longer; null when the phase never wrote one. */
function readEnd(file: string): string | null {
  const read = readLogFrom(file, (size) => size - MAX_LOG_BYTES_PER_PHASE);
  if (read === null) return null;
  return read.start === 0 ? read.text : `(the first ${read.start} bytes are left out)\n${read.text}`;
}

function decoded(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
