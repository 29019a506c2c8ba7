// reportPhase: every exit code stored once, stale and forged reports refused, the task resumed once.

import { describe, expect, it } from 'vitest';
import { InvalidInputError, StaleAttemptError, UnauthorizedError } from '../../../../lib/errors.ts';
import { getJob } from '../../../../lib/usecases/queries.ts';
import { evaluatePolicy } from '../../../../lib/usecases/evaluate-policy.ts';
import { reportPhase, reportStoppedPhase } from '../../../../lib/usecases/report-phase.ts';
import type { StopCause } from '../../../../lib/agent/protocol.ts';
import type { Phase } from '../../../../lib/policy/types.ts';
import { givenLaunched, givenReplacedAttempt, harness, JOB_ID, report, taskSpec, tokenFor, type Harness } from '../../../support/usecases-harness.ts';

const PULL_FAILURE = { step: 'image-pull', error: 'could not pull x:1 in 3 tries: toomanyrequests' } as const;

/** Node `nodeRank` reports that its agent failed at the image pull. */
function agentFailed(h: Harness, nodeRank: number, phase: Phase = 'setup'): Promise<{ status: 'accepted' | 'duplicate' }> {
  return reportPhase(
    { jobId: JOB_ID, attempt: 1, nodeRank, phase, agentFailure: PULL_FAILURE, outputTail: 'relaunch: could not pull', secret: h.compute.secretFor(JOB_ID, 1) },
    h.deps,
  );
}

