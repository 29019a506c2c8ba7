// A job driven through the real use cases on a clock the test moves, its nodes' steps
// scripted to the second: what the accounting tests measure.

import { accountJob, type JobAccount } from '../../../../lib/accounting/account.ts';
import { NoCapacityError } from '../../../../lib/errors.ts';
import { awaitAttempt } from '../../../../lib/usecases/await-attempt.ts';
import { evaluatePolicy } from '../../../../lib/usecases/evaluate-policy.ts';
import { heartbeat } from '../../../../lib/usecases/heartbeat.ts';
import { onInstanceEvent } from '../../../../lib/usecases/instance-event.ts';
import { launchAttempt } from '../../../../lib/usecases/launch-attempt.ts';
import { releaseInstances } from '../../../../lib/usecases/release-instances.ts';
import { reportPhase } from '../../../../lib/usecases/report-phase.ts';
import type { JobStore } from '../../../../lib/ports.ts';
import type { RecoveryPolicy } from '../../../../lib/task-file/types.ts';
import { AwaitResultSchema, type WorkflowState } from '../../../../lib/workflow/contract.ts';
import { fakeInstanceId } from '../../../support/fakes/fake-compute.ts';
import { givenJob, harness, initialState, JOB_ID, report, taskSpec, tokenFor, type Harness } from '../../../support/usecases-harness.ts';

/** One step of what happens on the attempt's nodes, each after `seconds` of the test's clock. */
export type Step =
  | { readonly boot: number; readonly progress?: { step: number; ageSeconds: number } }
  /** `ran`: how long setup itself ran, as the agent says in its report (per node, or the same on each); absent as from an older agent. */
  | { readonly setup: number; readonly code?: number; readonly ran?: number | readonly number[] }
  | { readonly agentFailure: number }
  | { readonly run: number; readonly code: number }
  | { readonly beat: number; readonly progress?: { step: number; ageSeconds: number } }
  | { readonly preempt: number }
  | { readonly lose: number };

/** An attempt: its steps, or a launch that finds no capacity. */
export type Attempt = readonly Step[] | 'no-capacity';

async function onNodes(h: Harness, attempt: number, numNodes: number, step: Step, jobId: string): Promise<void> {
  const at = () => h.clock.now().toISOString();
  const secret = h.compute.secretFor(jobId, attempt);
  const ranks = Array.from({ length: numNodes }, (_, rank) => rank);
  if ('boot' in step || 'beat' in step) {
    h.clock.advance('boot' in step ? step.boot : step.beat);
    for (const nodeRank of ranks) {
      await heartbeat({ jobId, attempt, nodeRank, secret, ...(step.progress === undefined ? {} : { progress: step.progress }) }, h.deps);
    }
  } else if ('setup' in step) {
    h.clock.advance(step.setup);
    for (const nodeRank of ranks) {
      const ran = typeof step.ran === 'number' ? step.ran : step.ran?.[nodeRank];
      if (ran === undefined) await report(h, attempt, 'setup', step.code ?? 0, nodeRank, jobId);
      else await reportPhase({ jobId, attempt, nodeRank, phase: 'setup', exitCode: step.code ?? 0, setupMs: ran * 1000, outputTail: '', secret }, h.deps);
    }
  } else if ('agentFailure' in step) {
    h.clock.advance(step.agentFailure);
    const agentFailure = { step: 'image-pull', error: 'could not pull x:1' } as const;
    for (const nodeRank of ranks) await reportPhase({ jobId, attempt, nodeRank, phase: 'setup', agentFailure, outputTail: '', secret }, h.deps);
  } else if ('run' in step) {
    h.clock.advance(step.run);
    for (const nodeRank of ranks) await report(h, attempt, 'run', step.code, nodeRank, jobId);
  } else {
    h.clock.advance('preempt' in step ? step.preempt : step.lose);
    const instanceId = fakeInstanceId(jobId, attempt, 0);
    if ('preempt' in step) await onInstanceEvent({ instanceId, kind: 'SPOT_INTERRUPTION_WARNING', time: at() }, h.deps);
    await onInstanceEvent({ instanceId, kind: 'STATE_CHANGE', state: 'terminated', time: at() }, h.deps);
  }
}

/**
 * Runs the job as the state machine would: `queued` seconds before the first launch; each
 * attempt's steps; 1 s for the decision; the backoff (or capacity) wait the decision names.
 */
export async function runJob(h: Harness, attempts: readonly Attempt[], options: { queued?: number; numNodes?: number; jobId?: string } = {}): Promise<JobAccount> {
  const numNodes = options.numNodes ?? 1;
  const jobId = options.jobId ?? JOB_ID;
  h.clock.advance(options.queued ?? 0);
  let state: WorkflowState = initialState(jobId);
  for (const attempt of attempts) {
    if (attempt === 'no-capacity') h.compute.scriptLaunch({ error: new NoCapacityError('no capacity in us-east-1a') });
    state = await launchAttempt(state, h.deps);
    let awaited: unknown;
    if (attempt === 'no-capacity') {
      awaited = { outcome: 'LAUNCH_FAILED' };
    } else {
      const taskToken = tokenFor(state.attempt);
      await awaitAttempt({ jobId, attempt: state.attempt, taskToken }, h.deps);
      for (const step of attempt) await onNodes(h, state.attempt, numNodes, step, jobId);
      const closing = h.workflow.closingOf(taskToken);
      if (closing?.kind !== 'resume') throw new Error(`attempt ${state.attempt} was not resumed`);
      awaited = closing.output;
    }
    h.clock.advance(1);
    state = await evaluatePolicy({ ...state, awaited: AwaitResultSchema.parse(awaited) }, h.deps);
    state = await releaseInstances(state, h.deps);
    if (state.decision?.action === 'SUCCEED' || state.decision?.action === 'FAIL') break;
    h.clock.advance(state.decision?.delaySeconds ?? 0);
  }
  const job = await h.store.getJob(jobId);
  return accountJob(job, await h.store.listAttempts(jobId), h.clock.now().getTime());
}

export async function jobWith(
  recovery: Partial<RecoveryPolicy>,
  attempts: readonly Attempt[],
  options: { queued?: number; numNodes?: number; useSpot?: boolean; jobId?: string; store?: JobStore } = {},
) {
  const h = harness(options.store);
  await givenJob(h, taskSpec({ recovery, numNodes: options.numNodes ?? 1, useSpot: options.useSpot ?? true }), options.jobId);
  const account = await runJob(h, attempts, options);
  return { h, account };
}

