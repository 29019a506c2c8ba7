// What the Lambdas emit for operations (functions/shared/metrics.ts, log.ts, notify.ts) and
// the alarms and dashboard in infra/ read: the metrics' namespace, names and dimensions, and
// the variables that switch them. Written once here, imported by both sides; nothing in it
// loads Powertools or the SDK.

/** The CloudWatch namespace of every relaunch metric. */
export const METRICS_NAMESPACE = 'relaunch';

/**
 * Powertools' `service` dimension, on every metric (and `service` on every log line): the
 * deployment's name prefix, so two relaunch stacks in one account keep their metrics apart.
 */
export const SERVICE_NAME_ENV = 'POWERTOOLS_SERVICE_NAME';

/** The service name when SERVICE_NAME_ENV is not set (tests, the default prefix). */
export const DEFAULT_SERVICE_NAME = 'relaunch';

/** The SNS topic a job's terminal status is published to; unset, nothing is published. */
export const JOB_NOTIFICATIONS_TOPIC_ENV = 'JOB_NOTIFICATIONS_TOPIC_ARN';

/** Metric names. Each is a count unless its comment says otherwise. */
export const MetricName = {
  /** One per recovery decision; no dimension, and Action with ExitCode. */
  decisions: 'Decisions',
  /** One per job that reached a terminal status; dimension Status. */
  jobsEnded: 'JobsEnded',
  /** One per attempt ended by a spot preemption; no dimension, and Zone with InstanceType. */
  preemptions: 'Preemptions',
  /**
   * Milliseconds from the previous attempt's end (its exit, preemption or loss) to the next
   * attempt's instances being launched, backoff included; no dimension, and Outcome.
   */
  exitToRelaunch: 'ExitToRelaunch',
  /** One per launch that started no instance; no dimension, and Error. */
  launchFailures: 'LaunchFailures',
  /** One per terminal-status notification SNS did not take; no dimension. */
  notificationFailures: 'NotificationFailures',
  /** An ended job's goodput, percent (lib/accounting: useful run time / wall time); no dimension. */
  jobGoodput: 'JobGoodput',
  /** An ended job's instances' cost, US dollars (spot at launch, or the price table); no dimension. */
  jobCost: 'JobCost',
} as const;
/** One of relaunch's metric names. */
export type MetricName = (typeof MetricName)[keyof typeof MetricName];

/** Dimension names, beside Powertools' `service`. */
export const MetricDimension = {
  service: 'service',
  /** The decision's action: SUCCEED, RESTART, RECOVER or FAIL. */
  action: 'Action',
  /** The exit code that decided (the root-cause node's), or NO_EXIT_CODE. */
  exitCode: 'ExitCode',
  /** A terminal job status: SUCCEEDED, FAILED, FAILED_CONTROLLER, ... */
  status: 'Status',
  zone: 'Zone',
  instanceType: 'InstanceType',
  /** How the attempt before a relaunch ended: EXITED, PREEMPTED, LOST, LAUNCH_FAILED. */
  outcome: 'Outcome',
  /** Why a launch started nothing: NO_RESOURCE, PRECHECKS, or the name of the error thrown. */
  error: 'Error',
} as const;

/** ExitCode's value for a decision no exit code made (a preemption, a lost instance, a launch). */
export const NO_EXIT_CODE = 'none';