describe('reportPhase', () => {
  it('stores the first report, moves STARTING to RUNNING, and leaves the attempt open after setup 0', async () => {
    const h = harness();
    await givenLaunched(h);

    expect(await report(h, 1, 'setup', 0)).toEqual({ status: 'accepted', run: 'go', reason: `attempt 1 of job ${JOB_ID} is the live attempt` });

    const attempt = await h.store.getAttempt(JOB_ID, 1);
    expect(attempt.reports).toEqual([
      { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: 'setup ended with 0', reportedAt: h.clock.now().toISOString() },
    ]);
    expect(attempt.outcome).toBeNull();
    expect((await h.store.getJob(JOB_ID)).status).toBe('RUNNING');
    expect(h.workflow.closings).toEqual([]);
  });

  it("stores how long setup itself ran with the setup report, and a repeat with it is a duplicate; a report without it (an older agent) is stored without", async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2 }));
    const credentials = { jobId: JOB_ID, attempt: 1, phase: 'setup', exitCode: 0, outputTail: '', secret: h.compute.secretFor(JOB_ID, 1) } as const;

    await reportPhase({ ...credentials, nodeRank: 0, setupMs: 41_250 }, h.deps);
    expect(await reportPhase({ ...credentials, nodeRank: 0, setupMs: 41_250 }, h.deps)).toMatchObject({ status: 'duplicate' });
    await reportPhase({ ...credentials, nodeRank: 1 }, h.deps);

    const attempt = await h.store.getAttempt(JOB_ID, 1);
    const at = h.clock.now().toISOString();
    expect(attempt.reports).toEqual([
      { nodeRank: 0, phase: 'setup', exitCode: 0, setupMs: 41_250, outputTail: '', reportedAt: at },
      { nodeRank: 1, phase: 'setup', exitCode: 0, outputTail: '', reportedAt: at },
    ]);
  });

  it('ends the attempt on the deciding report and resumes the waiting task with the outcome', async () => {
    const h = harness();
    await givenLaunched(h);
    await report(h, 1, 'setup', 0);

    await report(h, 1, 'run', 29);

    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 29 }] });
    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'EXITED' } }]);
  });

  it('acknowledges an exact duplicate, even after the attempt ended, and changes nothing', async () => {
    const h = harness();
    await givenLaunched(h);
    await report(h, 1, 'run', 0);
    const before = await h.store.getAttempt(JOB_ID, 1);
    h.clock.advance(5);

    expect(await report(h, 1, 'run', 0)).toEqual({ status: 'duplicate' });

    expect(await h.store.getAttempt(JOB_ID, 1)).toEqual(before);
    expect(h.workflow.closings).toHaveLength(1);
  });

  it('answers twin reports sent at once as one accepted and one duplicate, and ends the attempt once', async () => {
    const h = harness();
    await givenLaunched(h);

    const answers = await Promise.all([report(h, 1, 'run', 0), report(h, 1, 'run', 0)]);

    expect(answers.map((a) => a.status).sort()).toEqual(['accepted', 'duplicate']);
    expect((await h.store.getAttempt(JOB_ID, 1)).reports).toHaveLength(1);
    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'EXITED' } }]);
  });

  it('refuses the second of two different codes for one node and phase sent at once', async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2 }));

    const [first, second] = await Promise.allSettled([report(h, 1, 'setup', 0, 1), report(h, 1, 'setup', 1, 1)]);

    expect(first.status).toBe('fulfilled');
    expect(second).toMatchObject({ status: 'rejected', reason: { message: expect.stringContaining('node 1 already reported setup exit code 0; got 1') } });
  });

  it('refuses a different code for a node and phase already reported', async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2 }));
    await report(h, 1, 'setup', 0, 1);
    await expect(report(h, 1, 'setup', 1, 1)).rejects.toThrow(InvalidInputError);
    await expect(report(h, 1, 'setup', 1, 1)).rejects.toThrow('node 1 already reported setup exit code 0; got 1');
  });

  it("stores a node's agent failure in setup's place, ends the attempt AGENT_FAILED at once, and resumes the task with it", async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2 }));

    expect(await agentFailed(h, 1)).toEqual({ status: 'accepted' });

    const attempt = await h.store.getAttempt(JOB_ID, 1);
    expect(attempt.reports).toEqual([
      { nodeRank: 1, phase: 'setup', agentFailure: PULL_FAILURE, outputTail: 'relaunch: could not pull', reportedAt: h.clock.now().toISOString() },
    ]);
    expect(attempt.outcome).toEqual({ kind: 'AGENT_FAILED', nodeRank: 1, ...PULL_FAILURE });
    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'AGENT_FAILED' } }]);
    expect((await getJob(JOB_ID, h.deps)).attempts[0]).toMatchObject({ outcome: 'AGENT_FAILED', agentFailure: { nodeRank: 1, ...PULL_FAILURE } });
  });

  it("acknowledges a repeat of an agent's failure as a duplicate; a setup code after it is stale, and an agent failure for run is refused", async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2 }));
    await agentFailed(h, 1);

    expect(await agentFailed(h, 1)).toEqual({ status: 'duplicate' });
    await expect(report(h, 1, 'setup', 0, 1)).rejects.toThrow(StaleAttemptError);
    await expect(agentFailed(h, 0, 'run')).rejects.toThrow("expected setup with agentFailure (the agent's steps come before it), got run");
  });

  it('refuses a new report for an attempt that already ended', async () => {
    const h = harness();
    await givenLaunched(h);
    await h.store.endAttempt(JOB_ID, 1, { kind: 'PREEMPTED' }, h.clock.now().toISOString());
    await expect(report(h, 1, 'run', 0)).rejects.toThrow(StaleAttemptError);
    expect((await h.store.getAttempt(JOB_ID, 1)).reports).toEqual([]);
  });

  it('refuses a late report from an earlier attempt: it changes nothing', async () => {
    const h = harness();
    await givenLaunched(h);
    await givenReplacedAttempt(h);

    await expect(report(h, 1, 'run', 0)).rejects.toThrow(/attempt 1 of job .* (is stale|has already ended)/);
    expect((await h.store.getAttempt(JOB_ID, 1)).reports).toEqual([]);
    expect((await h.store.getAttempt(JOB_ID, 2)).reports).toEqual([]);
  });

  it('refuses a report whose secret is wrong, or another attempt\'s', async () => {
    const h = harness();
    await givenLaunched(h);
    const base = { jobId: JOB_ID, attempt: 1, nodeRank: 0, phase: 'run' as const, exitCode: 0, outputTail: '' };
    await expect(reportPhase({ ...base, secret: 'guess' }, h.deps)).rejects.toThrow(UnauthorizedError);
    await expect(reportPhase({ ...base, attempt: 2, secret: h.compute.secretFor(JOB_ID, 1) }, h.deps)).rejects.toThrow(UnauthorizedError);
    expect((await h.store.getAttempt(JOB_ID, 1)).reports).toEqual([]);
    expect((await h.store.getJob(JOB_ID)).status).toBe('STARTING');
  });

  it('refuses a node rank the job does not have', async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2 }));
    await expect(report(h, 1, 'run', 0, 2)).rejects.toThrow('nodeRank: expected an integer 0-1, got 2');
    await expect(report(h, 1, 'run', 0, -1)).rejects.toThrow(InvalidInputError);
  });

  it('multi-node: partial reports leave the attempt open; the last node decides it', async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 3 }));
    for (const rank of [0, 1, 2]) await report(h, 1, 'setup', 0, rank);
    await report(h, 1, 'run', 0, 2);
    await report(h, 1, 'run', 0, 0);
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toBeNull();
    expect(h.workflow.closings).toEqual([]);

    await report(h, 1, 'run', 0, 1);

    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({
      kind: 'EXITED',
      phase: 'run',
      nodes: [0, 1, 2].map((rank) => ({ rank, exitCode: 0 })),
    });
    expect(h.workflow.closings).toHaveLength(1);
  });

  it('multi-node: one failing node decides at once; a peer\'s later report is stale', async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2 }));
    await report(h, 1, 'run', 1, 1);
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toMatchObject({
      kind: 'EXITED',
      nodes: [{ rank: 0, exitCode: null, killedByController: true }, { rank: 1, exitCode: 1 }],
    });
    await expect(report(h, 1, 'run', 137, 0)).rejects.toThrow(StaleAttemptError);
  });

  it('one node: a warning then run 0 still succeeds', async () => {
    const h = harness();
    await givenLaunched(h);
    await h.store.noteInterruption(JOB_ID, 1, h.clock.now().toISOString());

    expect(await report(h, 1, 'run', 0)).toEqual({ status: 'accepted' });

    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 0 }] });
    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'EXITED' } }]);
  });

  it('one node: a non-zero report while a warning is on record ends the attempt PREEMPTED at once, its code kept and shown', async () => {
    const h = harness();
    await givenLaunched(h);
    await report(h, 1, 'setup', 0);
    await h.store.noteInterruption(JOB_ID, 1, h.clock.now().toISOString());

    expect(await report(h, 1, 'run', 143)).toEqual({ status: 'accepted' });

    const attempt = await h.store.getAttempt(JOB_ID, 1);
    expect(attempt.outcome).toEqual({ kind: 'PREEMPTED' });
    expect(attempt.reports.map((r) => [r.phase, r.exitCode])).toEqual([['setup', 0], ['run', 143]]);
    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'PREEMPTED' } }]);
    expect((await getJob(JOB_ID, h.deps)).attempts[0]).toMatchObject({ outcome: 'PREEMPTED', phase: 'run', exitCodes: [143] });
  });

  it('one node: a code in fail_on_exit_codes reported inside the warning fails the job, as the docs say; another code stays a preemption', async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ recovery: { failOnExitCodes: [42], maxRestartsOnErrors: 3 } }));
    await report(h, 1, 'setup', 0);
    await h.store.noteInterruption(JOB_ID, 1, h.clock.now().toISOString());
    await report(h, 1, 'run', 42);
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 42 }] });
    const decided = await evaluatePolicy({ jobId: JOB_ID, attempt: 1, attemptsInExecution: 1 }, h.deps);
    expect(decided.decision).toMatchObject({ action: 'FAIL', status: 'FAILED', reason: 'exit code 42 (run) is in fail_on_exit_codes; failing at once, no restart' });

    const other = harness();
    await givenLaunched(other, taskSpec({ recovery: { failOnExitCodes: [42] } }));
    await report(other, 1, 'setup', 0);
    await other.store.noteInterruption(JOB_ID, 1, other.clock.now().toISOString());
    await report(other, 1, 'run', 1);
    expect((await other.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'PREEMPTED' });
  });

  it('multi-node: a non-zero report while a peer\'s warning is on record ends the attempt PREEMPTED; the peer\'s later report is stale', async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2 }));
    await h.store.noteInterruption(JOB_ID, 1, h.clock.now().toISOString());

    await report(h, 1, 'run', 1, 0);

    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'PREEMPTED' });
    await expect(report(h, 1, 'run', 137, 1)).rejects.toThrow(StaleAttemptError);
    expect((await getJob(JOB_ID, h.deps)).attempts[0]).toMatchObject({ outcome: 'PREEMPTED', exitCodes: [1, null] });
  });

  it('ends the attempt when the agent retries a report whose first try was stored but never ended it', async () => {
    const h = harness();
    await givenLaunched(h);
    // The first try stopped (a crashed Lambda, a lost answer) between storing and ending.
    await h.store.addReport(JOB_ID, 1, { nodeRank: 0, phase: 'run', exitCode: 0, outputTail: '', reportedAt: h.clock.now().toISOString() });

    expect(await report(h, 1, 'run', 0)).toEqual({ status: 'duplicate' });

    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({ kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 0 }] });
    expect((await h.store.getJob(JOB_ID)).status).toBe('RUNNING');
    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'EXITED' } }]);
  });

  it('stores the report even when the task was already resumed by someone else', async () => {
    const h = harness();
    await givenLaunched(h);
    await h.workflow.resume(tokenFor(1), { outcome: 'EXITED' });
    expect(await report(h, 1, 'run', 0)).toEqual({ status: 'accepted' });
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome?.kind).toBe('EXITED');
  });

  it('a report from an unknown job is UnauthorizedError, as a wrong secret is: no job id can be probed', async () => {
    const h = harness();
    await expect(
      reportPhase({ jobId: 'j-nope', attempt: 1, nodeRank: 0, phase: 'run', exitCode: 0, outputTail: '', secret: 'x' }, h.deps),
    ).rejects.toThrow(UnauthorizedError);
  });
});

