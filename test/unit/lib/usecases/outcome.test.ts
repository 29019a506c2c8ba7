// decideAttempt and outcomeFromReports: which fact decides an attempt, and what each node's end was.

import { describe, expect, it } from 'vitest';
import type { NodeReport } from '../../../../lib/model.ts';
import { decideAttempt, outcomeFromReports, type AttemptFacts, type GoneNode } from '../../../../lib/outcome.ts';
import type { AttemptOutcome, Phase } from '../../../../lib/policy/types.ts';

function r(nodeRank: number, phase: Phase, exitCode: number): NodeReport {
  return { nodeRank, phase, exitCode, outputTail: '', reportedAt: '2026-03-01T12:00:00.000Z' };
}

/** Node `nodeRank`'s agent failed at the image pull, before setup. */
function pullFailed(nodeRank: number): NodeReport {
  return { nodeRank, phase: 'setup', agentFailure: { step: 'image-pull', error: 'toomanyrequests' }, outputTail: '', reportedAt: '2026-03-01T12:00:00.000Z' };
}

/** Node `nodeRank`'s agent stopped its run before it exited (its last lines, no code). */
function stoppedRun(nodeRank: number): NodeReport {
  return { nodeRank, phase: 'run', stopped: 'interruption', outputTail: 'step 3', reportedAt: '2026-03-01T12:00:00.000Z' };
}

const AGENT_FAILED_ON = (nodeRank: number): AttemptOutcome => ({ kind: 'AGENT_FAILED', nodeRank, step: 'image-pull', error: 'toomanyrequests' });

const killed = (rank: number, by: number) => ({
  rank,
  exitCode: null,
  killedByController: true,
  unknownReason: `stopped because node ${by} failed`,
});

const reportsOnlyCases: { name: string; numNodes: number; reports: NodeReport[]; expected: AttemptOutcome | null }[] = [
    { name: 'no report yet: undecided', numNodes: 1, reports: [], expected: null },
    { name: 'setup exited 0: still undecided', numNodes: 1, reports: [r(0, 'setup', 0)], expected: null },
    {
      name: 'single node run 0: exited in run with 0',
      numNodes: 1,
      reports: [r(0, 'setup', 0), r(0, 'run', 0)],
      expected: { kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 0 }] },
    },
    {
      name: 'single node run 29: exited in run with 29',
      numNodes: 1,
      reports: [r(0, 'setup', 0), r(0, 'run', 29)],
      expected: { kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 29 }] },
    },
    {
      name: 'setup failing decides at once, in setup',
      numNodes: 1,
      reports: [r(0, 'setup', 2)],
      expected: { kind: 'EXITED', phase: 'setup', nodes: [{ rank: 0, exitCode: 2 }] },
    },
    {
      name: 'multi-node: some nodes finished run 0, others running: undecided',
      numNodes: 3,
      reports: [r(0, 'run', 0), r(2, 'run', 0), r(1, 'setup', 0)],
      expected: null,
    },
    {
      name: 'multi-node: every node run 0, in any order: exited with every code in rank order',
      numNodes: 3,
      reports: [r(2, 'run', 0), r(0, 'run', 0), r(1, 'run', 0)],
      expected: {
        kind: 'EXITED',
        phase: 'run',
        nodes: [
          { rank: 0, exitCode: 0 },
          { rank: 1, exitCode: 0 },
          { rank: 2, exitCode: 0 },
        ],
      },
    },
    {
      name: 'multi-node: one node fails: it decides, finished nodes keep 0, running ones are killed',
      numNodes: 3,
      reports: [r(0, 'setup', 0), r(1, 'setup', 0), r(2, 'setup', 0), r(2, 'run', 0), r(1, 'run', 1)],
      expected: { kind: 'EXITED', phase: 'run', nodes: [killed(0, 1), { rank: 1, exitCode: 1 }, { rank: 2, exitCode: 0 }] },
    },
    {
      name: 'multi-node: a setup failure decides in setup, peers still in setup are killed',
      numNodes: 2,
      reports: [r(1, 'setup', 127)],
      expected: { kind: 'EXITED', phase: 'setup', nodes: [killed(0, 1), { rank: 1, exitCode: 127 }] },
    },
    {
      name: 'multi-node: every failing node is a root cause, in whatever order they came',
      numNodes: 2,
      reports: [r(1, 'run', 1), r(0, 'run', 137)],
      expected: { kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 137 }, { rank: 1, exitCode: 1 }] },
    },
    {
      name: 'multi-node: the same two failures the other way round decide the same',
      numNodes: 2,
      reports: [r(0, 'run', 137), r(1, 'run', 1)],
      expected: { kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 137 }, { rank: 1, exitCode: 1 }] },
    },
    {
      name: 'multi-node: a setup failure beside a run failure: exited in setup, both codes kept',
      numNodes: 2,
      reports: [r(0, 'run', 3), r(1, 'setup', 2)],
      expected: { kind: 'EXITED', phase: 'setup', nodes: [{ rank: 0, exitCode: 3 }, { rank: 1, exitCode: 2 }] },
    },
    {
      name: "an agent's failure before setup decides at once: AGENT_FAILED, with its node, step and error",
      numNodes: 1,
      reports: [pullFailed(0)],
      expected: AGENT_FAILED_ON(0),
    },
    {
      name: "multi-node: an agent's failure decides while its peers run, whatever they report after",
      numNodes: 3,
      reports: [r(0, 'setup', 0), pullFailed(2), r(0, 'run', 1)],
      expected: AGENT_FAILED_ON(2),
    },
    {
      name: "multi-node: a peer's agent failing beside a node's exit 3 decides, whichever came first: agent failed",
      numNodes: 2,
      reports: [r(0, 'setup', 3), pullFailed(1)],
      expected: AGENT_FAILED_ON(1),
    },
    {
      name: 'reports from ranks the job does not have are ignored',
      numNodes: 1,
      reports: [r(3, 'run', 1), r(0, 'run', 0)],
      expected: { kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 0 }] },
    },
];

