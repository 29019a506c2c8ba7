// toJobView, toJobSummary, and the getJob/listJobs queries that serve them.

import { describe, expect, it } from 'vitest';
import type { AttemptRecord, JobRecord, NodeReport } from '../../../../lib/model.ts';
import type { AttemptOutcome } from '../../../../lib/policy/types.ts';
import { getJob, listJobs } from '../../../../lib/usecases/queries.ts';
import { toJobSummary, toJobView } from '../../../../lib/views.ts';
import { newJobRecord } from '../../../../lib/usecases/submit-job.ts';
import { attemptRecord } from '../../../support/fixtures/records.ts';
import { givenJob, harness, taskSpec } from '../../../support/usecases-harness.ts';

const AT = '2026-03-01T12:00:00.000Z';

/** A job that has used 1 of its 2 restarts on errors. */
const RECOVERY = { maxRestartsOnErrors: 2 };

function job(numNodes = 1): JobRecord {
  return {
    ...newJobRecord('j-1', taskSpec({ numNodes, recovery: RECOVERY }), AT),
    status: 'RUNNING',
    counters: { restartsOnErrors: 1, restartsOnExitCodes: 2, recoveryCount: 3, consecutivePreemptions: 0, market: 'spot' },
    attemptCount: 1,
    executionArn: 'arn:x',
    updatedAt: '2026-03-01T13:00:00.000Z',
  };
}

