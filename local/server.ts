// The local REST API: the same routes and handlers as API Gateway (lib/http), served on
// 127.0.0.1 over a LocalRuntime, plus each local node's own network path (node-network.ts)
// and the jobs page (dashboard/page.ts).
// The runtime that owns a data folder serves it, and says where in
// `<dataDir>/server.json`, so other commands on the same folder can reach it. Two routes
// are for the relaunch commands of this machine alone (local-routes.ts): a submit that
// carries what only a local runtime takes (`--chaos`, `--env`, `--secret` as given), and a
// job's status changes, which `relaunch run` prints as it follows its job.

import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AddressInfo } from 'node:net';
import { InvalidInputError } from '../lib/errors.ts';
import { handleApiRequest, INTERNAL_ERROR_MESSAGE, matchRoute, MAX_BODY_BYTES, type ApiDeps, type ApiRequest, type ApiResponse } from '../lib/http/index.ts';
import { errorResponse } from '../lib/http/responses.ts';
import { decodeUtf8 } from '../lib/http/utf8.ts';
import { AgentCallGate } from './agent-calls.ts';
import { answerNodeRequest, isNodeRequest, type NodeDirectory } from './node-network.ts';
import { guardLocalRequest } from './request-guard.ts';
import { answerPageRequest, LOCAL_POLL_MS } from './dashboard/page.ts';
import { newPageToken, pageTokenRefusal } from './dashboard/page-token.ts';
import { removeServerInfo, takesNoJobsMessage, writeServerInfo, type OwnerRole } from './server-info.ts';
import { answerLocalRoute, isLocalSubmit, type LocalSubmitter } from './local-routes.ts';

/** How long a closing server lets the requests it is answering finish. */
const CLOSE_GRACE_MS = 1_000;

/** What the server answers from. */
export interface LocalApiServerOptions {
  readonly deps: ApiDeps;
  /** The local nodes, for their network paths. */
  readonly nodes: NodeDirectory;
  readonly dataDir: string;
  /** The port (0: any free one). @default 0 */
  readonly port?: number;
  /** The command that owns the folder, and whether this server takes jobs from others (`POST /jobs`). */
  readonly role: OwnerRole;
  /** Which lock file the owner locked (owner-lock.ts `fileIdentity`), recorded in server.json. */
  readonly lockIdentity?: string;
  /** Submits with what only a local runtime takes (`POST /_local/submit`); without it that route is 404. */
  readonly submit?: LocalSubmitter;
  readonly onError?: (error: unknown) => void;
}

/** Whether the server takes jobs now, and the submissions it is answering. */
interface Intake {
  role: OwnerRole;
  submitting: number;
  /** Called once no submission is being answered. */
  readonly drained: Set<() => void>;
  /** The agents' calls in flight, up to a limit (agent-calls.ts). */
  readonly agentCalls: AgentCallGate;
  /** When a command (not a node's agent) last called, in ms since the epoch: a runtime with callers is not idle. */
  lastClientAt: number;
}

/** An HTTP server answering the REST API and the local nodes. */
export class LocalApiServer {
  private constructor(
    private readonly server: http.Server,
    readonly url: string,
    private readonly dataDir: string,
    private readonly intake: Intake,
    private readonly lockIdentity: string | undefined,
  ) {}

  /**
   * Stops taking jobs from other commands (`relaunch serve --exit-when-idle` about to
   * exit): `POST /jobs` answers 409 from now on and server.json says so; resolves once
   * every submission already taken has been answered, so its job is in the store.
   */
  async stopTakingJobs(): Promise<void> {
    this.intake.role = { ...this.intake.role, takesJobs: false };
    writeServerInfo(this.dataDir, this.url, this.intake.role, this.lockIdentity);
    if (this.intake.submitting > 0) await new Promise<void>((resolve) => this.intake.drained.add(resolve));
  }

  /** When a command (not a node's agent) last called this server, in ms since the epoch; its start until one has. */
  get lastClientAt(): number {
    return this.intake.lastClientAt;
  }

  /** Takes jobs again (a job came in while it was stopping). */
  resumeTakingJobs(): void {
    this.intake.role = { ...this.intake.role, takesJobs: true };
    writeServerInfo(this.dataDir, this.url, this.intake.role, this.lockIdentity);
  }

  /** Listens on 127.0.0.1 and records itself in server.json. */
  static async start(options: LocalApiServerOptions): Promise<LocalApiServer> {
    let port = 0;
    // New on every start: a page served by an earlier server cannot cancel through this one.
    const token = newPageToken();
    const intake: Intake = { role: options.role, submitting: 0, drained: new Set(), agentCalls: new AgentCallGate(), lastClientAt: Date.now() };
    const server = http.createServer((req, res) => {
      void answer(options, intake, port, token, req, res);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
    });
    port = (server.address() as AddressInfo).port;
    const url = `http://127.0.0.1:${port}`;
    try {
      writeServerInfo(options.dataDir, url, options.role, options.lockIdentity);
    } catch (error) {
      server.close();
      throw error;
    }
    return new LocalApiServer(server, url, options.dataDir, intake, options.lockIdentity);
  }

