// The whole controller loop in memory: launch, await, agent reports, evaluate, release, again.

import { describe, expect, it } from 'vitest';
import type { AttemptRecord } from '../../../../lib/model.ts';
import { awaitAttempt } from '../../../../lib/usecases/await-attempt.ts';
import { evaluatePolicy } from '../../../../lib/usecases/evaluate-policy.ts';
import { onInstanceEvent } from '../../../../lib/usecases/instance-event.ts';
import { launchAttempt } from '../../../../lib/usecases/launch-attempt.ts';
import { getJob } from '../../../../lib/usecases/queries.ts';
import { releaseInstances } from '../../../../lib/usecases/release-instances.ts';
import { AwaitResultSchema, type WorkflowState } from '../../../../lib/workflow/contract.ts';
import { fakeInstanceId } from '../../../support/fakes/fake-compute.ts';
import { givenJob, harness, initialState, JOB_ID, report, taskSpec, tokenFor, type Harness } from '../../../support/usecases-harness.ts';

/** What the attempt's agent (or EC2) does while the machine waits. */
type Agent = (h: Harness, attempt: number) => Promise<void>;

const exits =
  (code: number): Agent =>
  async (h, attempt) => {
    await report(h, attempt, 'setup', 0);
    await report(h, attempt, 'run', code);
  };

const preempted: Agent = async (h, attempt) => {
  await report(h, attempt, 'setup', 0);
  const instanceId = fakeInstanceId(JOB_ID, attempt, 0);
  await onInstanceEvent({ instanceId, kind: 'SPOT_INTERRUPTION_WARNING', time: h.clock.now().toISOString() }, h.deps);
  await onInstanceEvent({ instanceId, kind: 'STATE_CHANGE', state: 'terminated', time: h.clock.now().toISOString() }, h.deps);
};

/**
 * Runs the machine as the state machine would, until a terminal decision: LaunchAttempt,
 * AwaitAttempt (its result is whatever resumed the token), the agent, EvaluateRecoveryPolicy,
 * ReleaseInstances, then the Choice. Returns every state the Choice saw.
 */
async function runMachine(h: Harness, agents: Agent[]): Promise<WorkflowState[]> {
  const decided: WorkflowState[] = [];
  let state = initialState();
  for (const agent of agents) {
    state = await launchAttempt(state, h.deps);
    const taskToken = tokenFor(state.attempt);
    await awaitAttempt({ jobId: JOB_ID, attempt: state.attempt, taskToken }, h.deps);
    await agent(h, state.attempt);
    h.clock.advance(60);
    const closing = h.workflow.closingOf(taskToken);
    if (closing?.kind !== 'resume') throw new Error(`attempt ${state.attempt} was not resumed`);
    state = await evaluatePolicy({ ...state, awaited: AwaitResultSchema.parse(closing.output) }, h.deps);
    state = await releaseInstances(state, h.deps);
    decided.push(state);
    if (state.decision?.action === 'SUCCEED' || state.decision?.action === 'FAIL') return decided;
  }
  throw new Error('the job did not finish with the agents given');
}

function decisionsOf(attempts: readonly AttemptRecord[]) {
  return attempts.map((a) => a.decision?.action);
}

describe('the controller loop, in memory', () => {
  it('exit 29 twice then 0, with recover_on_exit_codes [29]: two restarts, then success', async () => {
    const h = harness();
    await givenJob(h, taskSpec({ recovery: { recoverOnExitCodes: [29] } }));

    const decided = await runMachine(h, [exits(29), exits(29), exits(0)]);

    expect(decided.map((s) => s.decision?.action)).toEqual(['RESTART', 'RESTART', 'SUCCEED']);
    expect(decided.map((s) => [s.attempt, s.attemptsInExecution])).toEqual([
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
    const view = await getJob(JOB_ID, h.deps);
    expect(view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 2, restartsOnErrors: 0 });
    expect(view.attempts.map(({ attempt, outcome, phase, exitCodes, decision }) => ({ attempt, outcome, phase, exitCodes, decision }))).toEqual([
      { attempt: 1, outcome: 'EXITED', phase: 'run', exitCodes: [29], decision: 'RESTART' },
      { attempt: 2, outcome: 'EXITED', phase: 'run', exitCodes: [29], decision: 'RESTART' },
      { attempt: 3, outcome: 'EXITED', phase: 'run', exitCodes: [0], decision: 'SUCCEED' },
    ]);
    expect(view.attempts[0]?.reason).toMatch(/29.*recover_on_exit_codes/);
    expect(h.compute.launches.map((l) => [l.attempt, l.market])).toEqual([
      [1, 'spot'],
      [2, 'spot'],
      [3, 'spot'],
    ]);
    expect(h.compute.releases.map((r) => r.attempt)).toEqual([1, 2, 3]);
    const job = await h.store.getJob(JOB_ID);
    expect(job.counters).toMatchObject({ restartsOnExitCodes: 2, restartsOnErrors: 0, recoveryCount: 2 });
    expect((await h.store.listEvents(JOB_ID)).map((e) => e.to)).toEqual([
      'PENDING',
      'STARTING', 'RUNNING', 'RECOVERING',
      'STARTING', 'RUNNING', 'RECOVERING',
      'STARTING', 'RUNNING', 'SUCCEEDED',
    ]);
  });

  it('a preemption, an error within budget, then an error past it: RECOVER, RESTART, FAIL', async () => {
    const h = harness();
    await givenJob(h, taskSpec({ recovery: { maxRestartsOnErrors: 1 } }));

    const decided = await runMachine(h, [preempted, exits(1), exits(1)]);

    expect(decided.map((s) => s.decision?.action)).toEqual(['RECOVER', 'RESTART', 'FAIL']);
    const job = await h.store.getJob(JOB_ID);
    expect(job).toMatchObject({ status: 'FAILED', counters: { restartsOnErrors: 2, recoveryCount: 2 } });
    expect(job.failureReason).toBe(decided[2]?.decision?.reason);
    const attempts = await h.store.listAttempts(JOB_ID);
    expect(attempts.map((a) => a.outcome?.kind)).toEqual(['PREEMPTED', 'EXITED', 'EXITED']);
    expect(decisionsOf(attempts)).toEqual(['RECOVER', 'RESTART', 'FAIL']);
    expect(h.compute.launches[1]?.history).toEqual([{ placement: expect.anything(), outcome: 'PREEMPTED' }]);
  });
});