function attempt(n: number, outcome: AttemptOutcome | null, reports: NodeReport[] = []): AttemptRecord {
  const placement = { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm5.large' };
  return attemptRecord('j-1', n, AT, { placement, secretHash: 'h', reports, outcome });
}

const rep = (nodeRank: number, phase: 'setup' | 'run', exitCode: number): NodeReport => ({ nodeRank, phase, exitCode, outputTail: '', reportedAt: AT });

describe('toJobView', () => {
  it('shows the documented fields plus placement, market, times and failure reason, attempts oldest first', () => {
    const decided: AttemptRecord = {
      ...attempt(1, { kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 29 }] }),
      decision: {
        action: 'RESTART',
        rule: 'RECOVER_ON_EXIT_CODE',
        status: 'RECOVERING',
        reason: 'exit code 29 is listed',
        delaySeconds: 0,
        decidedAt: AT,
        counters: { restartsOnErrors: 0, restartsOnExitCodes: 1, recoveryCount: 1, consecutivePreemptions: 0, market: 'spot', capacityWaits: 0 },
      },
      reports: [{ nodeRank: 0, phase: 'run', exitCode: 29, outputTail: 'epoch 1\nepoch 2\n', reportedAt: AT }],
    };
    const view = toJobView(job(), [attempt(2, null), decided]);
    expect(view).toEqual({
      jobId: 'j-1',
      name: 'train',
      status: 'RUNNING',
      recoveryCount: 3,
      restartsOnErrors: 1,
      failureReason: null,
      recoveryPolicy: taskSpec({ recovery: RECOVERY }).resources.jobRecovery,
      numNodes: 1,
      createdAt: AT,
      updatedAt: '2026-03-01T13:00:00.000Z',
      attempts: [
        {
          attempt: 1,
          outcome: 'EXITED',
          phase: 'run',
          exitCodes: [29],
          decision: 'RESTART',
          reason: 'exit code 29 is listed',
          rule: 'RECOVER_ON_EXIT_CODE',
          delaySeconds: 0,
          countersAfter: { restartsOnErrors: 0, restartsOnExitCodes: 1, recoveryCount: 1, market: 'spot' },
          outputTails: [{ nodeRank: 0, phase: 'run', text: 'epoch 1\nepoch 2' }],
          agentFailure: null,
          market: 'spot',
          placement: { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm5.large' },
          startedAt: AT,
          endedAt: null,
          decidedAt: AT,
          runStartedAt: null,
          gapSeconds: null,
          standby: null,
          instances: [],
        },
        {
          attempt: 2,
          outcome: null,
          phase: null,
          exitCodes: [],
          decision: null,
          reason: null,
          rule: null,
          delaySeconds: null,
          countersAfter: null,
          outputTails: [],
          agentFailure: null,
          market: 'spot',
          placement: expect.anything(),
          startedAt: AT,
          endedAt: null,
          decidedAt: null,
          runStartedAt: null,
          gapSeconds: null,
          standby: null,
          instances: [],
        },
      ],
      // Where the time and money went: lib/accounting's tests hold its figures.
      account: expect.objectContaining({ ended: false, recoveries: 3 }),
    });
  });

  it("shows each node's instance in rank order, for relaunch ssh", () => {
    const placed: AttemptRecord = {
      ...attempt(1, null),
      instances: [
        { instanceId: 'i-0bbbbbbbbbbbbbbbb', nodeRank: 1, privateIp: '10.0.0.2' },
        { instanceId: 'i-0aaaaaaaaaaaaaaaa', nodeRank: 0, privateIp: '10.0.0.1' },
      ],
    };
    expect(toJobView(job(), [placed]).attempts[0]?.instances).toEqual([
      { nodeRank: 0, instanceId: 'i-0aaaaaaaaaaaaaaaa', reusedFrom: null },
      { nodeRank: 1, instanceId: 'i-0bbbbbbbbbbbbbbbb', reusedFrom: null },
    ]);
  });

  it('names, per node, the attempt a reused node served before, and null for a new one', () => {
    const relaunched: AttemptRecord = {
      ...attempt(2, null),
      instances: [
        { instanceId: 'i-0aaaaaaaaaaaaaaaa', nodeRank: 0, privateIp: '10.0.0.1', reusedFrom: 1 },
        { instanceId: 'i-0cccccccccccccccc', nodeRank: 1, privateIp: '10.0.0.3' },
      ],
    };
    expect(toJobView(job(), [relaunched]).attempts[0]?.instances).toEqual([
      { nodeRank: 0, instanceId: 'i-0aaaaaaaaaaaaaaaa', reusedFrom: 1 },
      { nodeRank: 1, instanceId: 'i-0cccccccccccccccc', reusedFrom: null },
    ]);
  });

  it('counts restarts on errors used, never more than allowed: the failure that ended the job is charged but not a restart', () => {
    const failed: JobRecord = {
      ...newJobRecord('j-1', taskSpec({ recovery: { maxRestartsOnErrors: 1 } }), AT),
      status: 'FAILED',
      counters: { restartsOnErrors: 2, restartsOnExitCodes: 0, recoveryCount: 1, consecutivePreemptions: 0, market: 'spot' },
      attemptCount: 2,
    };
    const last: AttemptRecord = {
      ...attempt(2, { kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 1 }] }),
      decision: {
        action: 'FAIL',
        rule: 'ERROR_BUDGET_EXHAUSTED',
        status: 'FAILED',
        reason: 'exit code 1 (run); max_restarts_on_errors (1) used up',
        delaySeconds: 0,
        decidedAt: AT,
        counters: { restartsOnErrors: 2, restartsOnExitCodes: 0, recoveryCount: 1, consecutivePreemptions: 0, market: 'spot', capacityWaits: 0 },
      },
    };

    const view = toJobView(failed, [last]);

    expect(view).toMatchObject({ restartsOnErrors: 1, recoveryCount: 1, recoveryPolicy: { maxRestartsOnErrors: 1 } });
    expect(view.attempts[0]?.countersAfter?.restartsOnErrors).toBe(1);
    expect(toJobSummary(failed)).toMatchObject({ restartsOnErrors: 1, maxRestartsOnErrors: 1 });
  });

  it('shows a standby in each of its states, and the gap before each run', () => {
    const T = (seconds: number): string => new Date(Date.parse(AT) + seconds * 1000).toISOString();
    const setup = (at: string) => [{ nodeRank: 0, phase: 'setup' as const, exitCode: 0, outputTail: '', reportedAt: at }];
    const warned: AttemptRecord = { ...attempt(1, { kind: 'PREEMPTED' }), endedAt: T(30), reports: setup(T(1)) };
    const adopted: AttemptRecord = { ...attempt(2, null), reports: setup(T(20)), standby: { for: 1, on: 'interruption', adoptedAt: T(30.1) }, runStartedAt: T(30.4) };
    const released: AttemptRecord = { ...attempt(3, null), endedAt: T(50), standby: { for: 2, on: 'rebalance', releasedAt: T(50), releaseReason: 'not needed: attempt 2 was decided SUCCEED' } };
    const holding: AttemptRecord = { ...attempt(3, null), standby: { for: 2, on: 'rebalance' } };
    const [first, second, third] = toJobView(job(), [warned, adopted, released]).attempts;
    expect(first).toMatchObject({ runStartedAt: T(1), gapSeconds: null, standby: null });
    expect(second).toMatchObject({
      runStartedAt: T(30.4),
      gapSeconds: 0.4,
      standby: { for: 1, on: 'interruption', state: 'adopted', adoptedAt: T(30.1), releasedAt: null, releaseReason: null },
    });
    expect(third).toMatchObject({ gapSeconds: null, standby: { for: 2, on: 'rebalance', state: 'released', releasedAt: T(50), releaseReason: 'not needed: attempt 2 was decided SUCCEED' } });
    expect(toJobView(job(), [warned, adopted, holding]).attempts[2]?.standby).toMatchObject({ state: 'holding', adoptedAt: null, releasedAt: null });
  });

  it('shows the market the instances run on when a task with candidates on both markets launched on-demand', () => {
    const onDemand: AttemptRecord = { ...attempt(1, null), placement: { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'g5.xlarge', market: 'on-demand', entry: 1 } };
    expect(toJobView(job(), [onDemand]).attempts[0]).toMatchObject({ market: 'on-demand', placement: { market: 'on-demand', entry: 1 } });
  });

  it.each<{ name: string; numNodes: number; outcome: AttemptOutcome | null; reports: NodeReport[]; phase: string | null; exitCodes: (number | null)[] }>([
    {
      name: 'an exited multi-node attempt: one code per node in rank order, null for a killed node',
      numNodes: 3,
      outcome: {
        kind: 'EXITED',
        phase: 'run',
        nodes: [
          { rank: 2, exitCode: 0 },
          { rank: 0, exitCode: null, killedByController: true },
          { rank: 1, exitCode: 1 },
        ],
      },
      reports: [],
      phase: 'run',
      exitCodes: [null, 1, 0],
    },
    { name: 'a preempted attempt with no report: no codes', numNodes: 1, outcome: { kind: 'PREEMPTED' }, reports: [], phase: null, exitCodes: [] },
    {
      name: 'a preempted attempt whose setup had finished: in run, its codes unknown (never setup 0)',
      numNodes: 2,
      outcome: { kind: 'PREEMPTED' },
      reports: [rep(1, 'setup', 0), rep(0, 'setup', 0)],
      phase: 'run',
      exitCodes: [null, null],
    },
    {
      name: 'a preempted attempt still in setup: setup, a node without its code unknown',
      numNodes: 2,
      outcome: { kind: 'PREEMPTED' },
      reports: [rep(1, 'setup', 3)],
      phase: 'setup',
      exitCodes: [null, 3],
    },
    {
      name: 'a lost attempt whose node 1 finished run: in run, node 0 unknown',
      numNodes: 2,
      outcome: { kind: 'LOST', reason: 'instance i-0 was terminated' },
      reports: [rep(0, 'setup', 0), rep(1, 'setup', 0), rep(1, 'run', 0)],
      phase: 'run',
      exitCodes: [null, 0],
    },
    {
      name: 'a cancelled attempt whose run was stopped: in run, its code unknown',
      numNodes: 1,
      outcome: { kind: 'CANCELLED' },
      reports: [rep(0, 'setup', 0), { nodeRank: 0, phase: 'run', stopped: 'shutdown', outputTail: 'step 7\n', reportedAt: AT }],
      phase: 'run',
      exitCodes: [null],
    },
    {
      name: 'a running attempt part-way through run: run codes so far, null for the rest',
      numNodes: 2,
      outcome: null,
      reports: [rep(0, 'setup', 0), rep(1, 'setup', 0), rep(1, 'run', 0)],
      phase: 'run',
      exitCodes: [null, 0],
    },
    {
      name: 'a cancelled launch: nothing',
      numNodes: 1,
      outcome: { kind: 'CANCELLED' },
      reports: [],
      phase: null,
      exitCodes: [],
    },
  ])('$name', ({ numNodes, outcome, reports, phase, exitCodes }) => {
    const [view] = toJobView(job(numNodes), [attempt(1, outcome, reports)]).attempts;
    expect(view).toMatchObject({ outcome: outcome?.kind ?? null, phase, exitCodes });
  });
});

