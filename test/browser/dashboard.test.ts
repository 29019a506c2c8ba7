/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
// The jobs page in a real browser (Debian's Chromium through playwright-core): jobs appear
// and change status live, a job's timeline matches `GET /jobs/{id}`, Cancel stops a
// running job, job data shows as text, and both views are saved as screenshots.

import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { summaryLine } from '../../lib/accounting/format.ts';
import type { JobView } from '../../lib/views.ts';
import { DashboardProxy } from '../../cli/dashboard-proxy.ts';
import { HttpJobsClient } from '../../cli/jobs-client.ts';
import { jobLogStreamConsoleUrl } from '../../lib/job-log-names.ts';
import { closeFakeApis, fakeApi, ShippedLogs } from '../support/fake-log-api.ts';
import { givenLaunched, harness, JOB_ID, taskSpec } from '../support/usecases-harness.ts';
import { EXAMPLES, killStrayClis, removeTempDirs, startCli, tempDir, waitFor, waitForOutput, type Cli } from '../support/cli.ts';

const CHROMIUM = '/usr/bin/chromium';
/** Where the screenshots go: the test's output folder. */
const OUTPUT = fileURLToPath(new URL('../../test-results/browser/', import.meta.url));

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const EXAMPLE_JOBS = ['checkpointing', 'recover-on-exit-code', 'max-restarts'] as const;
const RATE_LIMITED = 'toomanyrequests: You have reached your pull rate limit';

/**
 * A `docker` stand-in for the server's nodes: `info` works, it holds no image (so the agent
 * pulls), the first three pulls are rate limited (one attempt's three tries), and `exec` runs
 * its command on this machine.
 */
function standInDocker(dir: string): string {
  const bin = join(dir, 'docker-bin');
  mkdirSync(bin);
  writeFileSync(
    join(bin, 'docker'),
    `#!/bin/bash
printf '%s\\n' "$*" >> "${join(dir, 'docker.log')}"
case "$1" in
  info) echo 28.2.2 ;;
  image) exit 1 ;;
  pull) if [ "$(grep -c '^pull ' "${join(dir, 'docker.log')}")" -le 3 ]; then echo "${RATE_LIMITED}" >&2; exit 1; fi ;;
  exec)
    shift; workdir=''
    while [ "$#" -gt 0 ]; do case "$1" in -i) shift ;; -w) workdir=$2; shift 2 ;; -e) shift 2 ;; *) break ;; esac; done
    shift
    cd "$workdir" && exec "$@" ;;
esac
`,
    { mode: 0o755 },
  );
  return [bin, process.env.PATH].join(delimiter);
}
const HOSTILE = '<img src=x onerror=alert(1)>';
/** The part of a long page a screenshot keeps: the headline, the timeline and the first decisions. */
const TOP = { x: 0, y: 0, width: 1100, height: 940 };

