// The network a local node sees. Each node reaches the local server through a path of its
// own, `/_node/<instance id>/<route token>`, as an EC2 instance reaches the API, SSM and
// IMDS from its own interface: `<path>/imds/latest/...` is the node's instance metadata
// (IMDSv2), `<path>/ssm/` SSM's endpoint (secret-parameters.ts), and `<path>/jobs/...` the
// API's agent routes for its own attempt. On EC2 only the instance itself can reach its
// IMDS; here any local process can reach the server, so the path carries a credential only
// the node's agent is given (in its user data, a file only its user reads, and handed to
// curl on its stdin, never on a command line another user could read with ps): a request
// without it gets no answer at all, as one naming an unknown node does, so nothing tells
// a prober which nodes exist. A node whose network is cut gets no answer from the API or
// SSM, and a node whose instance is gone none at all.

import { randomUUID, timingSafeEqual } from 'node:crypto';
import type { ApiRequest, ApiResponse } from '../lib/http/index.ts';
import { headerValue, matchRoute } from '../lib/http/index.ts';
import { nextPath } from '../lib/agent/protocol.ts';
import { LOCAL_INSTANCE_TYPE, LOCAL_REGION, type LocalInstance } from './process-compute.ts';
import { credentialsDocument, LOCAL_INSTANCE_ROLE, type LocalSecretParameters } from './secret-parameters.ts';

/** Where every node's path starts. */
export const NODE_PATH_PREFIX = '/_node/';

/** What the node network needs of the compute. */
export interface NodeDirectory {
  instance(instanceId: string): LocalInstance | undefined;
  runStarted(instanceId: string): void;
  readonly secretParameters: LocalSecretParameters;
}

/** Instance role credentials from IMDS last this long (EC2's last about six hours, renewed before). */
const CREDENTIALS_LIFETIME_MS = 6 * 60 * 60 * 1000;

/** IMDSv2's headers. */
const TOKEN_HEADER = 'x-aws-ec2-metadata-token';
const TOKEN_TTL_HEADER = 'x-aws-ec2-metadata-token-ttl-seconds';

/** Whether a request came in on a node's path. */
export function isNodeRequest(path: string): boolean {
  return path.startsWith(NODE_PATH_PREFIX);
}

/**
 * Answers a request on a node's path; null means no answer at all (the caller drops the
 * connection): the node is unknown, terminated, or cut off, or the path lacks its route
 * token (IMDS: or the node is not running).
 * API requests go to `api` with the node's prefix removed; only the agent routes of the
 * node's own attempt are reachable.
 */
export async function answerNodeRequest(
  nodes: NodeDirectory,
  request: ApiRequest,
  api: (request: ApiRequest) => Promise<ApiResponse>,
): Promise<ApiResponse | null> {
  const [instanceSegment = '', token = '', ...restSegments] = request.path.slice(NODE_PATH_PREFIX.length).split('/');
  const instanceId = safeDecode(instanceSegment);
  const instance = instanceId === null ? undefined : nodes.instance(instanceId);
  if (instance === undefined || instance.state === 'terminated' || !sameToken(token, instance.routeToken)) return null;
  const path = `/${restSegments.join('/')}`;
  // IMDS is the instance's own (link-local on EC2): a cut network still reaches it, and only
  // a running instance's is answered.
  if (path.startsWith('/imds/')) return instance.state === 'running' ? await answerImds(instance, request.method, path.slice('/imds'.length), request.headers) : null;
  // A node shutting down still reaches the API, as an EC2 instance's OS does until it halts:
  // its agent sends the last lines of the phase it stopped (a stopped report).
  if (instance.networkCut) return null;
  if (path === '/ssm/' || path === '/ssm') {
    const body = request.body ?? '';
    return nodes.secretParameters.answer({ ...request, body }, { instanceArn: instance.arn, credentials: instance.credentials }, new Date());
  }

  const match = matchRoute(request.method, path);
  const route = match !== undefined && 'route' in match ? match : undefined;
  // A node kept for the next attempt still reaches the attempt it served, as on EC2, where
  // nothing but the API stands between an agent and a route: its agent asks there what to
  // do next until it is told (and the compute moves it meanwhile), and a report of the old
  // attempt that comes late gets the API's own answer (the attempt is over), not the network's.
  const askingNext = instance.servedBefore !== null && request.method === 'POST' && path === nextPath(instance.jobId, instance.servedBefore);
  if (!askingNext) {
    if (route === undefined || route.route.auth !== 'agent-secret') return text(403, 'a node reaches only the agent routes of the API');
    const ownAttempt = route.params.n === String(instance.attempt) || (instance.servedBefore !== null && route.params.n === String(instance.servedBefore));
    if (route.params.id !== instance.jobId || !ownAttempt) {
      return text(403, `a node reaches only the routes of its own attempt (attempt ${instance.attempt} of ${instance.jobId})`);
    }
  }
  const response = await api({ ...request, path });
  if (instance.networkCut) return null;
  if ((route?.route.name === 'reportPhase' || route?.route.name === 'holdOrRun') && response.statusCode < 300 && saysGo(response.body)) nodes.runStarted(instance.instanceId);
  return response;
}

