// The standby's rules on the records: which warning asks for one, what its nodes are told,
// whether a relaunch may take it, and the gap before a run.

import { describe, expect, it } from 'vitest';
import type { AttemptRecord, JobRecord } from '../../../lib/model.ts';
import { DEFAULT_RECOVERY_POLICY } from '../../../lib/task-file/recovery.ts';
import type { LaunchOnWarning } from '../../../lib/task-file/types.ts';
import { gapBefore, runSignal, runStartOf, standbyAskedBy, whyNotAdopt } from '../../../lib/standby-rules.ts';
import { JobStatus } from '../../../lib/status.ts';
import { newJobRecord } from '../../../lib/usecases/submit-job.ts';
import { attemptRecord } from '../../support/fixtures/records.ts';
import { taskSpec } from '../../support/fixtures/specs.ts';

const T0 = '2026-03-01T10:00:00.000Z';
const T1 = '2026-03-01T10:00:10.000Z';
const T2 = '2026-03-01T10:00:12.500Z';

function job(overrides: Partial<JobRecord> = {}): JobRecord {
  return { ...newJobRecord('j-1', taskSpec({ resources: { useSpot: true } }), T0), status: JobStatus.RUNNING, attemptCount: 1, ...overrides };
}

function attempt(number: number, overrides: Partial<AttemptRecord> = {}): AttemptRecord {
  return attemptRecord('j-1', number, T0, overrides);
}

const standby = (overrides: Partial<AttemptRecord> = {}): AttemptRecord => attempt(2, { standby: { for: 1, on: 'interruption' }, ...overrides });

describe('which warning asks for a standby', () => {
  it.each<[string, LaunchOnWarning, Partial<AttemptRecord>, string | null]>([
    ['no option, an interruption warning', false, { interruptionNoticedAt: T1 }, null],
    ['true, an interruption warning', true, { interruptionNoticedAt: T1 }, 'interruption'],
    ['true, a rebalance recommendation only', true, { rebalanceNoticedAt: T1 }, null],
    ['rebalance, a rebalance recommendation', 'rebalance', { rebalanceNoticedAt: T1 }, 'rebalance'],
    ['rebalance, both: the interruption is named', 'rebalance', { rebalanceNoticedAt: T0, interruptionNoticedAt: T1 }, 'interruption'],
    ['true, no warning', true, {}, null],
    ['true, a warning on an attempt that has ended', true, { interruptionNoticedAt: T1, outcome: { kind: 'PREEMPTED' } }, null],
  ])('%s', (_name, option, fields, expected) => {
    expect(standbyAskedBy({ ...DEFAULT_RECOVERY_POLICY, launchOnWarning: option }, attempt(1, fields), job().counters)).toBe(expected);
  });

  it('a policy stored before the option existed asks for none', () => {
    const { launchOnWarning: _absent, ...older } = DEFAULT_RECOVERY_POLICY;
    expect(standbyAskedBy(older, attempt(1, { interruptionNoticedAt: T1 }), job().counters)).toBeNull();
  });

  it.each<[string, number | null, number, string | null]>([
    ['no max_recoveries: asks', null, 5, 'interruption'],
    ['max_recoveries 0: a preemption ends the job, so none', 0, 0, null],
    ['max_recoveries 2, one used: asks', 2, 1, 'interruption'],
    ['max_recoveries 2, both used: none', 2, 2, null],
  ])('%s', (_name, maxRecoveries, used, expected) => {
    const policy = { ...DEFAULT_RECOVERY_POLICY, launchOnWarning: true as const, maxRecoveries };
    expect(standbyAskedBy(policy, attempt(1, { interruptionNoticedAt: T1 }), { ...job().counters, recoverDecisions: used })).toBe(expected);
  });
});

