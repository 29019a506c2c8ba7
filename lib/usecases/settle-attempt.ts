// Ending an attempt once its facts decide it: the one rule of lib/outcome.ts, for a report
// and an EC2 event alike, whichever arrives first, last, or at the same moment.

import type { AttemptRecord } from '../model.ts';
import { basisOf, decideAttempt, type GoneNode } from '../outcome.ts';
import type { AttemptOutcome } from '../policy/types.ts';
import type { UseCaseDeps } from './deps.ts';
import { resumeTask } from './tasks.ts';

/** Whether this call ended the attempt (and with what), and the attempt as it now is. */
export type Settled =
  | { readonly ended: true; readonly outcome: AttemptOutcome; readonly attempt: AttemptRecord }
  | { readonly ended: false; readonly attempt: AttemptRecord };

/**
 * Ends `attempt` (as just read or written) if `decideAttempt` decides it on its stored
 * reports, its warning, and `gone` (a node whose instance this caller saw go away; not
 * stored, since that fact always decides at once unless the node's final report is in),
 * and resumes the waiting execution when this call ended it.
 *
 * The end is written on the facts it was decided on (endAttempt's `basis`): a report or a
 * warning stored meanwhile refuses it, and the decision is taken again on the attempt as
 * it now is. So the outcome is always the rule applied to every fact stored before the
 * end, never to a stale read of them. Facts only grow (one report per node and phase, one
 * warning), so this ends after at most that many refusals. An attempt ended by someone
 * else is left as it is.
 */
export async function settleAttempt(
  attempt: AttemptRecord,
  numNodes: number,
  gone: readonly GoneNode[],
  at: string,
  deps: Pick<UseCaseDeps, 'store' | 'workflow'>,
): Promise<Settled> {
  const { store, workflow } = deps;
  let current = attempt;
  while (current.outcome === null) {
    const facts = { interruptionNoticedAt: current.interruptionNoticedAt, gone };
    const outcome = decideAttempt(numNodes, current.reports, facts);
    if (outcome === null) break;
    const ended = await store.endAttempt(current.jobId, current.attempt, outcome, at, basisOf(current));
    if (ended.won) {
      if (ended.attempt.taskToken !== null) await resumeTask(workflow, ended.attempt.taskToken, { outcome: outcome.kind });
      return { ended: true, outcome, attempt: ended.attempt };
    }
    current = ended.attempt;
  }
  return { ended: false, attempt: current };
}
