// The points of an attempt's timeline the use cases note as they happen (lib/accounting/
// reads them), in the writes their steps already make where one can carry them.

import type { Progress } from '../agent/protocol.ts';
import type { ProgressMark } from '../model.ts';

/**
 * The progress a heartbeat carried, dated by the API's clock (`now` less the file's age,
 * so a node's clock never dates it); undefined when it carried none.
 */
export function progressMark(input: { readonly nodeRank: number; readonly progress?: Progress }, now: Date): ProgressMark | undefined {
  if (input.progress === undefined) return undefined;
  return { step: input.progress.step, at: new Date(now.getTime() - input.progress.ageSeconds * 1000).toISOString(), nodeRank: input.nodeRank };
}
