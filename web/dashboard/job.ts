// One job: its headline, a Cancel button, a timeline of its attempts (one row per node,
// one bar per attempt, gaps for backoff and capacity waits), its recovery policy, and
// each attempt's decision with its reason, counters, placement and last output lines.

import type { AttemptView, JobView } from '../../lib/views.ts';
import { reusedNodesWords, standbyOfWords } from '../../lib/reused-nodes.ts';
import type { RecoveryPolicy } from '../../lib/task-file/types.ts';
import { isTerminal } from '../../lib/status.ts';
import { capacityTries, capacityWaitLine } from '../../lib/capacity-tries.ts';
import { accountSection } from './account.ts';
import { ApiFailure, poll, setLive, type Api, type PageConfig, type Screen } from './api.ts';
import { el, formatDuration, formatTime, statusBadge } from './dom.ts';
import type { JobViewWithLogs } from '../../lib/usecases/read-job-log.ts';

/** Shows job `jobId` in `main` and keeps it current until it ends or the user leaves. */
export function renderJob(main: HTMLElement, jobId: string, api: Api, config: PageConfig): Screen {
  const back = el('p', {}, el('a', { href: '#/' }, '← All jobs'));
  const head = el('div', { class: 'job-head' });
  const cancel = cancelPanel(jobId, api);
  const body = el('div', { class: 'job-body' });
  main.append(back, head, cancel.element, body);
  let shown = '';
  return poll(async () => {
    let job: JobView;
    try {
      job = await api.job(jobId);
    } catch (error) {
      if (!(error instanceof ApiFailure) || error.status !== 404) throw error;
      head.replaceChildren(el('h1', {}, 'No such job'), el('p', { role: 'alert' }, error.message));
      cancel.element.hidden = true;
      return false;
    }
    const text = JSON.stringify(job);
    const live = !isTerminal(job.status);
    // Only a change is drawn again; a live job's running bar grows, so it is drawn each time.
    if (text !== shown || live) {
      shown = text;
      head.replaceChildren(...headline(job));
      body.replaceChildren(timeline(job), ...accountSection(job), attempts(job, config), policy(job.recoveryPolicy));
    }
    cancel.update(job);
    return live;
  }, config.pollMs);
}

function headline(job: JobView): Node[] {
  const end = isTerminal(job.status) ? Date.parse(job.updatedAt) : Date.now();
  const facts = el(
    'dl',
    { class: 'facts' },
    fact('Job', el('span', { class: 'mono' }, job.jobId)),
    fact('Status', statusBadge(job.status)),
    fact('Attempts', String(job.attempts.length)),
    fact('Recoveries', String(job.recoveryCount)),
    fact('Restarts on errors', `${job.restartsOnErrors} / ${job.recoveryPolicy.maxRestartsOnErrors}`),
    fact('Submitted', formatTime(job.createdAt)),
    fact('Duration', formatDuration(end - Date.parse(job.createdAt))),
  );
  const nodes: Node[] = [el('h1', { class: 'job-title' }, job.name ?? '(no name)'), facts];
  if (job.failureReason !== null) nodes.push(el('p', { class: 'failure' }, job.failureReason));
  return nodes;
}

function fact(term: string, value: string | Node): HTMLElement {
  return el('div', {}, el('dt', {}, term), el('dd', {}, value));
}

/** The Cancel button, with a confirmation in the page (no modal dialog), shown while the job lives. */
function cancelPanel(jobId: string, api: Api): { element: HTMLElement; update(job: JobView): void } {
  const button = el('button', { type: 'button', class: 'danger', id: 'cancel-job' }, 'Cancel job…');
  const yes = el('button', { type: 'button', class: 'danger', id: 'cancel-confirm' }, 'Yes, cancel it');
  const no = el('button', { type: 'button', id: 'cancel-keep' }, 'Keep it running');
  const confirm = el('span', { class: 'confirm', hidden: '' }, 'Stop every node of this job? ', yes, ' ', no);
  const message = el('span', { class: 'cancel-message', role: 'status' });
  const element = el('div', { class: 'cancel', hidden: '' }, button, confirm, message);
  button.addEventListener('click', () => {
    confirm.hidden = false;
    button.hidden = true;
    yes.focus();
  });
  no.addEventListener('click', () => {
    confirm.hidden = true;
    button.hidden = false;
    button.focus();
  });
  yes.addEventListener('click', () => {
    yes.disabled = true;
    message.textContent = 'cancelling…';
    api.cancel(jobId).then(
      (answer) => {
        message.textContent = `cancel asked: ${answer.status}`;
        setLive(`cancel asked for ${jobId}`);
      },
      (error: unknown) => {
        message.textContent = `cancel refused: ${(error as Error).message}`;
        message.setAttribute('role', 'alert');
        yes.disabled = false;
      },
    );
  });
  return {
    element,
    update(job) {
      element.hidden = isTerminal(job.status) || job.status === 'CANCELLING';
    },
  };
}

