// Which nodes of an attempt a relaunch reused, and which a standby joins, in words: pure, with no import but a type, so
// the jobs page's script (web/dashboard) bundles it as the CLI's status does.

import type { AttemptView, StandbyView } from './views.ts';

/**
 * Which nodes of an attempt a relaunch reused and which are new (`node 0 reused from
 * attempt 1, node 1 new`), as status and the jobs page print it; null for an attempt whose
 * every node is new.
 */
export function reusedNodesWords(attempt: Pick<AttemptView, 'instances'>): string | null {
  if (!attempt.instances.some((node) => (node.reusedFrom ?? null) !== null)) return null;
  return attempt.instances.map((node) => `node ${node.nodeRank} ${(node.reusedFrom ?? null) === null ? 'new' : `reused from attempt ${node.reusedFrom}`}`).join(', ');
}

/**
 * Whose standby an attempt is, as run, status, logs and the jobs page print it: `attempt 1`,
 * or `attempt 1, beside its nodes 0, 2` (`its node 0`) for a standby of the warned node alone.
 */
export function standbyOfWords(standby: Pick<StandbyView, 'for'> & Partial<Pick<StandbyView, 'beside'>>): string {
  const beside = standby.beside ?? null;
  if (beside === null) return `attempt ${standby.for}`;
  return `attempt ${standby.for}, beside its node${beside.length === 1 ? '' : 's'} ${beside.join(', ')}`;
}
