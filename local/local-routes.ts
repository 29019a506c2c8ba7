// The local API's routes for the relaunch commands of this machine, beside the REST API's:
// `POST /_local/submit`, a submit with what only a local runtime takes (a chaos plan, and
// `--env`/`--secret` values passed as given rather than written into the task), under the
// caller's idempotency key; and `GET /_local/events/{job}`, a job's status changes with their
// reasons, which `relaunch run` prints as it follows its job through the runtime. Neither is
// a route of the deployed API. A web page may call neither (no Origin, no Sec-Fetch-Site).

import { parseChaosFile } from '../lib/chaos-file/parse.ts';
import type { ChaosPlan } from '../lib/chaos-file/types.ts';
import { InvalidInputError, type InputIssue } from '../lib/errors.ts';
import { headerValue } from '../lib/http/headers.ts';
import { IDEMPOTENCY_KEY_HEADER, IDEMPOTENT_REPLAY_HEADER, idempotencyKeyOf } from '../lib/http/idempotency-key.ts';
import { errorResponse, json } from '../lib/http/responses.ts';
import type { ApiResponse } from '../lib/http/types.ts';
import { isJobId } from '../lib/ids.ts';
import type { JobStore } from '../lib/ports.ts';
import type { SubmitJobResult } from '../lib/usecases/submit-job.ts';

/** The local submit's path. */
export const LOCAL_SUBMIT_PATH = '/_local/submit';
/** The prefix of a job's status changes: `/_local/events/<job id>`. */
export const LOCAL_EVENTS_PREFIX = '/_local/events/';

/** What the local submit's JSON body holds. */
export interface LocalSubmitBody {
  /** The task file's text (its local sources already replaced by what they were stored as). */
  readonly task: string;
  readonly envOverrides?: Readonly<Record<string, string>>;
  readonly secretOverrides?: Readonly<Record<string, string>>;
  /** The faults to inject, as a chaos file (`chaosFileText`); null for none. */
  readonly chaos?: string | null;
}

/** Submits as LocalRuntime.submit does, under an idempotency key when one is given. */
export type LocalSubmitter = (
  task: string,
  options: {
    readonly envOverrides?: Readonly<Record<string, string>>;
    readonly secretOverrides?: Readonly<Record<string, string>>;
    readonly chaos?: ChaosPlan;
    readonly idempotencyKey?: string;
  },
) => Promise<SubmitJobResult>;

/** Whether a request is the local submit (counted as a submit while a runtime stops taking jobs). */
export function isLocalSubmit(request: { readonly method: string; readonly path: string }): boolean {
  return request.method.toUpperCase() === 'POST' && pathOf(request.path) === LOCAL_SUBMIT_PATH;
}

/**
 * Answers a local route, or null for any other request. A request from a browser is
 * refused (403): these routes are for the commands of this machine.
 */
export async function answerLocalRoute(
  request: { readonly method: string; readonly path: string; readonly headers: Readonly<Record<string, string | undefined>>; readonly body: string },
  deps: { readonly store: Pick<JobStore, 'listEvents' | 'getJob'>; readonly submit?: LocalSubmitter },
): Promise<ApiResponse | null> {
  const path = pathOf(request.path);
  const submit = path === LOCAL_SUBMIT_PATH;
  const events = path.startsWith(LOCAL_EVENTS_PREFIX);
  if (!submit && !events) return null;
  if (headerValue(request.headers, 'origin') !== undefined || headerValue(request.headers, 'sec-fetch-site') !== undefined) {
    return json(403, { error: 'refused: this route is for the relaunch commands of this machine, not a web page' });
  }
  const method = request.method.toUpperCase();
  try {
    if (submit) {
      if (method !== 'POST') return json(405, { error: `${LOCAL_SUBMIT_PATH} takes POST` }, { allow: 'POST' });
      if (deps.submit === undefined) return json(404, { error: 'this runtime takes no local submits' });
      return await answerSubmit(request, deps.submit);
    }
    if (method !== 'GET') return json(405, { error: `${LOCAL_EVENTS_PREFIX}{job} takes GET` }, { allow: 'GET' });
    const jobId = decodeURIComponent(path.slice(LOCAL_EVENTS_PREFIX.length));
    if (!isJobId(jobId)) throw new InvalidInputError([{ path: 'job', message: `expected a job id, got "${jobId.slice(0, 40)}"` }]);
    await deps.store.getJob(jobId); // an unknown job is a 404, as GET /jobs/{id} answers
    return json(200, { events: await deps.store.listEvents(jobId) });
  } catch (error) {
    const answer = errorResponse(error);
    if (answer === undefined) throw error;
    return answer;
  }
}

