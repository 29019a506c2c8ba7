// What the page knows of its server: the settings written into its HTML, and the API
// calls it makes (the CLI's JSON API, on the page's own origin).

import type { JobSummary, JobView } from '../../lib/views.ts';

/** What the server wrote into the page. */
export interface PageConfig {
  readonly token: string;
  readonly tokenHeader: string;
  /** Whether the server serves full logs (the local runtime does). */
  readonly logs: boolean;
  readonly pollMs: number;
  readonly where: string;
}

function meta(name: string): string {
  const value = document.querySelector<HTMLMetaElement>(`meta[name="${name}"]`)?.content;
  if (value === undefined) throw new Error(`the page lacks <meta name="${name}">`);
  return value;
}

export const config: PageConfig = {
  token: meta('relaunch-page-token'),
  tokenHeader: meta('relaunch-token-header'),
  logs: meta('relaunch-logs') === 'local',
  pollMs: Number(meta('relaunch-poll-ms')),
  where: meta('relaunch-where'),
};

/** An answer of the API that was not 2xx: its status and its `error`. */
export class ApiFailure extends Error {
  override readonly name = 'ApiFailure';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function call(method: string, path: string, headers: Record<string, string> = {}): Promise<unknown> {
  const response = await fetch(path, { method, headers: { accept: 'application/json', ...headers }, cache: 'no-store' });
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = { error: text.slice(0, 200) };
  }
  if (!response.ok) {
    const error = (body as { error?: unknown } | null)?.error;
    throw new ApiFailure(response.status, typeof error === 'string' ? error : `the API answered ${response.status}`);
  }
  return body;
}

/** The page's API calls, as a type (views take them as a parameter). */
export type Api = typeof api;

/** How many of the newest jobs the list shows. */
export const PAGE_JOBS = 200;

/** The calls the page makes. */
export const api = {
  /** The newest PAGE_JOBS jobs: the list refreshes every few seconds, so it never reads them all. */
  async jobs(): Promise<JobSummary[]> {
    return ((await call('GET', `/jobs?limit=${PAGE_JOBS}`)) as { jobs: JobSummary[] }).jobs;
  },
  async job(jobId: string): Promise<JobView> {
    return (await call('GET', `/jobs/${encodeURIComponent(jobId)}`)) as JobView;
  },
  async cancel(jobId: string): Promise<{ status: string }> {
    return (await call('DELETE', `/jobs/${encodeURIComponent(jobId)}`, { [config.tokenHeader]: config.token })) as { status: string };
  },
};

/** One view on screen; `stop` ends its polling when the user goes elsewhere. */
export interface Screen {
  stop(): void;
}

/**
 * Says on the page how fresh what it shows is. Screen readers hear only a failure: a
 * region announcing "updated" every second would drown everything else.
 */
export function setLive(text: string, failed = false): void {
  const live = document.getElementById('live');
  if (live === null) return;
  live.setAttribute('aria-live', failed ? 'assertive' : 'off');
  live.textContent = text;
  live.classList.toggle('failed', failed);
}

/**
 * Runs `tick` now and again `everyMs` after each run ends (never two at once), until
 * stopped or until `tick` answers false (nothing left to change). A failed tick is shown
 * and tried again.
 */
export function poll(tick: () => Promise<boolean>, everyMs: number): Screen {
  let timer: number | undefined;
  let stopped = false;
  const run = async (): Promise<void> => {
    let again = true;
    try {
      again = await tick();
      setLive(`updated ${new Date().toLocaleTimeString()}`);
    } catch (error) {
      setLive(`cannot reach the API: ${(error as Error).message}`, true);
    }
    if (again && !stopped) timer = window.setTimeout(() => void run(), everyMs);
  };
  void run();
  return {
    stop() {
      stopped = true;
      window.clearTimeout(timer);
    },
  };
}