/** How an attempt ended on one node, as the bar's class and its words. */
function barKind(attempt: AttemptView, node: number): { kind: string; label: string; words: string } {
  const code = attempt.exitCodes[node];
  switch (attempt.outcome) {
    case null:
      // A node whose run has ended while its peers run on shows its code already.
      if (attempt.phase !== 'run' || code === null || code === undefined) return { kind: 'running', label: 'running', words: 'running' };
      return { kind: code === 0 ? 'ok' : 'error', label: String(code), words: `exited ${code}; other nodes still run` };
    case 'EXITED':
      if (code === null || code === undefined) return { kind: 'killed', label: '—', words: 'no exit code (killed or unknown)' };
      return code === 0 ? { kind: 'ok', label: '0', words: 'exited 0' } : { kind: 'error', label: String(code), words: `exited ${code}` };
    case 'PREEMPTED':
      return { kind: 'preempted', label: 'preempted', words: 'preempted' };
    case 'LOST':
      return { kind: 'lost', label: 'lost', words: 'lost' };
    case 'AGENT_FAILED': {
      const failed = attempt.agentFailure;
      if (failed === null || failed.nodeRank !== node) return { kind: 'killed', label: '—', words: 'stopped: another node\'s agent failed before setup' };
      return { kind: 'agent-failed', label: failed.step, words: `the agent failed before setup, at ${failed.step}` };
    }
    case 'LAUNCH_FAILED':
      return { kind: 'launch-failed', label: 'no launch', words: 'launch failed' };
    case 'CANCELLED':
      return { kind: 'cancelled', label: 'cancelled', words: 'cancelled' };
  }
}

/** One row per node, one bar per attempt from launch to end, and the waits between them. */
function timeline(job: JobView): HTMLElement {
  const start = Date.parse(job.createdAt);
  const now = Date.now();
  const ends = job.attempts.map((attempt) => (attempt.endedAt === null ? now : Date.parse(attempt.endedAt)));
  const end = Math.max(isTerminal(job.status) ? Date.parse(job.updatedAt) : now, ...ends, start + 1000);
  const span = end - start;
  const at = (ms: number): string => `${(((ms - start) / span) * 100).toFixed(3)}%`;
  const width = (from: number, to: number): string => `${((Math.max(0, to - from) / span) * 100).toFixed(3)}%`;
  const nodes = Math.max(job.numNodes, 1);

  const rows = Array.from({ length: nodes }, (_, node) => {
    const track = el('div', { class: 'track' });
    job.attempts.forEach((attempt, index) => {
      const started = Date.parse(attempt.startedAt);
      const to = ends[index] ?? now;
      // A standby's life before its run (setup, then holding) is a strip under the bars: it
      // overlaps the warned attempt's bar, and its own bar is its run.
      const standby = attempt.standby;
      const from = standby === null ? started : attempt.runStartedAt === null || standby.state === 'released' ? null : Date.parse(attempt.runStartedAt);
      if (standby !== null) track.append(standbyStrip(attempt, node, started, from ?? to, at, width));
      if (from === null) return;
      // The attempt before it that ran: a standby let go unused never did.
      const before = job.attempts.slice(0, index).findLastIndex((other) => other.standby?.state !== 'released');
      const previous = job.attempts[before];
      const previousEnd = ends[before];
      if (previous !== undefined && previousEnd !== undefined && from > previousEnd) {
        const wait = standby === null ? waitWords(previous, from - previousEnd) : { kind: 'standby', words: `${formatDuration(from - previousEnd)} from the end of attempt ${previous.attempt} to the run of its standby, attempt ${attempt.attempt}` };
        const gap = el('div', { class: `gap gap-${wait.kind}`, title: wait.words, 'data-gap-after': String(previous.attempt) });
        gap.style.left = at(previousEnd);
        gap.style.width = width(previousEnd, from);
        track.append(gap);
      }
      const { kind, label, words } = barKind(attempt, node);
      const description = `attempt ${attempt.attempt}, node ${node}: ${words}; ${formatDuration(to - from)}`;
      const bar = el(
        'a',
        {
          class: `bar bar-${kind}`,
          href: `#attempt-${attempt.attempt}`,
          title: description,
          'aria-label': description,
          'data-attempt': String(attempt.attempt),
          'data-node': String(node),
          'data-outcome': attempt.outcome ?? 'RUNNING',
          'data-exit-code': attempt.exitCodes[node] === undefined || attempt.exitCodes[node] === null ? '' : String(attempt.exitCodes[node]),
        },
        el('span', { class: 'bar-label' }, label),
      );
      // The fragment would replace the view's own; the bar moves focus to its attempt instead.
      bar.addEventListener('click', (event) => {
        event.preventDefault();
        const target = document.getElementById(`attempt-${attempt.attempt}`);
        target?.scrollIntoView({ block: 'nearest' });
        target?.focus();
      });
      bar.style.left = at(from);
      bar.style.width = width(from, to);
      track.append(bar);
    });
    return el('div', { class: 'timeline-row' }, el('span', { class: 'row-label' }, `node ${node}`), track);
  });
  const axis = el(
    'div',
    { class: 'axis' },
    el('span', {}, formatTime(job.createdAt)),
    el('span', {}, `+${formatDuration(span)}${isTerminal(job.status) ? '' : ' (now)'}`),
  );
  return el(
    'section',
    { class: 'timeline', 'aria-labelledby': 'timeline-title' },
    el('h2', { id: 'timeline-title' }, 'Attempts over time'),
    ...rows,
    axis,
    legend(),
  );
}

