// The jobs view: every job, newest first, one row each, updated in place as the API
// changes (rows keep their identity, so focus and the filter survive each refresh).

import type { JobSummary } from '../../lib/views.ts';
import { isTerminal, JOB_STATUSES, type JobStatus } from '../../lib/status.ts';
import { poll, type Api, type PageConfig, type Screen } from './api.ts';
import { el, formatDuration, formatTime, statusBadge } from './dom.ts';

/** The filter's choices: all jobs, the live ones, or one status. */
const ALL = 'all';
const LIVE = 'live';

/** Shows the jobs in `main` and keeps them current until stopped. */
export function renderJobs(main: HTMLElement, api: Api, config: PageConfig): Screen {
  const filter = el('select', { id: 'status-filter' }, el('option', { value: ALL }, 'all'), el('option', { value: LIVE }, 'live (not finished)'));
  for (const status of JOB_STATUSES) filter.append(el('option', { value: status }, status));
  filter.value = sessionStorage.getItem('relaunch-filter') ?? ALL;
  const body = el('tbody');
  const empty = el('p', { class: 'muted', hidden: '' });
  const table = el(
    'table',
    { class: 'jobs', 'aria-describedby': 'jobs-caption' },
    el('caption', { id: 'jobs-caption', class: 'visually-hidden' }, 'Jobs, newest first'),
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        ...['Name', 'Job', 'Status', 'Attempts', 'Recoveries', 'Restarts on errors', 'Submitted', 'Duration'].map((title) => el('th', { scope: 'col' }, title)),
      ),
    ),
    body,
  );
  main.append(
    el('h1', {}, 'Jobs'),
    el('div', { class: 'toolbar' }, el('label', { for: 'status-filter' }, 'Status '), filter),
    table,
    empty,
  );

  const rows = new Map<string, HTMLTableRowElement>();
  let jobs: JobSummary[] = [];
  const show = (): void => {
    const chosen = filter.value;
    const visible = jobs.filter((job) => chosen === ALL || (chosen === LIVE ? !isTerminal(job.status) : job.status === chosen));
    const order = visible.map((job) => rowOf(rows, job));
    // Rows are moved only when the order changed: moving a row takes focus off its link.
    const same = order.length === body.children.length && order.every((row, index) => body.children[index] === row);
    if (!same) body.replaceChildren(...order);
    empty.hidden = visible.length > 0;
    empty.textContent = jobs.length === 0 ? 'No jobs yet: relaunch run TASK.yaml submits one.' : 'No job has this status.';
  };
  filter.addEventListener('change', () => {
    sessionStorage.setItem('relaunch-filter', filter.value);
    show();
  });
  return poll(async () => {
    jobs = [...(await api.jobs())].sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.jobId.localeCompare(a.jobId));
    for (const job of jobs) update(rowOf(rows, job), job);
    show();
    return true;
  }, config.pollMs);
}

function rowOf(rows: Map<string, HTMLTableRowElement>, job: JobSummary): HTMLTableRowElement {
  let row = rows.get(job.jobId);
  if (row === undefined) {
    const link = el('a', { href: `#/jobs/${encodeURIComponent(job.jobId)}`, class: 'job-name' });
    row = el('tr', { 'data-job-id': job.jobId }, el('td', {}, link), ...Array.from({ length: 7 }, () => el('td')));
    rows.set(job.jobId, row);
  }
  return row;
}

function update(row: HTMLTableRowElement, job: JobSummary): void {
  const cells = [...row.cells];
  const link = cells[0]?.firstElementChild as HTMLAnchorElement;
  link.textContent = job.name ?? '(no name)';
  row.dataset.status = job.status;
  const end = isTerminal(job.status as JobStatus) ? Date.parse(job.updatedAt) : Date.now();
  const values: (string | Node)[] = [
    job.jobId,
    statusBadge(job.status),
    String(job.attemptCount),
    String(job.recoveryCount),
    `${job.restartsOnErrors} / ${job.maxRestartsOnErrors}`,
    formatTime(job.createdAt),
    formatDuration(end - Date.parse(job.createdAt)),
  ];
  values.forEach((value, index) => {
    const cell = cells[index + 1];
    if (cell === undefined) return;
    if (typeof value === 'string') {
      if (cell.textContent !== value) cell.textContent = value;
    } else if (cell.firstElementChild?.getAttribute('data-status') !== job.status) {
      cell.replaceChildren(value);
    }
  });
  cells[1]?.classList.add('mono');
  cells[2]?.setAttribute('data-col', 'status');
}