async function answerSubmit(request: { readonly headers: Readonly<Record<string, string | undefined>>; readonly body: string }, submit: LocalSubmitter): Promise<ApiResponse> {
  const type = headerValue(request.headers, 'content-type')?.split(';', 1)[0]?.trim().toLowerCase();
  if (type !== 'application/json') return json(415, { error: `expected application/json (Content-Type), got ${type ?? 'none'}` });
  const key = idempotencyKeyOf(headerValue(request.headers, IDEMPOTENCY_KEY_HEADER.toLowerCase()));
  const body = parseSubmitBody(request.body);
  const chaos = body.chaos === null || body.chaos === undefined ? undefined : parseChaosFile(body.chaos);
  const result = await submit(body.task, {
    envOverrides: body.envOverrides,
    secretOverrides: body.secretOverrides,
    ...(chaos === undefined ? {} : { chaos }),
    ...(key === undefined ? {} : { idempotencyKey: key }),
  });
  return json(202, { jobId: result.jobId, warnings: result.warnings }, result.replayed ? { [IDEMPOTENT_REPLAY_HEADER]: 'true' } : {});
}

/**
 * The local submit's body, checked: a task as text, overrides as maps of text, a chaos
 * file's text or null.
 *
 * @throws InvalidInputError naming each field that is not so.
 */
export function parseSubmitBody(text: string): LocalSubmitBody {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new InvalidInputError([{ path: 'body', message: 'expected a JSON object' }]);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new InvalidInputError([{ path: 'body', message: 'expected a JSON object' }]);
  const { task, envOverrides, secretOverrides, chaos, ...rest } = parsed as Record<string, unknown>;
  const issues: InputIssue[] = Object.keys(rest).map((key) => ({ path: key, message: 'unknown field; expected task, envOverrides, secretOverrides or chaos' }));
  if (typeof task !== 'string') issues.push({ path: 'task', message: 'expected the task file as text' });
  for (const [path, value] of [['envOverrides', envOverrides], ['secretOverrides', secretOverrides]] as const) {
    if (value === undefined) continue;
    const map = typeof value === 'object' && value !== null && !Array.isArray(value) ? Object.values(value) : null;
    if (map === null || map.some((entry) => typeof entry !== 'string')) issues.push({ path, message: 'expected a map of names to text values' });
  }
  if (chaos !== undefined && chaos !== null && typeof chaos !== 'string') issues.push({ path: 'chaos', message: 'expected a chaos file as text, or null' });
  if (issues.length > 0) throw new InvalidInputError(issues);
  return parsed as LocalSubmitBody;
}

/**
 * A chaos plan as a chaos file (JSON, which is YAML) that parseChaosFile reads back as the
 * same plan: the runtime parses what it is sent, never trusts a plan's shape.
 */
export function chaosFileText(plan: ChaosPlan): string {
  const ms = (value: number): string => `${value}ms`;
  const faults = plan.faults.map((fault) => {
    switch (fault.kind) {
      case 'preempt':
        return { attempt: fault.attempt, preempt: { node: fault.node, after: ms(fault.afterMs), warning: ms(fault.warningMs) } };
      case 'rebalance':
      case 'lose':
        return { attempt: fault.attempt, [fault.kind]: { node: fault.node, after: ms(fault.afterMs) } };
      case 'silence':
        return {
          attempt: fault.attempt,
          silence: { node: fault.node, after: ms(fault.afterMs), ...(fault.from === undefined ? {} : { from: fault.from }), ...(fault.forMs === undefined ? {} : { for: ms(fault.forMs) }) },
        };
      case 'no_capacity':
        return { attempt: fault.attempt, no_capacity: fault.tries };
      case 'drop_events':
        return { attempt: fault.attempt, drop_events: true };
    }
  });
  return JSON.stringify({ ...(plan.bootMs === undefined ? {} : { boot: ms(plan.bootMs) }), faults });
}

function pathOf(path: string): string {
  return path.split('?', 1)[0] ?? '';
}
