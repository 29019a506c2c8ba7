// `relaunch dashboard`'s server: the jobs page on 127.0.0.1, its API calls relayed to a
// deployed stack's API and signed there as the CLI signs its own (SigV4, the default AWS
// credentials). The browser talks to this process only and never sees a credential: what
// it gets back is the API's status and JSON body, none of the API's headers.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { isJobId } from '../lib/ids.ts';
import { json } from '../lib/http/responses.ts';
import { matchRoute } from '../lib/http/routes.ts';
import type { ApiResponse } from '../lib/http/types.ts';
import { answerPageRequest } from '../local/dashboard/page.ts';
import { newPageToken, pageTokenRefusal } from '../local/dashboard/page-token.ts';
import { guardLocalRequest } from '../local/request-guard.ts';
import { ApiError, type HttpJobsClient } from './jobs-client.ts';
import { ATTEMPT_LOG_PATH, deployedAttemptLog } from './dashboard-logs.ts';

/** The routes the page uses, the only ones relayed: a page that can submit nothing, and reach no agent route. */
const RELAYED = new Set(['listJobs', 'getJob', 'cancelJob']);

/** How the proxy is set up. */
export interface DashboardProxyOptions {
  /** The deployed API, signing as the CLI does. */
  readonly client: Pick<HttpJobsClient, 'where' | 'pacing' | 'relay'>;
  /** The port (0: any free one). @default 0 */
  readonly port?: number;
  /** Told of an error no answer expected (the page then gets a 500 with no detail). */
  readonly onError?: (error: unknown) => void;
}

/** The page and its relayed API calls, on 127.0.0.1. */
export class DashboardProxy {
  private constructor(
    private readonly server: http.Server,
    /** Where the page is: `http://127.0.0.1:<port>/`. */
    readonly url: string,
  ) {}

  /** Listens on 127.0.0.1; a port in use rejects with EADDRINUSE. */
  static async start(options: DashboardProxyOptions): Promise<DashboardProxy> {
    let port = 0;
    const token = newPageToken();
    const server = http.createServer((req, res) => {
      void answer(options, port, token, req).then(
        (response) => send(res, response),
        (error: unknown) => {
          options.onError?.(error);
          send(res, json(500, { error: 'internal error of relaunch dashboard; see its terminal' }));
        },
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
    });
    port = (server.address() as AddressInfo).port;
    return new DashboardProxy(server, `http://127.0.0.1:${port}/`);
  }

  /** Stops listening. */
  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

async function answer(options: DashboardProxyOptions, port: number, token: string, req: http.IncomingMessage): Promise<ApiResponse> {
  // The page sends no body; one sent anyway is read and dropped.
  req.resume();
  const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : v]));
  const request = { method: req.method ?? 'GET', path: req.url ?? '/', headers };
  // Only the page cancels through this server, so every cancel carries its token.
  const refused = guardLocalRequest(request, { port }) ?? pageTokenRefusal(request, token, { always: true });
  if (refused !== null) return { statusCode: refused.statusCode, headers: { 'content-type': 'application/json' }, body: refused.body };
  // The page's full log of an attempt, read through the API's log pages.
  const log = request.method === 'GET' ? ATTEMPT_LOG_PATH.exec(request.path) : null;
  if (log !== null) return await relayed(options, () => deployedAttemptLog(options.client, decodeSegment(log[1] ?? ''), decodeSegment(log[2] ?? '')));
  const page = await answerPageRequest(request, { token, logs: null, pollMs: options.client.pacing.pollMaxMs, where: options.client.where });
  if (page !== null) return page;
  const match = matchRoute(request.method, request.path);
  if (match === undefined || !('route' in match) || !RELAYED.has(match.route.name)) {
    return json(404, { error: `relaunch dashboard relays only GET /jobs, GET /jobs/{id} and DELETE /jobs/{id} to ${options.client.where}` });
  }
  const id = match.params.id;
  if (id !== undefined && !isJobId(id)) return json(404, { error: `no job with id ${JSON.stringify(id.slice(0, 64))}` });
  // Rebuilt from what was checked: the id, and for the list only a `limit` the API takes.
  let path = `/jobs/${encodeURIComponent(id ?? '')}`;
  if (id === undefined) {
    const limit = new URLSearchParams(request.path.split('?')[1] ?? '').get('limit');
    if (limit !== null && !/^[1-9][0-9]{0,2}$|^1000$/.test(limit)) return json(400, { error: `limit: expected an integer 1-1000, got ${JSON.stringify(limit.slice(0, 16))}` });
    path = limit === null ? '/jobs' : `/jobs?limit=${limit}`;
  }
  return relayed(options, async () => {
    const answered = await options.client.relay(match.route.method === 'DELETE' ? 'DELETE' : 'GET', path);
    return json(answered.status, answered.body);
  });
}

/** A relayed answer; an API that cannot be reached or signed for is a 502 saying so. */
async function relayed(options: DashboardProxyOptions, relay: () => Promise<ApiResponse>): Promise<ApiResponse> {
  try {
    return await relay();
  } catch (error) {
    if (error instanceof ApiError && error.statusCode === 0) return json(502, { error: error.message });
    // No AWS credentials to sign with: said on the page, as the CLI would say it.
    if (error instanceof Error && error.name === 'CredentialsProviderError') return json(502, { error: `cannot sign the request to ${options.client.where}: ${error.message}` });
    throw error;
  }
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

function send(res: http.ServerResponse, response: ApiResponse): void {
  if (res.headersSent) return;
  res.writeHead(response.statusCode, response.headers);
  res.end(response.body);
}