/** A standby's setup and hold (launch_on_warning), from its launch to its run, or to its release. */
function standbyStrip(attempt: AttemptView, node: number, from: number, to: number, at: (ms: number) => string, width: (from: number, to: number) => string): HTMLElement {
  const standby = attempt.standby as NonNullable<AttemptView['standby']>;
  const state = standby.state === 'released' ? `released unused: ${standby.releaseReason ?? ''}` : standby.state === 'holding' ? 'holding before run' : 'taken as the next attempt';
  const words = `attempt ${attempt.attempt}, node ${node}: the standby of ${standbyOfWords(standby)}, ${state}; ${formatDuration(to - from)}`;
  const strip = el('div', { class: `standby standby-${standby.state}`, title: words, 'aria-label': words, 'data-standby': String(attempt.attempt), 'data-node': String(node), 'data-state': standby.state });
  strip.style.left = at(from);
  strip.style.width = width(from, to);
  return strip;
}

function waitWords(previous: AttemptView, ms: number): { kind: string; words: string } {
  const seconds = formatDuration(ms);
  if (previous.rule === 'WAITING_FOR_CAPACITY') return { kind: 'capacity', words: `waited ${seconds} for capacity after attempt ${previous.attempt}` };
  if ((previous.delaySeconds ?? 0) > 0) return { kind: 'backoff', words: `backoff of ${previous.delaySeconds} s after attempt ${previous.attempt} (${seconds} in all)` };
  return { kind: 'relaunch', words: `${seconds} between attempt ${previous.attempt} and the next launch` };
}

function legend(): HTMLElement {
  const items: [string, string][] = [
    ['ok', 'exited 0'],
    ['error', 'exited non-zero'],
    ['killed', 'no exit code'],
    ['preempted', 'preempted'],
    ['lost', 'lost'],
    ['agent-failed', "relaunch's agent failed before setup"],
    ['launch-failed', 'launch failed'],
    ['cancelled', 'cancelled'],
    ['running', 'running'],
  ];
  const standby = el('li', {}, el('span', { class: 'swatch standby-holding', 'aria-hidden': 'true' }), 'standby: setup and holding before run');
  return el(
    'ul',
    { class: 'legend', 'aria-label': 'Colours of the bars' },
    ...items.map(([kind, words]) => el('li', {}, el('span', { class: `swatch bar-${kind}`, 'aria-hidden': 'true' }), words)),
    el('li', {}, el('span', { class: 'swatch gap-backoff', 'aria-hidden': 'true' }), 'backoff or wait for capacity'),
    standby,
  );
}

