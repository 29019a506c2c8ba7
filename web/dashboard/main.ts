// The jobs page: a live list of jobs, and one job's attempts on a timeline with each
// decision and its reason. Two views, chosen by the address's fragment: `#/` and
// `#/jobs/<id>`, so the browser's back button and bookmarks work.

import { api, config, type Screen } from './api.ts';
import { clear } from './dom.ts';
import { renderJob } from './job.ts';
import { renderJobs } from './jobs.ts';

let current: Screen | null = null;

/** A hash part as the user typed it when it is not valid percent-encoding (`#/jobs/%E0`): the page then says no such job. */
function decodedOrRaw(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function route(): void {
  current?.stop();
  const main = document.getElementById('main') as HTMLElement;
  clear(main);
  const match = /^#\/jobs\/(.+)$/.exec(location.hash);
  const jobId = match === null ? null : decodedOrRaw(match[1] ?? '');
  current = jobId === null ? renderJobs(main, api, config) : renderJob(main, jobId, api, config);
  // Keyboard and screen-reader users land on the new view, not on the link they left.
  main.focus();
}

function start(): void {
  const where = document.getElementById('where');
  if (where !== null) where.textContent = config.where === 'local' ? 'local runtime' : config.where;
  window.addEventListener('hashchange', route);
  route();
}

start();
