// Following a job: each status change and decision as it happens, and the job's output.

import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { capacityWaitLine } from '../lib/capacity-tries.ts';
import type { JobEvent } from '../lib/model.ts';
import { standbyOfWords } from '../lib/reused-nodes.ts';
import { isTerminal, JobStatus } from '../lib/status.ts';
import type { AttemptView, JobView } from '../lib/views.ts';
import type { Io } from './exit.ts';
import { ApiError, type JobsClient, type Pacing } from './jobs-client.ts';
import { JobNotFoundError } from '../lib/errors.ts';
import type { ShippedPhase } from '../lib/job-log-names.ts';
import { attemptLogs, readLogFrom, type PhaseLog } from '../local/paths.ts';
import { formatClock, formatTime } from './times.ts';

/** Polls after the job's end that wait for a standby's release (launch_on_warning) to show. */
const POLLS_FOR_RELEASE = 10;

/** Each poll that finds the job unchanged makes the next wait this much longer. */
const POLL_GROWTH = 1.5;
/** A poll's wait is moved up to this fraction either way at random (within the pacing's bounds). */
const POLL_JITTER = 0.2;

/**
 * Polls after the job's end that wait for its last lines to reach an API's log pages: a
 * deployed node ships them before it goes, and they may land after the job's end is stored.
 * Following ends at the first poll after the end that reads nothing new.
 */
const POLLS_FOR_LAST_LINES = 5;

/**
 * While following output through an API, the longest wait between polls: a line shipped
 * (every 2 s at most) shows within 5 s of its print.
 */
const OUTPUT_POLL_MAX_MS = 1500;
/** ...and the shortest, after a poll that found something new. */
const OUTPUT_POLL_MIN_MS = 1000;
/** ...but never more reads a second than this, however many nodes print (each node's phase is a read). */
const OUTPUT_READS_PER_SECOND = 8;

/** What to show while following. */
export interface FollowOptions {
  /** Print status changes and decisions (false for --json). */
  readonly progress: boolean;
  /**
   * Print the job's output: from the local log files with a data folder, else through the
   * API's log pages (`GET /jobs/{id}/logs`).
   */
  readonly output: boolean;
  /** Only this node's output (`--node`); every node's when absent. */
  readonly node?: number;
  /** Stops following early (Ctrl-C). */
  readonly signal?: AbortSignal;
  /**
   * Called once when the signal aborts, instead of returning: following then goes on, with
   * what was already printed not printed again, until the job ends (a cancel this command asks for).
   */
  readonly onAbort?: () => Promise<void>;
  /**
   * Waits between polls; resolves early (or rejects) when the signal aborts.
   * @default node:timers/promises setTimeout
   */
  readonly sleep?: (ms: number, signal?: AbortSignal) => Promise<unknown>;
  /**
   * A uniform draw in [0, 1), for the polls' jitter.
   * @default Math.random
   */
  readonly random?: () => number;
}

/**
 * Follows the job until it is terminal (or the signal aborts); returns its last view.
 * Where the client can read the job's audit trail, every status change is shown with its
 * reason (each decision's reason among them), in order, attempt by attempt with the
 * attempt's output; otherwise status changes are shown as the polls see them. Polls are
 * paced by the client (`pollDelayMs`): a local runtime every 200 ms to 1 s, a deployed
 * API every 2-5 s, so followers never crowd out the agents' heartbeats on its throttle.
 */
