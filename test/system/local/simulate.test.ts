// `relaunch simulate` promises the decisions a real run makes: the same task file, fed the
// events a real run produced, must give the same action, status and reason per attempt.

import { describe, expect, it } from 'vitest';
import { simulate } from '../../../lib/simulate.ts';
import { parseTaskFile } from '../../../lib/task-file/parse.ts';
import type { AttemptView } from '../../../lib/views.ts';
import { NO_CHAOS, preemptAttemptsPlan } from '../../../local/chaos.ts';
import { preemptedNodeJob, runToEnd, useLocalRuntimes, yaml } from '../../support/local-harness.ts';

const open = useLocalRuntimes();

/** The simulate event that stands for how a real attempt ended. */
function eventOf(attempt: AttemptView): string {
  switch (attempt.outcome) {
    case 'EXITED':
      return `${attempt.phase === 'setup' ? 'setup' : 'exit'}:${attempt.exitCodes.join('+')}`;
    case 'PREEMPTED':
      return 'preempt';
    default:
      throw new Error(`attempt ${attempt.attempt} ended ${String(attempt.outcome)}, which simulate has no event for here`);
  }
}

const TASKS = [
  {
    name: 'listed codes and ordinary errors interleaved (M=1)',
    events: ['exit:29', 'exit:1', 'exit:29', 'exit:2'],
    markets: ['on-demand', 'on-demand', 'on-demand', 'on-demand'],
    chaos: NO_CHAOS,
    task: yaml`
      resources:
        job_recovery:
          max_restarts_on_errors: 1
          recover_on_exit_codes: [29]
      run: |
        case "$RELAUNCH_ATTEMPT" in 1|3) exit 29 ;; 2) exit 1 ;; *) exit 2 ;; esac
    `,
  },
  {
    name: 'setup and run failures sharing the budget (M=2)',
    events: ['setup:1', 'exit:1', 'setup:1'],
    markets: ['on-demand', 'on-demand', 'on-demand'],
    chaos: NO_CHAOS,
    task: yaml`
      resources:
        job_recovery:
          max_restarts_on_errors: 2
      setup: |
        if [ "$RELAUNCH_ATTEMPT" -ne 2 ]; then exit 1; fi
      run: |
        exit 1
    `,
  },
  {
    name: 'a preemption, the on-demand fallback, then a fail-fast code',
    events: ['preempt', 'exit:3'],
    // The policy moved the job to on-demand: the second attempt was launched there.
    markets: ['spot', 'on-demand'],
    chaos: preemptAttemptsPlan([1]),
    task: yaml`
      resources:
        use_spot: true
        job_recovery:
          max_restarts_on_errors: 3
          fail_on_exit_codes: [3]
          on_demand_fallback_after: 1
      run: |
        if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then sleep 30; fi
        exit 3
    `,
  },
];

describe('simulate against a real run', () => {
  it.each(TASKS)('decides alike: $name', async ({ task, events, markets, chaos }) => {
    const t = await open();
    const job = await runToEnd(t, task, { chaos });
    // The run produced the events the case is about (else the comparison proves little).
    expect(job.view.attempts.map(eventOf)).toEqual(events);
    expect(job.view.attempts.map((a) => a.market)).toEqual(markets);

    const simulated = simulate(parseTaskFile(task).spec, events);

    expect(job.attempts.map((a) => ({ action: a.decision?.action, status: a.decision?.status, reason: a.decision?.reason }))).toEqual(
      simulated.decisions.map((d) => ({ action: d.action, status: d.status, reason: d.reason })),
    );
    expect(job.view.status).toBe(simulated.final.status);
    const last = simulated.decisions.at(-1);
    expect({ restartsOnErrors: job.view.restartsOnErrors, recoveryCount: job.view.recoveryCount }).toEqual({
      restartsOnErrors: last?.restartsOnErrors,
      recoveryCount: last?.recoveryCount,
    });
  });

  it('decides alike with a standby of the warned node alone: the warned node replaced, the others kept and joining the standby', { timeout: 90_000 }, async () => {
    const t = await open();
    const { task, chaos } = preemptedNodeJob({ numNodes: 2, node: 1, warningSeconds: 20, launchOnWarning: true });
    const job = await runToEnd(t, task, { chaos });
    const [first, second] = job.attempts;
    // The run produced the events the case is about.
    expect(first?.interruptionNode).toBe(1);
    expect(first?.outcome).toEqual({ kind: 'PREEMPTED', nodes: [1] });
    expect(job.view.attempts.map(eventOf)).toEqual(['preempt', 'exit:0+0']);

    const simulated = simulate(parseTaskFile(task).spec, ['warn@1', 'preempt@1', 'exit:0+0']);

    // The controller appends the nodes it keeps to the decision's reason; simulate prints them apart.
    const withNodes = simulated.decisions.map((d) => (d.nodes === undefined || d.nodes.kept.length === 0 ? d.reason : `${d.reason}; relaunch ${d.nodes.reason}`));
    expect(job.attempts.map((a) => a.decision?.reason)).toEqual(withNodes);
    expect(first?.decision?.keep?.nodes.map((node) => node.nodeRank)).toEqual(simulated.decisions[0]?.nodes?.kept);
    expect(second?.standby?.adoptedAt).toEqual(expect.any(String));
    expect(simulated.decisions[0]?.standby).toBe('adopted');
    expect(job.view.status).toBe(simulated.final.status);
  });
});
