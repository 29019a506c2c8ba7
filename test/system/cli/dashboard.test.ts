// `relaunch dashboard`: the jobs page for a deployed API, its calls relayed and signed
// with SigV4 on this machine (never in the browser), every cancel needing the page token,
// and nothing but the page's three calls relayed. The deployed API is a local HTTP server
// that records what reaches it.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { verifySigV4 } from '../../../local/sigv4.ts';
import { pageTokenAt, rawRequest, type RawAnswer } from '../../support/fixtures/raw-request.ts';
import { DashboardProxy } from '../../../cli/dashboard-proxy.ts';
import { HttpJobsClient, LOCAL_PACING } from '../../../cli/jobs-client.ts';
import { PAGE_TOKEN_HEADER } from '../../../local/dashboard/page-token.ts';
import { killStrayClis, removeTempDirs, runCli, startCli, tempDir, waitForOutput } from '../../support/cli.ts';

const JOB = 'j-0m8x2k1qz-4fz0aa';
const ACCESS_KEY = 'AKIDRELAUNCHTEST';
const SECRET_KEY = 'relaunch-test-secret-key';

interface Seen {
  readonly method: string;
  readonly path: string;
  readonly headers: http.IncomingHttpHeaders;
}

/** A stand-in for API Gateway: answers the three routes, and records every request. */
async function fakeApi(): Promise<{ url: string; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers });
    req.resume();
    const reply = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json', 'x-amzn-requestid': 'req-1', 'set-cookie': 'session=s' });
      res.end(JSON.stringify(body));
    };
    // API Gateway's IAM check on a signed request (a loopback API is not signed): the
    // signature must cover the method, path, query and headers.
    const headers = Object.fromEntries(Object.entries(req.headers).map(([name, value]) => [name, Array.isArray(value) ? value.join(',') : value]));
    const checked = verifySigV4({ method: req.method ?? '', path: req.url ?? '', headers, body: '' }, 'execute-api', (key) =>
      key === ACCESS_KEY ? { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET_KEY } : undefined, new Date());
    if (req.headers.authorization !== undefined && 'refused' in checked) reply(403, { message: checked.refused.message });
    else if (req.method === 'GET' && (req.url === '/jobs' || req.url === '/jobs?limit=200')) reply(200, { jobs: [{ jobId: JOB, name: 'train', status: 'RUNNING' }] });
    else if (req.method === 'GET' && req.url === `/jobs/${JOB}`) reply(200, { jobId: JOB, name: 'train', status: 'RUNNING', attempts: [] });
    else if (req.method === 'DELETE' && req.url === `/jobs/${JOB}`) reply(202, { jobId: JOB, status: 'CANCELLING', alreadyFinished: false });
    else reply(404, { error: 'no job with id x' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, seen, close: () => new Promise((resolve) => server.close(() => resolve())) };
}


function request(proxy: DashboardProxy, method: string, path: string, headers: Record<string, string> = {}): Promise<RawAnswer> {
  return rawRequest(proxy.url, method, path, headers);
}

function tokenOf(proxy: DashboardProxy): Promise<string> {
  return pageTokenAt(proxy.url);
}