describe('outcomeFromReports', () => {
  it.each(reportsOnlyCases)('$name', ({ numNodes, reports, expected }) => {
    expect(outcomeFromReports(numNodes, reports)).toEqual(expected);
  });
});

const WARNED = '2026-03-01T12:05:00.000Z';
const gone = (nodeRank: number, how = 'terminated'): GoneNode => ({ nodeRank, instanceId: `i-${nodeRank}`, how });
const facts = (warned: boolean, ...goneNodes: GoneNode[]): AttemptFacts => ({ interruptionNoticedAt: warned ? WARNED : null, gone: goneNodes });
/** LOST naming the first node gone early; `nodes`: every rank gone early, which the relaunch replaces. */
const lost = (nodeRank: number, how = 'terminated', nodes: number[] = [nodeRank]): AttemptOutcome => ({ kind: 'LOST', reason: `instance i-${nodeRank} was ${how}`, nodes });
const PREEMPTED: AttemptOutcome = { kind: 'PREEMPTED' };
/** PREEMPTED with the ranks seen gone before their final report. */
const preemptedGone = (...nodes: number[]): AttemptOutcome => ({ kind: 'PREEMPTED', nodes });
const exited = (phase: Phase, ...codes: number[]): AttemptOutcome => ({
  kind: 'EXITED',
  phase,
  nodes: codes.map((exitCode, rank) => ({ rank, exitCode })),
});

