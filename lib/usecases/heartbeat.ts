// An agent's heartbeat: proof the attempt is alive, passed on to the waiting execution.

import { assertLiveAttempt, authorizeAgent, markRunning, type AgentCredentials } from './agent.ts';
import { nowIso, type UseCaseDeps } from './deps.ts';

/** `POST /jobs/{id}/attempts/{n}/heartbeat`. */
export type HeartbeatInput = AgentCredentials;

/**
 * Records the heartbeat, moves STARTING -> RUNNING (a lost race is fine), and sends
 * SendTaskHeartbeat so AwaitAttempt's heartbeat timeout restarts. Wrong secret:
 * UnauthorizedError; an attempt that is not the latest or has ended: StaleAttemptError.
 */
export async function heartbeat(input: HeartbeatInput, deps: Pick<UseCaseDeps, 'store' | 'workflow' | 'clock'>): Promise<void> {
  const { store, workflow, clock } = deps;
  const { job, attempt } = await authorizeAgent(store, input);
  assertLiveAttempt(job, attempt);
  const recorded = await store.recordHeartbeat(input.jobId, input.attempt, nowIso(clock));
  // The attempt may have ended meanwhile: then its status belongs to the policy now.
  if (recorded.outcome !== null) return;
  await markRunning(store, job, input.attempt, clock);
  if (recorded.taskToken !== null) await workflow.heartbeat(recorded.taskToken);
}
