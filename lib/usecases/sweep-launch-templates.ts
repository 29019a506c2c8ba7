// The janitor's sweep of launch templates: a launch deletes the templates it made once its
// fleet requests are answered; one whose Lambda died in between leaves them behind. They
// launch nothing by themselves, but count against the account's template quota.

import type { Clock, LaunchTemplateInventory, TaggedLaunchTemplate } from '../ports.ts';
import { errorMessage } from './deps.ts';
import { SWEEP_GRACE_SECONDS } from './sweep-instances.ts';

/** What one sweep of launch templates did. */
export interface TemplateSweepResult {
  /** Tagged templates found. */
  readonly checked: number;
  readonly deleted: readonly TaggedLaunchTemplate[];
  /** Deletes that failed (the next sweep tries again), with the error. */
  readonly failed: readonly (TaggedLaunchTemplate & { readonly error: string })[];
}

/**
 * Deletes every relaunch-tagged launch template made more than SWEEP_GRACE_SECONDS ago:
 * a launch (at most its Lambda's 5 minutes) is long over by then, so no fleet request
 * still needs it. A template EC2 gives no creation time for is left alone. A failed
 * delete is reported and left to the next sweep.
 */
export async function sweepLaunchTemplates(deps: { readonly templates: LaunchTemplateInventory; readonly clock: Clock }): Promise<TemplateSweepResult> {
  const now = deps.clock.now().getTime();
  const found = await deps.templates.listTagged();
  const deleted: TaggedLaunchTemplate[] = [];
  const failed: (TaggedLaunchTemplate & { error: string })[] = [];
  for (const template of found) {
    if (template.createdAt === null || now - Date.parse(template.createdAt) < SWEEP_GRACE_SECONDS * 1000) continue;
    try {
      await deps.templates.delete(template);
      deleted.push(template);
    } catch (error) {
      failed.push({ ...template, error: errorMessage(error) });
    }
  }
  return { checked: found.length, deleted, failed };
}