/** The job's recovery policy, in the task file's own keys. */
function policy(recovery: RecoveryPolicy): HTMLElement {
  const codes = (list: readonly number[]): string => `[${list.join(', ')}]`;
  const lines = [
    'job_recovery:',
    `  strategy: ${recovery.strategy}`,
    `  max_restarts_on_errors: ${recovery.maxRestartsOnErrors}`,
    `  recover_on_exit_codes: ${codes(recovery.recoverOnExitCodes)}`,
  ];
  if (recovery.failOnExitCodes.length > 0) lines.push(`  fail_on_exit_codes: ${codes(recovery.failOnExitCodes)}`);
  if (recovery.maxRestartsOnExitCodes !== null) lines.push(`  max_restarts_on_exit_codes: ${recovery.maxRestartsOnExitCodes}`);
  const backoff = recovery.restartBackoff;
  if (backoff !== null) {
    lines.push(
      '  restart_backoff:',
      `    initial_seconds: ${backoff.initialSeconds}`,
      `    factor: ${backoff.factor}`,
      `    max_seconds: ${backoff.maxSeconds}`,
      `    jitter: ${backoff.jitter}`,
    );
  }
  if (recovery.onDemandFallbackAfter !== null) lines.push(`  on_demand_fallback_after: ${recovery.onDemandFallbackAfter}`);
  if (recovery.launchTimeoutSeconds !== undefined && recovery.launchTimeoutSeconds !== null) lines.push(`  launch_timeout: ${recovery.launchTimeoutSeconds}s`);
  if (recovery.maxRecoveries !== undefined && recovery.maxRecoveries !== null) lines.push(`  max_recoveries: ${recovery.maxRecoveries}`);
  if (recovery.launchOnWarning !== undefined && recovery.launchOnWarning !== false) lines.push(`  launch_on_warning: ${String(recovery.launchOnWarning)}`);
  return el(
    'section',
    { class: 'policy', 'aria-labelledby': 'policy-title' },
    el('h2', { id: 'policy-title' }, 'Recovery policy'),
    el('pre', {}, lines.join('\n')),
  );
}

/** Each attempt, newest last: how it ended, what the policy decided and why, and its output. */
function attempts(job: JobView, config: PageConfig): HTMLElement {
  const items = job.attempts.map((attempt) => {
    const ended = attempt.endedAt === null ? null : Date.parse(attempt.endedAt);
    const codes = attempt.exitCodes.length === 0 ? 'no exit code reported' : `exit codes ${attempt.exitCodes.map((code) => (code === null ? '—' : String(code))).join(', ')}${attempt.phase === null ? '' : ` (${attempt.phase})`}`;
    const where = attempt.placement === null ? 'not placed' : [attempt.placement.region, attempt.placement.zone, attempt.placement.instanceType].filter((part) => part !== null).join(' / ');
    const item = el(
      'li',
      { id: `attempt-${attempt.attempt}`, class: 'attempt', tabindex: '-1', 'data-attempt': String(attempt.attempt) },
      el('h3', {}, `Attempt ${attempt.attempt}${attempt.task === undefined ? '' : ` (task ${attempt.task + 1})`}: `, el('span', { class: 'outcome' }, outcomeWords(attempt)), ` · ${codes}`),
      el(
        'p',
        { class: 'muted' },
        `${attempt.market} · ${where} · started ${formatTime(attempt.startedAt)}`,
        ended === null ? '' : ` · ran ${formatDuration(ended - Date.parse(attempt.startedAt))}`,
      ),
      decision(attempt, job),
    );
    const standby = standbyWords(attempt);
    if (standby !== null) item.append(el('p', { class: 'standby-note' }, standby));
    const reused = reusedNodesWords(attempt);
    if (reused !== null) item.append(el('p', { class: 'nodes-note' }, `Nodes: ${reused}`));
    const failed = attempt.agentFailure;
    if (failed !== null) {
      item.append(
        el(
          'p',
          { class: 'agent-failure' },
          el('strong', {}, `relaunch's agent failed on node ${failed.nodeRank} at ${failed.step}`),
          ` before setup (not the job's failure, and not charged to its budget): ${failed.error}`,
        ),
      );
    }
    for (const tail of attempt.outputTails) {
      item.append(el('p', { class: 'tail-title' }, `node ${tail.nodeRank}, ${tail.phase}: last lines`), el('pre', { class: 'tail' }, tail.text === '' ? '(no output)' : tail.text));
    }
    // A deployed API lists each launched attempt's logs with their console pages (logStreams):
    // the full log is read through it, as the local runtime's is from its files.
    const streams = ((job as JobViewWithLogs).logStreams ?? []).filter((stream) => stream.attempt === attempt.attempt);
    if (config.logs || streams.length > 0) {
      item.append(el('p', {}, el('a', { href: `/jobs/${encodeURIComponent(job.jobId)}/attempts/${attempt.attempt}/log`, target: '_blank', rel: 'noopener' }, `full log of attempt ${attempt.attempt}`)));
    }
    if (streams.length > 0) {
      const links = streams.map((stream) =>
        el('li', {}, el('a', { href: stream.consoleUrl, target: '_blank', rel: 'noopener noreferrer', class: 'console-link' }, `node ${stream.nodeRank}, ${stream.phase}`)),
      );
      item.append(el('p', { class: 'tail-title' }, 'in the AWS console (CloudWatch Logs):'), el('ul', { class: 'console-links' }, ...links));
    }
    return item;
  });
  return el(
    'section',
    { class: 'attempts', 'aria-labelledby': 'attempts-title' },
    el('h2', { id: 'attempts-title' }, 'Decisions'),
    items.length === 0 ? el('p', { class: 'muted' }, 'Not launched yet.') : el('ol', {}, ...items),
  );
}

