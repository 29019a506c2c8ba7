// Nodes that end together: the decision is a function of the attempt's set of codes, in
// every order their reports arrive (a fake clock, inside the wait for peers' codes), and is
// the one `relaunch simulate` gives for the same codes.

import { describe, expect, it } from 'vitest';
import { PEER_REPORT_WAIT_MS } from '../../../../lib/outcome.ts';
import { simulate } from '../../../../lib/simulate.ts';
import type { RecoveryPolicy } from '../../../../lib/task-file/types.ts';
import { evaluatePolicy } from '../../../../lib/usecases/evaluate-policy.ts';
import { givenLaunched, harness, JOB_ID, report, taskSpec } from '../../../support/usecases-harness.ts';

/** Every order of `items`. */
function orders<T>(items: readonly T[]): T[][] {
  if (items.length <= 1) return [[...items]];
  return items.flatMap((item, index) => orders([...items.slice(0, index), ...items.slice(index + 1)]).map((rest) => [item, ...rest]));
}

/** Lets every pending promise and immediate run, so a report under way is stored. */
async function settle(): Promise<void> {
  for (let round = 0; round < 20; round += 1) await new Promise((resolve) => setImmediate(resolve));
}

/**
 * Attempt 1 of a job with `codes.length` nodes, each node's setup 0, then each run's code in
 * `order` (ranks), one second apart on the clock: all inside the wait for peers. Returns
 * the policy's decision.
 */
async function decideInOrder(recovery: Partial<RecoveryPolicy>, codes: readonly number[], order: readonly number[]) {
  const h = harness();
  h.clock.hold();
  const spec = taskSpec({ numNodes: codes.length, recovery });
  await givenLaunched(h, spec);
  for (let rank = 0; rank < codes.length; rank += 1) await report(h, 1, 'setup', 0, rank);
  const answers: Promise<unknown>[] = [];
  for (const [index, rank] of order.entries()) {
    if (index > 0) h.clock.advance(1);
    answers.push(report(h, 1, 'run', codes[rank] ?? 0, rank));
    await settle();
  }
  // Everything in: the last report decided; the first one's wait ends on the clock.
  h.clock.advance(PEER_REPORT_WAIT_MS / 1000);
  await Promise.all(answers);
  const decided = await evaluatePolicy({ jobId: JOB_ID, attempt: 1, attemptsInExecution: 1 }, h.deps);
  return decided.decision;
}

function simulated(recovery: Partial<RecoveryPolicy>, codes: readonly number[]) {
  const [decision] = simulate(taskSpec({ numNodes: codes.length, recovery }), [`exit:${codes.join('+')}`]).decisions;
  return { action: decision?.action, status: decision?.status, reason: decision?.reason };
}

const CASES: { name: string; recovery: Partial<RecoveryPolicy>; codes: number[] }[] = [
  { name: 'a fail-on code and a recover-on code', recovery: { failOnExitCodes: [42], recoverOnExitCodes: [3] }, codes: [42, 3] },
  { name: 'a recover-on code and an ordinary failure', recovery: { recoverOnExitCodes: [3], maxRestartsOnErrors: 0 }, codes: [1, 3] },
  { name: 'a fail-on code, a recover-on code and a 0', recovery: { failOnExitCodes: [42], recoverOnExitCodes: [3] }, codes: [3, 0, 42] },
  { name: 'three failures, one on the recover list', recovery: { recoverOnExitCodes: [29], maxRestartsOnErrors: 1 }, codes: [1, 29, 137] },
];

describe('codes of nodes that end together are decided as a set', () => {
  it('waits a bounded time for the peers', () => {
    expect(PEER_REPORT_WAIT_MS).toBeGreaterThan(2_000);
  });

  for (const { name, recovery, codes } of CASES) {
    it.each(orders(codes.map((_code, rank) => rank)).map((order) => [order.join(' then ')!, order] as const))(
      `${name} (${codes.join(', ')}): node %s decides as simulate does`,
      async (_label, order) => {
        const decision = await decideInOrder(recovery, codes, order);
        expect({ action: decision?.action, status: decision?.status, reason: decision?.reason }).toEqual(simulated(recovery, codes));
      },
    );
  }

  it('decides without a peer that has not reported when the wait is over: its code unknown, killed by relaunch', async () => {
    const h = harness();
    h.clock.hold();
    await givenLaunched(h, taskSpec({ numNodes: 2, recovery: { recoverOnExitCodes: [3] } }));
    await report(h, 1, 'setup', 0, 0);
    await report(h, 1, 'setup', 0, 1);
    const answer = report(h, 1, 'run', 3, 0);
    await settle();
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toBeNull();
    h.clock.advance(PEER_REPORT_WAIT_MS / 1000);
    await answer;
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toEqual({
      kind: 'EXITED',
      phase: 'run',
      nodes: [
        { rank: 0, exitCode: 3 },
        { rank: 1, exitCode: null, killedByController: true, unknownReason: 'stopped because node 0 failed' },
      ],
    });
  });
});
