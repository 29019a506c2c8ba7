// AWS Signature Version 4, checked the way an AWS endpoint checks it: the local SSM
// stand-in accepts a node's GetParameter only when it is signed with that node's
// credentials, as SSM does. Enough of SigV4 for JSON POSTs with header signatures (what
// the agent and the SDK send); a presigned URL or a chunked upload is refused.

import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { headerValue } from '../lib/http/headers.ts';

/** A request as it arrived: header names in any case. */
export interface SignedRequest {
  readonly method: string;
  /** The path as sent, with any query string. */
  readonly path: string;
  readonly headers: Readonly<Record<string, string | undefined>>;
  readonly body: string;
}

/** Long-term or session credentials. */
export interface Credentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  /** A session's token; when set, the request must carry and sign it. */
  readonly sessionToken?: string;
}

/** Why a signature was refused, in the error code AWS answers with. */
export interface SignatureRefusal {
  readonly code: 'MissingAuthenticationToken' | 'IncompleteSignatureException' | 'UnrecognizedClientException' | 'InvalidSignatureException';
  readonly message: string;
}

/** AWS refuses a request whose X-Amz-Date is further than this from its clock. */
export const MAX_CLOCK_SKEW_MS = 15 * 60 * 1000;

const AUTHORIZATION = /^AWS4-HMAC-SHA256 Credential=([^/,\s]+)\/(\d{8})\/([a-z0-9-]+)\/([a-z0-9-]+)\/aws4_request,\s*SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})$/;
const AMZ_DATE = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/;
/** Characters a path may hold unencoded: its canonical form is then the path itself. */
const PLAIN_PATH = /^\/[A-Za-z0-9\-._~/]*$/;

/**
 * The credentials that signed `request` for `service`, or why it is refused. `credentialsOf`
 * looks an access key up (undefined: unknown). Checks the scope's date and service, the
 * clock skew, that host, x-amz-date and (for a session) x-amz-security-token are signed,
 * that the token is the session's, and the signature, in constant time.
 */
export function verifySigV4(
  request: SignedRequest,
  service: string,
  credentialsOf: (accessKeyId: string) => Credentials | undefined,
  now: Date,
): { readonly credentials: Credentials; readonly region: string } | { readonly refused: SignatureRefusal } {
  const authorization = header(request, 'authorization');
  if (authorization === undefined) return refuse('MissingAuthenticationToken', 'the request carries no Authorization header');
  const match = AUTHORIZATION.exec(authorization.trim());
  if (match === null) return refuse('IncompleteSignatureException', 'the Authorization header is not an AWS4-HMAC-SHA256 signature');
  const [, accessKeyId, day, region, scopeService, signedList, signature] = match as unknown as [string, string, string, string, string, string, string];
  const credentials = credentialsOf(accessKeyId);
  if (credentials === undefined) return refuse('UnrecognizedClientException', 'the security token included in the request is invalid');
  const amzDate = header(request, 'x-amz-date') ?? '';
  const signedAt = parseAmzDate(amzDate);
  if (signedAt === null || !amzDate.startsWith(day)) return refuse('IncompleteSignatureException', 'X-Amz-Date is missing or does not match the credential scope');
  if (Math.abs(now.getTime() - signedAt) > MAX_CLOCK_SKEW_MS) return refuse('InvalidSignatureException', 'the signature has expired (X-Amz-Date is more than 15 minutes away)');
  if (scopeService !== service) return refuse('InvalidSignatureException', `the credential scope names service ${scopeService}, expected ${service}`);
  const signed = signedList.split(';');
  const required = ['host', 'x-amz-date', ...(credentials.sessionToken === undefined ? [] : ['x-amz-security-token'])];
  const unsigned = required.filter((name) => !signed.includes(name));
  if (unsigned.length > 0) return refuse('IncompleteSignatureException', `headers that must be signed are not: ${unsigned.join(', ')}`);
  if (credentials.sessionToken !== undefined && header(request, 'x-amz-security-token') !== credentials.sessionToken) {
    return refuse('UnrecognizedClientException', 'the security token included in the request is invalid');
  }
  const canonical = canonicalRequest(request, signed);
  if (canonical === null) return refuse('InvalidSignatureException', 'a signed header is missing, or the path needs an encoding this stand-in does not check');
  const scope = `${day}/${region}/${service}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonical)].join('\n');
  const expected = hmac(signingKey(credentials.secretAccessKey, day, region, service), toSign);
  if (!timingSafeEqual(expected, Buffer.from(signature, 'hex'))) {
    return refuse('InvalidSignatureException', 'the request signature we calculated does not match the signature you provided');
  }
  return { credentials, region };
}

function canonicalRequest(request: SignedRequest, signed: readonly string[]): string | null {
  const query = request.path.indexOf('?');
  const path = query < 0 ? request.path : request.path.slice(0, query);
  if (!PLAIN_PATH.test(path)) return null;
  const lines: string[] = [];
  for (const name of signed) {
    const value = header(request, name);
    if (value === undefined) return null;
    lines.push(`${name}:${value.trim().replace(/\s+/g, ' ')}\n`);
  }
  return [request.method.toUpperCase(), path, canonicalQuery(query < 0 ? '' : request.path.slice(query + 1)), lines.join(''), signed.join(';'), sha256Hex(request.body)].join('\n');
}

/** Query parameters sorted by name, then value, each name and value RFC 3986-encoded. */
function canonicalQuery(query: string): string {
  if (query === '') return '';
  return query
    .split('&')
    .map((pair) => {
      const equals = pair.indexOf('=');
      const [name, value] = equals < 0 ? [pair, ''] : [pair.slice(0, equals), pair.slice(equals + 1)];
      return [rfc3986(name), rfc3986(value)] as const;
    })
    .sort(([a, x], [b, y]) => (a === b ? compare(x, y) : compare(a, b)))
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
}

function rfc3986(component: string): string {
  let decoded: string;
  try {
    decoded = decodeURIComponent(component.replaceAll('+', '%20'));
  } catch {
    decoded = component;
  }
  return encodeURIComponent(decoded).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function signingKey(secretAccessKey: string, day: string, region: string, service: string): Buffer {
  let key: Buffer = Buffer.from(`AWS4${secretAccessKey}`, 'utf8');
  for (const part of [day, region, service, 'aws4_request']) key = hmac(key, part);
  return key;
}

function hmac(key: Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data, 'utf8').digest();
}

function sha256Hex(data: string): string {
  return createHash('sha256').update(data, 'utf8').digest('hex');
}

function parseAmzDate(text: string): number | null {
  const match = AMZ_DATE.exec(text);
  if (match === null) return null;
  const [, y, mo, d, h, mi, s] = match.map(Number) as [number, number, number, number, number, number, number];
  const time = Date.UTC(y, mo - 1, d, h, mi, s);
  return Number.isNaN(time) ? null : time;
}

function header(request: SignedRequest, name: string): string | undefined {
  return headerValue(request.headers, name);
}

function refuse(code: SignatureRefusal['code'], message: string): { readonly refused: SignatureRefusal } {
  return { refused: { code, message } };
}
