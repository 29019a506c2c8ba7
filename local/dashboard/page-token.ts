// The per-server token a page's Cancel carries. The guard (request-guard.ts) already keeps
// other origins out; the token adds a proof that the request comes from a page this very
// server served: only its HTML holds the token, and no other origin can read that HTML.

import { randomBytes, timingSafeEqual } from 'node:crypto';
import { headerValue } from '../../lib/http/headers.ts';
import { matchRoute } from '../../lib/http/routes.ts';
import type { GuardedRequest, GuardRefusal } from '../request-guard.ts';

/** The header the page sends its token in. */
export const PAGE_TOKEN_HEADER = 'x-relaunch-page-token';

/** A fresh token: 32 random bytes as hex, made once per server start. */
export function newPageToken(): string {
  return randomBytes(32).toString('hex');
}

/**
 * Refuses a cancel a browser made without this server's page token, or returns null.
 *
 * A browser marks every DELETE it sends with `Origin` (fetch always does for a method
 * other than GET and HEAD) and, today, `Sec-Fetch-Site`; the CLI and curl send neither,
 * and keep cancelling as they always have. `always` makes the token required of every
 * cancel, for a server only a page talks to (`relaunch dashboard`).
 */
export function pageTokenRefusal(request: GuardedRequest, token: string, options: { readonly always?: boolean } = {}): GuardRefusal | null {
  const match = matchRoute(request.method, request.path);
  if (match === undefined || !('route' in match) || match.route.name !== 'cancelJob') return null;
  const fromBrowser = headerValue(request.headers, 'origin') !== undefined || headerValue(request.headers, 'sec-fetch-site') !== undefined;
  if (!fromBrowser && options.always !== true) return null;
  const given = headerValue(request.headers, PAGE_TOKEN_HEADER);
  if (given === undefined) {
    return refuse(`refused: a cancel from a web page must carry this server's page token (${PAGE_TOKEN_HEADER}); reload the page this server serves at /`);
  }
  if (!sameToken(given, token)) {
    return refuse(`refused: the page token (${PAGE_TOKEN_HEADER}) is not this server's; reload the page this server serves at / (a restarted server makes a new one)`);
  }
  return null;
}

function sameToken(given: string, token: string): boolean {
  const a = Buffer.from(given, 'utf8');
  const b = Buffer.from(token, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}

function refuse(error: string): GuardRefusal {
  return { statusCode: 403, body: JSON.stringify({ error }) };
}
