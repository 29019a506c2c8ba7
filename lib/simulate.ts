// `relaunch simulate`: a task's recovery policy replayed over made-up attempt ends, no compute.

import { InvalidInputError, type InputIssue } from './errors.ts';
import { decideRecovery, initialCounters } from './policy/decide.ts';
import type { AttemptOutcome, Phase, RecoveryAction } from './policy/types.ts';
import type { TaskSpec } from './spec/types.ts';
import { isTerminal, JobStatus } from './status.ts';

/** One event's decision, as `relaunch simulate --json` prints it (these keys, no others). */
export interface SimulatedDecision {
  /** The event exactly as given. */
  readonly event: string;
  readonly action: RecoveryAction;
  readonly status: JobStatus;
  readonly restartsOnErrors: number;
  readonly recoveryCount: number;
  readonly reason: string;
}

/** Every decision in event order, and the status the job is left in. */
export interface SimulationResult {
  readonly decisions: readonly SimulatedDecision[];
  readonly final: { readonly status: JobStatus };
}

/** The event forms, as error messages and help text name them. */
export const EVENT_FORMS = 'exit:N, exit:N+M (one code per node), setup:N, setup:N+M, preempt or lost';

/**
 * What backoff jitter draws when the caller gives no random source: the midpoint, so the
 * same command prints the same delays every time. With jitter `full` the reason also
 * states the upper bound ("next attempt in 10 s (full jitter, up to 20 s)").
 */
export const MIDPOINT_DRAW = (): number => 0.5;

/**
 * Feeds each event to the recovery policy of `spec`, from fresh counters, as the controller
 * would after each attempt. Pure. Throws InvalidInputError for an event that is not one of
 * EVENT_FORMS, whose code count differs from num_nodes, or that follows a terminal status.
 */
export function simulate(spec: TaskSpec, events: readonly string[], random: () => number = MIDPOINT_DRAW): SimulationResult {
  const outcomes = parseEvents(events, spec.numNodes);
  const policy = spec.resources.jobRecovery;
  let counters = initialCounters(spec.resources.useSpot);
  let status: JobStatus = JobStatus.PENDING;
  let endedAt = 0;
  const decisions: SimulatedDecision[] = [];
  outcomes.forEach((outcome, index) => {
    const event = events[index] as string;
    if (isTerminal(status)) {
      throw new InvalidInputError([
        {
          path: `event ${index + 1}`,
          message: `"${event}" comes after the job ended with ${status} at event ${endedAt}; a finished job takes no more events`,
        },
      ]);
    }
    const decision = decideRecovery({ policy, counters, outcome, random });
    counters = decision.counters;
    status = decision.status;
    endedAt = index + 1;
    decisions.push({
      event,
      action: decision.action,
      status: decision.status,
      restartsOnErrors: counters.restartsOnErrors,
      recoveryCount: counters.recoveryCount,
      reason: decision.reason,
    });
  });
  return { decisions, final: { status } };
}

/**
 * Reads every event, reporting all the bad ones at once. Public so the CLI can check its
 * arguments before reading the task file; `simulate` calls it itself.
 */
export function parseEvents(events: readonly string[], numNodes: number): AttemptOutcome[] {
  if (events.length === 0) {
    throw new InvalidInputError([{ path: 'events', message: `give at least one event: ${EVENT_FORMS}` }]);
  }
  const issues: InputIssue[] = [];
  const outcomes: AttemptOutcome[] = [];
  events.forEach((event, index) => {
    const parsed = parseEvent(event, numNodes);
    if (typeof parsed === 'string') issues.push({ path: `event ${index + 1}`, message: parsed });
    else outcomes.push(parsed);
  });
  if (issues.length > 0) throw new InvalidInputError(issues);
  return outcomes;
}

const EXIT_EVENT = /^(exit|setup):(\d+(?:\+\d+)*)$/;

/** One event as an attempt outcome, or what is wrong with it. */
function parseEvent(event: string, numNodes: number): AttemptOutcome | string {
  if (event === 'preempt') return { kind: 'PREEMPTED' };
  if (event === 'lost') return { kind: 'LOST', reason: 'heartbeat lost' };
  const match = EXIT_EVENT.exec(event);
  if (match === null) return `expected ${EVENT_FORMS}; got "${event}"`;
  const phase: Phase = match[1] === 'setup' ? 'setup' : 'run';
  const codes = (match[2] as string).split('+').map(Number);
  const outOfRange = codes.find((code) => code > 255);
  if (outOfRange !== undefined) return `"${event}": exit code ${outOfRange} is out of range, expected 0-255`;
  if (codes.length !== numNodes) {
    const example = `${match[1]}:${Array.from({ length: numNodes }, (_, rank) => codes[rank] ?? 0).join('+')}`;
    return (
      `"${event}" has ${plural(codes.length, 'exit code')}, but the task has ${plural(numNodes, 'node')}` +
      ` (num_nodes: ${numNodes}); give one code per node, e.g. ${example}`
    );
  }
  if (phase === 'setup' && codes.every((code) => code === 0)) {
    return `"${event}": a setup that exits 0 goes on to run, so it does not end an attempt; use exit:N for how the run ended`;
  }
  return { kind: 'EXITED', phase, nodes: codes.map((exitCode, rank) => ({ rank, exitCode })) };
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}
