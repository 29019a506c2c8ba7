// What the local API refuses before routing: requests a web page could make. A browser
// can reach 127.0.0.1 from any site (through DNS rebinding, or a plain form post), so only
// requests addressed to this server by name, from no other origin, and job submissions in
// a type no form can send get through.

import { matchRoute } from '../lib/http/routes.ts';

/** A request as the guard reads it: header names in any case, repeated headers joined by ", ". */
export interface GuardedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string | undefined>>;
}

/** A refusal: the status and a JSON `{error}` body saying why. */
export interface GuardRefusal {
  readonly statusCode: number;
  readonly body: string;
}

/** The task types `POST /jobs` takes. None is one a form or a no-preflight `fetch` can send. */
export const SUBMIT_CONTENT_TYPES: readonly string[] = ['application/yaml', 'text/yaml', 'application/json'];

/** `Sec-Fetch-Site` values of a request this server's own page or a user made (absent: not a browser). */
const TRUSTED_FETCH_SITES: ReadonlySet<string> = new Set(['same-origin', 'none']);

/**
 * Refuses a request the local API must not answer, or returns null to let it through.
 *
 * | refused | status |
 * |---|---|
 * | `Host` missing, or other than `127.0.0.1:<port>` / `localhost:<port>` (DNS rebinding) | 403 |
 * | `Origin` present and other than `http://127.0.0.1:<port>` / `http://localhost:<port>` (`null` included) | 403 |
 * | `Sec-Fetch-Site` other than `same-origin` or `none` (`cross-site`, and `same-site`: another port of localhost is the same site) | 403 |
 * | `POST /jobs` whose media type is not one of SUBMIT_CONTENT_TYPES, or is absent | 415 |
 *
 * Host names compare without regard to case, as DNS names do; everything else must match
 * exactly, so a repeated header (joined with ", ") never matches.
 */
export function guardLocalRequest(request: GuardedRequest, listen: { readonly port: number }): GuardRefusal | null {
  const host = header(request, 'host');
  const hosts = [`127.0.0.1:${listen.port}`, `localhost:${listen.port}`];
  if (host === undefined || !hosts.includes(host.toLowerCase())) {
    return refuse(403, `refused: the Host header must be ${hosts.join(' or ')}, got ${shown(host)} (a request through another name may come from a web page)`);
  }
  const origin = header(request, 'origin');
  const origins = hosts.map((h) => `http://${h}`);
  if (origin !== undefined && !origins.includes(origin.toLowerCase())) {
    return refuse(403, `refused: a request from the origin ${shown(origin)}; only ${origins.join(' or ')} may call this API`);
  }
  const site = header(request, 'sec-fetch-site');
  if (site !== undefined && !TRUSTED_FETCH_SITES.has(site)) {
    return refuse(403, `refused: a browser request from another site (Sec-Fetch-Site ${shown(site)})`);
  }
  const match = matchRoute(request.method, request.path);
  if (match !== undefined && 'route' in match && match.route.name === 'submitJob') {
    const type = header(request, 'content-type');
    const media = type?.split(';', 1)[0]?.trim().toLowerCase();
    if (media === undefined || !SUBMIT_CONTENT_TYPES.includes(media)) {
      return refuse(415, `expected a task as ${SUBMIT_CONTENT_TYPES.join(', ')} (Content-Type), got ${shown(type)}`);
    }
  }
  return null;
}

/** Every value of a header, under any spelling of its name, joined as HTTP joins repeats. */
function header(request: GuardedRequest, name: string): string | undefined {
  const values = Object.entries(request.headers)
    .filter(([key, value]) => key.toLowerCase() === name && value !== undefined)
    .map(([, value]) => value as string);
  return values.length === 0 ? undefined : values.join(', ');
}

/** A header's value as a message shows it: quoted, cut when long; `none` when absent. */
function shown(value: string | undefined): string {
  if (value === undefined) return 'none';
  return JSON.stringify(value.length > 100 ? `${value.slice(0, 100)}...` : value);
}

function refuse(statusCode: number, error: string): GuardRefusal {
  return { statusCode, body: JSON.stringify({ error }) };
}