describe('toJobView output tails', () => {
  it('keeps, per node in rank order, the last lines of the furthest phase it reported', () => {
    const long = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
    const reports: NodeReport[] = [
      { ...rep(1, 'setup', 0), outputTail: 'node 1 setup' },
      { ...rep(0, 'setup', 0), outputTail: 'node 0 setup' },
      { ...rep(0, 'run', 1), outputTail: long },
    ];
    const [view] = toJobView(job(2), [attempt(1, null, reports)]).attempts;
    expect(view?.outputTails).toEqual([
      { nodeRank: 0, phase: 'run', text: Array.from({ length: 20 }, (_, i) => `line ${i + 11}`).join('\n') },
      { nodeRank: 1, phase: 'setup', text: 'node 1 setup' },
    ]);
  });
});

describe('toJobView of an attempt whose run was stopped', () => {
  it("keeps the stopped run's last lines over setup's, and its code unknown", () => {
    const reports: NodeReport[] = [
      { ...rep(0, 'setup', 0), outputTail: 'set up\n' },
      { nodeRank: 0, phase: 'run', stopped: 'interruption', outputTail: 'step 1\nstep 2\nsaving checkpoint\n', reportedAt: AT },
    ];
    const [view] = toJobView(job(1), [attempt(1, { kind: 'PREEMPTED' }, reports)]).attempts;
    expect(view).toMatchObject({ phase: 'run', exitCodes: [null], outputTails: [{ nodeRank: 0, phase: 'run', text: 'step 1\nstep 2\nsaving checkpoint' }] });
  });
});

