// What a valid task may still get wrong: allowed, but shown to the user at submit time.

import type { TaskSpec } from './types.ts';
import type { Problem } from '../located-yaml/messages.ts';
import { isMapping } from '../located-yaml/fields.ts';
import { mountWarnings } from './mounts.ts';
import { otherCloudOf } from './cloud-region-zone.ts';
import { reuseChoice } from '../reuse-rules.ts';

/** SIGKILL's exit code: the kernel's out-of-memory killer is its usual sender. */
const SIGKILL_EXIT = 137;

/** Which warnings to give. */
export interface WarningOptions {
  /**
   * Also the warnings of a review (`relaunch validate`), beyond likely mistakes: a
   * recover_on_exit_codes that can relaunch without a cap and without a pause. Submitting
   * stays quiet about it, as SkyPilot's own example (`recover_on_exit_codes: [29]`) has it.
   */
  readonly review?: boolean;
}

/**
 * Warnings for a valid task: the legacy `spot_recovery` name; `strategy: none` beside other
 * keys (SkyPilot drops the whole mapping then); exit codes 137 and 0 in
 * recover_on_exit_codes (137 with what bound to add when nothing caps it); with `review`,
 * other codes that nothing caps or paces; an on-demand fallback or launch_on_warning on a
 * task that never uses spot; bad_node_exit_codes on a task whose relaunches never keep a
 * node; `any_of`/`ordered` entries for another cloud, left out; and a task with nothing to run.
 */
export function specWarnings(task: Readonly<Record<string, unknown>>, spec: TaskSpec, options: WarningOptions = {}): Problem[] {
  const warnings: Problem[] = [];
  const resources = isMapping(task.resources) ? task.resources : {};
  const policyKey = resources.spot_recovery != null ? 'spot_recovery' : 'job_recovery';
  if (policyKey === 'spot_recovery') {
    warnings.push({
      path: ['resources', 'spot_recovery'],
      message:
        'a legacy name: SkyPilot renamed it job_recovery and removed spot_recovery in February 2025; relaunch still reads it as job_recovery',
    });
  }
  const given = resources[policyKey];
  const others = isMapping(given) ? Object.keys(given).filter((key) => key !== 'strategy') : [];
  if (isMapping(given) && given.strategy === 'none' && others.length > 0) {
    warnings.push({
      path: ['resources', policyKey, 'strategy'],
      message:
        `none beside other keys (${others.join(', ')}): relaunch applies those with the default strategy, ` +
        'but SkyPilot ignores the whole job_recovery mapping when strategy is none; leave strategy out to mean the same in both',
    });
  }
  const policy = spec.resources.jobRecovery;
  const codes = ['resources', policyKey, 'recover_on_exit_codes'];
  const cap = policy.maxRestartsOnExitCodes;
  if (policy.recoverOnExitCodes.includes(SIGKILL_EXIT)) {
    const pause = policy.restartBackoff === null ? ', each time at once' : '';
    const remedy = policy.restartBackoff === null ? ' (or restart_backoff to pause between restarts)' : '';
    warnings.push({
      path: codes,
      message:
        cap === null
          ? `137 is SIGKILL, usually out of memory: a job killed that way every time restarts forever${pause}; add max_restarts_on_exit_codes to cap it${remedy}`
          : `137 is SIGKILL, usually out of memory: a job killed that way every time restarts ${cap} times before it fails`,
    });
  }
  if (policy.recoverOnExitCodes.includes(0)) {
    warnings.push({
      path: codes,
      message:
        spec.numNodes === 1
          ? '0 is success: a single node that exits 0 succeeds, so 0 here changes nothing'
          : "0 is success: relaunch matches every node's code, so when one node has exited 0 and another fails, the attempt restarts by this list, uncharged, instead of counting as a failure; when every node exits 0 the job still succeeds",
    });
  }
  const unbounded = policy.recoverOnExitCodes.length > 0 && cap === null && policy.restartBackoff === null;
  if (options.review === true && unbounded && !policy.recoverOnExitCodes.includes(SIGKILL_EXIT)) {
    warnings.push({
      path: codes,
      message:
        'no cap and no pause: a listed code that comes back on every attempt relaunches the job forever, each time at once; ' +
        'add max_restarts_on_exit_codes (a cap, past which the code is an ordinary failure) or restart_backoff (a wait between relaunches)',
    });
  }
  if (policy.onDemandFallbackAfter !== null && !spec.resources.useSpot) {
    warnings.push({
      path: ['resources', policyKey, 'on_demand_fallback_after'],
      message: 'has no effect: the task does not use spot (use_spot is not true)',
    });
  }
  if (policy.launchOnWarning !== undefined && policy.launchOnWarning !== false && !spec.resources.useSpot) {
    warnings.push({
      path: ['resources', policyKey, 'launch_on_warning'],
      message: 'has no effect: the task does not use spot (use_spot is not true), and EC2 warns only of spot instances',
    });
  }
  if ((policy.badNodeExitCodes ?? []).length > 0 && !reuseChoice(policy).reuse) {
    warnings.push({
      path: ['resources', policyKey, 'bad_node_exit_codes'],
      message:
        policy.reuseNodes?.reuse === false
          ? 'has no effect: reuse_nodes is false, so every relaunch runs on fresh nodes and no node is kept to be told apart'
          : `has no effect: under the ${policy.strategy} strategy every relaunch runs on fresh nodes; set reuse_nodes: true (or strategy: FAILOVER) to keep the healthy ones and replace only a bad one`,
    });
  }
  warnings.push(...mountWarnings(task, spec.fileMounts ?? []));
  for (const key of ['any_of', 'ordered']) {
    const entries = resources[key];
    if (!Array.isArray(entries)) continue;
    entries.forEach((entry, index) => {
      const cloud = otherCloudOf(entry);
      if (cloud === null) return;
      warnings.push({ path: ['resources', key, index], message: `left out: it is for ${cloud}, and relaunch runs on AWS only (the AWS entries remain)` });
    });
  }
  if (spec.setup === null && spec.run === null) {
    warnings.push({ path: [], message: 'neither setup nor run is given: the job does nothing and succeeds' });
  }
  return warnings;
}
