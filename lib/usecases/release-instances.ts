// ReleaseInstances: give back the attempt's instances, whatever the decision was, and the
// job's secrets when the decision ended the job.

import { isTerminal, type JobStatus } from '../status.ts';
import type { WorkflowState } from '../workflow/contract.ts';
import type { UseCaseDeps } from './deps.ts';

/**
 * Terminates the instances of the attempt in `state`, recorded or not, then, when the
 * decision ends the job, deletes its secrets (no attempt will need them). Safe to run
 * again (both are idempotent), so the machine may retry it freely. Returns the state
 * unchanged, so the decision reaches the Choice.
 */
export async function releaseInstances(state: WorkflowState, deps: Pick<UseCaseDeps, 'store' | 'compute' | 'secrets'>): Promise<WorkflowState> {
  const { store, compute } = deps;
  if (state.attempt >= 1) {
    const attempt = await store.getAttempt(state.jobId, state.attempt);
    // Even with no instances recorded: a launch whose Lambda died before setInstances may
    // have started some, and compute also finds an attempt's instances by their tags.
    await compute.release(state.jobId, state.attempt, attempt.instances);
  }
  if (state.decision !== undefined && isTerminal(state.decision.status as JobStatus)) await deps.secrets.delete(state.jobId);
  return state;
}
