// handleApiRequest: the REST API with no framework. Route, parse, call one use case, answer;
// API Gateway's Lambda and `relaunch serve` both adapt their requests to this.

import { headerValue } from './headers.ts';
import type * as z from '../zod.ts';
import { InvalidInputError, UnauthorizedError } from '../errors.ts';
import { isJobId, JOB_ID_LENGTH } from '../ids.ts';
import { DataCredentialsBodySchema, HeartbeatBodySchema, HoldBodySchema, LogCredentialsBodySchema, NextBodySchema, ReportBodySchema, secretOfAuthorization, ShipperBodySchema } from '../agent/protocol.ts';
import { cancelJob } from '../usecases/cancel-job.ts';
import { issueDataCredentials, issueLogCredentials, shipperProgram } from '../usecases/data-credentials.ts';
import { heartbeat } from '../usecases/heartbeat.ts';
import { getJob, listJobs } from '../usecases/queries.ts';
import { MAX_CURSOR_LENGTH, readControllerLog, readJobLog, withLogLinks } from '../usecases/read-job-log.ts';
import { reportPhase, reportStoppedPhase } from '../usecases/report-phase.ts';
import { holdOrRun } from '../usecases/standby-attempt.ts';
import { nextAttempt } from '../usecases/next-attempt.ts';
import type { AgentCredentials } from '../usecases/agent.ts';
import { errorResponse, INTERNAL_ERROR_MESSAGE, json } from './responses.ts';
import { matchRoute, type RouteName } from './routes.ts';
import { issuesFromZod } from '../zod-issues.ts';
import type { ApiDeps, ApiRequest, ApiResponse } from './types.ts';
import { IDEMPOTENCY_KEY_HEADER, IDEMPOTENT_REPLAY_HEADER, idempotencyKeyOf } from './idempotency-key.ts';

/**
 * The largest body accepted, in bytes (UTF-8): a task file with a long `run` script fits
 * many times over; an agent report is at most a few KiB.
 */
export const MAX_BODY_BYTES = 256 * 1024;

/** `GET /jobs?limit=` is capped here. */
const MAX_LIST_LIMIT = 1000;

type Params = Readonly<Record<string, string>>;
type RouteHandler = (request: ApiRequest, params: Params, deps: ApiDeps) => Promise<ApiResponse>;