/** The attempt's outcome, or what it is without one: a standby holding or let go, or running. */
function outcomeWords(attempt: AttemptView): string {
  if (attempt.standby?.state === 'released') return 'standby, not needed';
  if (attempt.outcome !== null) return attempt.outcome;
  return attempt.standby?.state === 'holding' ? 'standby, holding' : 'running';
}

/** What a standby's attempt was (launch_on_warning), and how long the job went without a run before its own; null otherwise. */
function standbyWords(attempt: AttemptView): string | null {
  const standby = attempt.standby;
  if (standby === null) return null;
  const started = `The standby of ${standbyOfWords(standby)}, started on its ${standby.on === 'rebalance' ? 'rebalance recommendation' : 'spot interruption warning'}`;
  switch (standby.state) {
    case 'holding':
      return `${started}: its setup runs beside attempt ${standby.for}, and it holds before run until attempt ${standby.for} is decided.`;
    case 'released':
      return `${started}: released without running run, charged to nothing (${standby.releaseReason ?? 'no reason recorded'}).`;
    case 'adopted': {
      const gap = attempt.gapSeconds === null ? '' : `, ${formatDuration(attempt.gapSeconds * 1000)} after attempt ${standby.for} ended (the gap with no run)`;
      return `${started}: taken as the next attempt at ${formatTime(standby.adoptedAt ?? attempt.startedAt)}; its run started${gap}.`;
    }
  }
}

function decision(attempt: AttemptView, job: JobView): HTMLElement {
  if (attempt.decision === null) return el('p', { class: 'decision muted' }, attempt.outcome === null ? 'Running: no decision yet.' : 'Ended; the decision is being made.');
  const waiting = capacityWait(attempt);
  const parts: (string | Node)[] = [el('strong', { class: `action action-${attempt.decision.toLowerCase()}` }, attempt.decision), ' ', waiting?.line ?? attempt.reason ?? ''];
  const after = attempt.countersAfter;
  const counters =
    after === null
      ? null
      : el(
          'p',
          { class: 'counters' },
          `After it: restarts on errors ${after.restartsOnErrors} of ${job.recoveryPolicy.maxRestartsOnErrors} · restarts on exit codes ${after.restartsOnExitCodes}${job.recoveryPolicy.maxRestartsOnExitCodes === null ? ' (unlimited)' : ` of ${job.recoveryPolicy.maxRestartsOnExitCodes}`} · recoveries ${after.recoveryCount} · next market ${after.market}`,
        );
  const box = el('div', { class: 'decision' }, el('p', {}, ...parts));
  if (waiting !== null) box.append(waiting.tries);
  if (counters !== null) box.append(counters);
  return box;
}

/**
 * A wait for capacity as one short line (when the next try is, and what had none) and the
 * launch's tries in a list under it, instead of the reason's one long line; null for any
 * other decision.
 */
function capacityWait(attempt: AttemptView): { line: string; tries: HTMLElement } | null {
  const line = capacityWaitLine(attempt, (at) => formatTime(new Date(at).toISOString()));
  if (line === null) return null;
  const reason = attempt.reason ?? '';
  const tries = capacityTries(reason);
  const list =
    tries.length === 0
      ? el('p', { class: 'tries' }, reason)
      : el('ul', { class: 'tries' }, ...tries.map((each) => el('li', {}, `${each.instanceType} ${each.where}: ${each.answer}`)));
  return { line, tries: el('details', { class: 'capacity-tries' }, el('summary', {}, `${tries.length === 0 ? 'the launch' : `${tries.length} tries`} of attempt ${attempt.attempt}`), list) };
}
