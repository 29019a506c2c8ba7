// How much of each node's output tail an attempt keeps, so an attempt's record stays storable.
//
// Every report lives on its attempt (DynamoDB: one item, at most 400 KB): 2 phases x
// num_nodes reports of up to OUTPUT_TAIL_MAX_BYTES would pass that from 24 nodes on. The
// smaller correct change than an item per report: bound num_nodes, and share a fixed
// budget of tail bytes between an attempt's reports. Up to 16 nodes keep the agent's
// whole tail; at MAX_NUM_NODES each keeps 2 KiB. The rest of the item (per report ~150 B
// of fields, instances, the outcome's node list, decision, task token) fits in the ~140 KB
// the budget leaves.

import { OUTPUT_TAIL_MAX_BYTES } from './agent/protocol.ts';

/** The most nodes a task may ask for (num_nodes): what the tail budget is sized for. */
export const MAX_NUM_NODES = 64;

/** Bytes of output tail an attempt keeps across all its reports (two per node). */
export const REPORT_TAILS_BUDGET_BYTES = 256 * 1024;

/** The most bytes of output tail stored per report for a task of `numNodes` nodes. */
export function storedTailMaxBytes(numNodes: number): number {
  return Math.min(OUTPUT_TAIL_MAX_BYTES, Math.floor(REPORT_TAILS_BUDGET_BYTES / (2 * Math.max(1, numNodes))));
}

/** The end of `text` within `maxBytes` of UTF-8; a character cut in half at the start is dropped. */
export function keepTail(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return text;
  let start = bytes.length - maxBytes;
  // Skip continuation bytes (10xxxxxx): they belong to a character that starts before the cut.
  while (start < bytes.length && ((bytes[start] ?? 0) & 0xc0) === 0x80) start += 1;
  return bytes.subarray(start).toString('utf8');
}