const HANDLERS: Readonly<Record<RouteName, RouteHandler>> = {
  async submitJob(request, _params, deps) {
    const key = idempotencyKeyOf(header(request, IDEMPOTENCY_KEY_HEADER.toLowerCase()));
    const body = isJson(request) ? parseJson(request.body) : (request.body ?? '');
    // Only this route parses task files. Its parser (yaml and the task schema, a third of
    // the API Lambda's code) loads with the first submit, so the agents' heartbeats and
    // reports, and reads, cold-start without it.
    const { submitJob } = await import('../usecases/submit-job.ts');
    const idempotency = key === undefined ? undefined : { key, caller: request.caller ?? '' };
    const { jobId, warnings, replayed } = await submitJob({ body, idempotency, computeProblems: deps.computeProblems, onJobEnded: deps.onJobEnded }, deps);
    return json(202, { jobId, warnings }, replayed ? { [IDEMPOTENT_REPLAY_HEADER]: 'true' } : {});
  },
  async listJobs(request, _params, deps) {
    return json(200, await listJobs(deps, { limit: listLimit(request.path) }));
  },
  async getJob(_request, params, deps) {
    return json(200, withLogLinks(await getJob(jobIdOf(params), deps), deps.jobLogs));
  },
  async cancelJob(_request, params, deps) {
    const result = await cancelJob(jobIdOf(params), deps);
    return json(result.alreadyFinished ? 200 : 202, { jobId: jobIdOf(params), ...result });
  },
  async readJobLog(request, params, deps) {
    if (deps.jobLogs === undefined) return json(404, { error: 'this relaunch keeps no job output to read' });
    return json(200, await readJobLog({ jobId: jobIdOf(params), ...logQueryOf(request.path) }, { store: deps.store, jobLogs: deps.jobLogs }));
  },
  async readControllerLog(_request, params, deps) {
    if (deps.controllerLog === undefined) {
      return json(404, { error: "this relaunch's controller runs in the process that serves it: its side of a job is the job's status changes" });
    }
    return json(200, await readControllerLog(jobIdOf(params), { store: deps.store, controllerLog: deps.controllerLog }));
  },
  async heartbeat(request, params, deps) {
    const body = parseBody(HeartbeatBodySchema, request.body);
    await heartbeat({ ...credentials(request, params, body.nodeRank), ...(body.progress === undefined ? {} : { progress: body.progress }) }, deps);
    return json(200, { status: 'accepted' });
  },
  async holdOrRun(request, params, deps) {
    const body = parseBody(HoldBodySchema, request.body);
    return json(200, await holdOrRun(credentials(request, params, body.nodeRank), deps));
  },
  async nextAttempt(request, params, deps) {
    const body = parseBody(NextBodySchema, request.body);
    return json(200, await nextAttempt(credentials(request, params, body.nodeRank), deps));
  },
  async dataCredentials(request, params, deps) {
    if (deps.dataAccess === undefined) return json(404, { error: 'this relaunch gives no data credentials: its nodes reach their data without them' });
    const body = parseBody(DataCredentialsBodySchema, request.body);
    const issued = await issueDataCredentials(credentials(request, params, body.nodeRank), { store: deps.store, dataAccess: deps.dataAccess });
    // Credentials: no cache between the node and the API may keep a copy.
    return json(200, issued, { 'cache-control': 'no-store' });
  },
  async logCredentials(request, params, deps) {
    if (deps.logAccess === undefined) return json(404, { error: 'this relaunch ships no job output to CloudWatch Logs: its nodes keep their logs where they run' });
    const body = parseBody(LogCredentialsBodySchema, request.body);
    const issued = await issueLogCredentials(credentials(request, params, body.nodeRank), { store: deps.store, logAccess: deps.logAccess });
    return json(200, issued, { 'cache-control': 'no-store' });
  },
  async agentShipper(request, params, deps) {
    // Served whether or not output ships: the library also installs the tools a node's mounts need.
    const body = parseBody(ShipperBodySchema, request.body);
    const program = await shipperProgram(credentials(request, params, body.nodeRank), { store: deps.store });
    return { statusCode: 200, headers: { 'content-type': 'text/x-shellscript; charset=utf-8' }, body: program };
  },
  async sourcesLocation(_request, _params, deps) {
    if (deps.sources === undefined) return json(404, { error: 'this relaunch keeps no uploads in S3: a local runtime takes them into its data folder' });
    return json(200, deps.sources);
  },
  async reportPhase(request, params, deps) {
    const { nodeRank, phase, outputTail, exitCode, agentFailure, stopped, setupMs } = parseBody(ReportBodySchema, request.body);
    const who = { ...credentials(request, params, nodeRank), phase, outputTail };
    // The schema lets through exactly one of the three (an old agent's exitCode beside agentFailure aside).
    if (stopped !== undefined) return json(200, await reportStoppedPhase({ ...who, stopped }, deps));
    if (agentFailure !== undefined) return json(200, await reportPhase({ ...who, agentFailure }, deps));
    if (exitCode !== undefined) return json(200, await reportPhase({ ...who, exitCode, ...(setupMs === undefined ? {} : { setupMs }) }, deps));
    throw new InvalidInputError([{ path: 'exitCode', message: 'expected an exit code 0-255, or agentFailure when the agent failed before setup' }]);
  },
};

/**
 * Answers one request. Never throws: a route's expected errors become 400/401/404/409/422/503
 * (see `errorResponse`), an oversized body 413, an unknown path 404, a wrong method 405,
 * a path naming something that cannot be a job id (`isJobId`) 404 before any store call
 * or secret check, and anything else a generic 500 after `deps.onUnexpectedError` saw it.
 */
export async function handleApiRequest(request: ApiRequest, deps: ApiDeps): Promise<ApiResponse> {
  const match = matchRoute(request.method, request.path);
  if (match === undefined) return json(404, { error: `no route for ${request.method.toUpperCase()} ${pathOnly(request.path)}` });
  if ('allowed' in match) {
    return json(405, { error: `${request.method.toUpperCase()} is not allowed here` }, { allow: match.allowed.join(', ') });
  }
  const id = match.params.id;
  if (id !== undefined && !isJobId(id)) return json(404, { error: `no job with id ${shownId(id)}` });
  const size = Buffer.byteLength(request.body ?? '', 'utf8');
  if (size > MAX_BODY_BYTES) {
    return json(413, { error: `the body is ${size} bytes; at most ${MAX_BODY_BYTES} are accepted` });
  }
  try {
    return await HANDLERS[match.route.name](request, match.params, deps);
  } catch (error) {
    const known = errorResponse(error);
    if (known !== undefined) return known;
    deps.onUnexpectedError?.(error, request);
    return json(500, { error: INTERNAL_ERROR_MESSAGE });
  }
}

