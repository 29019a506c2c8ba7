// The error hierarchy: every error relaunch raises on purpose, each with a literal name.
//
// Names are literal strings (not `this.constructor.name`) because Lambda reports the name
// and Step Functions Catch/Retry match on it; a minifier would otherwise rename classes.

/** An error's message, whatever was thrown. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** One problem found in user input, located by its path (and line, when known). */
export interface InputIssue {
  /** Dotted path with list indexes, e.g. `resources.job_recovery.recover_on_exit_codes[1]`. */
  readonly path: string;
  /** What was expected and what arrived. */
  readonly message: string;
  /** 1-based line in the source file, when the input came from a file. */
  readonly line?: number;
}

/** Base of every error relaunch raises deliberately. */
export abstract class RelaunchError extends Error {
  abstract override readonly name: string;
}

/** A task file (or API body) that is not a valid task; carries every issue found. */
export class InvalidTaskSpecError extends RelaunchError {
  override readonly name = 'InvalidTaskSpecError';
  constructor(readonly issues: readonly InputIssue[]) {
    super(issues.map(formatIssue).join('\n'));
  }
}

/** Input to a command or an API route that is not what it accepts (not a task file). */
export class InvalidInputError extends RelaunchError {
  override readonly name = 'InvalidInputError';
  constructor(readonly issues: readonly InputIssue[]) {
    super(issues.map(formatIssue).join('\n'));
  }
}

/** No job with that id. */
export class JobNotFoundError extends RelaunchError {
  override readonly name = 'JobNotFoundError';
  constructor(readonly jobId: string) {
    super(`no job with id ${jobId}`);
  }
}

/** A status change the job's current status does not allow. */
export class IllegalTransitionError extends RelaunchError {
  override readonly name = 'IllegalTransitionError';
  constructor(
    readonly from: string,
    readonly to: string,
  ) {
    super(`a job cannot go from ${from} to ${to}`);
  }
}

/** A write that lost a race: the stored state is no longer what the writer expected. */
export class ConcurrentUpdateError extends RelaunchError {
  override readonly name = 'ConcurrentUpdateError';
}

/** A report, heartbeat or event for an attempt that is no longer the live one. */
export class StaleAttemptError extends RelaunchError {
  override readonly name = 'StaleAttemptError';
}

/**
 * A submit whose idempotency key an earlier submit of the same caller already used, for
 * a different task, within the key's lifetime: the request is refused, nothing is created.
 */
export class IdempotencyKeyReusedError extends RelaunchError {
  override readonly name = 'IdempotencyKeyReusedError';
  constructor(readonly jobId: string) {
    super(`the idempotency key was already used for a different task (job ${jobId}); send a new key with a new task`);
  }
}

/** A callback whose per-attempt secret does not match. */
export class UnauthorizedError extends RelaunchError {
  override readonly name = 'UnauthorizedError';
}

/** An event for a job that has already reached a terminal status. */
export class JobAlreadyFinishedError extends RelaunchError {
  override readonly name = 'JobAlreadyFinishedError';
}

/** Renders an issue the way every surface shows it: `path: message (line N)`. */
export function formatIssue(issue: InputIssue): string {
  const where = issue.path === '' ? '' : `${issue.path}: `;
  const line = issue.line === undefined ? '' : ` (line ${issue.line})`;
  return `${where}${issue.message}${line}`;
}

/** No zone, region or instance type had capacity within the launch retry budget. */
export class NoCapacityError extends RelaunchError {
  override readonly name = 'NoCapacityError';
}

/** A spec the compute cannot run at all (unknown instance type, bad image): never retried. */
export class PrecheckError extends RelaunchError {
  override readonly name = 'PrecheckError';
}

/** Instances that were told to terminate and are still not shutting down. */
export class InstancesStillRunningError extends RelaunchError {
  /** The name Step Functions matches to retry a release. */
  static readonly errorName = 'InstancesStillRunningError';
  override readonly name = InstancesStillRunningError.errorName;
}

/**
 * An AWS call that was throttled or failed on AWS's side (a 5xx) and was still failing
 * when the SDK's own retries (and an adapter's, where it has some) gave up. Nothing is
 * wrong with the request, so the state machine retries the whole step later, with
 * backoff, instead of ending the job FAILED_CONTROLLER. Only adapters raise it; `cause`
 * holds the SDK's error.
 */
export class TransientError extends RelaunchError {
  /** The name Step Functions matches to retry a step. */
  static readonly errorName = 'TransientError';
  override readonly name = TransientError.errorName;
}

/** A Lambda deployed without a setting it needs, or with one it cannot read. */
export class ConfigurationError extends RelaunchError {
  override readonly name = 'ConfigurationError';
}

/** A cloud API answered without something it always returns (an ARN, an IP). */
export class UnexpectedCloudResponseError extends RelaunchError {
  override readonly name = 'UnexpectedCloudResponseError';
}
