// What the local runtime does with a chaos plan (lib/chaos-file/ holds the file's format):
// no plan, `--preempt-attempts` and `--boot` as a plan, plans merged, faults checked against
// the task's nodes, and the faults of one attempt.

import { MAX_ATTEMPT, type ChaosFault, type ChaosPlan } from '../lib/chaos-file/types.ts';
import { InvalidInputError, type InputIssue } from '../lib/errors.ts';
import { describe, expectedGot } from '../lib/located-yaml/messages.ts';

/** No fault at all. */
export const NO_CHAOS: ChaosPlan = Object.freeze({ faults: Object.freeze([]) });

/**
 * When `--preempt-attempts` warns, counted from run's start, and how long before the
 * instance goes: what the option always did (a strike 300 ms in), now with a warning
 * first. Short on purpose: examples/spot-preemption.yaml runs for 2 s, and a preemption
 * that lands after the job has exited 0 is no preemption.
 */
export const PREEMPT_ATTEMPTS_AFTER_MS = 300;
export const PREEMPT_ATTEMPTS_WARNING_MS = 500;

/**
 * `--preempt-attempts 1,3` as a plan: node 0 of each attempt warned PREEMPT_ATTEMPTS_AFTER_MS
 * after run starts and gone PREEMPT_ATTEMPTS_WARNING_MS later. An attempt given twice is one fault.
 *
 * @throws InvalidInputError naming `--preempt-attempts` for a number that is not an attempt.
 */
export function preemptAttemptsPlan(attempts: readonly number[]): ChaosPlan {
  const wrong = attempts.find((attempt) => !Number.isSafeInteger(attempt) || attempt < 1 || attempt > MAX_ATTEMPT);
  if (wrong !== undefined) {
    throw new InvalidInputError([
      { path: '--preempt-attempts', message: expectedGot(`attempt numbers from 1 to ${MAX_ATTEMPT}`, wrong) },
    ]);
  }
  return {
    faults: [...new Set(attempts)].map(
      (attempt): ChaosFault => ({
        kind: 'preempt',
        attempt,
        node: 0,
        afterMs: PREEMPT_ATTEMPTS_AFTER_MS,
        warningMs: PREEMPT_ATTEMPTS_WARNING_MS,
      }),
    ),
  };
}

/** Whether the plan does anything: a fault, or a boot longer than none. */
export function hasChaos(plan: ChaosPlan | undefined): boolean {
  return plan !== undefined && (plan.faults.length > 0 || (plan.bootMs ?? 0) > 0);
}

/**
 * Both plans' faults, `a`'s first, and `b`'s boot where it gives one, else `a`'s: the
 * narrower plan wins (a job's over `relaunch serve --chaos`, `--boot` over the file's).
 */
export function mergeChaos(a: ChaosPlan, b: ChaosPlan): ChaosPlan {
  const bootMs = b.bootMs ?? a.bootMs;
  return { faults: [...a.faults, ...b.faults], ...(bootMs === undefined ? {} : { bootMs }) };
}

/**
 * Issues for faults naming a node the task does not have (node >= numNodes), at
 * `faults[i].<kind>.node` with the line where the file names it. `i` is the fault's
 * `source.index`, or its position in the plan when it has no source.
 */
export function chaosIssuesForTask(plan: ChaosPlan, numNodes: number): InputIssue[] {
  const nodes = numNodes === 1 ? 'node 0 (the task has 1 node)' : `a node from 0 to ${numNodes - 1} (the task has ${numNodes} nodes)`;
  return plan.faults.flatMap((fault, position): InputIssue[] => {
    if (!('node' in fault) || fault.node < numNodes) return [];
    const path = `faults[${fault.source?.index ?? position}].${fault.kind}.node`;
    const message = `expected ${nodes}, got ${describe(fault.node)}`;
    const line = fault.source?.line;
    return [line === undefined ? { path, message } : { path, message, line }];
  });
}

/** The faults of one attempt, in the plan's order. */
export function faultsOfAttempt(plan: ChaosPlan, attempt: number): readonly ChaosFault[] {
  return plan.faults.filter((fault) => fault.attempt === attempt);
}
