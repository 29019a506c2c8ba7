// What a valid task may still get wrong: allowed, but shown to the user at submit time.

import type { TaskSpec } from './types.ts';
import type { Problem } from './messages.ts';
import { isMapping } from './fields.ts';

/** SIGKILL's exit code: the kernel's out-of-memory killer is its usual sender. */
const SIGKILL_EXIT = 137;

/**
 * Warnings for a valid task: the deprecated `spot_recovery` name, exit codes 137 and 0 in
 * recover_on_exit_codes, an on-demand fallback on a task that never uses spot, and a task
 * with nothing to run.
 */
export function specWarnings(task: Readonly<Record<string, unknown>>, spec: TaskSpec): Problem[] {
  const warnings: Problem[] = [];
  const resources = isMapping(task.resources) ? task.resources : {};
  const policyKey = resources.spot_recovery != null ? 'spot_recovery' : 'job_recovery';
  if (policyKey === 'spot_recovery') {
    warnings.push({
      path: ['resources', 'spot_recovery'],
      message: 'deprecated: SkyPilot renamed it job_recovery; read as job_recovery',
    });
  }
  const policy = spec.resources.jobRecovery;
  const codes = ['resources', policyKey, 'recover_on_exit_codes'];
  if (policy.recoverOnExitCodes.includes(SIGKILL_EXIT)) {
    const cap = policy.maxRestartsOnExitCodes;
    warnings.push({
      path: codes,
      message:
        cap === null
          ? '137 is SIGKILL, usually out of memory: a job killed that way every time restarts forever (max_restarts_on_exit_codes caps it)'
          : `137 is SIGKILL, usually out of memory: a job killed that way every time restarts ${cap} times before it fails`,
    });
  }
  if (policy.recoverOnExitCodes.includes(0)) {
    warnings.push({
      path: codes,
      message: '0 is success: a multi-node job where one node exits 0 and another fails restarts instead of failing',
    });
  }
  if (policy.onDemandFallbackAfter !== null && !spec.resources.useSpot) {
    warnings.push({
      path: ['resources', policyKey, 'on_demand_fallback_after'],
      message: 'has no effect: the task does not use spot (use_spot is not true)',
    });
  }
  if (spec.setup === null && spec.run === null) {
    warnings.push({ path: [], message: 'neither setup nor run is given: the job does nothing and succeeds' });
  }
  return warnings;
}
