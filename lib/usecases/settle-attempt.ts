// Ending an attempt once its facts decide it: the one rule of lib/outcome.ts, for a report
// and an EC2 event alike, whichever arrives first, last, or at the same moment.

import type { AttemptRecord } from '../model.ts';
import { basisOf, decideAttempt, peerWaitEnds, type GoneNode } from '../outcome.ts';
import type { AttemptOutcome } from '../policy/types.ts';
import type { TaskSpec } from '../task-file/types.ts';
import { nowIso, sleepOn, type UseCaseDeps } from './deps.ts';
import { resumeTask } from './tasks.ts';

/** Whether this call ended the attempt (and with what), and the attempt as it now is. */
export type Settled =
  | { readonly ended: true; readonly outcome: AttemptOutcome; readonly attempt: AttemptRecord }
  | { readonly ended: false; readonly attempt: AttemptRecord };

/** How a settle treats a failure whose peers have not reported yet. */
export interface SettleOptions {
  /**
   * false: decide on the codes on record at once, without waiting for the peers' (a
   * runtime reopening a folder: no node of it runs any more). @default true
   */
  readonly waitForPeers?: boolean;
}

/**
 * Ends `attempt` (as just read or written) if `decideAttempt` decides it on its stored
 * reports, its warning, `gone` (a node whose instance this caller saw go away; not
 * stored, since that fact always decides at once unless the node's final report is in),
 * the task's `fail_on_exit_codes` and the time `at` (a failure's peers are waited for up
 * to PEER_REPORT_WAIT_MS), and resumes the waiting execution when this call ended it.
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
  spec: TaskSpec,
  gone: readonly GoneNode[],
  at: string,
  deps: Pick<UseCaseDeps, 'store' | 'workflow'>,
  options: SettleOptions = {},
): Promise<Settled> {
  const { store, workflow } = deps;
  const { numNodes } = spec;
  let current = attempt;
  while (current.outcome === null) {
    const facts = {
      interruptionNoticedAt: current.interruptionNoticedAt,
      ...(current.interruptionNode === undefined ? {} : { warnedNode: current.interruptionNode }),
      gone,
      finalCodes: spec.resources.jobRecovery.failOnExitCodes,
      ...(options.waitForPeers === false ? {} : { now: at }),
    };
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

/**
 * settleAttempt after a node's report, then, while the attempt is undecided only because a
 * failing node's peers have not reported (decideAttempt's row W), waits until their time
 * is up on the clock and settles it again on a fresh read: the last report in, or the
 * bound, decides, on every code stored by then.
 */
export async function settleAfterReport(
  attempt: AttemptRecord,
  spec: TaskSpec,
  deps: Pick<UseCaseDeps, 'store' | 'workflow' | 'clock'>,
): Promise<Settled> {
  const { store, clock } = deps;
  let settled = await settleAttempt(attempt, spec, [], nowIso(clock), deps);
  for (;;) {
    if (settled.ended || settled.attempt.outcome !== null) return settled;
    const until = peerWaitEnds(spec.numNodes, settled.attempt.reports);
    const left = until === null ? 0 : until - clock.now().getTime();
    if (left <= 0) return settled;
    await sleepOn(clock, left);
    settled = await settleAttempt(await store.getAttempt(attempt.jobId, attempt.attempt), spec, [], nowIso(clock), deps);
  }
}