describe('the jobs page in Chromium', () => {
  let server: Cli;
  let url: string;
  let context: BrowserContext;
  let page: Page;
  let profile: string;
  const dialogs: string[] = [];
  const pageErrors: string[] = [];

  const getJob = async (jobId: string): Promise<JobView> => (await (await fetch(`${url}/jobs/${jobId}`)).json()) as JobView;
  const submit = async (file: string | { yaml: string }): Promise<string> => {
    const body = typeof file === 'string' ? await import('node:fs/promises').then((fs) => fs.readFile(file, 'utf8')) : file.yaml;
    const answer = await fetch(`${url}/jobs`, { method: 'POST', headers: { 'content-type': 'application/yaml' }, body });
    expect(answer.status).toBe(202);
    return ((await answer.json()) as { jobId: string }).jobId;
  };
  const row = (jobId: string) => page.locator(`tr[data-job-id="${jobId}"]`);

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium`);
    mkdirSync(OUTPUT, { recursive: true });
    const dir = await tempDir('browser');
    server = startCli(['serve', '--port', '0', '--data-dir', join(dir, 'data')], { cwd: dir, env: { PATH: standInDocker(dir) } });
    url = (await waitForOutput(server, /^relaunch API on (http:\/\/127\.0\.0\.1:[1-9][0-9]*) /m))[1] as string;
    // A fresh profile: nothing from an earlier run (cache, storage) can make the test pass.
    profile = mkdtempSync(join(tmpdir(), 'relaunch-chromium-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ARGS,
      viewport: { width: 1100, height: 720 },
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    page.on('pageerror', (error) => pageErrors.push(error.message));
  });

  afterAll(async () => {
    await context?.close();
    if (profile !== undefined) rmSync(profile, { recursive: true, force: true });
    if (server !== undefined && server.child.exitCode === null) {
      server.child.kill('SIGINT');
      await server.finished;
    }
    killStrayClis();
    await removeTempDirs();
  });

  let jobIds: Record<(typeof EXAMPLE_JOBS)[number], string>;

  it('shows submitted jobs as they appear and as their status changes, with no reload', async () => {
    await page.goto(`${url}/`);
    await expect.poll(() => page.locator('main h1').textContent()).toBe('Jobs');
    // Every status each row shows, as the page draws it; and a mark a full reload would lose.
    await page.evaluate(() => {
      const seen: Record<string, string[]> = {};
      const record = (): void => {
        for (const row of document.querySelectorAll<HTMLElement>('tbody tr')) {
          const list = (seen[row.dataset.jobId ?? ''] ??= []);
          const status = row.dataset.status ?? '';
          if (list.at(-1) !== status) list.push(status);
        }
      };
      new MutationObserver(record).observe(document.querySelector('tbody') as Node, { subtree: true, childList: true, attributes: true });
      Object.assign(window, { seenStatuses: seen, loadedOnce: true });
    });

    const ids = await Promise.all(EXAMPLE_JOBS.map((name) => submit(join(EXAMPLES, `${name}.yaml`))));
    jobIds = Object.fromEntries(EXAMPLE_JOBS.map((name, index) => [name, ids[index] as string])) as typeof jobIds;

    for (const name of EXAMPLE_JOBS) {
      const jobId = jobIds[name];
      await expect.poll(() => row(jobId).locator('a.job-name').textContent(), { timeout: 30_000 }).toBe(name);
    }
    for (const name of EXAMPLE_JOBS) {
      await expect.poll(() => row(jobIds[name]).getAttribute('data-status'), { timeout: 90_000 }).toBe('SUCCEEDED');
      expect((await getJob(jobIds[name])).status).toBe('SUCCEEDED');
    }
    const seen = await page.evaluate(() => (window as unknown as { seenStatuses: Record<string, string[]> }).seenStatuses);
    for (const name of EXAMPLE_JOBS) {
      // Each row was drawn live at least once before its end (each example runs for seconds; the page asks every second).
      expect(seen[jobIds[name]]?.at(-1)).toBe('SUCCEEDED');
      expect(seen[jobIds[name]]?.length, `${name}: ${seen[jobIds[name]]?.join(' -> ')}`).toBeGreaterThan(1);
    }
    expect(await page.evaluate(() => (window as unknown as { loadedOnce?: boolean }).loadedOnce)).toBe(true);

    // Newest first, as the API lists them; the restarts column reads used / allowed.
    const listed = await page.locator('tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-job-id')));
    const api = ((await (await fetch(`${url}/jobs`)).json()) as { jobs: { jobId: string; createdAt: string }[] }).jobs;
    expect(listed).toEqual([...api].sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.jobId.localeCompare(a.jobId)).map((job) => job.jobId));
    await expect.poll(() => row(jobIds['max-restarts']).locator('td').nth(5).textContent()).toBe('2 / 2');

    // The filter hides what does not match, and shows it again.
    await page.selectOption('#status-filter', 'FAILED');
    await expect.poll(() => page.locator('tbody tr').count()).toBe(0);
    await page.selectOption('#status-filter', 'all');
    await expect.poll(() => page.locator('tbody tr').count()).toBe(3);

    await page.screenshot({ path: join(OUTPUT, 'jobs.png') });
  });

  it("opens a job from the keyboard; its timeline's bars and exit codes are those of GET /jobs/{id}", async () => {
    const jobId = jobIds.checkpointing;
    await row(jobId).locator('a.job-name').focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('h1.job-title').textContent()).toBe('checkpointing');

    const job = await getJob(jobId);
    expect(job.attempts.length).toBe(2);
    const bars = page.locator('.timeline .bar');
    await expect.poll(() => bars.count()).toBe(job.attempts.length * job.numNodes);
    for (const attempt of job.attempts) {
      const bar = page.locator(`.bar[data-attempt="${attempt.attempt}"][data-node="0"]`);
      expect(await bar.getAttribute('data-outcome')).toBe(attempt.outcome);
      expect(await bar.getAttribute('data-exit-code')).toBe(String(attempt.exitCodes[0]));
      expect(await bar.locator('.bar-label').textContent()).toBe(String(attempt.exitCodes[0]));
      expect(await bar.getAttribute('class')).toContain(attempt.exitCodes[0] === 0 ? 'bar-ok' : 'bar-error');
      // The decision, in words, under the timeline.
      const section = page.locator(`#attempt-${attempt.attempt}`);
      expect(await section.locator('.decision').textContent()).toContain(attempt.reason as string);
      expect(await section.locator('.counters').textContent()).toContain(`recoveries ${attempt.countersAfter?.recoveryCount}`);
    }
    // The first attempt's backoff (restart_backoff, 1 s) is a gap between the bars.
    expect(job.attempts[0]?.delaySeconds).toBe(1);
    expect(await page.locator('.gap[data-gap-after="1"]').getAttribute('class')).toContain('gap-backoff');
    expect(await page.locator('.policy pre').textContent()).toContain('recover_on_exit_codes: [29]');
    // Where its time and money went: the summary line, and the wall time cut by cause.
    const account = job.account!;
    expect(await page.locator('.account-summary').textContent()).toBe(summaryLine(account));
    const stretches = [...account.between, ...account.attempts.flatMap((a) => a.segments)];
    expect(await page.locator('.cause-bar .cause').count()).toBe(stretches.length);
    expect(await page.locator('.cause-bar .cause-restarted').count()).toBe(1);
    // A finished job offers no Cancel.
    expect(await page.locator('.cancel').isVisible()).toBe(false);
    await page.screenshot({ path: join(OUTPUT, 'job.png'), fullPage: true, clip: TOP });
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.screenshot({ path: join(OUTPUT, 'job-dark.png'), fullPage: true, clip: TOP });
    await page.emulateMedia({ colorScheme: 'light' });

    // A bar is a link to its attempt: Enter on it moves focus there.
    await page.locator('.bar[data-attempt="1"]').focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe('attempt-1');
    // The full log of the attempt, as the runtime wrote it.
    const href = await page.locator('#attempt-1 a[href$="/log"]').getAttribute('href');
    const log = await (await fetch(`${url}${href}`)).text();
    expect(log).toContain('step 4/8');

  });

  it('cancels a running job from the page', async () => {
    const jobId = await submit({ yaml: 'name: long-train\nrun: sleep 300\n' });
    await page.goto(`${url}/#/jobs/${jobId}`);
    await expect.poll(() => page.locator('.status').first().textContent(), { timeout: 30_000 }).toBe('RUNNING');

    expect(await page.locator('#cancel-job').isVisible()).toBe(true);
    await page.click('#cancel-job');
    await page.click('#cancel-confirm');
    await expect.poll(() => page.locator('.status').first().textContent(), { timeout: 30_000 }).toBe('CANCELLED');
    const job = await getJob(jobId);
    expect(job.status).toBe('CANCELLED');
    expect(job.attempts.at(-1)?.outcome).toBe('CANCELLED');
    expect(await page.locator('.bar[data-attempt="1"]').getAttribute('data-outcome')).toBe('CANCELLED');
    expect(await page.locator('#cancel-job').isVisible()).toBe(false);

  });

  it("shows a job's output as text, never as markup", async () => {
    const jobId = await submit({ yaml: `name: markup\nrun: echo '${HOSTILE}'\n` });
    await waitFor(`${jobId} to end`, async () => ((await getJob(jobId)).status === 'SUCCEEDED' ? true : undefined), 30_000);
    await page.goto(`${url}/#/jobs/${jobId}`);
    await expect.poll(() => page.locator('pre.tail').first().textContent(), { timeout: 30_000 }).toBe(HOSTILE);
    expect(await page.locator('img').count()).toBe(0);
    expect(dialogs).toEqual([]);
  });

  it('shows a hostile job name as text in the list and on the job', async () => {
    // Names are checked at submit, so the API never holds such a name: the page's answer is
    // rewritten here, to test the page's own escaping.
    const victim = jobIds['max-restarts'];
    // The list (`/jobs?limit=...`) and one job (`/jobs/<id>`).
    await page.route(/\/jobs(\/[^/?]+)?(\?[^/]*)?$/, async (route) => {
      const response = await route.fetch();
      const body = (await response.json()) as { jobs?: { jobId: string; name: string | null }[]; name?: string | null; jobId?: string };
      for (const job of body.jobs ?? []) if (job.jobId === victim) job.name = HOSTILE;
      if (body.jobId === victim) body.name = HOSTILE;
      await route.fulfill({ response, json: body });
    });
    try {
      await page.goto(`${url}/#/`);
      await expect.poll(() => row(victim).locator('a.job-name').textContent()).toBe(HOSTILE);
      await row(victim).locator('a.job-name').click();
      await expect.poll(() => page.locator('h1.job-title').textContent()).toBe(HOSTILE);
      expect(await page.locator('img').count()).toBe(0);
    } finally {
      await page.unrouteAll();
    }

    // An address naming no job, in markup: the API's 404, shown as text.
    await page.goto(`${url}/#/jobs/${encodeURIComponent(HOSTILE)}`);
    await expect.poll(() => page.locator('main h1').textContent()).toBe('No such job');
    expect(await page.locator('main [role="alert"]').textContent()).toContain('no job with id');
    expect(await page.locator('img').count()).toBe(0);
    expect(dialogs).toEqual([]);
    expect(pageErrors).toEqual([]);
  });

  // End to end, from a real browser: a foreign page cannot cancel. Chromium's CORS preflight
  // (a DELETE with a custom header) already stops it before the server's Origin check and
  // token; test/unit/local/dashboard.test.ts checks those two directly, without a browser.
  it('leaves a running job alone when a page of another origin sends it a cancel, whatever token it guesses', async () => {
    const jobId = await submit({ yaml: 'name: victim\nrun: sleep 300\n' });
    await waitFor(`${jobId} to run`, async () => ((await getJob(jobId)).status === 'RUNNING' ? true : undefined), 30_000);
    await page.goto('about:blank');
    const status = await page.evaluate(async ([target, id]) => {
      try {
        return (await fetch(`${target}/jobs/${id}`, { method: 'DELETE', headers: { 'x-relaunch-page-token': 'guess' } })).status;
      } catch {
        return 'blocked';
      }
    }, [url, jobId] as const);
    // The browser's preflight is refused (Origin null), so the DELETE is never sent.
    expect(status).toBe('blocked');
    expect((await getJob(jobId)).status).toBe('RUNNING');
    expect((await fetch(`${url}/jobs/${jobId}`, { method: 'DELETE' })).status).toBe(202);
  });

  it("shows relaunch's agent failing before setup as its own: the bar names the step, the attempt the step and the error", async () => {
    const jobId = await submit({ yaml: 'name: pulled\nresources:\n  image_id: docker:ubuntu:22.04\nrun: echo ran\n' });
    await waitFor(`${jobId} to end`, async () => (['SUCCEEDED', 'FAILED', 'FAILED_SETUP'].includes((await getJob(jobId)).status) ? true : undefined), 90_000);
    const job = await getJob(jobId);
    expect(job.status).toBe('SUCCEEDED');
    expect(job.attempts.map((attempt) => attempt.outcome)).toEqual(['AGENT_FAILED', 'EXITED']);

    await page.goto(`${url}/#/jobs/${jobId}`);
    await expect.poll(() => page.locator('h1.job-title').textContent()).toBe('pulled');
    const bar = page.locator('.bar[data-attempt="1"][data-node="0"]');
    expect(await bar.getAttribute('data-outcome')).toBe('AGENT_FAILED');
    expect(await bar.getAttribute('class')).toContain('bar-agent-failed');
    expect(await bar.locator('.bar-label').textContent()).toBe('image-pull');
    const failure = await page.locator('#attempt-1 .agent-failure').textContent();
    expect(failure).toContain("relaunch's agent failed on node 0 at image-pull before setup");
    expect(failure).toContain(`could not pull ubuntu:22.04 in 3 tries: ${RATE_LIMITED}`);
    expect(await page.locator('#attempt-2 .agent-failure').count()).toBe(0);
  });

  it('shows a wait for capacity as one short line, with the tries listed under it', async () => {
    // A server of its own: its chaos (attempt 2 finds no capacity) applies to every job it runs.
    const dir = await tempDir('browser-capacity');
    const chaos = join(dir, 'chaos.yaml');
    writeFileSync(chaos, 'faults:\n  - attempt: 1\n    preempt: {after: 200ms, warning: 200ms}\n  - attempt: 2\n    no_capacity: 3\n');
    const waiting = startCli(['serve', '--port', '0', '--data-dir', join(dir, 'data'), '--chaos', chaos], { cwd: dir });
    try {
      const base = (await waitForOutput(waiting, /^relaunch API on (http:\/\/127\.0\.0\.1:[1-9][0-9]*) /m))[1] as string;
      const answer = await fetch(`${base}/jobs`, { method: 'POST', headers: { 'content-type': 'application/yaml' }, body: 'name: no-room\nresources:\n  use_spot: true\nrun: sleep 60\n' });
      const { jobId } = (await answer.json()) as { jobId: string };
      await waitFor('the wait for capacity', async () => {
        const job = (await (await fetch(`${base}/jobs/${jobId}`)).json()) as JobView;
        return job.attempts[1]?.rule === 'WAITING_FOR_CAPACITY' ? true : undefined;
      }, 60_000);

      await page.goto(`${base}/#/jobs/${jobId}`);
      await expect.poll(() => page.locator('h1.job-title').textContent()).toBe('no-room');
      const decision = page.locator('#attempt-2 .decision');
      expect(await decision.locator('p').first().textContent()).toMatch(/^RECOVER waiting for capacity: next try at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d, in 60 s: no spot capacity for local-process$/);
      const tries = decision.locator('.capacity-tries li');
      expect(await tries.count()).toBeGreaterThan(0);
      expect(await tries.first().textContent()).toMatch(/^local-process try 1: InsufficientInstanceCapacity/);
      await fetch(`${base}/jobs/${jobId}`, { method: 'DELETE' });
    } finally {
      waiting.child.kill('SIGINT');
      await waiting.finished;
    }
  });

  it('draws one row per node, and lists jobs of every ending', async () => {
    const failed = await submit(join(EXAMPLES, 'fail-fast.yaml'));
    const twoNodes = await submit(join(EXAMPLES, 'two-node-spot.yaml'));
    for (const jobId of [failed, twoNodes]) {
      await waitFor(`${jobId} to end`, async () => (['SUCCEEDED', 'FAILED'].includes((await getJob(jobId)).status) ? true : undefined), 60_000);
    }
    await page.goto(`${url}/#/jobs/${twoNodes}`);
    await expect.poll(() => page.locator('h1.job-title').textContent()).toBe('two-node-spot');
    const job = await getJob(twoNodes);
    expect(job.numNodes).toBe(2);
    await expect.poll(() => page.locator('.timeline-row').count()).toBe(2);
    for (const node of [0, 1]) {
      expect(await page.locator(`.bar[data-attempt="1"][data-node="${node}"]`).getAttribute('data-exit-code')).toBe(String(job.attempts[0]?.exitCodes[node]));
    }
    await page.goto(`${url}/#/`);
    await expect.poll(() => row(failed).getAttribute('data-status')).toBe('FAILED');
    await page.screenshot({ path: join(OUTPUT, 'jobs-all.png') });
  });
});

