// The environment every node of a job sees: the task's envs plus relaunch's and SkyPilot's
// variables, so real multi-node scripts can hand them to torchrun unchanged.

import type { TaskSpec } from './task-file/types.ts';

/** Where one node of one attempt runs. */
export interface NodeContext {
  readonly jobId: string;
  /** 1-based. */
  readonly attempt: number;
  readonly nodeRank: number;
  /** Every node's IP, head (rank 0) first. */
  readonly nodeIps: readonly string[];
}

/** GPUs per node: the count of the accelerator asked for (every candidate has one), else 0. */
export function gpusPerNode(spec: TaskSpec): number {
  return spec.resources.accelerators[0]?.count ?? 0;
}

/**
 * The variables a node's setup and run see. The task's own `envs` come first so the
 * documented RELAUNCH_* and SKYPILOT_* values cannot be shadowed by accident.
 */
export function jobEnvironment(spec: TaskSpec, node: NodeContext): Record<string, string> {
  const numNodes = String(spec.numNodes);
  const ips = node.nodeIps.join('\n');
  const rank = String(node.nodeRank);
  return {
    ...spec.envs,
    RELAUNCH_JOB_ID: node.jobId,
    RELAUNCH_ATTEMPT: String(node.attempt),
    RELAUNCH_NODE_RANK: rank,
    RELAUNCH_NUM_NODES: numNodes,
    RELAUNCH_NODE_IPS: ips,
    SKYPILOT_TASK_ID: `${node.jobId}-${node.attempt}`,
    SKYPILOT_NODE_RANK: rank,
    SKYPILOT_NUM_NODES: numNodes,
    SKYPILOT_NODE_IPS: ips,
    SKYPILOT_NUM_GPUS_PER_NODE: String(gpusPerNode(spec)),
  };
}
