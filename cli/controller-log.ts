// `relaunch logs JOB --controller`: the controller's side of a job, as one timeline of what it
// did and why (each launch, each attempt's end, each decision with its reason, each status change).

import type { JobEvent } from '../lib/model.ts';
import type { ControllerLogLine } from '../lib/ports.ts';
import type { AttemptView, JobView } from '../lib/views.ts';
import { formatTime } from './times.ts';

/** One line of the controller's timeline: when, and what happened. */
export interface ControllerEntry {
  /** ISO 8601. */
  readonly at: string;
  readonly text: string;
}

/**
 * Where entries of one instant go, in the order the controller makes them: an attempt is
 * launched, its run starts, it ends, the policy decides, and the status changes the decision
 * wrote come last.
 */
const ORDER = { launched: 0, run: 1, ended: 2, decided: 3, status: 4, function: 5 } as const;

/** Fields of a function's JSON line that every line has and say nothing about the job. */
const ROUTINE_FIELDS = new Set([
  'level', 'message', 'timestamp', 'service', 'jobId', 'sampling_rate', 'xray_trace_id', 'cold_start',
  'function_arn', 'function_memory_size', 'function_name', 'function_request_id', 'requestId',
]);

/**
 * The job's timeline, oldest first: from its attempts (launched, run started, ended,
 * decided, with the rule, the reason and the wait before the next launch) and, where the
 * client can read them (`events` not null: the local runtime), its status changes with
 * their reasons.
 */
export function controllerTimeline(job: JobView, events: readonly JobEvent[] | null, lines: readonly ControllerLogLine[] = []): ControllerEntry[] {
  const entries: (ControllerEntry & { readonly order: number })[] = [];
  for (const attempt of job.attempts) {
    for (const entry of attemptEntries(attempt)) entries.push(entry);
  }
  for (const event of events ?? []) {
    const from = event.from === null ? 'new' : event.from;
    const which = event.attempt === null ? '' : ` (attempt ${event.attempt})`;
    entries.push({ at: event.at, order: ORDER.status, text: `status ${from} -> ${event.to}${which}: ${event.reason}` });
  }
  for (const line of lines) entries.push({ at: line.at, order: ORDER.function, text: `${line.source}: ${functionLine(line.message)}` });
  return entries
    .map((entry, index) => ({ entry, index }))
    .sort((a, b) => a.entry.at.localeCompare(b.entry.at) || a.entry.order - b.entry.order || a.index - b.index)
    .map(({ entry }) => ({ at: entry.at, text: entry.text }));
}

/** One attempt's entries, in the order they happen. */
function attemptEntries(attempt: AttemptView): (ControllerEntry & { readonly order: number })[] {
  const name = `attempt ${attempt.attempt}`;
  const entries: (ControllerEntry & { readonly order: number })[] = [
    { at: attempt.startedAt, order: ORDER.launched, text: `${name} launched${launchedWhere(attempt)}` },
  ];
  if (attempt.runStartedAt !== null) entries.push({ at: attempt.runStartedAt, order: ORDER.run, text: `${name}: run started` });
  if (attempt.endedAt !== null) {
    const outcome = attempt.outcome ?? (attempt.standby?.state === 'released' ? 'released unused' : 'ended');
    entries.push({ at: attempt.endedAt, order: ORDER.ended, text: `${name} ended ${outcome}${endedHow(attempt)}` });
  }
  if (attempt.decidedAt !== null && attempt.decision !== null) {
    const rule = attempt.rule === null ? '' : ` (${attempt.rule})`;
    const wait = attempt.delaySeconds !== null && attempt.delaySeconds > 0 ? `; next launch in ${attempt.delaySeconds} s` : '';
    entries.push({ at: attempt.decidedAt, order: ORDER.decided, text: `${name} decided ${attempt.decision}${rule}: ${attempt.reason ?? 'no reason recorded'}${wait}` });
  }
  return entries;
}

/** Where and how an attempt was launched, as far as its record says. */
function launchedWhere(attempt: AttemptView): string {
  const standby = attempt.standby === null ? '' : ` as the standby of attempt ${attempt.standby.for} (${attempt.standby.on} warning)`;
  const placement = attempt.placement;
  if (placement === null) return `${standby}, ${attempt.market}`;
  const zone = placement.zone === null ? placement.region : placement.zone;
  return `${standby}, ${attempt.market}, ${placement.instanceType} in ${zone}`;
}

/** The phase and codes an ended attempt shows (a code that never came as `unknown`), and an agent's failure. */
function endedHow(attempt: AttemptView): string {
  const phase = attempt.phase === null ? '' : ` in ${attempt.phase}`;
  const codes = attempt.exitCodes.length === 0 ? '' : `, exit codes ${attempt.exitCodes.map((code) => (code === null ? 'unknown' : String(code))).join(',')}`;
  const failure = attempt.agentFailure === null ? '' : `; node ${attempt.agentFailure.nodeRank}'s agent failed at ${attempt.agentFailure.step}: ${attempt.agentFailure.error}`;
  return `${phase}${codes}${failure}`;
}

/**
 * A function's log line as the timeline shows it: a Powertools JSON line as its level,
 * message and the fields particular to it (`INFO decision made action=RESTART ...`); any
 * other line as it is.
 */
export function functionLine(message: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(message);
  } catch {
    return message;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return message;
  const record = parsed as Record<string, unknown>;
  const fields = Object.entries(record)
    .filter(([key]) => !ROUTINE_FIELDS.has(key))
    .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
  const head = [record.level, record.message].filter((part) => typeof part === 'string' && part !== '').join(' ');
  return [head, ...fields].filter((part) => part !== '').join(' ');
}

/** The timeline as the command prints it: one line per entry, its time first (cli/times.ts, as every command prints one). */
export function formatTimeline(entries: readonly ControllerEntry[], timeZone?: string): string {
  return entries.map((entry) => `${formatTime(entry.at, timeZone)}  ${entry.text}`).join('\n');
}
