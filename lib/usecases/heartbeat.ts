// An agent's heartbeat: proof the attempt is alive, passed on to the waiting execution.

import { StateName } from '../workflow/contract.ts';
import { assertLiveOrHolding, authorizeAgent, markRunning, type AgentCredentials } from './agent.ts';
import { nodesNotHeardFrom } from './await-attempt.ts';
import { nowIso, type UseCaseDeps } from './deps.ts';
import { resumeTask } from './tasks.ts';
import { progressMark } from './timeline-marks.ts';
import type { Progress } from '../agent/protocol.ts';

/** `POST /jobs/{id}/attempts/{n}/heartbeat`, with the job's progress when the beat carried it. */
export interface HeartbeatInput extends AgentCredentials {
  readonly progress?: Progress;
}

/**
 * Records the heartbeat and its node, moves STARTING -> RUNNING (a lost race is fine), and
 * passes it on to the waiting task:
 *
 * - AwaitBoot's: once every node has been heard from, the task is resumed with `booted`
 *   (again by each later beat until AwaitAttempt's token replaces it: harmless, the task
 *   has ended). AwaitBoot has no heartbeat timeout, so a beat is not sent to it.
 * - AwaitAttempt's: SendTaskHeartbeat, so its heartbeat timeout restarts.
 *
 * A standby holding after the live attempt (launch_on_warning) is recorded as alive and
 * nothing more: no task waits on it, and the job's status is the live attempt's.
 *
 * Wrong secret: UnauthorizedError; an attempt that is neither the latest nor the standby
 * after it, or that has ended: StaleAttemptError.
 */
export async function heartbeat(input: HeartbeatInput, deps: Pick<UseCaseDeps, 'store' | 'workflow' | 'clock'>): Promise<void> {
  const { store, workflow, clock } = deps;
  const { job, attempt } = await authorizeAgent(store, input);
  const which = assertLiveOrHolding(job, attempt);
  const recorded = await store.recordHeartbeat(input.jobId, input.attempt, nowIso(clock), input.nodeRank, progressMark(input, clock.now()));
  // The attempt may have ended meanwhile: then its status belongs to the policy now.
  if (recorded.outcome !== null || which === 'standby') return;
  await markRunning(store, job, input.attempt, clock);
  if (recorded.taskToken === null) return;
  if (recorded.tokenState === StateName.AwaitBoot) {
    if (nodesNotHeardFrom(recorded, job.spec.numNodes).length === 0) await resumeTask(workflow, recorded.taskToken, { booted: true });
    return;
  }
  await workflow.heartbeat(recorded.taskToken);
}
