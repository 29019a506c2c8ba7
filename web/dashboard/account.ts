// One job's account on its page: the summary line, the wall time as one bar cut by cause
// (each attempt's stretches and the waits between them, in order), and the breakdown.

import { breakdownLines, CAUSE_WORDS, span, summaryLine } from '../../lib/accounting/format.ts';
import type { SegmentView } from '../../lib/accounting/view.ts';
import type { JobView } from '../../lib/views.ts';
import { el } from './dom.ts';

/** The section, or nothing for a job the API gave no account for. */
export function accountSection(job: JobView): HTMLElement[] {
  const account = job.account;
  if (account === undefined) return [];
  const stretches: SegmentView[] = [...account.between, ...account.attempts.flatMap((attempt) => attempt.segments)].sort((a, b) => Date.parse(a.from) - Date.parse(b.from));
  const wall = account.wallSeconds > 0 ? account.wallSeconds : 1;
  const summary = summaryLine(account);
  const bar = el('div', { class: 'cause-bar', role: 'img', 'aria-label': `${summary}: the wall time by cause` });
  for (const stretch of stretches) {
    const part = el('span', { class: `cause cause-${stretch.cause}`, title: `${CAUSE_WORDS[stretch.cause]}: ${span(stretch.seconds)}` });
    part.style.width = `${(stretch.seconds / wall) * 100}%`;
    bar.appendChild(part);
  }
  return [
    el(
      'section',
      { class: 'account', 'aria-labelledby': 'account-title' },
      el('h2', { id: 'account-title' }, 'Where the time and money went'),
      el('p', { class: 'account-summary' }, summary),
      bar,
      el('ul', { class: 'account-breakdown' }, ...breakdownLines(account).map((line) => el('li', {}, line.trim()))),
    ),
  ];
}
