// A chaos file's plan: the faults it injects into which attempts and nodes, and the bounds a
// file's values must keep.

import { MAX_BODY_BYTES } from '../http/handle.ts';

/**
 * Where a fault was written, for messages about it: its index in the file's `faults` list
 * and the line to point at (its `node` key when it names one, else its entry). Faults made
 * from options (`preemptAttemptsPlan`) have none.
 */
export interface ChaosSource {
  readonly index: number;
  readonly line?: number;
}

/**
 * One injected fault, for one attempt (1-based). Times count from the node's `run` start.
 * - `preempt`: a spot interruption warning, then `warningMs` later the termination.
 * - `rebalance`: EC2's rebalance recommendation for the node's instance; nothing ends.
 * - `lose`: the instance vanishes (no report, the instance `terminated`).
 * - `silence`: the node's network is cut (no heartbeat or report), its process runs on;
 *   `from: boot` counts `after` from the node's start instead, so with `after: 0s` the
 *   node never reaches relaunch at all (an instance with no route to the API); `for`
 *   restores the network after that long (with `from: boot`, a slow boot).
 * - `no_capacity`: the attempt's first `tries` launch tries fail with InsufficientInstanceCapacity.
 * - `drop_events`: EC2 events about the attempt's instances are never delivered.
 */
export type ChaosFault =
  | {
      readonly kind: 'preempt';
      readonly attempt: number;
      readonly node: number;
      readonly afterMs: number;
      readonly warningMs: number;
      readonly source?: ChaosSource;
    }
  | { readonly kind: 'lose'; readonly attempt: number; readonly node: number; readonly afterMs: number; readonly source?: ChaosSource }
  | { readonly kind: 'rebalance'; readonly attempt: number; readonly node: number; readonly afterMs: number; readonly source?: ChaosSource }
  | {
      readonly kind: 'silence';
      readonly attempt: number;
      readonly node: number;
      readonly afterMs: number;
      /** Set when `after` counts from the node's start, not its run's. */
      readonly from?: 'boot';
      /** How long the network stays cut; absent: for good. */
      readonly forMs?: number;
      readonly source?: ChaosSource;
    }
  | { readonly kind: 'no_capacity'; readonly attempt: number; readonly tries: number; readonly source?: ChaosSource }
  | { readonly kind: 'drop_events'; readonly attempt: number; readonly source?: ChaosSource };

/** The faults to inject, in the order they were given (a file's, then the options'). */
export interface ChaosPlan {
  readonly faults: readonly ChaosFault[];
  /**
   * The emulated boot of every new node, in ms (`boot`, or `relaunch run --boot`): a local
   * node's process starts this long after its launch (the instance `pending` meanwhile), as
   * an EC2 instance takes its boot before its agent runs. A node an attempt keeps from the
   * one before (restart in place) is running already and gets none. Absent or 0: at once.
   */
  readonly bootMs?: number;
}


/** The fault kinds, as an entry of the file names them. */
export const FAULT_KINDS = ['preempt', 'rebalance', 'lose', 'silence', 'no_capacity', 'drop_events'] as const;

/**
 * `preempt`'s `warning` when not given: shorter than EC2's 120 s, but, as EC2's is, long
 * enough for the job's whole grace period and the agent's end before the instance goes
 * (the local runtime gives a job 10 s and its agent 5 s more), so a rehearsal stops the
 * job the way EC2 does.
 */
export const DEFAULT_PREEMPT_WARNING_MS = 15_000;

/**
 * The longest duration a file may give. The local runtime waits with setTimeout, which
 * fires at once past 2^31-1 ms (about 24.8 days); a day is far below that and far above
 * any rehearsal.
 */
export const MAX_DURATION_MS = 24 * 3_600_000;

/** The highest attempt a fault may name: a rehearsal of a thousand attempts is plenty. */
export const MAX_ATTEMPT = 1_000;

/** The most launch tries `no_capacity` may fail. */
export const MAX_NO_CAPACITY_TRIES = 1_000;

/** The most entries `faults` may have. */
export const MAX_FAULTS = 1_000;

/**
 * The largest chaos file, in bytes (and the longest text, in characters): as large as a
 * task file may be, the most the CLI reads of one (cli/task-file.ts). A full file of
 * MAX_FAULTS entries with a comment each takes about 100 KiB; the yaml package parses a
 * dense flow list at about 3 s per MiB, so this also bounds a hostile file to under a second.
 */
export const MAX_CHAOS_FILE_BYTES = MAX_BODY_BYTES;