describe('relaunch dashboard, relaying to a deployed API', () => {
  const saved = { ...process.env };
  let api: Awaited<ReturnType<typeof fakeApi>>;
  let proxy: DashboardProxy;

  beforeEach(async () => {
    Object.assign(process.env, { AWS_ACCESS_KEY_ID: ACCESS_KEY, AWS_SECRET_ACCESS_KEY: SECRET_KEY, AWS_REGION: 'eu-west-1' });
    delete process.env.AWS_SESSION_TOKEN;
    delete process.env.AWS_PROFILE;
    api = await fakeApi();
    // Signed as for a deployed API, though this one listens on loopback.
    const client = new HttpJobsClient(api.url, { sign: true, pacing: LOCAL_PACING });
    proxy = await DashboardProxy.start({ client });
  });

  afterEach(async () => {
    await proxy.close();
    await api.close();
    process.env = { ...saved };
  });

  it('serves the page, saying where its jobs are and that no full logs are kept', async () => {
    const page = await request(proxy, 'GET', '/');
    expect(page.status).toBe(200);
    expect(page.body).toContain(`<meta name="relaunch-where" content="${api.url}">`);
    expect(page.body).toContain('<meta name="relaunch-logs" content="none">');
    expect(page.body).not.toContain(ACCESS_KEY);
    expect(api.seen).toEqual([]);
    const log = await request(proxy, 'GET', `/jobs/${JOB}/attempts/1/log`);
    expect(log.status).toBe(404);
    expect(JSON.parse(log.body).error).toContain('keeps no full logs');
  });

  it.each([
    ['GET', '/jobs', 200],
    ['GET', '/jobs?limit=200', 200],
    ['GET', `/jobs/${JOB}`, 200],
  ])('relays %s %s signed with SigV4 (checked as API Gateway would), and answers only its status and JSON', async (method, path, status) => {
    const answer = await request(proxy, method, path, { origin: proxy.url.slice(0, -1), 'sec-fetch-site': 'same-origin' });
    expect(answer.status).toBe(status);
    expect(api.seen).toHaveLength(1);
    const [seen] = api.seen;
    expect(seen?.path).toBe(path);
    expect(seen?.headers.authorization).toMatch(new RegExp(`^AWS4-HMAC-SHA256 Credential=${ACCESS_KEY}/\\d{8}/eu-west-1/execute-api/aws4_request, `));
    // Nothing of the browser's request reaches the API, and nothing of the API's headers reaches the browser.
    expect(seen?.headers.origin).toBeUndefined();
    expect(answer.headers['set-cookie']).toBeUndefined();
    expect(answer.headers['x-amzn-requestid']).toBeUndefined();
    expect(answer.body).not.toContain(SECRET_KEY);
    expect(JSON.parse(answer.body)).toMatchObject({ ...(path.startsWith('/jobs?') || path === '/jobs' ? { jobs: [{ jobId: JOB }] } : { jobId: JOB }) });
  });

  it('relays a cancel only with the page token, and refuses it (403) without one or with a wrong one, from any client', async () => {
    for (const headers of [{}, { [PAGE_TOKEN_HEADER]: 'f'.repeat(64) }, { origin: proxy.url.slice(0, -1) }] as Record<string, string>[]) {
      const refused = await request(proxy, 'DELETE', `/jobs/${JOB}`, headers);
      expect(refused.status).toBe(403);
      expect(JSON.parse(refused.body).error).toContain(PAGE_TOKEN_HEADER);
    }
    expect(api.seen).toEqual([]);
    const cancelled = await request(proxy, 'DELETE', `/jobs/${JOB}`, { [PAGE_TOKEN_HEADER]: await tokenOf(proxy) });
    expect(cancelled.status).toBe(202);
    expect(JSON.parse(cancelled.body)).toEqual({ jobId: JOB, status: 'CANCELLING', alreadyFinished: false });
    expect(api.seen.map((seen) => `${seen.method} ${seen.path}`)).toEqual([`DELETE /jobs/${JOB}`]);
  });

  it.each([
    ['a rebinding Host', 'GET', '/jobs', { host: 'evil.example' }, 403],
    ['a foreign Origin', 'GET', '/jobs', { origin: 'http://evil.example' }, 403],
    ['a cross-site request', 'GET', `/jobs/${JOB}`, { 'sec-fetch-site': 'cross-site' }, 403],
    ['a submit (the page submits nothing)', 'POST', '/jobs', { 'content-type': 'application/yaml' }, 404],
    ["an agent's report", 'POST', `/jobs/${JOB}/attempts/1/report`, {}, 404],
    ['an upload location', 'GET', '/sources', {}, 404],
    ['a malformed job id', 'GET', '/jobs/..%2Fsources', {}, 404],
    ['a limit the API does not take', 'GET', '/jobs?limit=5000', {}, 400],
    ['a limit that smuggles a query', 'GET', '/jobs?limit=1%26x%3Dy', {}, 400],
    ['an unknown path', 'GET', '/admin', {}, 404],
  ])('refuses %s without calling the API', async (_name, method, path, headers, status) => {
    const answer = await request(proxy, method, path, headers);
    expect(answer.status).toBe(status);
    expect(JSON.parse(answer.body)).toHaveProperty('error');
    expect(api.seen).toEqual([]);
  });

  it('answers 502 naming the API when it cannot be reached', async () => {
    await api.close();
    const answer = await request(proxy, 'GET', '/jobs');
    expect(answer.status).toBe(502);
    expect(JSON.parse(answer.body).error).toContain(`cannot reach ${api.url}`);
    api = await fakeApi();
  });
});

describe('relaunch dashboard, the command', { timeout: 120_000 }, () => {
  afterAll(async () => {
    killStrayClis();
    await removeTempDirs();
  });

  it('without an API or a local runtime: a usage error (2) naming --api', async () => {
    const dir = await tempDir('dashboard');
    const result = await runCli(['dashboard', '--data-dir', join(dir, 'data')], { cwd: dir });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--api: expected the URL of a deployed relaunch API');
  });

  it('a bad --api URL: a usage error (2)', async () => {
    const dir = await tempDir('dashboard');
    const result = await runCli(['dashboard', '--api', 'ftp://x'], { cwd: dir });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--api: expected an http(s) URL, got "ftp://x"');
  });

  it('without an API, points at the page of the runtime serving the data folder', async () => {
    const dir = await tempDir('dashboard');
    const data = join(dir, 'data');
    const server = startCli(['serve', '--port', '0', '--data-dir', data], { cwd: dir });
    const [, url] = await waitForOutput(server, /^jobs page: (http:\/\/127\.0\.0\.1:[1-9][0-9]*)\/$/m);
    const result = await runCli(['dashboard', '--data-dir', data], { cwd: dir });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`jobs page: ${url}/ (the local runtime of ${data}, pid ${server.child.pid})`);
    server.child.kill('SIGINT');
    expect((await server.finished).code).toBe(0);
  });

  it('with an API, serves the page on the port it prints until interrupted', async () => {
    const dir = await tempDir('dashboard');
    const api = await fakeApi();
    try {
      const cli = startCli(['dashboard', '--api', api.url, '--port', '0'], { cwd: dir });
      const [, url] = await waitForOutput(cli, /^jobs page of \S+ on (http:\/\/127\.0\.0\.1:[1-9][0-9]*\/);/m);
      const page = await fetch(url as string);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('relaunch-page-token');
      expect((await fetch(`${url}jobs`)).status).toBe(200);
      expect(api.seen.map((seen) => seen.path)).toEqual(['/jobs']);
      cli.child.kill('SIGINT');
      expect((await cli.finished).code).toBe(0);
    } finally {
      await api.close();
    }
  });
});
