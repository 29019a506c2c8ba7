// relaunch's CloudWatch metrics, as EMF lines on stdout (Powertools Metrics): CloudWatch
// Logs turns each line into metric values, with no API call and no latency in the handler.
// Each metric is written at once, as its own line with its own dimension sets, so a handler
// that fails afterwards has still counted what it did; the line's other fields (jobId,
// attempt, ...) stay searchable in Logs Insights without being dimensions.

import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { AttemptRecord } from '../../lib/model.ts';
import type { AttemptOutcome } from '../../lib/policy/types.ts';
import { isTerminal } from '../../lib/status.ts';
import type { DecisionOutput } from '../../lib/workflow/contract.ts';
import { serviceName } from './log.ts';
import { MetricDimension, MetricName, METRICS_NAMESPACE, NO_EXIT_CODE } from '../../lib/workflow/operations.ts';

let instance: Metrics | undefined;

/** The shared Metrics, made on first use; POWERTOOLS_METRICS_DISABLED turns it off. */
function metrics(): Metrics {
  instance ??= new Metrics({ namespace: METRICS_NAMESPACE, serviceName: serviceName() });
  return instance;
}

type Unit = (typeof MetricUnit)[keyof typeof MetricUnit];
type Dimensions = Readonly<Record<string, string>>;
type Metadata = Readonly<Record<string, string | number | undefined>>;

/**
 * Whether to write metrics: in Lambda, where CloudWatch Logs reads the lines (and where
 * POWERTOOLS_METRICS_DISABLED still turns them off). Elsewhere (tests of other things, a
 * handler run by hand) they would be noise, unless POWERTOOLS_METRICS_DISABLED says
 * otherwise.
 */
function enabled(): boolean {
  return process.env.AWS_LAMBDA_FUNCTION_NAME !== undefined || process.env.POWERTOOLS_METRICS_DISABLED !== undefined;
}

/**
 * Writes one EMF line: `value` of `name` under each of `dimensionSets` (`{}` is the metric
 * with `service` alone, the total), with `metadata` as plain fields of the line. No two sets
 * share a dimension: Powertools warns on each line that does.
 */
function emit(name: string, unit: Unit, value: number, dimensionSets: readonly Dimensions[], metadata: Metadata): void {
  if (!enabled()) return;
  const line = metrics().singleMetric();
  for (const dimensions of dimensionSets) line.addDimensions({ ...dimensions });
  for (const [key, field] of Object.entries(metadata)) if (field !== undefined) line.addMetadata(key, String(field));
  // A single metric is flushed by addMetric, so it goes last.
  line.addMetric(name, unit, value);
}

/**
 * Counts a recovery decision, in all and by its action with its deciding exit code. A
 * decision on a preempted attempt also counts a preemption by zone and instance type, and a
 * decision that ends the job counts the job's end by status.
 */
export function recordDecision(attempt: AttemptRecord, decision: DecisionOutput): void {
  const ids = { jobId: attempt.jobId, attempt: attempt.attempt };
  const exitCode = decidingExitCode(attempt.outcome);
  emit(
    MetricName.decisions,
    MetricUnit.Count,
    1,
    [{}, { [MetricDimension.action]: decision.action, [MetricDimension.exitCode]: exitCode }],
    { ...ids, status: decision.status, outcome: attempt.outcome?.kind },
  );
  if (attempt.outcome?.kind === 'PREEMPTED') {
    const zone = attempt.placement?.zone ?? attempt.placement?.region ?? 'unknown';
    const instanceType = attempt.placement?.instanceType ?? 'unknown';
    emit(
      MetricName.preemptions,
      MetricUnit.Count,
      1,
      [{}, { [MetricDimension.zone]: zone, [MetricDimension.instanceType]: instanceType }],
      { ...ids, market: attempt.market },
    );
  }
  if (endsJob(decision)) recordJobEnded(attempt.jobId, decision.status);
}

/** Whether the decision's status is the job's last. */
export function endsJob(decision: DecisionOutput): boolean {
  return isTerminal(decision.status);
}

/** Counts a job that reached a terminal status (the FAILED_CONTROLLER alarm reads this). */
export function recordJobEnded(jobId: string, status: string): void {
  emit(MetricName.jobsEnded, MetricUnit.Count, 1, [{ [MetricDimension.status]: status }], { jobId });
}

/** Records an ended job's goodput (percent) and its instances' cost (dollars), when known. */
export function recordJobAccount(jobId: string, goodput: number | null, dollars: number | null): void {
  if (goodput !== null) emit(MetricName.jobGoodput, MetricUnit.Percent, goodput * 100, [{}], { jobId });
  if (dollars !== null) emit(MetricName.jobCost, MetricUnit.NoUnit, dollars, [{}], { jobId });
}

/**
 * Records how long a relaunch took: from the end of `previous` (the attempt before it) to
 * `launchedAt`, when the next attempt's instances were launched. Backoff waits are in it:
 * it is the gap the job saw.
 */
export function recordRelaunch(previous: AttemptRecord, launchedAt: Date): void {
  if (previous.endedAt === null) return;
  const milliseconds = Math.max(0, launchedAt.getTime() - Date.parse(previous.endedAt));
  emit(
    MetricName.exitToRelaunch,
    MetricUnit.Milliseconds,
    milliseconds,
    [{}, { [MetricDimension.outcome]: previous.outcome?.kind ?? 'unknown' }],
    { jobId: previous.jobId, attempt: previous.attempt + 1 },
  );
}

/**
 * Counts a launch that started no instance, by why: NO_RESOURCE or PRECHECKS when the
 * attempt ended LAUNCH_FAILED (with its reason, which names EC2's error, as a plain field),
 * or the name of the error the launch threw.
 */
export function recordLaunchFailure(jobId: string, attempt: number, error: string, reason?: string): void {
  emit(MetricName.launchFailures, MetricUnit.Count, 1, [{}, { [MetricDimension.error]: error }], { jobId, attempt, reason });
}

/** Counts a terminal-status notification that could not be published. */
export function recordNotificationFailure(jobId: string): void {
  emit(MetricName.notificationFailures, MetricUnit.Count, 1, [{}], { jobId });
}

/**
 * The exit code behind an outcome, as a dimension value: 0 when every node exited 0, else
 * the first non-zero code of a node relaunch did not kill (the root cause), else of any
 * node; `unknown` when that node's code is unknown; NO_EXIT_CODE for an attempt that did
 * not exit (preempted, lost, never launched, cancelled).
 */
export function decidingExitCode(outcome: AttemptOutcome | null): string {
  if (outcome?.kind !== 'EXITED') return NO_EXIT_CODE;
  const failing = outcome.nodes.filter((node) => node.exitCode !== 0);
  if (failing.length === 0) return outcome.nodes.length === 0 ? 'unknown' : '0';
  const decider = failing.find((node) => node.killedByController !== true) ?? failing[0];
  return decider?.exitCode == null ? 'unknown' : String(decider.exitCode);
}