describe('toJobSummary', () => {
  it('shows the list fields only', () => {
    expect(toJobSummary(job())).toEqual({
      jobId: 'j-1',
      name: 'train',
      status: 'RUNNING',
      recoveryCount: 3,
      restartsOnErrors: 1,
      maxRestartsOnErrors: taskSpec({ recovery: RECOVERY }).resources.jobRecovery.maxRestartsOnErrors,
      attemptCount: 1,
      createdAt: AT,
      updatedAt: '2026-03-01T13:00:00.000Z',
    });
  });
});

describe('getJob and listJobs', () => {
  it('read the store: one job with its attempts, and the jobs newest first', async () => {
    const h = harness();
    await givenJob(h, taskSpec(), 'j-older');
    h.clock.advance(1);
    await givenJob(h, taskSpec(), 'j-newer');

    expect(await getJob('j-older', h.deps)).toMatchObject({ jobId: 'j-older', status: 'PENDING', attempts: [] });
    expect((await listJobs(h.deps)).jobs.map((j) => j.jobId)).toEqual(['j-newer', 'j-older']);
    expect((await listJobs(h.deps, { limit: 1 })).jobs).toHaveLength(1);
    await expect(getJob('j-missing', h.deps)).rejects.toThrow('no job with id j-missing');
  });
});
