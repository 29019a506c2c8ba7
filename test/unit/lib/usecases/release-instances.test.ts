// ReleaseInstances notes when the attempt's released instances were gone: once, after the
// release resolves, and never for the nodes a decision keeps for the next attempt.

import { describe, expect, it, vi } from 'vitest';
import { evaluatePolicy } from '../../../../lib/usecases/evaluate-policy.ts';
import { releaseInstances } from '../../../../lib/usecases/release-instances.ts';
import type { WorkflowState } from '../../../../lib/workflow/contract.ts';
import { givenLaunched, harness, JOB_ID, report, taskSpec, type Harness } from '../../../support/usecases-harness.ts';

/** A release that takes `seconds` on the fake clock before it resolves (EC2's checks, a process's end). */
function slowRelease(h: Harness, seconds: number): void {
  const release = h.compute.release.bind(h.compute);
  vi.spyOn(h.compute, 'release').mockImplementation(async (...args: Parameters<typeof release>) => {
    h.clock.advance(seconds);
    return release(...args);
  });
}

async function decided(h: Harness, state: WorkflowState): Promise<WorkflowState> {
  return evaluatePolicy(state, h.deps);
}

describe('ReleaseInstances notes the instances gone', () => {
  it('notes the time the release resolved, after the stop asked, in one write', async () => {
    const h = harness();
    const state = await givenLaunched(h, taskSpec({ numNodes: 2 }));
    for (const rank of [0, 1]) await report(h, 1, 'setup', 0, rank);
    for (const rank of [0, 1]) await report(h, 1, 'run', 0, rank);
    const next = await decided(h, state);
    slowRelease(h, 40);
    const asked = h.clock.now().toISOString();
    const notes = vi.spyOn(h.store, 'noteInstancesGone');

    await releaseInstances(next, h.deps);

    const attempt = await h.store.getAttempt(JOB_ID, 1);
    expect(attempt.stopAskedAt).toBe(asked);
    expect(attempt.instancesGoneAt).toBe(h.clock.now().toISOString());
    expect(Date.parse(attempt.instancesGoneAt ?? '') - Date.parse(asked)).toBe(40_000);
    expect(notes).toHaveBeenCalledTimes(1);
  });

  it('a retried release notes nothing new', async () => {
    const h = harness();
    const state = await givenLaunched(h, taskSpec());
    await report(h, 1, 'setup', 0);
    await report(h, 1, 'run', 0);
    const next = await decided(h, state);
    await releaseInstances(next, h.deps);
    const first = (await h.store.getAttempt(JOB_ID, 1)).instancesGoneAt;
    const notes = vi.spyOn(h.store, 'noteInstancesGone');
    h.clock.advance(90);

    await releaseInstances(next, h.deps);

    expect(first).toBeDefined();
    expect((await h.store.getAttempt(JOB_ID, 1)).instancesGoneAt).toBe(first);
    expect(notes).not.toHaveBeenCalled();
  });

  it('notes nothing when the decision keeps every node for the next attempt (their gone time is a later attempt\'s)', async () => {
    const h = harness();
    const state = await givenLaunched(h, taskSpec({ recovery: { reuseNodes: { reuse: true, setup: 'skip' }, recoverOnExitCodes: [29] } }));
    await report(h, 1, 'setup', 0);
    await report(h, 1, 'run', 29);
    const next = await decided(h, state);
    expect((await h.store.getAttempt(JOB_ID, 1)).decision?.keep?.nodes).toHaveLength(1);
    const notes = vi.spyOn(h.store, 'noteInstancesGone');

    await releaseInstances(next, h.deps);

    expect((await h.store.getAttempt(JOB_ID, 1)).instancesGoneAt).toBeUndefined();
    expect(notes).not.toHaveBeenCalled();
  });

  it('notes nothing for an attempt with no instance recorded', async () => {
    const h = harness();
    const state = await givenLaunched(h, taskSpec());
    const notes = vi.spyOn(h.store, 'noteInstancesGone');
    // The attempt's instances recorded as none (a launch that failed before any started).
    const attempt = await h.store.getAttempt(JOB_ID, 1);
    vi.spyOn(h.store, 'getAttempt').mockResolvedValue({ ...attempt, instances: [] });

    await releaseInstances(state, h.deps);

    expect(notes).not.toHaveBeenCalled();
  });
});