/** Whether a path's token is the node's, compared in constant time (its length is no secret). */
function sameToken(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** An answer that sends the agent on to run: a setup report's, or a holding standby's ask, with `run: go`. */
function saysGo(body: string | undefined): boolean {
  try {
    const answer = JSON.parse(body ?? '') as { run?: unknown; status?: unknown };
    return answer.run === 'go';
  } catch {
    return false;
  }
}

/**
 * How long a look at `spot/instance-action` that finds no notice is held before its 404
 * (EC2 answers at once). A local agent pauses half a second between looks, and each look
 * costs it a curl: held, a look comes every 3.5 s instead of every half second, and a
 * notice reaches the agent as soon as it is written. Under the 5 s the agent's curl waits
 * for an answer (`--max-time 5` in agent.sh's interruption_watch).
 */
export const NOTICE_HOLD_MS = 3_000;

/**
 * IMDSv2 as EC2 serves it, for the keys the agent reads and a few more; null (no answer)
 * when the instance stopped running while a look was held.
 */
async function answerImds(
  instance: LocalInstance,
  method: string,
  path: string,
  headers: Readonly<Record<string, string | undefined>>,
): Promise<ApiResponse | null> {
  if (path === '/latest/api/token') {
    if (method !== 'PUT') return text(405, '');
    const ttl = Number(headerValue(headers, TOKEN_TTL_HEADER));
    if (!Number.isInteger(ttl) || ttl < 1 || ttl > 21_600) return text(400, '');
    const token = randomUUID();
    instance.imdsTokens.add(token);
    return text(200, token);
  }
  if (method !== 'GET') return text(405, '');
  const token = headerValue(headers, TOKEN_HEADER);
  if (token === undefined || !instance.imdsTokens.has(token)) return text(401, '');
  const prefix = '/latest/meta-data/';
  if (!path.startsWith(prefix)) return text(404, '');
  const key = path.slice(prefix.length);
  if (key === 'spot/instance-action' && instance.interruptionNotice === null) {
    await noticeOrHoldEnd(instance);
    if (instance.state !== 'running') return null;
  }
  const value = metadata(instance, key);
  return value === undefined ? text(404, '') : text(200, value);
}

function metadata(instance: LocalInstance, key: string): string | undefined {
  switch (key) {
    case 'instance-id':
      return instance.instanceId;
    case 'ami-launch-index':
      return String(instance.rank);
    case 'local-ipv4':
      return '127.0.0.1';
    case 'instance-type':
      return LOCAL_INSTANCE_TYPE;
    case 'placement/region':
      return LOCAL_REGION;
    case 'iam/security-credentials/':
      return LOCAL_INSTANCE_ROLE;
    case `iam/security-credentials/${LOCAL_INSTANCE_ROLE}`:
      return credentialsDocument(instance.credentials, new Date(Date.now() + CREDENTIALS_LIFETIME_MS));
    case 'tags/instance':
      return [...instance.tags.keys()].join('\n');
    case 'spot/instance-action':
      return instance.interruptionNotice ?? undefined;
    default:
      if (key.startsWith('tags/instance/')) return instance.tags.get(safeDecode(key.slice('tags/instance/'.length)) ?? '');
      return undefined;
  }
}

/** Resolves when the instance gets a notice or stops running (process-compute.ts wakes it), or after NOTICE_HOLD_MS. */
function noticeOrHoldEnd(instance: LocalInstance): Promise<void> {
  return new Promise((resolve) => {
    const end = (): void => {
      clearTimeout(timer);
      instance.heldNoticeLooks.delete(end);
      resolve();
    };
    // Unreferenced: a held look never keeps a closing runtime's process alive.
    const timer = setTimeout(end, NOTICE_HOLD_MS).unref();
    instance.heldNoticeLooks.add(end);
  });
}

function text(statusCode: number, body: string): ApiResponse {
  return { statusCode, headers: { 'content-type': 'text/plain' }, body };
}

function safeDecode(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}
