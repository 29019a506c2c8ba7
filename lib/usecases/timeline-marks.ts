// The points of an attempt's timeline the use cases note as they happen (lib/accounting/
// reads them): each in a write of its own only where no write of the step could carry it.

import type { Progress } from '../agent/protocol.ts';
import { isPhaseEnd, isStopped, type AttemptRecord, type ProgressMark } from '../model.ts';
import type { JobStore } from '../ports.ts';
import type { InstanceEvent } from './instance-event.ts';

/**
 * Notes the instance of an EC2 state-change event gone, on the attempt it serves, once per
 * node, when its node has sent no final report: then its time is when the instance stopped
 * costing, which nothing else on record says. A node that reported its end is not noted
 * (its agent shuts the instance down right after: the report's time stands for it), so an
 * attempt whose nodes all report costs no write here. Nothing for other events, nor for a
 * state not in `goneStates` (the caller's list of states in which an instance is gone).
 */
export async function noteInstanceGone(store: JobStore, attempt: AttemptRecord, event: InstanceEvent, goneStates: object): Promise<void> {
  if (event.kind !== 'STATE_CHANGE' || event.state === undefined || !(event.state in goneStates)) return;
  const node = attempt.instances.find((instance) => instance.instanceId === event.instanceId);
  if (node === undefined || attempt.nodeMarks?.[String(node.nodeRank)]?.goneAt !== undefined) return;
  if (hasFinalReport(attempt, node.nodeRank)) return;
  await store.noteInstanceGone(attempt.jobId, attempt.attempt, node.nodeRank, event.time);
}

/**
 * The progress a heartbeat carried, dated by the API's clock (`now` less the file's age,
 * so a node's clock never dates it); undefined when it carried none.
 */
export function progressMark(input: { readonly nodeRank: number; readonly progress?: Progress }, now: Date): ProgressMark | undefined {
  if (input.progress === undefined) return undefined;
  return { step: input.progress.step, at: new Date(now.getTime() - input.progress.ageSeconds * 1000).toISOString(), nodeRank: input.nodeRank };
}

/** Whether node `nodeRank` sent the report its agent shuts down after: run's, a failed setup's, or a stopped phase's. */
export function hasFinalReport(attempt: AttemptRecord, nodeRank: number): boolean {
  return attempt.reports.some((r) => r.nodeRank === nodeRank && (r.phase === 'run' || isStopped(r) || (isPhaseEnd(r) && r.exitCode !== 0)));
}
