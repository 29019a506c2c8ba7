// What the AWS SDK throws, read the same way by every adapter: its code, and whether it is
// a fault that time will fix (throttling, a 5xx) rather than one in the request.

import { TransientError } from '../errors.ts';

/** The AWS error code: the SDK puts it in `name` (EC2's query errors also in `Code`). */
export function awsErrorCode(error: unknown): string {
  if (typeof error !== 'object' || error === null) return '';
  const { name, Code } = error as { name?: unknown; Code?: unknown };
  if (typeof Code === 'string') return Code;
  return typeof name === 'string' ? name : '';
}

/**
 * Codes that say "slow down", as DynamoDB (ProvisionedThroughputExceededException,
 * ThrottlingException, RequestLimitExceeded), Step Functions (ThrottlingException,
 * KmsThrottlingException) and EC2 (RequestLimitExceeded) answer them. Several are HTTP 400,
 * so the status alone would miss them.
 */
const THROTTLING_CODES: ReadonlySet<string> = new Set([
  'ProvisionedThroughputExceededException',
  'RequestLimitExceeded',
  'ThrottlingException',
  'Throttling',
  'KmsThrottlingException',
  'TooManyRequestsException',
  'RequestThrottled',
  'RequestThrottledException',
]);

/**
 * Codes of a fault on AWS's side, for an error that does not carry its HTTP status (EC2's
 * query protocol names them; DynamoDB's InternalServerError is a 500 anyway).
 */
const SERVER_FAULT_CODES: ReadonlySet<string> = new Set([
  'InternalServerError',
  'InternalError',
  'InternalFailure',
  'ServiceUnavailable',
  'ServiceUnavailableException',
  'Unavailable',
]);

/**
 * Whether an SDK error is throttling or a server-side fault (any 5xx): the request was
 * fine and the same call may succeed later. A refused condition, a validation error, a
 * missing resource or a denied permission (all 4xx) is not. Callers with 5xx codes that
 * mean something else (EC2's capacity errors) must sort those out first.
 */
export function isTransientAwsError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = awsErrorCode(error);
  if (THROTTLING_CODES.has(code) || SERVER_FAULT_CODES.has(code)) return true;
  const { $metadata, $retryable } = error as { $metadata?: { httpStatusCode?: unknown }; $retryable?: { throttling?: unknown } };
  if ($retryable?.throttling === true) return true;
  const status = $metadata?.httpStatusCode;
  return typeof status === 'number' && status >= 500 && status <= 599;
}

/**
 * `error` as a TransientError naming the call (`DynamoDB GetItem in us-east-1`), the
 * retries it outlived and the SDK's code, with the SDK's error as its cause. For an error
 * isTransientAwsError (or an adapter's own classification) has judged transient.
 */
export function transientError(call: string, error: unknown, retries = "the SDK's retries"): TransientError {
  const code = awsErrorCode(error) || 'an error with no code';
  const status = (error as { $metadata?: { httpStatusCode?: unknown } } | null)?.$metadata?.httpStatusCode;
  const http = typeof status === 'number' ? `, HTTP ${status}` : '';
  const message = error instanceof Error && error.message !== '' && error.message !== code ? `: ${error.message}` : '';
  return new TransientError(
    `${call}: throttled or failed on AWS's side after ${retries} (${code}${http}${message}); the step can be tried again later`,
    { cause: error },
  );
}

/**
 * Runs one AWS call. An error isTransientAwsError accepts becomes a TransientError naming
 * `call`; any other error is thrown as it is, so the adapter can still read the SDK's
 * exception (a refused condition, an unknown token).
 */
export async function sendAws<T>(call: string, send: () => Promise<T>): Promise<T> {
  try {
    return await send();
  } catch (error) {
    if (isTransientAwsError(error)) throw transientError(call, error);
    throw error;
  }
}
