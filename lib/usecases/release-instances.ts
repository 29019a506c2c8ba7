// ReleaseInstances: give back the attempt's instances, whatever the decision was, the
// standby's when the decision does not relaunch, and the job's secrets when it ends the job.

import { RecoveryAction } from '../policy/types.ts';
import { isTerminal } from '../status.ts';
import type { DecisionOutput, WorkflowState } from '../workflow/contract.ts';
import { nowIso, type UseCaseDeps } from './deps.ts';
import { releaseStandbyOf } from './standby-attempt.ts';

/**
 * Terminates the instances of the attempt in `state`, recorded or not, but the nodes its
 * decision keeps for the relaunch (`keep`: restart in place, survivors of a partial loss),
 * which are held instead (compute.hold: their agents stop the job and ask what is next;
 * LaunchAttempt runs the next attempt on them, or releases them). When the decision
 * does not relaunch the job (it succeeded, failed, was cancelled, or a pipeline moves on to
 * its next task), the standby a warning started for the attempt (launch_on_warning) is not
 * needed: it is released, charged to nothing, and its instances terminated too; a relaunch
 * leaves it to the next LaunchAttempt, which takes it. Then, when the decision ends the
 * job, its secrets are deleted (no attempt will need them). Safe to run again (every step
 * is idempotent), so the machine may retry it freely. Returns the state unchanged, so the
 * decision reaches the Choice.
 */
export async function releaseInstances(state: WorkflowState, deps: Pick<UseCaseDeps, 'store' | 'compute' | 'secrets' | 'clock'>): Promise<WorkflowState> {
  const { store, compute } = deps;
  if (state.attempt >= 1) {
    const attempt = await store.getAttempt(state.jobId, state.attempt);
    if (attempt.instances.length > 0 && attempt.stopAskedAt === undefined) await store.noteStopAsked(state.jobId, state.attempt, nowIso(deps.clock));
    const keep = attempt.decision?.keep;
    let released = attempt.instances;
    if (keep === undefined) {
      // Even with no instances recorded: a launch whose Lambda died before setInstances may
      // have started some, and compute also finds an attempt's instances by their tags.
      await compute.release(state.jobId, state.attempt, attempt.instances);
    } else {
      // Kept nodes are told first (their agents stop the job and ask what is next), then
      // every other instance of the attempt goes, by tag too, but never a kept one.
      await compute.hold(state.jobId, state.attempt, { placement: keep.placement, nodes: keep.nodes });
      const kept = keep.nodes.map((node) => node.instanceId);
      const others = attempt.instances.filter((instance) => !kept.includes(instance.instanceId));
      await compute.release(state.jobId, state.attempt, others, { except: kept });
      released = others;
    }
    // The release resolved: its instances are gone or going (the timeline's "instance gone").
    // Once: a retry finds it noted; kept nodes go with a later attempt, and are not counted.
    if (released.length > 0 && attempt.instancesGoneAt === undefined) await store.noteInstancesGone(state.jobId, state.attempt, nowIso(deps.clock));
    const { decision } = state;
    if (decision !== undefined && !relaunches(decision)) {
      await releaseStandbyOf(deps, state.jobId, state.attempt, `not needed: attempt ${state.attempt} was decided ${decision.action} (${decision.reason})`);
    }
  }
  if (state.decision !== undefined && isTerminal(state.decision.status)) await deps.secrets.delete(state.jobId);
  return state;
}

/** Whether a decision launches a next attempt of the same task, which may take a standby. */
function relaunches(decision: DecisionOutput): boolean {
  return decision.action === RecoveryAction.RESTART || decision.action === RecoveryAction.RECOVER;
}
