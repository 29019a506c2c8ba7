// guardLocalRequest: what a web page could send to the local API is refused (403/415) with
// the reason; what the CLI, curl and the local agents send gets through.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { HttpJobsClient } from '../../../cli/jobs-client.ts';
import { guardLocalRequest, type GuardedRequest } from '../../../local/request-guard.ts';

const PORT = 8080;
const HOST = `127.0.0.1:${PORT}`;

function guard(method: string, path: string, headers: Record<string, string | undefined>) {
  const request: GuardedRequest = { method, path, headers };
  const refusal = guardLocalRequest(request, { port: PORT });
  return refusal === null ? null : { statusCode: refusal.statusCode, error: (JSON.parse(refusal.body) as { error: string }).error };
}

describe('lets through', () => {
  it.each([
    ['the CLI submitting YAML', 'POST', '/jobs', { host: HOST, 'content-type': 'application/yaml' }],
    ['curl submitting YAML with a charset', 'POST', '/jobs', { host: HOST, 'content-type': 'text/yaml; charset=utf-8' }],
    ['a JSON task', 'POST', '/jobs', { host: HOST, 'content-type': 'Application/JSON ; charset=UTF-8' }],
    ['localhost by name', 'GET', '/jobs', { host: `localhost:${PORT}` }],
    ['a host name in capitals (DNS names have no case)', 'GET', '/jobs', { Host: `LOCALHOST:${PORT}` }],
    ['this server\'s own origin', 'DELETE', '/jobs/j-0m8x2k1qz-4fz0aa', { host: HOST, origin: `http://${HOST}` }],
    ['a same-origin browser request', 'GET', '/jobs', { host: HOST, 'sec-fetch-site': 'same-origin', origin: `http://localhost:${PORT}` }],
    ['a URL the user typed', 'GET', '/jobs', { host: HOST, 'sec-fetch-site': 'none' }],
    ['an agent\'s report (JSON, not a submission)', 'POST', '/jobs/j-0m8x2k1qz-4fz0aa/attempts/1/report', { host: HOST, 'content-type': 'application/json' }],
    ['an agent\'s heartbeat with no content type', 'POST', '/jobs/j-0m8x2k1qz-4fz0aa/attempts/1/heartbeat', { host: HOST }],
    ['a GET with no content type', 'GET', '/jobs?limit=5', { host: HOST }],
    ['a header whose value is absent', 'GET', '/jobs', { host: HOST, origin: undefined }],
  ])('%s', (_what, method, path, headers) => {
    expect(guard(method, path, headers)).toBeNull();
  });
});

describe('refuses with 403 a request addressed by another name (DNS rebinding)', () => {
  it.each([
    ['no Host at all', {}, 'none'],
    ['evil.com', { host: 'evil.com' }, '"evil.com"'],
    ['evil.com on the right port', { host: `evil.com:${PORT}` }, `"evil.com:${PORT}"`],
    ['127.0.0.1 on another port', { host: '127.0.0.1:8081' }, '"127.0.0.1:8081"'],
    ['127.0.0.1 with no port', { host: '127.0.0.1' }, '"127.0.0.1"'],
    ['a name that starts like 127.0.0.1', { host: `127.0.0.1.evil.com:${PORT}` }, `"127.0.0.1.evil.com:${PORT}"`],
    ['a name that ends like localhost', { host: `evil-localhost:${PORT}` }, `"evil-localhost:${PORT}"`],
    ['IPv6 loopback (the server listens on IPv4 only)', { host: `[::1]:${PORT}` }, `"[::1]:${PORT}"`],
    ['a repeated Host, joined', { host: `${HOST}, evil.com` }, `"${HOST}, evil.com"`],
    ['the same Host under two spellings', { Host: HOST, HOST: 'evil.com' }, `"${HOST}, evil.com"`],
    ['an upper-case header name', { HOST: 'evil.com' }, '"evil.com"'],
    ['a trailing dot', { host: `localhost.:${PORT}` }, `"localhost.:${PORT}"`],
    ['an empty Host', { host: '' }, '""'],
  ])('%s', (_what, headers, got) => {
    expect(guard('GET', '/jobs', headers)).toEqual({
      statusCode: 403,
      error: `refused: the Host header must be ${HOST} or localhost:${PORT}, got ${got} (a request through another name may come from a web page)`,
    });
  });
});

