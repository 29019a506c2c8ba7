// The jobs page on the local API's port: what it serves, who may load it, the page token
// a browser's cancel must carry (while the CLI's cancel keeps working without one), and
// an attempt's full log, each against a real runtime's server.

import { describe, expect, it } from 'vitest';
import { pageTokenAt, rawRequest, type RawAnswer } from '../../support/fixtures/raw-request.ts';
import { isTerminal } from '../../../lib/status.ts';
import { PAGE_TOKEN_HEADER } from '../../../local/dashboard/page-token.ts';
import { finish, useLocalRuntimes, waitFor, waitUntilAwaiting, yaml, type TestRuntime } from '../../support/local-harness.ts';

const open = useLocalRuntimes();


function request(t: TestRuntime, method: string, path: string, headers: Record<string, string> = {}): Promise<RawAnswer> {
  return rawRequest(t.runtime.url, method, path, headers);
}

function pageToken(t: TestRuntime): Promise<string> {
  return pageTokenAt(t.runtime.url);
}

/** The headers a browser adds to a fetch from the page itself. */
function fromThePage(t: TestRuntime): Record<string, string> {
  return { origin: t.runtime.url, 'sec-fetch-site': 'same-origin' };
}

async function statusOf(t: TestRuntime, jobId: string): Promise<string> {
  return (await t.runtime.deps.store.getJob(jobId)).status;
}

const UNKNOWN_JOB = 'j-0m8x2k1qz-4fz0aa';

describe('the jobs page, served by the local API', () => {
  it('serves the page with a fresh 64-hex token per server, its script and its style, none of them frameable or sniffable', async () => {
    const [a, b] = [await open(), await open()];
    const page = await request(a, 'GET', '/');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.body).toContain('<meta name="relaunch-logs" content="local">');
    const [tokenA, tokenB] = [await pageToken(a), await pageToken(b)];
    expect(tokenA).toMatch(/^[0-9a-f]{64}$/);
    expect(tokenB).not.toBe(tokenA);
    expect(await pageToken(a)).toBe(tokenA);

    const script = await request(a, 'GET', '/dashboard.js');
    expect(script.status).toBe(200);
    expect(script.headers['content-type']).toBe('text/javascript; charset=utf-8');
    // The bundle holds the page's own code, and no HTML parsing of data.
    expect(script.body).toContain('relaunch-page-token');
    expect(script.body).not.toContain('innerHTML');
    const style = await request(a, 'GET', '/dashboard.css');
    expect(style.status).toBe(200);
    expect(style.body).toContain('prefers-color-scheme: dark');
  });

  it.each([
    ['a rebinding Host', { host: 'evil.example:80' }, 403, 'Host'],
    ['no Host', { host: '' }, 403, 'Host'],
    ['a foreign Origin', { origin: 'http://evil.example' }, 403, 'origin'],
    ['a cross-site navigation', { 'sec-fetch-site': 'cross-site' }, 403, 'another site'],
  ])('refuses the page to %s, giving no token', async (_name, headers, status, words) => {
    const t = await open();
    for (const path of ['/', '/dashboard.js']) {
      const answer = await request(t, 'GET', path, headers);
      expect(answer.status).toBe(status);
      expect(JSON.parse(answer.body).error).toContain(words);
      expect(answer.body).not.toMatch(/[0-9a-f]{64}/);
    }
  });

  it('answers 405 to a method the page does not take', async () => {
    const t = await open();
    const answer = await request(t, 'POST', '/', { 'content-type': 'application/json' });
    expect(answer.status).toBe(405);
    expect(answer.headers.allow).toBe('GET');
  });
});

