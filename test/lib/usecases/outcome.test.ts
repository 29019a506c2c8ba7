// outcomeFromReports: when the reports decide an attempt, and what each node's end was.

import { describe, expect, it } from 'vitest';
import type { NodeReport } from '../../../lib/model.ts';
import { outcomeFromReports } from '../../../lib/outcome.ts';
import type { AttemptOutcome, Phase } from '../../../lib/policy/types.ts';

function r(nodeRank: number, phase: Phase, exitCode: number): NodeReport {
  return { nodeRank, phase, exitCode, outputTail: '', reportedAt: '2026-03-01T12:00:00.000Z' };
}

const killed = (rank: number, by: number) => ({
  rank,
  exitCode: null,
  killedByController: true,
  unknownReason: `stopped because node ${by} failed`,
});

describe('outcomeFromReports', () => {
  it.each<{ name: string; numNodes: number; reports: NodeReport[]; expected: AttemptOutcome | null }>([
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
      name: 'multi-node: the earliest failure is the root cause; a later one is its casualty',
      numNodes: 2,
      reports: [r(1, 'run', 1), r(0, 'run', 137)],
      expected: {
        kind: 'EXITED',
        phase: 'run',
        nodes: [{ rank: 0, exitCode: 137, killedByController: true }, { rank: 1, exitCode: 1 }],
      },
    },
    {
      name: 'reports from ranks the job does not have are ignored',
      numNodes: 1,
      reports: [r(3, 'run', 1), r(0, 'run', 0)],
      expected: { kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 0 }] },
    },
  ])('$name', ({ numNodes, reports, expected }) => {
    expect(outcomeFromReports(numNodes, reports)).toEqual(expected);
  });
});