export async function followJob(client: JobsClient, jobId: string, io: Io, options: FollowOptions): Promise<JobView> {
  const printer = new Progress(client, jobId, io, options);
  const pause = options.sleep ?? ((ms: number, signal?: AbortSignal) => sleep(ms, undefined, { signal }));
  const random = options.random ?? Math.random;
  let seen = '';
  let unchangedPolls = 0;
  let pollsAfterEnd = 0;
  let aborted = false;
  for (;;) {
    const view = await client.getJob(jobId);
    const events = client.listEvents === undefined ? null : await client.listEvents(jobId);
    const printed = await printer.show(view, events);
    if (options.signal?.aborted === true && !aborted) {
      if (options.onAbort === undefined) return view;
      aborted = true;
      await options.onAbort();
      continue;
    }
    // A standby still holding when the job ends is released by the step after the
    // decision: a few more polls show that, unless it takes longer. Output read through an
    // API is followed until a poll after the end finds nothing new.
    const holding = view.attempts.some((attempt) => attempt.standby?.state === 'holding');
    const drained = !printer.readsApi || (pollsAfterEnd > 0 && !printed) || pollsAfterEnd >= POLLS_FOR_LAST_LINES;
    if (isTerminal(view.status) && (!holding || pollsAfterEnd >= POLLS_FOR_RELEASE) && drained) return view;
    if (isTerminal(view.status)) pollsAfterEnd += 1;
    const now = JSON.stringify([view, events?.length ?? 0]);
    unchangedPolls = now === seen && !printed ? unchangedPolls + 1 : 0;
    seen = now;
    await pause(pollDelayMs(printer.pacing(view), unchangedPolls, random), aborted ? undefined : options.signal).catch(() => undefined);
  }
}

/**
 * The wait before the next poll, in ms: `pollMinMs` after a poll that saw the job change,
 * half as long again for each poll in a row that saw no change, up to `pollMaxMs`; then
 * moved up to POLL_JITTER either way at random and kept within those bounds, so people
 * following jobs together do not poll in step.
 */
export function pollDelayMs(pacing: Pacing, unchangedPolls: number, random: () => number): number {
  const base = Math.min(pacing.pollMaxMs, pacing.pollMinMs * POLL_GROWTH ** unchangedPolls);
  const jittered = base * (1 + (2 * random() - 1) * POLL_JITTER);
  return Math.round(Math.min(pacing.pollMaxMs, Math.max(pacing.pollMinMs, jittered)));
}

/** One line (or chunk of output) of a poll, with when it happened, to be printed in that order. */
interface Entry {
  /** ISO 8601; output still being written sorts last (END_OF_POLL). */
  readonly at: string;
  /** Among entries of one instant: an attempt's output, then status changes, then what follows from them. */
  readonly order: number;
  readonly text: string;
}

/** Sorts after every ISO time: output of an attempt that has not ended belongs to the poll's end. */
const END_OF_POLL = '\uffff';
/** Entry orders within one instant. */
const ORDER = { output: 0, event: 1, launched: 2, decided: 3, status: 4 } as const;

/** Remembers what was shown, so each poll prints only what is new, in the order it happened. */
class Progress {
  private readonly launched = new Set<number>();
  private readonly decided = new Set<number>();
  /** Standbys whose release was shown. */
  private readonly released = new Set<number>();
  private eventsShown = 0;
  private status: JobStatus | null = null;
  private readonly logs = new LogTail({ dropShellNotices: true });
  private readonly apiLogs: ApiLogTail;

  constructor(
    private readonly client: JobsClient,
    private readonly jobId: string,
    private readonly io: Io,
    private readonly options: FollowOptions,
  ) {
    this.apiLogs = new ApiLogTail(client, jobId);
  }

  /** Whether the output is read through the API's log pages (no local data folder). */
  get readsApi(): boolean {
    return this.options.output && this.client.dataDir === null && this.client.readLog !== undefined;
  }

  /**
   * The client's pacing, quickened while output is read through an API so a line shows
   * within 5 s, and slowed by the number of logs each poll reads (OUTPUT_READS_PER_SECOND).
   */
  pacing(view: JobView): Pacing {
    const { pacing } = this.client;
    if (!this.readsApi) return pacing;
    const reads = (this.options.node === undefined ? view.numNodes : 1) * 2;
    const floor = Math.ceil((reads / OUTPUT_READS_PER_SECOND) * 1000);
    return { ...pacing, pollMinMs: Math.max(floor, Math.min(pacing.pollMinMs, OUTPUT_POLL_MIN_MS)), pollMaxMs: Math.max(floor, Math.min(pacing.pollMaxMs, OUTPUT_POLL_MAX_MS)) };
  }

