// The controller's ASL as the local engine runs it: the Lambda Tasks' timeouts, which on
// AWS stand for an invocation lost with no answer, never fire locally, where a step runs in
// this process and can only be late (a stalled event loop), never lost.

import { describe, expect, it } from 'vitest';
import { renderControllerAsl } from '../../../infra/asl.ts';
import { StateName } from '../../../lib/workflow/contract.ts';
import { LOCAL_MAX_TASK_SECONDS, localControllerDefinition } from '../../../local/runtime.ts';

type States = Record<string, Record<string, unknown>>;

const deployed = renderControllerAsl().States as States;
const local = localControllerDefinition().States as unknown as States;
const lambdaTasks = Object.keys(deployed).filter(
  (name) => deployed[name]?.Type === 'Task' && name !== StateName.AwaitBoot && name !== StateName.AwaitAttempt,
);

describe('the local controller definition', () => {
  it('has Lambda Tasks whose deployed timeouts are minutes at most', () => {
    expect(lambdaTasks).toEqual(expect.arrayContaining([StateName.LaunchAttempt, StateName.EvaluateRecoveryPolicy, StateName.ReleaseInstances]));
    for (const name of lambdaTasks) expect(deployed[name]?.TimeoutSeconds, name).toBeLessThan(15 * 60);
  });

  it.each(lambdaTasks)('gives %s the longest timeout the engine can set, so a late step is never retried beside itself', (name) => {
    expect(local[name]?.TimeoutSeconds).toBe(LOCAL_MAX_TASK_SECONDS);
    // Retried and caught on the same errors as on AWS (TransientError's pauses are shorter).
    const errors = (states: States): unknown => (states[name]?.Retry as { ErrorEquals: string[] }[]).map((retry) => retry.ErrorEquals);
    expect(errors(local)).toEqual(errors(deployed));
    expect(local[name]?.Catch).toEqual(deployed[name]?.Catch);
  });

  it("keeps the attempt's own clocks: AwaitBoot's boot timeout, AwaitAttempt's heartbeat alone", () => {
    expect(local[StateName.AwaitBoot]?.TimeoutSecondsPath).toBe('$.Payload.bootTimeoutSeconds');
    expect(local[StateName.AwaitAttempt]?.TimeoutSeconds).toBe(LOCAL_MAX_TASK_SECONDS);
  });
});