describe('what a node is told', () => {
  it.each<[string, Partial<JobRecord>, AttemptRecord, string]>([
    ['the live attempt goes', {}, attempt(1), 'go'],
    ['a standby after the live attempt holds', {}, standby(), 'hold'],
    ['an adopted standby, now the live attempt, goes', { attemptCount: 2 }, standby({ standby: { for: 1, on: 'interruption', adoptedAt: T1 } }), 'go'],
    ['a released standby stops', {}, standby({ standby: { for: 1, on: 'interruption', releasedAt: T1, releaseReason: 'not needed: attempt 1 succeeded' } }), 'stop'],
    ['a standby that ended (its setup failed) stops', {}, standby({ outcome: { kind: 'EXITED', phase: 'setup', nodes: [{ rank: 0, exitCode: 1 }] } }), 'stop'],
    ['the live attempt of a job being cancelled stops', { status: JobStatus.CANCELLING }, attempt(1), 'stop'],
    ['a standby of a job being cancelled stops', { status: JobStatus.CANCELLING }, standby(), 'stop'],
    ['the live attempt of a job that has ended stops', { status: JobStatus.SUCCEEDED }, attempt(1), 'stop'],
    ['an older attempt stops', { attemptCount: 3 }, attempt(2), 'stop'],
    ['a standby two past the live attempt stops', {}, attempt(3, { standby: { for: 2, on: 'interruption' } }), 'stop'],
    // The job and the attempt read a moment apart, around an adoption or a release: never go.
    ['an adopted standby beside a job read before its adoption holds', {}, standby({ standby: { for: 1, on: 'interruption', adoptedAt: T1 } }), 'hold'],
    ['a holding standby beside a job read after its release and retirement holds', { attemptCount: 2 }, standby(), 'hold'],
    ['an adopted standby the job has moved past stops', { attemptCount: 3 }, standby({ standby: { for: 1, on: 'interruption', adoptedAt: T1 } }), 'stop'],
  ])('%s', (_name, fields, record, expected) => {
    expect(runSignal(job(fields), record).run).toBe(expected);
  });

  it('says why, in words the agent logs', () => {
    expect(runSignal(job(), standby())).toEqual({ run: 'hold', reason: 'attempt 2 of job j-1 is a standby: attempt 1 is still the live one' });
    const released = standby({ standby: { for: 1, on: 'rebalance', releasedAt: T1, releaseReason: 'not needed: attempt 1 succeeded' } });
    expect(runSignal(job(), released)).toEqual({ run: 'stop', reason: 'attempt 2 of job j-1 was a standby, released: not needed: attempt 1 succeeded' });
  });
});

describe('whether the relaunch takes the standby', () => {
  it.each<[string, Partial<JobRecord>, AttemptRecord, string | null]>([
    ['on its market, same task: taken', {}, standby(), null],
    ['its setup failed: taken, and decided as any attempt', {}, standby({ outcome: { kind: 'EXITED', phase: 'setup', nodes: [{ rank: 0, exitCode: 1 }] } }), null],
    ['the fallback moved the job on-demand', { counters: { ...job().counters, market: 'on-demand' } }, standby(), 'the next attempt runs on-demand, and the standby spot'],
    ['released', {}, standby({ standby: { for: 1, on: 'interruption', releasedAt: T1, releaseReason: 'no capacity' } }), 'it was released (no capacity)'],
    ['lost while it held: gone, not taken', {}, standby({ outcome: { kind: 'LOST', reason: 'instance i-2 was terminated' } }), 'it was lost while it held (instance i-2 was terminated)'],
    ['reclaimed while it held: gone, not taken', {}, standby({ outcome: { kind: 'PREEMPTED' } }), 'it was reclaimed while it held (a spot interruption)'],
  ])('%s', (_name, fields, record, expected) => {
    expect(whyNotAdopt(job(fields), record)).toBe(expected);
  });

  it('a standby of the warned node alone is taken only by a relaunch that keeps exactly the nodes it was launched beside', () => {
    const node = (rank: number) => ({ instanceId: `i-old-${rank}`, nodeRank: rank, privateIp: null });
    const keep = (...ranks: number[]) => ({ nodes: ranks.map(node), placement: { region: 'us-east-1', zone: null, instanceType: 'm5.large' }, setup: 'rerun' as const, replace: [] });
    const beside = standby({ standby: { for: 1, on: 'interruption', beside: [node(0), node(2)] } });
    expect(whyNotAdopt(job(), beside, keep(2, 0))).toBeNull();
    expect(whyNotAdopt(job(), beside, null)).toBe('it was launched beside nodes 0, 2 of attempt 1, and the relaunch keeps none');
    expect(whyNotAdopt(job(), beside, keep(0))).toBe('it was launched beside nodes 0, 2 of attempt 1, and the relaunch keeps node 0');
    expect(whyNotAdopt(job(), beside, keep(0, 1, 2))).toBe('it was launched beside nodes 0, 2 of attempt 1, and the relaunch keeps nodes 0, 1, 2');
    // A whole set takes no kept node.
    expect(whyNotAdopt(job(), standby(), null)).toBeNull();
  });

  it('a pipeline that moved on to its next task does not take a standby of the task before', () => {
    const piped = job({ pipeline: { name: null, tasks: [taskSpec(), taskSpec()], current: 1 } });
    expect(whyNotAdopt(piped, standby({ task: 0 }))).toBe('the job has moved on to task 2');
    expect(whyNotAdopt(piped, standby({ task: 1 }))).toBeNull();
  });
});

