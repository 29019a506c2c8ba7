// The janitor, every 10 minutes: events whose delivery gave up are applied again,
// instances relaunch tagged whose attempt is over (or whose job it does not know) are
// terminated, jobs whose start Step Functions throttled are started, and launch templates
// a launch left behind are deleted. Each thing it does
// is logged with its job.

import { replayDeadLetters } from '../../lib/usecases/replay-dead-letters.ts';
import { startQueuedJobs, type QueuedStartResult } from '../../lib/usecases/start-queued.ts';
import { sweepInstances, type SweepResult } from '../../lib/usecases/sweep-instances.ts';
import { sweepLaunchTemplates, type TemplateSweepResult } from '../../lib/usecases/sweep-launch-templates.ts';
import type { ReplayedLetter } from '../../lib/usecases/replay-dead-letters.ts';
import { clock, deadLetters, inventory, compute, store, workflow, jobSecrets, launchTemplates } from '../shared/deps.ts';
import { startInvocation, type LambdaContext } from '../shared/log.ts';
import { announceJobEnded } from '../shared/notify.ts';

/** What one run did: the letters replayed, then the sweeps. */
export interface JanitorResult {
  readonly replayed: readonly ReplayedLetter[];
  readonly sweep: SweepResult;
  readonly queued: QueuedStartResult;
  readonly templates: TemplateSweepResult;
}

/** Invoked by a schedule: its event says nothing the janitor needs, so it is not read. */
export async function handler(_event: unknown, context?: LambdaContext): Promise<JanitorResult> {
  const log = startInvocation(context);
  const deps = { store: store(), workflow: workflow(), compute: compute(), secrets: jobSecrets(), clock };
  const replayed = await replayDeadLetters(deadLetters(), deps);
  for (const letter of replayed) {
    const line = { queue: letter.queue, action: 'REPLAY', outcome: letter.outcome, reason: letter.detail };
    if (letter.outcome === 'applied') log.info('dead letter replayed', line);
    else log.warn('dead letter not replayed', line);
    if (letter.ended !== undefined) await announceJobEnded(letter.ended);
  }
  const sweep = await sweepInstances({ ...deps, inventory: inventory() });
  for (const swept of sweep.released) {
    log.warn('instances swept', { jobId: swept.jobId, attempt: swept.attempt, instanceIds: swept.instanceIds, action: 'SWEEP', reason: swept.reason });
  }
  for (const failed of sweep.failed) {
    log.error('instances not swept', { jobId: failed.jobId, attempt: failed.attempt, instanceIds: failed.instanceIds, reason: failed.reason, error: failed.error });
  }
  const queued = await startQueuedJobs(deps);
  for (const jobId of queued.started) log.info('queued job started', { jobId, action: 'START' });
  for (const ended of queued.cancelled) {
    log.info('queued job cancelled', { jobId: ended.jobId, action: 'CANCEL' });
    await announceJobEnded(ended);
  }
  for (const failed of queued.failed) {
    log.error('queued job could not start', { jobId: failed.jobId, reason: failed.reason, error: failed.error });
    await announceJobEnded(failed);
  }
  const templates = await sweepLaunchTemplates({ templates: launchTemplates(), clock });
  for (const template of templates.deleted) {
    log.warn('launch template swept', { jobId: template.jobId, templateId: template.templateId, region: template.region, action: 'SWEEP' });
  }
  for (const failed of templates.failed) {
    log.error('launch template not swept', { jobId: failed.jobId, templateId: failed.templateId, region: failed.region, error: failed.error });
  }
  log.info('janitor run', {
    replayed: replayed.length,
    checked: sweep.checked,
    released: sweep.released.length,
    failed: sweep.failed.length,
    kept: sweep.kept,
    deferred: sweep.deferred,
    queuedStarted: queued.started.length,
    stillQueued: queued.stillQueued.length,
    templatesChecked: templates.checked,
    templatesDeleted: templates.deleted.length,
  });
  return { replayed, sweep, queued, templates };
}