describe('cancel from the page: the page token', () => {
  it.each([
    ['no token', undefined, "must carry this server's page token"],
    ['a wrong token', 'f'.repeat(64), "is not this server's"],
    ['an empty token', '', "is not this server's"],
  ])('refuses a browser cancel with %s (403), and the job runs on', async (_name, token, message) => {
    const t = await open();
    const { jobId } = await t.runtime.submit(yaml`
      run: sleep 30
    `);
    await waitUntilAwaiting(t, jobId, 1);
    const headers = { ...fromThePage(t), ...(token === undefined ? {} : { [PAGE_TOKEN_HEADER]: token }) };
    const answer = await request(t, 'DELETE', `/jobs/${jobId}`, headers);
    expect(answer.status).toBe(403);
    expect(JSON.parse(answer.body).error).toContain(message);
    expect(await statusOf(t, jobId)).toBe('RUNNING');
    await t.runtime.deps.store.getAttempt(jobId, 1).then((attempt) => expect(attempt.outcome).toBeNull());
  });

  it("refuses another server's token", async () => {
    const [t, other] = [await open(), await open()];
    const { jobId } = await t.runtime.submit(yaml`
      run: sleep 30
    `);
    await waitUntilAwaiting(t, jobId, 1);
    const answer = await request(t, 'DELETE', `/jobs/${jobId}`, { ...fromThePage(t), [PAGE_TOKEN_HEADER]: await pageToken(other) });
    expect(answer.status).toBe(403);
    expect(await statusOf(t, jobId)).toBe('RUNNING');
  });

  it('cancels with the right token; the CLI, which sends no browser headers, cancels without one', async () => {
    const t = await open();
    const task = yaml`
      run: sleep 30
    `;
    const [fromPage, fromCli] = [(await t.runtime.submit(task)).jobId, (await t.runtime.submit(task)).jobId];
    await waitUntilAwaiting(t, fromPage, 1);
    await waitUntilAwaiting(t, fromCli, 1);

    const page = await request(t, 'DELETE', `/jobs/${fromPage}`, { ...fromThePage(t), [PAGE_TOKEN_HEADER]: await pageToken(t) });
    expect(page.status).toBe(202);
    const cli = await request(t, 'DELETE', `/jobs/${fromCli}`);
    expect(cli.status).toBe(202);
    for (const jobId of [fromPage, fromCli]) expect((await finish(t, jobId)).view.status).toBe('CANCELLED');
  });

  it('still refuses a foreign Origin that carries the right token', async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(yaml`
      run: sleep 30
    `);
    await waitUntilAwaiting(t, jobId, 1);
    const answer = await request(t, 'DELETE', `/jobs/${jobId}`, { origin: 'http://evil.example', [PAGE_TOKEN_HEADER]: await pageToken(t) });
    expect(answer.status).toBe(403);
    expect(await statusOf(t, jobId)).toBe('RUNNING');
  });
});

describe("an attempt's full log, and the job view the page reads", () => {
  it('serves every phase of an attempt as plain text, and the view carries decisions, counters and last lines', async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(yaml`
      name: logged
      resources:
        job_recovery:
          recover_on_exit_codes: [29]
      setup: echo preparing
      run: |
        echo "<img src=x onerror=alert(1)> attempt $RELAUNCH_ATTEMPT"
        [ "$RELAUNCH_ATTEMPT" -ge 2 ] || exit 29
    `);
    await waitFor(`${jobId} to end`, async () => (isTerminal((await t.runtime.deps.store.getJob(jobId)).status) ? true : undefined));

    const log = await request(t, 'GET', `/jobs/${jobId}/attempts/1/log`);
    expect(log.status).toBe(200);
    expect(log.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(log.headers['x-content-type-options']).toBe('nosniff');
    expect(log.body).toBe('==> node 0, setup <==\npreparing\n\n==> node 0, run <==\n<img src=x onerror=alert(1)> attempt 1\n');

    const view = JSON.parse((await request(t, 'GET', `/jobs/${jobId}`)).body);
    expect(view).toMatchObject({ status: 'SUCCEEDED', numNodes: 1, recoveryPolicy: { recoverOnExitCodes: [29] } });
    expect(view.attempts[0]).toMatchObject({
      exitCodes: [29],
      decision: 'RESTART',
      rule: 'RECOVER_ON_EXIT_CODE',
      delaySeconds: 0,
      countersAfter: { restartsOnErrors: 0, restartsOnExitCodes: 1, recoveryCount: 1, market: 'on-demand' },
      outputTails: [{ nodeRank: 0, phase: 'run', text: '<img src=x onerror=alert(1)> attempt 1' }],
    });
    expect(view.attempts[0].reason).toBe('exit code 29 (run) is in recover_on_exit_codes; restart 1, unlimited');
  });

  it.each([
    ['an unknown job', `/jobs/${UNKNOWN_JOB}/attempts/1/log`, 404, `no job with id ${UNKNOWN_JOB}`],
    ['a malformed job id', '/jobs/..%2F..%2Fetc/attempts/1/log', 404, 'no job with id'],
    ['attempt 0', '/jobs/JOB/attempts/0/log', 400, 'attempt'],
    ['an attempt that is not a number', '/jobs/JOB/attempts/x/log', 400, 'attempt'],
    ['an attempt the job never had', '/jobs/JOB/attempts/7/log', 404, 'has no attempt 7 (it has 1)'],
  ])('answers %s (%s) with a clear error', async (_name, path, status, message) => {
    const t = await open();
    const { jobId } = await t.runtime.submit(yaml`
      run: echo done
    `);
    await t.runtime.waitForJob(jobId);
    const answer = await request(t, 'GET', path.replace('JOB', jobId));
    expect(answer.status).toBe(status);
    const body = JSON.parse(answer.body);
    if (status === 400) expect(body.issues).toEqual([{ path: 'attempt', message: expect.stringContaining('expected a positive integer') }]);
    else expect(body.error).toContain(message);
  });

  it('refuses the log to a rebinding Host', async () => {
    const t = await open();
    const answer = await request(t, 'GET', `/jobs/${UNKNOWN_JOB}/attempts/1/log`, { host: 'evil.example' });
    expect(answer.status).toBe(403);
  });
});
