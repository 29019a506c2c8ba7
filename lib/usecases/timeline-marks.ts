// The points of an attempt's timeline the use cases note as they happen (lib/accounting/
// reads them): each in a write of its own only where no write of the step could carry it.

import type { Progress } from '../agent/protocol.ts';
import type { AttemptRecord, ProgressMark } from '../model.ts';
import type { JobStore } from '../ports.ts';
import type { InstanceEvent } from './instance-event.ts';

/**
 * Notes the instance of an EC2 state-change event gone, on the attempt it serves, once per
 * node: whether the event decides anything or not (most come after the node's final
 * report), its time is when the instance stopped costing. Nothing for other events, nor
 * for a state not in `goneStates` (the caller's list of states in which an instance is gone).
 */
export async function noteInstanceGone(store: JobStore, attempt: AttemptRecord, event: InstanceEvent, goneStates: object): Promise<void> {
  if (event.kind !== 'STATE_CHANGE' || event.state === undefined || !(event.state in goneStates)) return;
  const node = attempt.instances.find((instance) => instance.instanceId === event.instanceId);
  if (node === undefined || attempt.nodeMarks?.[String(node.nodeRank)]?.goneAt !== undefined) return;
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
