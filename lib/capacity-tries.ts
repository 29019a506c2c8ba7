// The tries of a launch that found no capacity, read back from its reason, for the short line
// `relaunch run` prints and the list the jobs page shows while a relaunch waits for capacity.

import type { PolicyRule } from './policy/types.ts';

/** One try of a launch: the instance type, where (a zone, or the local runtime's try number), and EC2's answer. */
export interface CapacityTry {
  readonly instanceType: string;
  readonly where: string;
  readonly answer: string;
}

/**
 * The tries a no-capacity reason lists (`... tried g5.xlarge in us-east-1a:
 * InsufficientInstanceCapacity, ...; next try in 60 s`, as the EC2 and local compute word
 * them), in order; [] when it lists none.
 */
export function capacityTries(reason: string): CapacityTry[] {
  const tried = /tried (.*?)(?:; next try in|; launch_timeout|$)/.exec(reason)?.[1] ?? '';
  const tries: CapacityTry[] = [];
  for (const entry of tried.split(', ')) {
    const parts = /^([\w.-]+) ((?:in|try) [^:]+): (.+)$/.exec(entry);
    if (parts !== null) tries.push({ instanceType: parts[1] as string, where: parts[2] as string, answer: parts[3] as string });
  }
  return tries;
}

/** The instance types of the tries, each once, in the order first tried. */
export function triedInstanceTypes(reason: string): string[] {
  return [...new Set(capacityTries(reason).map((each) => each.instanceType))];
}

/** What a wait for capacity shows: when the next try is, on which market, and what had none. */
interface WaitingAttempt {
  readonly rule: PolicyRule | null;
  readonly decidedAt: string | null;
  readonly delaySeconds: number | null;
  readonly reason: string | null;
  readonly market: string;
}

/**
 * The one line an attempt waiting for capacity reads as, in `relaunch run` and on the jobs
 * page alike: `waiting for capacity: next try at <time>, in 60 s: no spot capacity for
 * g5.xlarge, g5.2xlarge` (at most three types, then how many more); null for an attempt
 * not waiting. `timeOf` writes the next try's time as the caller prints times.
 */
export function capacityWaitLine(attempt: WaitingAttempt, timeOf: (at: number) => string): string | null {
  if (attempt.rule !== 'WAITING_FOR_CAPACITY' || attempt.decidedAt === null || attempt.delaySeconds === null) return null;
  const next = Date.parse(attempt.decidedAt) + attempt.delaySeconds * 1000;
  const types = triedInstanceTypes(attempt.reason ?? '');
  const what = types.length === 0 ? '' : ` for ${types.length > 3 ? `${types.slice(0, 3).join(', ')} and ${types.length - 3} more` : types.join(', ')}`;
  return `waiting for capacity: next try at ${timeOf(next)}, in ${attempt.delaySeconds} s: no ${attempt.market} capacity${what}`;
}