/** Node `nodeRank` reports that its agent stopped `phase` before it exited. */
function stopped(h: Harness, stoppedBy: StopCause, nodeRank = 0, phase: Phase = 'run'): Promise<{ status: 'accepted' | 'duplicate' }> {
  return reportStoppedPhase(
    { jobId: JOB_ID, attempt: 1, nodeRank, phase, stopped: stoppedBy, outputTail: 'step 1\nstep 2\n', secret: h.compute.secretFor(JOB_ID, 1) },
    h.deps,
  );
}

describe('reportStoppedPhase', () => {
  it("keeps a stopped run's last lines, decides nothing, and the preemption that follows shows run with its code unknown", async () => {
    const h = harness();
    await givenLaunched(h);
    await report(h, 1, 'setup', 0);
    await h.store.noteInterruption(JOB_ID, 1, h.clock.now().toISOString());

    expect(await stopped(h, 'interruption')).toEqual({ status: 'accepted' });

    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toBeNull();
    expect(h.workflow.closings).toEqual([]);
    await h.store.endAttempt(JOB_ID, 1, { kind: 'PREEMPTED' }, h.clock.now().toISOString());
    expect((await getJob(JOB_ID, h.deps)).attempts[0]).toMatchObject({
      outcome: 'PREEMPTED',
      phase: 'run',
      exitCodes: [null],
      outputTails: [{ nodeRank: 0, phase: 'run', text: 'step 1\nstep 2' }],
    });
  });

  it('is taken after the attempt ended (a cancel ends it before the node is told to stop), and a repeat is a duplicate', async () => {
    const h = harness();
    await givenLaunched(h);
    await report(h, 1, 'setup', 0);
    await h.store.endAttempt(JOB_ID, 1, { kind: 'CANCELLED' }, h.clock.now().toISOString());

    expect(await stopped(h, 'shutdown')).toEqual({ status: 'accepted' });
    expect(await stopped(h, 'shutdown')).toEqual({ status: 'duplicate' });

    const attempt = await h.store.getAttempt(JOB_ID, 1);
    expect(attempt.outcome).toEqual({ kind: 'CANCELLED' });
    expect(attempt.reports).toHaveLength(2);
    expect(h.workflow.closings).toEqual([]);
  });

  it('never overrides a code: a node that reported run refuses its stop, and a stop leaves the slot to no code', async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2 }));
    await report(h, 1, 'run', 0, 1);

    await expect(stopped(h, 'shutdown', 1)).rejects.toThrow(new InvalidInputError([{ path: 'stopped', message: 'node 1 already reported run exit code 0; got stopped (shutdown)' }]));
    await stopped(h, 'shutdown', 0);
    await expect(report(h, 1, 'run', 0, 0)).rejects.toThrow('node 0 already reported run stopped (shutdown); got exit code 0');
  });

  it('refuses a wrong secret as any callback does', async () => {
    const h = harness();
    await givenLaunched(h);
    await expect(
      reportStoppedPhase({ jobId: JOB_ID, attempt: 1, nodeRank: 0, phase: 'run', stopped: 'shutdown', outputTail: '', secret: 'x' }, h.deps),
    ).rejects.toThrow(UnauthorizedError);
  });
});