describe('the jobs page of a deployed stack in Chromium (relaunch dashboard)', () => {
  it("shows each node's log: a full log of the attempt read through the API, and each log's page in the AWS console", async () => {
    const h = harness();
    await givenLaunched(h, taskSpec({ numNodes: 2 }));
    const api = await fakeApi(h, new ShippedLogs('eu-west-1'));
    api.logs.ship({ jobId: JOB_ID, attempt: 1, nodeRank: 0, phase: 'run' }, 'loss 0.91', 'loss 0.42');
    api.logs.ship({ jobId: JOB_ID, attempt: 1, nodeRank: 1, phase: 'run' }, `${HOSTILE}`);
    const proxy = await DashboardProxy.start({ client: new HttpJobsClient(api.url) });
    const profile = mkdtempSync(join(tmpdir(), 'relaunch-chromium-'));
    const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1100, height: 720 } });
    try {
      const page = context.pages()[0] ?? (await context.newPage());
      await page.goto(`${proxy.url}#/jobs/${JOB_ID}`);
      const consoleLinks = page.locator('a.console-link');
      await expect.poll(() => consoleLinks.count(), { timeout: 30_000 }).toBe(4);
      const url = (nodeRank: number, phase: 'setup' | 'run') => jobLogStreamConsoleUrl({ region: 'eu-west-1', namePrefix: 'relaunch', stream: { jobId: JOB_ID, attempt: 1, nodeRank, phase } });
      expect(await consoleLinks.evaluateAll((links) => links.map((link) => [link.textContent, link.getAttribute('href')]))).toEqual([
        ['node 0, setup', url(0, 'setup')],
        ['node 0, run', url(0, 'run')],
        ['node 1, setup', url(1, 'setup')],
        ['node 1, run', url(1, 'run')],
      ]);
      const full = page.getByRole('link', { name: 'full log of attempt 1' });
      const href = await full.getAttribute('href');
      await page.goto(`${proxy.url}${(href ?? '').replace(/^\//, '')}`);
      expect(await page.locator('body').innerText()).toBe(`==> node 0, run <==\nloss 0.91\nloss 0.42\n\n==> node 1, run <==\n${HOSTILE}\n`);
      expect(await page.locator('img').count()).toBe(0);
    } finally {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
      await proxy.close();
      await closeFakeApis();
    }
  });
});
