// Whether a task's nodes can reach each other on this deployment: the instances' security
// group admits its own members only when the stack was deployed with node-to-node traffic
// (relaunch:nodeToNodeTraffic, on by default). Without it a multi-node job would launch and
// hang in its rendezvous, so it is refused at submit, and at launch for one submitted before.

import type { InputIssue } from '../errors.ts';
import type { TaskSpec } from '../task-file/types.ts';

/** Why the task cannot run on a deployment whose nodes may (or may not) reach each other; empty when it can. */
export function nodeTrafficProblems(spec: Pick<TaskSpec, 'numNodes'>, nodeToNodeTraffic: boolean): InputIssue[] {
  if (nodeToNodeTraffic || spec.numNodes <= 1) return [];
  return [
    {
      path: 'num_nodes',
      message:
        `expected 1 on this deployment, got ${spec.numNodes}: its instances may not reach each other (it was deployed with ` +
        'relaunch:nodeToNodeTraffic false), so the nodes of a multi-node job could never meet; deploy with relaunch:nodeToNodeTraffic true',
    },
  ];
}