describe('decideAttempt: which fact decides an attempt, messages in any order', () => {
  it.each<{ row: string; name: string; numNodes: number; reports: NodeReport[]; facts: AttemptFacts; expected: AttemptOutcome | null }>([
    // Row 1: every node's final report stored, all 0.
    { row: '1', name: 'one node, run 0, nothing else: succeeds', numNodes: 1, reports: [r(0, 'setup', 0), r(0, 'run', 0)], facts: facts(false), expected: exited('run', 0) },
    { row: '1', name: 'one node, warning then run 0: still succeeds', numNodes: 1, reports: [r(0, 'run', 0)], facts: facts(true), expected: exited('run', 0) },
    { row: '1', name: 'one node, run 0 stored, then its instance went (it shut itself down): succeeds', numNodes: 1, reports: [r(0, 'run', 0)], facts: facts(false, gone(0)), expected: exited('run', 0) },
    { row: '1', name: 'one node, warning, run 0, instance gone after it: succeeds', numNodes: 1, reports: [r(0, 'run', 0)], facts: facts(true, gone(0)), expected: exited('run', 0) },
    { row: '1', name: 'two nodes, every node run 0, every instance gone after: succeeds', numNodes: 2, reports: [r(0, 'run', 0), r(1, 'run', 0)], facts: facts(false, gone(0), gone(1)), expected: exited('run', 0, 0) },
    { row: '1', name: 'two nodes, a warning on a node that then reported 0: succeeds', numNodes: 2, reports: [r(1, 'run', 0), r(0, 'run', 0)], facts: facts(true, gone(1)), expected: exited('run', 0, 0) },
    // Row 2: a final code non-zero, warning on record.
    { row: '2', name: 'one node, warning then run 1: preempted at once, without waiting for the instance to go', numNodes: 1, reports: [r(0, 'setup', 0), r(0, 'run', 1)], facts: facts(true), expected: PREEMPTED },
    { row: '2', name: 'one node, warning then setup 2: preempted', numNodes: 1, reports: [r(0, 'setup', 2)], facts: facts(true), expected: PREEMPTED },
    { row: '2', name: 'one node, warning, run 137, instance gone after: preempted', numNodes: 1, reports: [r(0, 'run', 137)], facts: facts(true, gone(0)), expected: PREEMPTED },
    { row: '2', name: 'two nodes, warning on one, the other exits 1 (its peer vanished): preempted, not a user error', numNodes: 2, reports: [r(0, 'run', 1)], facts: facts(true), expected: PREEMPTED },
    { row: '2', name: 'two nodes, both reported non-zero, warning: preempted whatever the codes', numNodes: 2, reports: [r(0, 'run', 1), r(1, 'run', 3)], facts: facts(true), expected: PREEMPTED },
    { row: '2', name: 'two nodes, one 0 and one 1, warning: preempted', numNodes: 2, reports: [r(0, 'run', 0), r(1, 'run', 1)], facts: facts(true, gone(0)), expected: PREEMPTED },
    { row: '2', name: "one node, warning then its agent's failure before setup: preempted", numNodes: 1, reports: [pullFailed(0)], facts: facts(true), expected: PREEMPTED },
    { row: '2', name: 'two nodes, warning naming node 1, node 0 exits 1: preempted, naming node 1, whose instance goes', numNodes: 2, reports: [r(0, 'run', 1)], facts: { ...facts(true), warnedNode: 1 }, expected: preemptedGone(1) },
    { row: '2', name: 'four nodes, warning naming node 3, node 2 gone, node 0 exits 1: preempted, naming nodes 2 and 3', numNodes: 4, reports: [r(0, 'run', 1)], facts: { ...facts(true, gone(2)), warnedNode: 3 }, expected: preemptedGone(2, 3) },
    { row: '2', name: 'two nodes, a warned rank outside the task: preempted, naming none', numNodes: 2, reports: [r(0, 'run', 1)], facts: { ...facts(true), warnedNode: 7 }, expected: PREEMPTED },
    // Row F: a code in fail_on_exit_codes is final, even after a warning.
    { row: 'F', name: 'one node, warning then run 42 in fail_on_exit_codes: exited with 42', numNodes: 1, reports: [r(0, 'run', 42)], facts: { ...facts(true), finalCodes: [42] }, expected: exited('run', 42) },
    { row: 'F', name: 'one node, warning, run 42, its instance gone after: exited with 42', numNodes: 1, reports: [r(0, 'run', 42)], facts: { ...facts(true, gone(0)), finalCodes: [42] }, expected: exited('run', 42) },
    { row: 'F', name: 'one node, warning then run 1, not in the list: preempted as before', numNodes: 1, reports: [r(0, 'run', 1)], facts: { ...facts(true), finalCodes: [42] }, expected: PREEMPTED },
    // Row W: a failure's peers are waited for, up to PEER_REPORT_WAIT_MS after it.
    { row: 'W', name: 'two nodes, one failed, the other runs, inside the wait: undecided', numNodes: 2, reports: [r(0, 'run', 1)], facts: { ...facts(false), now: '2026-03-01T12:00:02.999Z' }, expected: null },
    {
      row: 'W',
      name: 'two nodes, one failed, the other runs, the wait over: exited, the peer killed',
      numNodes: 2,
      reports: [r(0, 'run', 1)],
      facts: { ...facts(false), now: '2026-03-01T12:00:03.000Z' },
      expected: { kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 1 }, killed(1, 0)] },
    },
    { row: 'W', name: 'two nodes, both failed inside the wait: decided at once on both', numNodes: 2, reports: [r(1, 'run', 3), r(0, 'run', 42)], facts: { ...facts(false), now: '2026-03-01T12:00:00.000Z' }, expected: exited('run', 42, 3) },
    { row: 'W', name: "two nodes, an agent's failure: decided at once, no wait", numNodes: 2, reports: [pullFailed(1)], facts: { ...facts(false), now: '2026-03-01T12:00:00.000Z' }, expected: AGENT_FAILED_ON(1) },
    // Row 3: a node gone before its final report, warning on record.
    { row: '3', name: 'one node, warning, then the instance went with no report: preempted', numNodes: 1, reports: [], facts: facts(true, gone(0)), expected: preemptedGone(0) },
    { row: '3', name: 'one node, warning, setup 0, instance gone in run: preempted', numNodes: 1, reports: [r(0, 'setup', 0)], facts: facts(true, gone(0)), expected: preemptedGone(0) },
    { row: '3', name: 'two nodes, warning, one reported 0, the other\'s instance went: preempted, naming that node', numNodes: 2, reports: [r(0, 'run', 0)], facts: facts(true, gone(1)), expected: preemptedGone(1) },
    { row: '3', name: 'four nodes, warning, node 2 gone, another reports 1: preempted, naming only node 2', numNodes: 4, reports: [r(0, 'run', 1)], facts: facts(true, gone(2)), expected: preemptedGone(2) },
    // Row 4: a node gone before its final report, no warning.
    { row: '4', name: 'one node, instance gone with no report: lost, naming the instance', numNodes: 1, reports: [], facts: facts(false, gone(0)), expected: lost(0) },
    { row: '4', name: 'one node, setup 0 then the instance stopped: lost, saying how', numNodes: 1, reports: [r(0, 'setup', 0)], facts: facts(false, gone(0, 'stopped')), expected: lost(0, 'stopped') },
    { row: '4', name: 'two nodes, one reported 0 and its instance went, the other\'s went before its report: lost (that one)', numNodes: 2, reports: [r(0, 'run', 0)], facts: facts(false, gone(0), gone(1)), expected: lost(1) },
    { row: '4', name: 'two nodes, one gone early, the other reports 1: lost, whatever the other\'s code', numNodes: 2, reports: [r(0, 'run', 1)], facts: facts(false, gone(1)), expected: lost(1) },
    { row: '4', name: 'three nodes, two gone early: lost, the first one named, both replaced', numNodes: 3, reports: [r(1, 'run', 0)], facts: facts(false, gone(2), gone(0)), expected: lost(2, 'terminated', [0, 2]) },
    // Row 5: a final code non-zero, no warning, no node gone early: the reports decide.
    { row: '5', name: 'one node, run 29: exited with 29', numNodes: 1, reports: [r(0, 'setup', 0), r(0, 'run', 29)], facts: facts(false), expected: exited('run', 29) },
    { row: '5', name: 'one node, run 1 stored, its instance gone after: exited with 1', numNodes: 1, reports: [r(0, 'run', 1)], facts: facts(false, gone(0)), expected: exited('run', 1) },
    { row: '5', name: 'one node, setup 2 then its instance went (run skipped, agent shut down): exited in setup', numNodes: 1, reports: [r(0, 'setup', 2)], facts: facts(false, gone(0)), expected: exited('setup', 2) },
    {
      row: '5',
      name: 'two nodes, one fails and its instance went after its report: exited, the running peer killed',
      numNodes: 2,
      reports: [r(1, 'run', 1)],
      facts: facts(false, gone(1)),
      expected: { kind: 'EXITED', phase: 'run', nodes: [killed(0, 1), { rank: 1, exitCode: 1 }] },
    },
    { row: '5', name: "one node, its agent's failure, then its instance went (the agent shut down): agent failed", numNodes: 1, reports: [pullFailed(0)], facts: facts(false, gone(0)), expected: AGENT_FAILED_ON(0) },
    // Row 6: undecided.
    { row: '6', name: 'one node, nothing yet', numNodes: 1, reports: [], facts: facts(false), expected: null },
    { row: '6', name: 'one node, warning noted, setup 0: runs on until the instance goes or it reports', numNodes: 1, reports: [r(0, 'setup', 0)], facts: facts(true), expected: null },
    { row: '6', name: 'two nodes, one reported 0 and shut down, the other runs: runs on', numNodes: 2, reports: [r(0, 'run', 0)], facts: facts(false, gone(0)), expected: null },
    { row: '6', name: 'two nodes, warning, one reported 0: runs on', numNodes: 2, reports: [r(0, 'setup', 0), r(0, 'run', 0), r(1, 'setup', 0)], facts: facts(true), expected: null },
    // A stopped run (its tail, no code) is no final report: it decides nothing.
    { row: '6', name: 'one node, warning, setup 0, run stopped by the notice: runs on until the instance goes', numNodes: 1, reports: [r(0, 'setup', 0), stoppedRun(0)], facts: facts(true), expected: null },
    { row: '3', name: 'one node, warning, run stopped, instance gone: preempted', numNodes: 1, reports: [r(0, 'setup', 0), stoppedRun(0)], facts: facts(true, gone(0)), expected: preemptedGone(0) },
    { row: '2', name: 'four nodes, node 2 stopped by the notice, then a peer exits 1: preempted, naming the warned node', numNodes: 4, reports: [stoppedRun(2), r(0, 'run', 1)], facts: facts(true), expected: preemptedGone(2) },
    { row: '4', name: 'one node, run stopped (a shutdown), instance gone: lost', numNodes: 1, reports: [r(0, 'setup', 0), stoppedRun(0)], facts: facts(false, gone(0)), expected: lost(0) },
    { row: '1', name: 'two nodes, one run 0 and one stopped, no instance gone: runs on', numNodes: 2, reports: [r(0, 'run', 0), stoppedRun(1)], facts: facts(false), expected: null },
    // Out of range: ignored.
    { row: '-', name: 'a gone node outside the job\'s ranks is ignored', numNodes: 1, reports: [r(0, 'setup', 0)], facts: facts(false, gone(4)), expected: null },
    { row: '-', name: 'a report outside the job\'s ranks is ignored', numNodes: 1, reports: [r(3, 'run', 1)], facts: facts(true), expected: null },
  ])('row $row: $name', ({ numNodes, reports, facts: given, expected }) => {
    expect(decideAttempt(numNodes, reports, given)).toEqual(expected);
  });

  it.each(reportsOnlyCases)('with no warning and no instance gone, decides as outcomeFromReports: $name', ({ numNodes, reports, expected }) => {
    expect(decideAttempt(numNodes, reports, facts(false))).toEqual(expected);
  });
});