  /**
   * Stops listening and removes server.json. A request already being answered (a command's
   * call that found the runtime a moment before it stopped) gets its answer, for up to
   * CLOSE_GRACE_MS; then every connection is closed, so no keep-alive holds the process.
   */
  async close(): Promise<void> {
    removeServerInfo(this.dataDir);
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const grace = new AbortController();
    await Promise.race([closed, sleep(CLOSE_GRACE_MS, undefined, { signal: grace.signal }).catch(() => undefined)]);
    grace.abort();
    this.server.closeAllConnections();
    await closed;
  }
}

async function answer(options: LocalApiServerOptions, intake: Intake, port: number, token: string, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const request = { method: req.method ?? 'GET', path: req.url ?? '/', headers: flatHeaders(req.headers) };
  if (!isSubmit(request)) return answerRequest(options, intake, port, token, request, req, res);
  intake.submitting += 1;
  try {
    await answerRequest(options, intake, port, token, request, req, res);
  } finally {
    intake.submitting -= 1;
    if (intake.submitting === 0) {
      for (const drained of intake.drained) drained();
      intake.drained.clear();
    }
  }
}

async function answerRequest(
  options: LocalApiServerOptions,
  intake: Intake,
  port: number,
  token: string,
  request: { readonly method: string; readonly path: string; readonly headers: Record<string, string | undefined> },
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  try {
    const refused = guardLocalRequest(request, { port }) ?? pageTokenRefusal(request, token) ?? submitRefusal(request, intake.role);
    if (refused !== null) {
      req.resume();
      send(res, { statusCode: refused.statusCode, headers: { 'content-type': 'application/json' }, body: refused.body });
      return;
    }
    const page = await answerPageRequest(request, {
      token,
      logs: { dataDir: options.dataDir, store: options.deps.store },
      pollMs: LOCAL_POLL_MS,
      where: 'local',
    });
    if (page !== null) {
      req.resume();
      send(res, page);
      return;
    }
    if (!isNodeRequest(request.path)) intake.lastClientAt = Date.now();
    const bytes = await readBody(req);
    if (bytes === null) {
      send(res, { statusCode: 413, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ error: `the body is larger than ${MAX_BODY_BYTES} bytes` }) });
      return;
    }
    let body: string;
    try {
      body = decodeUtf8(bytes, 'body');
    } catch (error) {
      if (!(error instanceof InvalidInputError)) throw error;
      send(res, errorResponse(error) as ApiResponse);
      return;
    }
    const local = await answerLocalRoute({ ...request, body }, { store: options.deps.store, submit: options.submit });
    if (local !== null) {
      send(res, local);
      return;
    }
    const api = (apiRequest: ApiRequest): Promise<ApiResponse> =>
      handleApiRequest(apiRequest, { ...options.deps, onUnexpectedError: options.onError });
    if (isNodeRequest(request.path)) {
      const response = await answerNodeRequest(options.nodes, { ...request, body }, (apiRequest) =>
        intake.agentCalls.run(
          () => api(apiRequest),
          () => req.socket.destroyed,
        ),
      );
      // No answer at all: what a node whose network is cut, or whose instance is gone, sees.
      if (response === null) req.socket.destroy();
      else send(res, response);
      return;
    }
    send(res, await api({ ...request, body }));
  } catch (error) {
    options.onError?.(error);
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: INTERNAL_ERROR_MESSAGE }));
  }
}

/**
 * `POST /jobs` to a runtime that takes no jobs but its own (a `relaunch run` in progress),
 * or none any more (a `serve --exit-when-idle` stopping): 409, saying why. Such a runtime
 * closes when its own work is done, and would take any job submitted through it down with it.
 */
function submitRefusal(request: { method: string; path: string }, role: OwnerRole): { statusCode: number; body: string } | null {
  if (role.takesJobs || !isSubmit(request)) return null;
  return { statusCode: 409, body: JSON.stringify({ error: takesNoJobsMessage(role, process.pid) }) };
}

function isSubmit(request: { method: string; path: string }): boolean {
  if (isLocalSubmit(request)) return true;
  const match = matchRoute(request.method, request.path);
  return match !== undefined && 'route' in match && match.route.name === 'submitJob';
}

function send(res: http.ServerResponse, response: ApiResponse): void {
  res.writeHead(response.statusCode, { 'content-type': 'application/json', ...response.headers });
  res.end(response.body);
}

/** The body's bytes, or null when it is over the API's limit (the rest is read and dropped). */
function readBody(req: http.IncomingMessage): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.on('end', () => resolve(size > MAX_BODY_BYTES ? null : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function flatHeaders(headers: http.IncomingHttpHeaders): Record<string, string | undefined> {
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : v]));
}