/** Who an agent callback claims to be: the path's job and attempt, the body's node, the header's secret. */
function credentials(request: ApiRequest, params: Params, nodeRank: number): AgentCredentials {
  const secret = secretOfAuthorization(header(request, 'authorization'));
  if (secret === null) throw new UnauthorizedError('the callback carries no bearer secret');
  return { jobId: jobIdOf(params), attempt: attemptOf(params), nodeRank, secret };
}

function jobIdOf(params: Params): string {
  return params.id ?? '';
}

function attemptOf(params: Params): number {
  const raw = params.n ?? '';
  if (!/^[1-9][0-9]{0,8}$/.test(raw)) {
    throw new InvalidInputError([{ path: 'attempt', message: `expected a positive integer in the path, got "${raw}"` }]);
  }
  return Number(raw);
}

/** The query of `GET /jobs/{id}/logs`: which attempt, node and phase, and where to read on from. */
function logQueryOf(path: string): { attempt: number; nodeRank: number; phase: 'setup' | 'run'; cursor: string | undefined } {
  const query = new URLSearchParams(path.includes('?') ? path.slice(path.indexOf('?') + 1) : '');
  const shown = (raw: string | null) => (raw === null ? 'nothing' : `"${raw.slice(0, 40)}"`);
  const attempt = query.get('attempt');
  if (attempt === null || !/^[1-9][0-9]{0,8}$/.test(attempt)) {
    throw new InvalidInputError([{ path: 'attempt', message: `expected an attempt number (1-based) in ?attempt=, got ${shown(attempt)}` }]);
  }
  const node = query.get('node');
  if (node === null || !/^(0|[1-9][0-9]{0,8})$/.test(node)) {
    throw new InvalidInputError([{ path: 'node', message: `expected a node rank (0 for the head node) in ?node=, got ${shown(node)}` }]);
  }
  const phase = query.get('phase');
  if (phase !== 'setup' && phase !== 'run') throw new InvalidInputError([{ path: 'phase', message: `expected setup or run in ?phase=, got ${shown(phase)}` }]);
  const cursor = query.get('cursor') ?? undefined;
  if (cursor !== undefined && cursor.length > MAX_CURSOR_LENGTH) {
    throw new InvalidInputError([{ path: 'cursor', message: `expected a cursor a page of this log gave, got ${cursor.length} characters (at most ${MAX_CURSOR_LENGTH})` }]);
  }
  return { attempt: Number(attempt), nodeRank: Number(node), phase, cursor };
}

/** A JSON body checked against a schema; every problem becomes an issue with its path. */
function parseBody<T>(schema: z.ZodMiniType<T>, body: string | undefined): T {
  const parsed = schema.safeParse(parseJson(body));
  if (parsed.success) return parsed.data;
  throw new InvalidInputError(issuesFromZod(parsed.error));
}

function parseJson(body: string | undefined): unknown {
  if (body === undefined || body.trim() === '') {
    throw new InvalidInputError([{ path: '', message: 'expected a JSON body, got an empty one' }]);
  }
  try {
    return JSON.parse(body) as unknown;
  } catch (error) {
    throw new InvalidInputError([{ path: '', message: `expected a JSON body: ${(error as Error).message}` }]);
  }
}

function isJson(request: ApiRequest): boolean {
  return /^application\/([\w.+-]+\+)?json\b/i.test(header(request, 'content-type') ?? '');
}

function header(request: ApiRequest, name: string): string | undefined {
  return headerValue(request.headers, name);
}

function listLimit(path: string): number | undefined {
  const query = path.includes('?') ? path.slice(path.indexOf('?') + 1) : '';
  const raw = new URLSearchParams(query).get('limit');
  if (raw === null) return undefined;
  if (!/^[1-9][0-9]*$/.test(raw) || Number(raw) > MAX_LIST_LIMIT) {
    throw new InvalidInputError([{ path: 'limit', message: `expected an integer 1-${MAX_LIST_LIMIT}, got "${raw}"` }]);
  }
  return Number(raw);
}

/** Longest id a 404 repeats as it came. */
const MAX_SHOWN_ID = 64;

/**
 * An id that can name no job, as a message shows it: as it came when short and printable
 * (`j-no-such-job`), else quoted, cut, and measured against what a job id is.
 */
function shownId(id: string): string {
  if (id.length <= MAX_SHOWN_ID && /^[\x21-\x7e]+$/.test(id)) return id;
  const cut = id.length > MAX_SHOWN_ID ? `${id.slice(0, MAX_SHOWN_ID / 2)}...` : id;
  return `${JSON.stringify(cut)} (${id.length} characters; a job id has ${JOB_ID_LENGTH}, such as j-0m8x2k1qz-4fz0aa)`;
}

function pathOnly(path: string): string {
  return path.split('?', 1)[0] ?? path;
}
