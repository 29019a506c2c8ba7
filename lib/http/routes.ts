// The REST routes (DESIGN.md section 6), written once: the handler dispatches on them and
// the CDK API builds its resources and authorization from them.

/** Who may call a route: the deployer's IAM principals, or an attempt's agent by its secret. */
export type RouteAuth = 'iam' | 'agent-secret';

/** The HTTP methods relaunch serves. */
export type HttpMethod = 'GET' | 'POST' | 'DELETE';

/** One route: method, path pattern with `{param}` segments, and how it is authorized. */
export interface Route {
  readonly name: RouteName;
  readonly method: HttpMethod;
  readonly pattern: string;
  readonly auth: RouteAuth;
}

/** Route names, for dispatch. */
export type RouteName =
  | 'submitJob'
  | 'listJobs'
  | 'getJob'
  | 'cancelJob'
  | 'readJobLog'
  | 'readControllerLog'
  | 'heartbeat'
  | 'reportPhase'
  | 'holdOrRun'
  | 'nextAttempt'
  | 'dataCredentials'
  | 'logCredentials'
  | 'agentShipper'
  | 'sourcesLocation';

/** Every route; a path is matched against them in order. */
export const ROUTES: readonly Route[] = [
  { name: 'submitJob', method: 'POST', pattern: '/jobs', auth: 'iam' },
  { name: 'listJobs', method: 'GET', pattern: '/jobs', auth: 'iam' },
  { name: 'getJob', method: 'GET', pattern: '/jobs/{id}', auth: 'iam' },
  { name: 'cancelJob', method: 'DELETE', pattern: '/jobs/{id}', auth: 'iam' },
  // A page of one node's output of one phase: `?attempt=N&node=N&phase=setup|run`, and
  // `&cursor=` (a page's own) to read on, else from its start.
  { name: 'readJobLog', method: 'GET', pattern: '/jobs/{id}/logs', auth: 'iam' },
  // What the controller's functions logged about the job.
  { name: 'readControllerLog', method: 'GET', pattern: '/jobs/{id}/controller-log', auth: 'iam' },
  { name: 'heartbeat', method: 'POST', pattern: '/jobs/{id}/attempts/{n}/heartbeat', auth: 'agent-secret' },
  { name: 'reportPhase', method: 'POST', pattern: '/jobs/{id}/attempts/{n}/report', auth: 'agent-secret' },
  { name: 'holdOrRun', method: 'POST', pattern: '/jobs/{id}/attempts/{n}/hold', auth: 'agent-secret' },
  // A node kept after attempt n ended asks what it does next (lib/usecases/next-attempt.ts).
  { name: 'nextAttempt', method: 'POST', pattern: '/jobs/{id}/attempts/{n}/next', auth: 'agent-secret' },
  { name: 'dataCredentials', method: 'POST', pattern: '/jobs/{id}/attempts/{n}/data-credentials', auth: 'agent-secret' },
  { name: 'logCredentials', method: 'POST', pattern: '/jobs/{id}/attempts/{n}/log-credentials', auth: 'agent-secret' },
  { name: 'agentShipper', method: 'POST', pattern: '/jobs/{id}/attempts/{n}/shipper', auth: 'agent-secret' },
  { name: 'sourcesLocation', method: 'GET', pattern: '/sources', auth: 'iam' },
];

/** A path matched to a route, with its decoded parameters. */
export interface RouteMatch {
  readonly route: Route;
  readonly params: Readonly<Record<string, string>>;
}

/**
 * Finds the route for a request. `undefined` when no pattern matches the path;
 * `{ allowed }` when the path exists but not with this method (405, with the methods it has).
 */
export function matchRoute(method: string, path: string): RouteMatch | { readonly allowed: readonly HttpMethod[] } | undefined {
  const segments = splitPath(path);
  if (segments === undefined) return undefined;
  const allowed: HttpMethod[] = [];
  for (const route of ROUTES) {
    const params = matchPattern(route.pattern, segments);
    if (params === undefined) continue;
    if (route.method === method.toUpperCase()) return { route, params };
    allowed.push(route.method);
  }
  return allowed.length > 0 ? { allowed } : undefined;
}

/** `/jobs/abc/` → `['jobs', 'abc']`; a query string is ignored; undefined for a bad escape. */
function splitPath(path: string): string[] | undefined {
  const [bare = ''] = path.split('?', 1);
  try {
    return bare
      .split('/')
      .filter((segment) => segment !== '')
      .map((segment) => decodeURIComponent(segment));
  } catch {
    return undefined;
  }
}

function matchPattern(pattern: string, segments: readonly string[]): Record<string, string> | undefined {
  const parts = pattern.split('/').filter((part) => part !== '');
  if (parts.length !== segments.length) return undefined;
  const params: Record<string, string> = {};
  for (const [index, part] of parts.entries()) {
    const segment = segments[index] as string;
    if (part.startsWith('{') && part.endsWith('}')) params[part.slice(1, -1)] = segment;
    else if (part !== segment) return undefined;
  }
  return params;
}
