// `POST /jobs/{id}/attempts/{n}/next`: a node whose job of attempt n has ended asks whether it
// runs the next attempt (restart in place, or a survivor of a partial loss), waits, or shuts down.

import type { NextAnswer } from '../agent/protocol.ts';
import type { AttemptRecord, JobRecord } from '../model.ts';
import type { ReuseSetup } from '../task-file/types.ts';
import { isEnding } from '../status.ts';
import { authorizeAgent, type AgentCredentials } from './agent.ts';
import type { UseCaseDeps } from './deps.ts';

/**
 * What node `nodeRank` of attempt `attempt` does next, read from the records only (so a
 * retried ask gets the same answer, and asking changes nothing). Authorized with attempt
 * `attempt`'s secret even after that attempt ended: the one route that takes an ended
 * attempt's secret, and only to be told this.
 *
 * - `stop`: the job has ended or is being cancelled; the attempt's decision keeps no node,
 *   or not this one (it is replaced, with why); the next attempt failed to launch, was
 *   placed without this node (it was found gone), or has ended; a later attempt is live.
 * - `wait`: the attempt is not decided yet (its peers may still run), or it kept this node
 *   and its next attempt is not placed yet (a backoff, a launch under way).
 * - `run`: the next attempt was placed on this node (reusedFrom `attempt`): its number, this
 *   node's rank in it, every node's IP, and whether setup runs again.
 *
 * Wrong secret: UnauthorizedError; a rank outside the job's nodes: InvalidInputError.
 */
export async function nextAttempt(input: AgentCredentials, deps: Pick<UseCaseDeps, 'store'>): Promise<NextAnswer> {
  const { store } = deps;
  const { job, attempt } = await authorizeAgent(store, input);
  const which = `node ${input.nodeRank} of attempt ${attempt.attempt} of job ${job.jobId}`;
  const stop = (why: string): NextAnswer => ({ next: 'stop', reason: `${which}: ${why}` });
  const wait = (why: string): NextAnswer => ({ next: 'wait', reason: `${which}: ${why}` });
  if (isEnding(job.status)) return stop(`the job is ${job.status}`);
  if (attempt.decision === null) {
    if (attempt.attempt < job.attemptCount) return stop(`attempt ${job.attemptCount} is the live one`);
    return wait(attempt.outcome === null ? 'the attempt runs on its other nodes' : 'the attempt is being decided');
  }
  const keep = attempt.decision.keep;
  if (keep === undefined) return stop(`the decision keeps no node (${attempt.decision.action}: ${attempt.decision.reason})`);
  const kept = keep.nodes.find((node) => node.nodeRank === input.nodeRank);
  if (kept === undefined) {
    const why = keep.replace.find((node) => node.nodeRank === input.nodeRank)?.why ?? 'it is not kept';
    return stop(`replaced in the relaunch: ${why}`);
  }
  if (job.attemptCount === attempt.attempt) return wait(`kept for attempt ${attempt.attempt + 1}, which is not launched yet`);
  const latest = await store.getAttempt(job.jobId, job.attemptCount);
  return answerFor(job, attempt, latest, kept.instanceId, keep.setup, { stop, wait });
}

/** The answer once a later attempt exists: run it if it was placed on this node, wait while it launches, stop otherwise. */
function answerFor(
  job: JobRecord,
  attempt: AttemptRecord,
  latest: AttemptRecord,
  instanceId: string,
  setup: ReuseSetup,
  say: { readonly stop: (why: string) => NextAnswer; readonly wait: (why: string) => NextAnswer },
): NextAnswer {
  const serving = latest.instances.find((node) => node.instanceId === instanceId && node.reusedFrom === attempt.attempt);
  if (serving === undefined) {
    if (latest.placement === null && latest.outcome === null) return say.wait(`attempt ${latest.attempt} is being launched`);
    if (latest.placement === null) return say.stop(`attempt ${latest.attempt} was not launched (${latest.outcome?.kind ?? 'no outcome'})`);
    return say.stop(`attempt ${latest.attempt} was placed without this node`);
  }
  if (latest.outcome !== null) return say.stop(`attempt ${latest.attempt} has already ended (${latest.outcome.kind})`);
  const nodeIps = [...latest.instances].sort((a, b) => a.nodeRank - b.nodeRank).map((node) => node.privateIp ?? '');
  const how = setup === 'skip' ? 'setup skipped' : 'setup run again';
  return {
    next: 'run',
    reason: `instance ${instanceId} runs attempt ${latest.attempt} of job ${job.jobId} as node ${serving.nodeRank}, ${how}`,
    attempt: latest.attempt,
    nodeRank: serving.nodeRank,
    numNodes: job.spec.numNodes,
    nodeIps,
    setup,
  };
}
