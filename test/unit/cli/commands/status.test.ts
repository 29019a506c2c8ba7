// What `relaunch status` says of a standby (launch_on_warning) and of the gap before a run,
// from records the use cases wrote.

import { describe, expect, it } from 'vitest';
import { attemptDuration, reusedNodes, standbys } from '../../../../cli/commands/status.ts';
import { StateName } from '../../../../lib/workflow/contract.ts';
import { awaitAttempt } from '../../../../lib/usecases/await-attempt.ts';
import { evaluatePolicy } from '../../../../lib/usecases/evaluate-policy.ts';
import { heartbeat } from '../../../../lib/usecases/heartbeat.ts';
import { onInstanceEvent } from '../../../../lib/usecases/instance-event.ts';
import { launchAttempt } from '../../../../lib/usecases/launch-attempt.ts';
import { getJob } from '../../../../lib/usecases/queries.ts';
import { releaseInstances } from '../../../../lib/usecases/release-instances.ts';
import { holdOrRun, launchStandby } from '../../../../lib/usecases/standby-attempt.ts';
import { fakeInstanceId } from '../../../support/fakes/fake-compute.ts';
import { givenLaunched, harness, JOB_ID, report, taskSpec, type Harness } from '../../../support/usecases-harness.ts';

const agent = (h: Harness, attempt: number) => ({ jobId: JOB_ID, attempt, nodeRank: 0, secret: h.compute.secretFor(JOB_ID, attempt) });
const event = (h: Harness, attempt: number, kind: 'SPOT_INTERRUPTION_WARNING' | 'STATE_CHANGE') =>
  onInstanceEvent({ instanceId: fakeInstanceId(JOB_ID, attempt, 0), kind, ...(kind === 'STATE_CHANGE' ? { state: 'terminated' } : {}), time: h.clock.now().toISOString() }, h.deps);
const decide = async (h: Harness, attempt: number) => releaseInstances(await evaluatePolicy({ jobId: JOB_ID, attempt, attemptsInExecution: attempt }, h.deps), h.deps);

/** Attempt 1 warned, its standby (attempt 2) set up and holding; attempt 1's instance then goes. */
async function warnedWithStandby(h: Harness): Promise<void> {
  await givenLaunched(h, taskSpec({ recovery: { launchOnWarning: true } }));
  await heartbeat(agent(h, 1), h.deps);
  await awaitAttempt({ jobId: JOB_ID, attempt: 1, taskToken: 'await-1', state: StateName.AwaitAttempt }, h.deps);
  await event(h, 1, 'SPOT_INTERRUPTION_WARNING');
  await launchStandby({ jobId: JOB_ID, standbyFor: 1 }, h.deps);
  await report(h, 2, 'setup', 0);
}

describe('status of a standby', () => {
  it('does not say "run not started yet" of a standby taken and then lost before its run: its run never started', async () => {
    const h = harness();
    await warnedWithStandby(h);
    await event(h, 1, 'STATE_CHANGE');
    await launchAttempt(await decide(h, 1), h.deps);
    h.clock.advance(1);
    await event(h, 2, 'STATE_CHANGE');
    const lines = standbys((await getJob(JOB_ID, h.deps)).attempts);
    expect(lines.join('\n')).not.toContain('run not started yet');
    expect(lines.at(-1)).toMatch(/taken as the next attempt at [^;]+; its run never started \(it ended LOST\)$/);
  });

  it('measures the gap after a standby lost while it held from the end of the attempt before it, not the standby\'s', async () => {
    const h = harness();
    await warnedWithStandby(h);
    h.clock.advance(2);
    await event(h, 2, 'STATE_CHANGE');
    h.clock.advance(3);
    await event(h, 1, 'STATE_CHANGE');
    const next = await launchAttempt(await decide(h, 1), h.deps);
    h.clock.advance(4);
    await report(h, next.attempt, 'setup', 0);
    const view = await getJob(JOB_ID, h.deps);
    const fresh = view.attempts.find((attempt) => attempt.attempt === next.attempt);
    // Attempt 1 ended 4 s before the fresh attempt's run started; the lost standby 7 s before.
    expect(fresh?.gapSeconds).toBe(4);
    expect(await holdOrRun(agent(h, 2), h.deps)).toMatchObject({ run: 'stop' });
  });
});

describe("an attempt's DURATION", () => {
  it('gives tenths under a minute, and minutes and whole seconds beyond, never 60 seconds', () => {
    const from = '2026-12-06T18:00:00.000Z';
    const after = (seconds: number) => ({ startedAt: from, endedAt: new Date(Date.parse(from) + seconds * 1000).toISOString() });
    expect(attemptDuration(after(1.44))).toBe('1.4s');
    expect(attemptDuration(after(119.6))).toBe('1m 59s');
    expect(attemptDuration(after(3725))).toBe('1h 02m');
  });
});

describe('status of the nodes a relaunch reused', () => {
  it('names, per node, the attempt it was reused from or that it is new; nothing for attempts on fresh nodes', async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2, recovery: { reuseNodes: { reuse: true, setup: 'skip' } } }));
    await report(h, 1, 'setup', 0, 0);
    await report(h, 1, 'setup', 0, 1);
    await onInstanceEvent({ instanceId: fakeInstanceId(JOB_ID, 1, 1), kind: 'STATE_CHANGE', state: 'terminated', time: h.clock.now().toISOString() }, h.deps);
    await launchAttempt(await decide(h, 1), h.deps);

    expect(reusedNodes((await getJob(JOB_ID, h.deps)).attempts)).toEqual(['', 'attempt 2: node 0 reused from attempt 1, node 1 new']);
  });
});
