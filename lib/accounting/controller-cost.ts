// The controller's own cost for one job: the calls its attempts made, counted from their
// records, priced by the same lines the scale benchmark prices a run with (prices.ts).

import { HEARTBEAT_INTERVAL_SECONDS } from '../agent/protocol.ts';
import type { AttemptRecord } from '../model.ts';
import { controllerCostLines, type ControllerCounts } from './prices.ts';
import { ms } from './timeline.ts';

/**
 * What one step costs the controller, as the deployed stack makes it (docs/architecture.md):
 * an attempt is 7 state transitions and 5 controller Lambdas (launch, the two awaits'
 * token writes, the decision, the release), about 10 write and 6 read units; each
 * heartbeat and report is one API request, one API Lambda, one write and two reads; each
 * node's instance sends EC2 events (free) and its agent reads its secret from SSM once.
 * Lambda time per invocation is the scale benchmark's model (bench/scale/simulation.ts).
 */
export const CONTROLLER_STEP_COUNTS = {
  transitionsPerAttempt: 7,
  transitionsPerBackoffWait: 1,
  lambdasPerAttempt: 5,
  lambdaSecondsPerAttempt: 1.2 + 0.06 + 0.06 + 0.08 + 0.4,
  writesPerAttempt: 10,
  readsPerAttempt: 6,
  writesPerCallback: 1,
  readsPerCallback: 2,
  apiLambdaSeconds: 0.06,
  lambdaMemoryGb: 0.5,
} as const;

/** The counts one job's attempts made, from their records. */
export function controllerCountsOf(attempts: readonly AttemptRecord[]): ControllerCounts {
  const c = CONTROLLER_STEP_COUNTS;
  let transitions = 0;
  let callbacks = 0;
  let nodes = 0;
  for (const attempt of attempts) {
    transitions += c.transitionsPerAttempt + ((attempt.decision?.delaySeconds ?? 0) > 0 ? c.transitionsPerBackoffWait : 0);
    nodes += attempt.instances.length;
    callbacks += attempt.reports.length + heartbeatsOf(attempt);
  }
  const n = attempts.length;
  return {
    transitions,
    lambdaInvocations: n * c.lambdasPerAttempt + callbacks,
    lambdaGbSeconds: (n * c.lambdaSecondsPerAttempt + callbacks * c.apiLambdaSeconds) * c.lambdaMemoryGb,
    writeUnits: n * c.writesPerAttempt + callbacks * c.writesPerCallback,
    readUnits: n * c.readsPerAttempt + callbacks * c.readsPerCallback,
    apiRequests: callbacks,
    awsEvents: nodes * 2,
    ssmCalls: nodes,
  };
}

/** The heartbeats an attempt's nodes sent: one at each first beat, then one a minute until its end. */
function heartbeatsOf(attempt: AttemptRecord): number {
  const end = ms(attempt.endedAt) ?? ms(attempt.lastHeartbeatAt);
  let beats = 0;
  for (const marks of Object.values(attempt.nodeMarks ?? {})) {
    const first = ms(marks.firstHeartbeatAt);
    if (first === null) continue;
    beats += 1 + Math.max(0, Math.floor(((end ?? first) - first) / 1000 / HEARTBEAT_INTERVAL_SECONDS));
  }
  return beats;
}

/** The controller's cost for a job with these attempts, in US dollars. */
export function controllerCostOf(attempts: readonly AttemptRecord[]): number {
  return controllerCostLines(controllerCountsOf(attempts)).reduce((sum, line) => sum + line.dollars, 0);
}
