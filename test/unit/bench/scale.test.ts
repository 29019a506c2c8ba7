// The scale simulation at N = 200: jobs end, none for throttling or relaunch's own fault,
// the launch pace holds EC2's bucket, throttled starts are absorbed, and the counts the
// cost model prices agree with each other. Behaviour only: no wall-clock timing.

import { beforeAll, describe, expect, it } from 'vitest';
import { renderControllerAsl, type AslDefinition } from '../../../infra/asl.ts';
import { EC2_LAUNCH_PACE } from '../../../lib/launch-pace.ts';
import { TASK_STATES } from '../../../lib/workflow/contract.ts';
import { LambdaName, TASK_LAMBDAS } from '../../../infra/lambda-catalog.ts';
import { costOf } from '../../../bench/scale/cost.ts';
import { runScaleSimulation, type ScaleOptions, type ScaleResult } from '../../../bench/scale/simulation.ts';

// Runs of one to three minutes (the benchmark's are 4-12) keep each run to a few seconds:
// the agents' heartbeats are most of the events.
const run = (overrides: Partial<ScaleOptions>): Promise<ScaleResult> =>
  runScaleSimulation({ jobs: 200, seed: 7, asl, pace: EC2_LAUNCH_PACE, jobListProjection: 'KEYS_ONLY', runSeconds: [60, 180], ...overrides });

/**
 * Runs of 200 jobs are CPU-bound: this file takes about 10 s alone, and its first run took
 * over 30 s in npm test under two busy loops. The limit is only against a hang.
 */
const SIMULATION_TIMEOUT_MS = 180_000;

let asl: AslDefinition;
let published: ScaleResult;
beforeAll(async () => {
  asl = renderControllerAsl();
  published = await run({});
}, SIMULATION_TIMEOUT_MS);

/** Jobs that failed for a throttle or relaunch's own fault. */
function failedForThrottlingOrController(result: ScaleResult): number {
  return [...result.failedByCause.entries()]
    .filter(([cause]) => cause.startsWith('FAILED_CONTROLLER') || cause.endsWith('throttling'))
    .reduce((sum, [, count]) => sum + count, 0);
}

/** A launch bucket ten times smaller than EC2's, for EC2 and for the pace alike. */
const SMALL_LAUNCH_BUCKET = { burst: 100, perSecond: 2 };

describe('the scale simulation (200 jobs)', () => {
  it('ends every job, none for throttling or a controller fault, with AWS limits as published', () => {
    const result = published;

    expect(result.unfinished).toBe(0);
    expect([...result.statuses.values()].reduce((sum, n) => sum + n, 0)).toBe(200);
    expect(failedForThrottlingOrController(result)).toBe(0);
    expect([...result.handlerErrors.keys()]).toEqual([]);
    // Every job's script asked for at least one attempt, and some for relaunches.
    expect(result.attempts).toBeGreaterThan(200);
    expect(result.sfn.enteredByState.get('EvaluateRecoveryPolicy')).toBe(result.sfn.enteredByState.get('ReleaseInstances'));
  });

  it('keeps the counts the cost model prices consistent with each other', () => {
    const result = published;
    const entered = [...result.sfn.enteredByState.values()].reduce((sum, n) => sum + n, 0);
    expect(result.sfn.transitions).toBe(entered + result.sfn.retries);

    const taskEntries = TASK_STATES.reduce((sum, state) => sum + (result.sfn.enteredByState.get(state) ?? 0), 0);
    const controllerLambdas = new Set<string>(Object.values(TASK_LAMBDAS));
    const controllerInvocations = [...result.lambda.invocations.entries()].filter(([fn]) => controllerLambdas.has(fn)).reduce((sum, [, n]) => sum + n, 0);
    expect(controllerInvocations + result.sfn.lambdaThrottles).toBe(taskEntries + result.sfn.retries);
    expect(result.lambda.invocations.get(LambdaName.api)).toBe(result.api.requests - result.api.throttled);

    const cost = costOf(result);
    expect(cost.relaunchTotal).toBeCloseTo(cost.relaunch.reduce((sum, line) => sum + line.dollars, 0), 10);
    expect(cost.relaunchPer1000Jobs).toBeCloseTo(cost.relaunchTotal * 5, 10);
    expect(cost.relaunch.find((line) => line.item.startsWith('Step Functions'))?.count).toBe(result.sfn.transitions);
    expect(cost.relaunchTotal).toBeGreaterThan(0);
  });

  it('makes launches past a small launch bucket wait in WaitForLaunchPace, and absorbs throttled starts', { timeout: SIMULATION_TIMEOUT_MS }, async () => {
    const result = await run({
      pace: SMALL_LAUNCH_BUCKET,
      limits: { ec2InstanceLaunches: SMALL_LAUNCH_BUCKET, sfnStartExecution: { burst: 20, perSecond: 1 } },
    });

    expect(result.launchesWaitedForPace).toBeGreaterThan(0);
    // EC2's bucket, of the pace's size, never refused an instance: the pace was never exceeded.
    expect(result.ec2.instanceLaunchesThrottled).toBe(0);
    expect(result.startExecutionThrottles).toBeGreaterThan(0);
    expect(result.janitorStarts).toBeGreaterThan(0);
    expect(result.unfinished).toBe(0);
    expect(failedForThrottlingOrController(result)).toBe(0);
  });

  it('sees EC2 refuse instances when the pace is off and the launch bucket is small (the referee can fail)', { timeout: SIMULATION_TIMEOUT_MS }, async () => {
    const result = await run({ pace: { burst: 100_000, perSecond: 10_000 }, limits: { ec2InstanceLaunches: SMALL_LAUNCH_BUCKET } });

    expect(result.launchesWaitedForPace).toBe(0);
    expect(result.ec2.instanceLaunchesThrottled).toBeGreaterThan(0);
  });
});
