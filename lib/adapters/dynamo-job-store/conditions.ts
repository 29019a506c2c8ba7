// What every write of the job store requires of the item it writes, one named condition
// each. These are where "nothing lost" and "a late report from an old attempt changes
// nothing" hold: a write whose condition is false is refused whole, and the store reads
// the refused item to say why (job-store-rules.ts words it). Read this file as the list of
// what each write requires; store.ts says which write uses which.

import type { DecisionBasis } from '../../outcome.ts';
import { TABLE_KEY } from '../../workflow/job-table.ts';
import { allOf, anyOf, atMost, equals, exists, lacks, notExists, sizeIs, type Condition } from './expression.ts';
import { EVENT_COUNT, REPORT_KEYS } from './items.ts';

/** The item is there: an update never creates one (an update of a missing key would). */
export const ITEM_EXISTS: Condition = exists(TABLE_KEY.partitionKey);

/** No item under the key: a put of a new item never overwrites one (a job, an attempt, an event row). */
export const ITEM_IS_NEW: Condition = notExists(TABLE_KEY.partitionKey);

/**
 * An idempotency key is free to claim: nobody holds it, or the claim on it has lapsed by
 * `now` (TTL deletes lapsed claims late, so the time is checked here).
 */
export function claimFree(now: string): Condition {
  return anyOf(ITEM_IS_NEW, atMost('expiresAt', now));
}

/**
 * The job is as its writer read it: in the status the change moves it from, with the event
 * count it numbered its EVENT row from (so two writers never take the same number).
 */
export function jobAsRead(status: string, eventCount: number): Condition {
  return allOf(equals('status', status), equals(EVENT_COUNT, eventCount));
}

/**
 * The job's live attempt is `attempt`: attempts are written in sequence, and a standby is
 * launched for the live attempt only.
 */
export function liveAttemptIs(attempt: number): Condition {
  return equals('attemptCount', attempt);
}

/** The attempt has not ended: no outcome is stored (an outcome is set once). */
export const ATTEMPT_OPEN: Condition = allOf(ITEM_EXISTS, notExists('outcome'));

/** The attempt is not a standby let go unused (an absent standby mark counts as not released). */
export const NOT_RELEASED: Condition = notExists('standby.releasedAt');

/**
 * A node's report is taken: the attempt is open and not let go, and no report of that node
 * and phase (`key`) was taken before, so a duplicate changes nothing.
 */
export function reportIsNew(key: string): Condition {
  return allOf(ATTEMPT_OPEN, NOT_RELEASED, lacks(REPORT_KEYS, key));
}

/**
 * A stopped phase's last lines are taken once per node and phase while the attempt is not let
 * go, even after it ended: they decide nothing, and a cancel ends the attempt before its
 * nodes are told to stop.
 */
export function stoppedTailIsNew(key: string): Condition {
  return allOf(ITEM_EXISTS, NOT_RELEASED, lacks(REPORT_KEYS, key));
}

/** A heartbeat is taken while the attempt is open and not let go. */
export const TAKES_HEARTBEAT: Condition = allOf(ATTEMPT_OPEN, NOT_RELEASED);

/** EC2's word (`field`: a warning or a rebalance notice) on an open attempt is noted the first time only. */
export function firstNotice(field: 'interruptionNoticedAt' | 'rebalanceNoticedAt'): Condition {
  return allOf(ATTEMPT_OPEN, notExists(field));
}

/** The attempt's instances are set once. */
export const PLACEMENT_UNSET: Condition = allOf(ITEM_EXISTS, notExists('placement'));

/** The start of the job's `run` is noted once. */
export const RUN_START_UNSET: Condition = allOf(ITEM_EXISTS, notExists('runStartedAt'));

/** The attempt's decision is written once. */
export const DECISION_UNSET: Condition = allOf(ITEM_EXISTS, notExists('decision'));

/**
 * The attempt ends once, and (with a basis) only on the facts its decider read: reports are
 * only appended and a warning is set once, so the list's size and the warning's presence
 * say whether any fact was added since.
 */
export function endsOnce(basis?: DecisionBasis): Condition {
  if (basis === undefined) return ATTEMPT_OPEN;
  const warning = basis.interruptionNoticed ? exists('interruptionNoticedAt') : notExists('interruptionNoticedAt');
  return allOf(ATTEMPT_OPEN, sizeIs('reports', basis.reports), warning);
}

/** A standby neither adopted nor let go yet: one of the two happens, once. */
export const STANDBY_UNSETTLED: Condition = allOf(exists('standby'), notExists('standby.adoptedAt'), NOT_RELEASED);

/** A standby that was let go unused: retiring it moves the live attempt past it. */
export const STANDBY_RELEASED: Condition = exists('standby.releasedAt');
