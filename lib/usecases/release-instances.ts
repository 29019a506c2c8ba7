// ReleaseInstances: give back the attempt's instances, whatever the decision was.

import type { WorkflowState } from '../workflow/contract.ts';
import type { UseCaseDeps } from './deps.ts';

/**
 * Terminates the instances of the attempt in `state`, recorded or not. Safe to run again
 * (compute.release is idempotent), so the machine may retry it freely. Returns the state
 * unchanged, so the decision reaches the Choice.
 */
export async function releaseInstances(state: WorkflowState, deps: Pick<UseCaseDeps, 'store' | 'compute'>): Promise<WorkflowState> {
  const { store, compute } = deps;
  if (state.attempt < 1) return state;
  const attempt = await store.getAttempt(state.jobId, state.attempt);
  // Even with no instances recorded: a launch whose Lambda died before setInstances may
  // have started some, and compute also finds an attempt's instances by their tags.
  await compute.release(state.jobId, state.attempt, attempt.instances);
  return state;
}
