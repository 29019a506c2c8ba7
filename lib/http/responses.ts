// Errors to HTTP answers: one table, so every surface answers the same status for the same fault.

import {
  ConcurrentUpdateError,
  TransientError,
  IdempotencyKeyReusedError,
  IllegalTransitionError,
  InvalidInputError,
  InvalidTaskSpecError,
  JobAlreadyFinishedError,
  JobNotFoundError,
  StaleAttemptError,
  UnauthorizedError,
  type InputIssue,
} from '../errors.ts';
import { STALE_ATTEMPT_STATUS } from '../agent/protocol.ts';
import { IDEMPOTENCY_KEY_HEADER } from './idempotency-key.ts';
import type { ApiResponse } from './types.ts';

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8' } as const;

/** A JSON answer. */
export function json(statusCode: number, body: unknown, headers: Readonly<Record<string, string>> = {}): ApiResponse {
  return { statusCode, headers: { ...JSON_HEADERS, ...headers }, body: JSON.stringify(body) };
}

/** `400 {error, issues}`: what was wrong, each issue located by path (and line). */
export function badRequest(error: string, issues: readonly InputIssue[]): ApiResponse {
  return json(400, { error, issues: issues.map(({ path, message, line }) => ({ path, message, ...(line === undefined ? {} : { line }) })) });
}

/** The message every 401 carries: nothing about which part of the proof failed. */
export const UNAUTHORIZED_MESSAGE = 'the callback secret does not match this attempt';
/** The message every 500 carries: the cause is logged, never sent. */
export const INTERNAL_ERROR_MESSAGE = 'internal error; the request was logged';

/** Seconds a 503 for a lost race asks the caller to wait before trying again. */
export const CONFLICT_RETRY_AFTER_SECONDS = 1;

/**
 * The answer for an error a route raised, or undefined for one no route expects (a 500,
 * answered by the caller after reporting it).
 *
 * | error | status |
 * |---|---|
 * | InvalidTaskSpecError, InvalidInputError | 400 with issues |
 * | UnauthorizedError | 401 |
 * | JobNotFoundError | 404 |
 * | StaleAttemptError | 409 (STALE_ATTEMPT_STATUS: the agent stops retrying) |
 * | IllegalTransitionError, JobAlreadyFinishedError | 409 |
 * | IdempotencyKeyReusedError | 422, located at the Idempotency-Key header |
 * | ConcurrentUpdateError, TransientError | 503 with Retry-After |
 *
 * 409 is the agent's "stop": only a stale attempt may answer it on the agent's routes. A
 * lost race (ConcurrentUpdateError) is transient, so it is a 503 the agent (which retries
 * every non-2xx) and a user may simply try again; so is a throttle or an AWS fault that
 * outlasted the SDK's retries (TransientError). IllegalTransitionError keeps 409: the
 * agent's routes only ever move a job STARTING -> RUNNING, which is always legal, so only
 * a user route (cancel) could raise it, and for a user it is a refusal, not a hiccup.
 */
export function errorResponse(error: unknown): ApiResponse | undefined {
  if (error instanceof InvalidTaskSpecError) return badRequest(countIssues('the task is not valid', error.issues), error.issues);
  if (error instanceof InvalidInputError) return badRequest(countIssues('the request is not valid', error.issues), error.issues);
  if (error instanceof UnauthorizedError) return json(401, { error: UNAUTHORIZED_MESSAGE });
  if (error instanceof JobNotFoundError) return json(404, { error: error.message });
  if (error instanceof StaleAttemptError) return json(STALE_ATTEMPT_STATUS, { error: error.message });
  if (error instanceof ConcurrentUpdateError || error instanceof TransientError) {
    return json(503, { error: error.message }, { 'retry-after': String(CONFLICT_RETRY_AFTER_SECONDS) });
  }
  if (error instanceof IllegalTransitionError || error instanceof JobAlreadyFinishedError) return json(409, { error: error.message });
  if (error instanceof IdempotencyKeyReusedError) {
    return json(422, { error: `${IDEMPOTENCY_KEY_HEADER}: ${error.message}`, issues: [{ path: IDEMPOTENCY_KEY_HEADER, message: error.message }] });
  }
  return undefined;
}

function countIssues(what: string, issues: readonly InputIssue[]): string {
  return `${what} (${issues.length} ${issues.length === 1 ? 'issue' : 'issues'})`;
}
