// attemptTimeline's "instance gone" per node: the attempt's noted instancesGoneAt for the
// nodes its release let go, an earlier time a node is known gone by, and the older
// derivation for an attempt recorded before the field existed.

import { describe, expect, it } from 'vitest';
import { attemptTimeline } from '../../../../lib/accounting/timeline.ts';
import type { AttemptRecord, InstanceRef, NodeReport } from '../../../../lib/model.ts';
import { RecoveryAction } from '../../../../lib/policy/types.ts';
import { JobStatus } from '../../../../lib/status.ts';

const at = (seconds: number): string => new Date(Date.UTC(2026, 0, 2) + seconds * 1000).toISOString();
const t = (seconds: number): number => Date.parse(at(seconds));

function node(nodeRank: number): InstanceRef {
  return { instanceId: `i-${nodeRank}`, nodeRank, privateIp: null, runningAt: at(10) };
}

function phase(nodeRank: number, which: 'setup' | 'run', exitCode: number, seconds: number): NodeReport {
  return { nodeRank, phase: which, exitCode, outputTail: '', reportedAt: at(seconds), ...(which === 'setup' ? { setupMs: 5000 } : {}) };
}

function attempt(fields: Partial<AttemptRecord>): AttemptRecord {
  return {
    jobId: 'job-1',
    attempt: 1,
    market: 'spot',
    placement: null,
    instances: [node(0), node(1)],
    taskToken: null,
    tokenState: null,
    secretHash: 'x',
    reports: [phase(0, 'setup', 0, 30), phase(1, 'setup', 0, 30)],
    outcome: null,
    decision: null,
    startedAt: at(0),
    lastHeartbeatAt: null,
    nodesHeardFrom: [0, 1],
    interruptionNoticedAt: null,
    endedAt: at(100),
    stopAskedAt: at(101),
    ...fields,
  } as AttemptRecord;
}

const gone = (record: AttemptRecord) => attemptTimeline(record).nodes.map((n) => [n.nodeRank, n.goneAt]);

describe('a node\'s instance gone', () => {
  it('is the attempt\'s noted instancesGoneAt for a released node with no final report', () => {
    const record = attempt({ outcome: { kind: 'LOST', reason: 'no heartbeat' }, instancesGoneAt: at(140) });
    expect(gone(record)).toEqual([
      [0, t(140)],
      [1, t(140)],
    ]);
  });

  it('keeps an earlier time a node is known gone by: its final report, or its own loss ending the attempt', () => {
    const record = attempt({
      reports: [phase(0, 'setup', 0, 30), phase(1, 'setup', 0, 30), phase(0, 'run', 1, 90)],
      outcome: { kind: 'PREEMPTED', nodes: [1] },
      instancesGoneAt: at(140),
    });
    expect(gone(record)).toEqual([
      [0, t(90)],
      [1, t(100)],
    ]);
  });

  it('leaves a node the decision keeps out: it goes with a later attempt', () => {
    const record = attempt({
      outcome: { kind: 'PREEMPTED', nodes: [1] },
      decision: {
        action: RecoveryAction.RECOVER,
        rule: 'PREEMPTED_OR_LOST',
        status: JobStatus.RECOVERING,
        reason: 'kept',
        delaySeconds: 0,
        decidedAt: at(100),
        keep: { nodes: [node(0)], placement: { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm5.large' }, setup: 'skip', replace: [{ nodeRank: 1, why: 'preempted' }] },
      } as AttemptRecord['decision'],
      instancesGoneAt: at(140),
    });
    expect(gone(record)).toEqual([
      [0, null],
      [1, t(100)],
    ]);
  });

  it('falls back to the final report, else nothing (the attempt\'s end stands), without the field', () => {
    const record = attempt({ reports: [phase(0, 'setup', 0, 30), phase(1, 'setup', 0, 30), phase(0, 'run', 0, 90)], outcome: { kind: 'LOST', reason: 'no heartbeat' } });
    expect(gone(record)).toEqual([
      [0, t(90)],
      [1, null],
    ]);
  });
});