  /**
   * Prints what this poll found that was not shown: status changes, launches, releases,
   * decisions and output, sorted by when they happened. An attempt's launch line comes
   * after the STARTING change that claimed it (written before the launch, so read in the
   * same poll), and its output after its launch line: the output of an attempt that ended
   * before the changes its end caused, that of a live one at the poll's end. True when
   * that included output.
   */
  async show(view: JobView, events: readonly JobEvent[] | null): Promise<boolean> {
    let printed = false;
    const fresh = events === null ? [] : events.slice(this.eventsShown);
    this.eventsShown += fresh.length;
    const entries: Entry[] = [];
    const progress = this.options.progress;
    if (progress) for (const event of fresh) entries.push({ at: event.at, order: ORDER.event, text: eventLine(event, view) });
    // Several attempts may be live at once where standbys are (launch_on_warning): each line then says its attempt.
    const labelAttempts = view.attempts.some((attempt) => attempt.standby !== null) || Boolean(view.recoveryPolicy.launchOnWarning);
    for (const attempt of view.attempts) {
      const placed = attempt.placement !== null || attempt.outcome !== null;
      if (placed && !this.launched.has(attempt.attempt)) {
        const standby = attempt.standby === null ? '' : ` as the standby of ${standbyOfWords(attempt.standby)}`;
        const at = latest(attempt.startedAt, startingAt(events, attempt.attempt));
        if (progress) entries.push({ at, order: ORDER.launched, text: `${stamp(at)} attempt ${attempt.attempt} ${where(attempt)}${standby}` });
        this.launched.add(attempt.attempt);
      }
      if (progress && attempt.standby?.state === 'released' && !this.released.has(attempt.attempt)) {
        const at = attempt.standby.releasedAt ?? attempt.startedAt;
        entries.push({ at, order: ORDER.decided, text: `${stamp(at)} attempt ${attempt.attempt} released, charged to nothing: ${attempt.standby.releaseReason ?? ''}` });
        this.released.add(attempt.attempt);
      }
      if (this.options.output && this.launched.has(attempt.attempt)) {
        const text = await this.output(view, attempt, labelAttempts ? attempt.attempt : undefined);
        if (text !== '') {
          entries.push({ at: attempt.endedAt ?? END_OF_POLL, order: ORDER.output, text: text.endsWith('\n') ? text.slice(0, -1) : text });
          printed = true;
        }
      }
      if (events === null && progress && !this.decided.has(attempt.attempt) && attempt.decision !== null) {
        const at = attempt.decidedAt ?? new Date().toISOString();
        entries.push({ at, order: ORDER.decided, text: `${stamp(at)} ${describeDecision(attempt)}` });
        this.decided.add(attempt.attempt);
      }
    }
    if (events === null && progress && view.status !== this.status) entries.push({ at: END_OF_POLL, order: ORDER.status, text: `${stamp(new Date().toISOString())} ${this.jobId}: ${view.status}` });
    this.status = view.status;
    const sorted = entries.map((entry, index) => ({ entry, index })).sort((a, b) => compare(a.entry.at, b.entry.at) || a.entry.order - b.entry.order || a.index - b.index);
    for (const { entry } of sorted) this.io.out(entry.text);
    return printed;
  }