describe('the gap before a run', () => {
  const setupOk = { nodeRank: 0, phase: 'setup' as const, exitCode: 0, outputTail: '', reportedAt: T2 };

  it('runs from the end of the attempt before to the adopted standby told to go', () => {
    const old = attempt(1, { endedAt: T1 });
    const adopted = standby({ standby: { for: 1, on: 'interruption', adoptedAt: T1 }, runStartedAt: T2, reports: [{ ...setupOk, reportedAt: T0 }] });
    expect(runStartOf(adopted)).toBe(T2);
    expect(gapBefore(adopted, [old, adopted])).toBe(2.5);
  });

  it('of an attempt that never held, runs to its first setup report that exited 0', () => {
    const second = attempt(2, { reports: [{ ...setupOk, nodeRank: 1, reportedAt: '2026-03-01T10:00:20.000Z' }, setupOk] });
    expect(gapBefore(second, [attempt(1, { endedAt: T1 }), second])).toBe(2.5);
  });

  it('skips a standby let go unused, and is unknown before run starts or for the first attempt', () => {
    const released = standby({ standby: { for: 1, on: 'interruption', releasedAt: T1 }, endedAt: '2026-03-01T10:00:11.000Z' });
    const third = attempt(3, { reports: [setupOk] });
    expect(gapBefore(third, [attempt(1, { endedAt: T1 }), released, third])).toBe(2.5);
    expect(gapBefore(attempt(3), [attempt(1, { endedAt: T1 }), attempt(3)])).toBeNull();
    expect(gapBefore(attempt(1, { reports: [setupOk] }), [attempt(1, { reports: [setupOk] })])).toBeNull();
    expect(runStartOf(standby({ reports: [setupOk] }))).toBeNull();
  });
});

describe('an attempt with reused nodes starts when every node is set up', () => {
  const twoNodes = (overrides: Partial<JobRecord> = {}): JobRecord => job({ spec: taskSpec({ numNodes: 2, resources: { useSpot: true } }), attemptCount: 2, ...overrides });
  const setup0 = (nodeRank: number, reportedAt: string) => ({ nodeRank, phase: 'setup' as const, exitCode: 0, outputTail: '', reportedAt });
  const reused = (reports: AttemptRecord['reports']): AttemptRecord =>
    attempt(2, {
      instances: [
        { instanceId: 'i-kept', nodeRank: 0, privateIp: '10.0.0.1', reusedFrom: 1 },
        { instanceId: 'i-new', nodeRank: 1, privateIp: '10.0.0.2' },
      ],
      reports,
    });

  it('holds the kept node set up first until its replacement has reported setup 0, then says go', () => {
    expect(runSignal(twoNodes(), reused([setup0(0, T0)]))).toEqual({ run: 'hold', reason: 'attempt 2 of job j-1 waits for node 1 to finish setup: it runs on reused nodes, and starts when every node is up' });
    expect(runSignal(twoNodes(), reused([setup0(0, T0), setup0(1, T1)]))).toMatchObject({ run: 'go' });
  });

  it('starts its run with the last node set up', () => {
    expect(runStartOf(reused([setup0(0, T0)]))).toBeNull();
    expect(runStartOf(reused([setup0(1, T2), setup0(0, T1)]))).toBe(T2);
  });

  it('an adopted standby that kept nodes joined holds its new node until they are set up too', () => {
    const adopted = (reports: AttemptRecord['reports']): AttemptRecord => ({ ...reused(reports), standby: { for: 1, on: 'interruption', adoptedAt: T0 } });
    expect(runSignal(twoNodes(), adopted([setup0(1, T0)]))).toEqual({ run: 'hold', reason: 'attempt 2 of job j-1 waits for node 0 to finish setup: it runs on reused nodes, and starts when every node is up' });
    expect(runSignal(twoNodes(), adopted([setup0(1, T0), setup0(0, T1)]))).toEqual({ run: 'go', reason: 'attempt 2 of job j-1 is the live attempt: attempt 1 has ended and the job relaunched' });
    // Not adopted yet: a standby, whatever its nodes' setups.
    expect(runSignal(twoNodes({ attemptCount: 1 }), { ...reused([setup0(1, T0), setup0(0, T1)]), standby: { for: 1, on: 'interruption' } })).toMatchObject({ run: 'hold' });
  });

  it('an attempt on fresh nodes goes at once, as before', () => {
    const fresh = attempt(2, { instances: [{ instanceId: 'i-a', nodeRank: 0, privateIp: null }, { instanceId: 'i-b', nodeRank: 1, privateIp: null }], reports: [setup0(0, T0)] });
    expect(runSignal(twoNodes(), fresh)).toMatchObject({ run: 'go' });
  });
});
