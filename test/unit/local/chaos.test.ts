// The local runtime's plan helpers: --preempt-attempts as a plan, plans merged, the faults of
// one attempt, and faults checked against the task's nodes.

import { describe, expect, it } from 'vitest';
import { parseChaosFile } from '../../../lib/chaos-file/parse.ts';
import { DEFAULT_PREEMPT_WARNING_MS, type ChaosFault, type ChaosPlan } from '../../../lib/chaos-file/types.ts';
import { LOCAL_STOP_GRACE_SECONDS } from '../../../local/process-compute.ts';
import { InvalidInputError, type InputIssue } from '../../../lib/errors.ts';
import { chaosIssuesForTask, faultsOfAttempt, mergeChaos, NO_CHAOS, preemptAttemptsPlan } from '../../../local/chaos.ts';

/** The issues a parse threw; fails the test when it did not throw InvalidInputError. */
function issuesOf(parse: () => unknown): readonly InputIssue[] {
  try {
    parse();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidInputError);
    return (error as InvalidInputError).issues;
  }
  throw new Error('expected the input to be refused');
}

describe('plans', () => {
  const preempt = (attempt: number): ChaosFault => ({ kind: 'preempt', attempt, node: 0, afterMs: 300, warningMs: 500 });

  it('makes --preempt-attempts a warning to node 0 300 ms into run and its end 500 ms later, once per attempt', () => {
    expect(preemptAttemptsPlan([1, 3, 1])).toEqual({ faults: [preempt(1), preempt(3)] });
    expect(preemptAttemptsPlan([])).toEqual(NO_CHAOS);
  });

  it.each([[0], [1.5], [1001], [1e20], [Number.NaN]])('refuses --preempt-attempts %d', (attempt) => {
    expect(issuesOf(() => preemptAttemptsPlan([1, attempt]))).toEqual([
      { path: '--preempt-attempts', message: `expected attempt numbers from 1 to 1000, got ${String(attempt)}` },
    ]);
  });

  it("gives preempt's default warning room for the local grace period and the agent's end, as EC2's 120 s give its 90 s", () => {
    expect(DEFAULT_PREEMPT_WARNING_MS).toBeGreaterThanOrEqual((LOCAL_STOP_GRACE_SECONDS + 5) * 1000);
  });

  it('merges two plans, the first one first', () => {
    const file = parseChaosFile('faults: [{attempt: 2, drop_events: true}]');
    expect(mergeChaos(file, preemptAttemptsPlan([1]))).toEqual({ faults: [...file.faults, preempt(1)] });
    expect(mergeChaos(NO_CHAOS, NO_CHAOS)).toEqual({ faults: [] });
  });

  it("merges the boot: the second plan's when it gives one, else the first's", () => {
    const serve = parseChaosFile('boot: 20s');
    const run = parseChaosFile('boot: 1s');
    expect(mergeChaos(serve, run).bootMs).toBe(1_000);
    expect(mergeChaos(serve, preemptAttemptsPlan([1])).bootMs).toBe(20_000);
    expect(mergeChaos(NO_CHAOS, run).bootMs).toBe(1_000);
    expect(mergeChaos(NO_CHAOS, NO_CHAOS)).not.toHaveProperty('bootMs');
  });

  it('picks the faults of one attempt, in the plan order', () => {
    const plan = parseChaosFile('faults:\n  - {attempt: 2, lose: {}}\n  - {attempt: 1, drop_events: true}\n  - {attempt: 2, no_capacity: 1}');
    expect(faultsOfAttempt(plan, 2).map((fault) => fault.kind)).toEqual(['lose', 'no_capacity']);
    expect(faultsOfAttempt(plan, 3)).toEqual([]);
  });
});

describe('chaosIssuesForTask', () => {
  const plan = parseChaosFile(
    [
      'faults:',
      '  - {attempt: 1, no_capacity: 2}',
      '  - attempt: 1',
      '    preempt:',
      '      after: 1s',
      '      node: 3',
      '  - {attempt: 2, lose: {node: 1}}',
      '  - {attempt: 2, silence: {node: 63}}',
      '  - {attempt: 3, drop_events: true}',
    ].join('\n'),
  );

  it.each<[number, readonly InputIssue[]]>([
    [
      1,
      [
        { path: 'faults[1].preempt.node', message: 'expected node 0 (the task has 1 node), got 3', line: 6 },
        { path: 'faults[2].lose.node', message: 'expected node 0 (the task has 1 node), got 1', line: 7 },
        { path: 'faults[3].silence.node', message: 'expected node 0 (the task has 1 node), got 63', line: 8 },
      ],
    ],
    [
      2,
      [
        { path: 'faults[1].preempt.node', message: 'expected a node from 0 to 1 (the task has 2 nodes), got 3', line: 6 },
        { path: 'faults[3].silence.node', message: 'expected a node from 0 to 1 (the task has 2 nodes), got 63', line: 8 },
      ],
    ],
    [4, [{ path: 'faults[3].silence.node', message: 'expected a node from 0 to 3 (the task has 4 nodes), got 63', line: 8 }]],
    [64, []],
  ])('with num_nodes %i, names each fault whose node the task lacks', (numNodes, issues) => {
    expect(chaosIssuesForTask(plan, numNodes)).toEqual(issues);
  });

  it('names a fault made without a file by its place in the plan', () => {
    const made: ChaosPlan = { faults: [{ kind: 'drop_events', attempt: 1 }, { kind: 'lose', attempt: 1, node: 2, afterMs: 0 }] };
    expect(chaosIssuesForTask(made, 2)).toEqual([
      { path: 'faults[1].lose.node', message: 'expected a node from 0 to 1 (the task has 2 nodes), got 2' },
    ]);
  });

  it('finds nothing wrong with --preempt-attempts on a one-node task', () => {
    expect(chaosIssuesForTask(preemptAttemptsPlan([1, 2]), 1)).toEqual([]);
  });
});