describe('refuses with 403 a request from another origin', () => {
  it.each([
    ['a web site', 'https://evil.com'],
    ['an opaque origin (sandboxed frame, file:)', 'null'],
    ['the right host over https', `https://${HOST}`],
    ['the right host on another port', 'http://127.0.0.1:3000'],
    ['the right host without the port', 'http://127.0.0.1'],
    ['a path after the origin', `http://${HOST}/`],
    ['a repeated Origin, joined', `http://${HOST}, https://evil.com`],
    ['an empty Origin', ''],
  ])('%s', (_what, origin) => {
    expect(guard('POST', '/jobs', { host: HOST, origin, 'content-type': 'application/yaml' })).toEqual({
      statusCode: 403,
      error: `refused: a request from the origin ${JSON.stringify(origin)}; only http://${HOST} or http://localhost:${PORT} may call this API`,
    });
  });

  it.each(['cross-site', 'same-site', 'same-origin, cross-site', 'Cross-Site'])('and with Sec-Fetch-Site %j, Origin or not', (site) => {
    expect(guard('GET', '/jobs', { host: HOST, 'sec-fetch-site': site })).toEqual({
      statusCode: 403,
      error: `refused: a browser request from another site (Sec-Fetch-Site ${JSON.stringify(site)})`,
    });
  });
});

describe('refuses with 415 a job submitted in a type a form or a simple fetch can send', () => {
  it.each([
    ['no content type', undefined, 'none'],
    ['text/plain (fetch without preflight)', 'text/plain;charset=UTF-8', '"text/plain;charset=UTF-8"'],
    ['a form', 'application/x-www-form-urlencoded', '"application/x-www-form-urlencoded"'],
    ['a multipart form', 'multipart/form-data; boundary=x', '"multipart/form-data; boundary=x"'],
    ['a YAML type joined with text/plain', 'application/yaml, text/plain', '"application/yaml, text/plain"'],
    ['a type that only starts like YAML', 'application/yamlx', '"application/yamlx"'],
    ['an empty type', '', '""'],
  ])('%s', (_what, type, got) => {
    const expected = { statusCode: 415, error: `expected a task as application/yaml, text/yaml, application/json (Content-Type), got ${got}` };
    expect(guard('POST', '/jobs', { host: HOST, 'content-type': type })).toEqual(expected);
    // However the path is spelled, it is the same route.
    expect(guard('post', '//jobs/?x=1', { host: HOST, 'content-type': type })).toEqual(expected);
  });
});

describe('checks in order: the host first, then the origin, then the site, then the type', () => {
  it('answers the first thing wrong', () => {
    const all = { host: 'evil.com', origin: 'null', 'sec-fetch-site': 'cross-site', 'content-type': 'text/plain' };
    expect(guard('POST', '/jobs', all)?.error).toMatch(/^refused: the Host header/);
    expect(guard('POST', '/jobs', { ...all, host: HOST })?.error).toMatch(/^refused: a request from the origin "null"/);
    expect(guard('POST', '/jobs', { ...all, host: HOST, origin: undefined })?.error).toMatch(/Sec-Fetch-Site/);
    expect(guard('POST', '/jobs', { host: HOST, 'content-type': 'text/plain' })?.statusCode).toBe(415);
  });

  it('cuts a long hostile header in its message', () => {
    const error = guard('GET', '/jobs', { host: 'h'.repeat(10_000) })?.error ?? '';
    expect(error.length).toBeLessThan(300);
  });
});

describe('the CLI\'s own HTTP client', () => {
  it('sends what the guard lets through: the server\'s address as Host, a task as application/yaml', async () => {
    const seen: GuardedRequest[] = [];
    const server = http.createServer((req, res) => {
      seen.push({ method: req.method ?? '', path: req.url ?? '', headers: { ...req.headers } as Record<string, string> });
      req.resume();
      req.on('end', () => {
        res.writeHead(req.method === 'POST' ? 202 : 200, { 'content-type': 'application/json' });
        res.end(req.method === 'POST' ? '{"jobId":"j-0m8x2k1qz-4fz0aa","warnings":[]}' : '{"jobs":[]}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const client = new HttpJobsClient(`http://127.0.0.1:${port}`);
      await client.submit('run: echo hi\n', {});
      await client.submit('run: echo hi\n', { envOverrides: { MODE: 'x' } });
      await client.listJobs();
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
    expect(seen.map((request) => [request.method, request.headers['content-type']])).toEqual([
      ['POST', 'application/yaml'],
      ['POST', 'application/yaml'],
      ['GET', undefined],
    ]);
    for (const request of seen) expect(guardLocalRequest(request, { port })).toBeNull();
  });
});