  /**
   * What the attempt's logs gained: from the data folder's files, else through the API;
   * given `label`, each line says its attempt. Every line of a job of several nodes says its
   * node (unless one was asked for), though an attempt has one node's log so far (a
   * standby of one warned node, or a node that started before its peers).
   */
  private async output(view: JobView, attempt: AttemptView, label: number | undefined): Promise<string> {
    const labelNodes = view.numNodes > 1 && this.options.node === undefined ? true : undefined;
    if (this.client.dataDir !== null) return this.logs.read(nodeLogs(attemptLogs(this.client.dataDir, this.jobId, attempt.attempt), this.options.node), label, labelNodes);
    if (!this.readsApi || attempt.placement === null) return '';
    return this.apiLogs.read(attempt.attempt, attemptNodes(view, attempt, this.options.node), label, labelNodes);
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The later of two ISO times (null: the other). */
function latest(at: string, other: string | null): string {
  return other !== null && other > at ? other : at;
}

/** When the attempt's STARTING change was recorded, among the events read; null when none was (a standby's, until taken). */
function startingAt(events: readonly JobEvent[] | null, attempt: number): string | null {
  return events?.find((event) => event.attempt === attempt && event.to === JobStatus.STARTING)?.at ?? null;
}

/** A time as every line of `run` starts: local, with the zone (cli/times.ts). */
function stamp(at: string): string {
  return formatTime(at);
}

/**
 * A status change as `run` prints it. A wait for capacity says when the next try is, at
 * what time and in how long, and a short reason; the tries themselves are in the job's
 * record (`--json`, `relaunch status JOB`, the page).
 */
function eventLine(event: JobEvent, view: JobView): string {
  const attempt = event.attempt === null ? undefined : view.attempts.find((each) => each.attempt === event.attempt);
  const waiting = attempt !== undefined && event.to === JobStatus.RECOVERING ? capacityWait(attempt) : null;
  return `${stamp(event.at)} ${event.to.padEnd(10)} ${waiting ?? event.reason}`;
}

/**
 * `waiting for capacity: next try at 19:16:21, in 60 s: no spot capacity for g5.xlarge`,
 * for an attempt the policy decided to wait on for capacity; null for any other.
 */
export function capacityWait(attempt: AttemptView, timeZone?: string): string | null {
  return capacityWaitLine(attempt, (at) => formatClock(at, timeZone));
}

/** `attempt 2: EXITED exit 29 (run) -> RESTART: <reason>`. */
export function describeDecision(attempt: AttemptView): string {
  const codes = attempt.exitCodes.length === 0 ? '' : ` exit ${attempt.exitCodes.map((c) => (c === null ? '?' : String(c))).join('+')}`;
  const phase = attempt.phase === null ? '' : ` (${attempt.phase})`;
  const waiting = capacityWait(attempt);
  return `attempt ${attempt.attempt}: ${attempt.outcome ?? 'RUNNING'}${codes}${phase} -> ${attempt.decision ?? 'pending'}: ${waiting ?? attempt.reason ?? ''}`;
}

/** `launched (spot, m5.large in us-east-1a)`, or `ended before launch` when no placement was made. */
function where(attempt: AttemptView): string {
  const { placement } = attempt;
  if (placement === null) return 'ended before launch';
  return `launched (${placement.market ?? attempt.market}, ${placement.instanceType} in ${placement.zone ?? placement.region})`;
}

/**
 * Reads what was appended to an attempt's phase logs since the last look. With several
 * nodes each line says its node, and given an attempt, its attempt too; a log the agent
 * could not finish writing gets a note.
 */
export class LogTail {
  private readonly offsets = new Map<string, number>();
  private readonly midLine = new Set<string>();
  private readonly noted = new Set<string>();

  /**
   * @param options.dropShellNotices leave out the lines bash writes of its own when a
   *   child it waits for dies of SIGTERM (a bare `Terminated`, as when a notice stops a
   *   job): `run`'s live output, never `logs`, which shows the log as it is.
   */
  constructor(private readonly options: { readonly dropShellNotices?: boolean } = {}) {}

  read(logs: readonly PhaseLog[], attempt?: number, labelNodes?: boolean): string {
    const several = labelNodes ?? new Set(logs.map((log) => log.rank)).size > 1;
    let out = '';
    for (const log of logs) {
      const names = [...(attempt === undefined ? [] : [`attempt ${attempt}`]), ...(several ? [`node ${log.rank}`] : [])];
      const prefix = names.length === 0 ? '' : `(${names.join(', ')}) `;
      const continues = this.midLine.has(log.key);
      const read = this.appended(log.key, log.file);
      const text = this.options.dropShellNotices === true ? withoutShellNotices(read, continues) : read;
      if (text !== '') {
        // Only a name goes in front of each line: a single node's log (tens of MB, say) is
        // passed on as it is, not rebuilt line by line for nothing.
        const lines = prefix === '' ? text : text.replace(/\n(?=.)/g, `\n${prefix}`);
        out += continues ? lines : prefix + lines;
      }
      if (read !== '') {
        if (read.endsWith('\n')) this.midLine.delete(log.key);
        else this.midLine.add(log.key);
      }
      if (!this.noted.has(log.key) && existsSync(log.truncatedMark)) {
        this.noted.add(log.key);
        if (this.midLine.delete(log.key)) out += '\n';
        out += `relaunch: node ${log.rank}'s ${log.phase} output stops here: its log could not be written (is the disk full?); the job went on\n`;
      }
    }
    return out;
  }

  /** What `file` gained past the offset kept for `key` (a log keeps its offset when its node renames it on moving on). */
  private appended(key: string, file: string): string {
    const from = this.offsets.get(key) ?? 0;
    const read = readLogFrom(file, () => from);
    if (read === null || read.size <= from) return '';
    this.offsets.set(key, read.size);
    return read.text;
  }
}

/** Whole lines that are only bash's report of a child killed by SIGTERM. */
const SHELL_NOTICE = /(^|\n)Terminated\n/g;

/** `text` without bash's bare `Terminated` lines; `continues`: its start is the rest of a line begun before. */
function withoutShellNotices(text: string, continues: boolean): string {
  const guarded = continues ? `\u0000${text}` : text;
  let kept = guarded;
  // Twice: two notices in a row share the newline between them.
  for (let pass = 0; pass < 2; pass += 1) kept = kept.replace(SHELL_NOTICE, '$1');
  return continues ? kept.slice(1) : kept;
}

/** The logs of one node (`--node`), or all of them. */
export function nodeLogs(logs: readonly PhaseLog[], node: number | undefined): readonly PhaseLog[] {
  return node === undefined ? logs : logs.filter((log) => log.rank === node);
}

/**
 * The nodes whose output an attempt has: the one asked for, else as many as it reported
 * codes for, else the job's.
 */
export function attemptNodes(view: JobView, attempt: AttemptView, node: number | undefined): readonly number[] {
  if (node !== undefined) return [node];
  const count = attempt.exitCodes.length > 0 ? attempt.exitCodes.length : view.numNodes;
  return Array.from({ length: count }, (_, rank) => rank);
}

/** Pages one read follows per log before it moves on to the next log (a fast log may not starve the others). */
const MAX_PAGES_PER_READ = 8;

/**
 * Reads what an attempt's logs gained since the last look through an API's log pages (the
 * cursor of each kept), in the order and shape LogTail prints the local files: node by
 * node, setup before run, each line after `(node N) ` when there are several.
 */
export class ApiLogTail {
  private readonly cursors = new Map<string, string>();
  private readonly midLine = new Set<string>();

  constructor(
    private readonly client: JobsClient,
    private readonly jobId: string,
  ) {}

  /** Set once the API answered that it has no log route (a stack deployed before it): nothing more is asked. */
  private unserved = false;

  /** Given `label`, each line says its attempt too, and with `labelNodes` its node, as LogTail's do. */
  async read(attempt: number, nodes: readonly number[], label?: number, labelNodes?: boolean): Promise<string> {
    const readLog = this.client.readLog?.bind(this.client);
    if (readLog === undefined || this.unserved) return '';
    try {
      return await this.readNodes(readLog, attempt, nodes, label, labelNodes ?? nodes.length > 1);
    } catch (error) {
      // API Gateway answers 403 for a route its stack lacks; an older `relaunch serve`, 404.
      const unserved = (error instanceof ApiError && error.statusCode === 403) || error instanceof JobNotFoundError;
      if (!unserved) throw error;
      this.unserved = true;
      return `relaunch: ${this.client.where} serves no job output (deployed before relaunch read logs); each phase's last lines are in relaunch status ${this.jobId} --json\n`;
    }
  }

  private async readNodes(readLog: NonNullable<JobsClient['readLog']>, attempt: number, nodes: readonly number[], label: number | undefined, several: boolean): Promise<string> {
    let out = '';
    for (const nodeRank of nodes) {
      for (const phase of ['setup', 'run'] as const satisfies readonly ShippedPhase[]) {
        const key = `${attempt}/${nodeRank}/${phase}`;
        const names = [...(label === undefined ? [] : [`attempt ${label}`]), ...(several ? [`node ${nodeRank}`] : [])];
        const prefix = names.length === 0 ? '' : `(${names.join(', ')}) `;
        for (let page = 0; page < MAX_PAGES_PER_READ; page += 1) {
          const read = await readLog(this.jobId, { attempt, nodeRank, phase, cursor: this.cursors.get(key) });
          this.cursors.set(key, read.cursor);
          if (read.text === '') break;
          const lines = prefix === '' ? read.text : read.text.replace(/\n(?=.)/g, `\n${prefix}`);
          out += this.midLine.has(key) ? lines : prefix + lines;
          if (read.text.endsWith('\n')) this.midLine.delete(key);
          else this.midLine.add(key);
        }
      }
    }
    return out;
  }
}
