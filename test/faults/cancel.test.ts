// Cancel at any moment, through the API of a real `relaunch serve`: right after submit, 20
// jobs at once; before launch, during it, while running, during backoff, twice. Serve
// stays up, every job ends CANCELLED, and no process of any job is left.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killStrayClis, startCli, waitForOutput, type Cli } from '../cli/helpers.ts';
import { waitFor, yaml } from '../local/harness.ts';
import { processesOfJob } from './world.ts';

let serve: Cli;
let url: string;
let dataDir: string;

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'relaunch-cancel-'));
  serve = startCli(['serve', '--data-dir', dataDir, '--port', '0'], { cwd: dataDir });
  [, url] = (await waitForOutput(serve, /relaunch API on (http:\/\/127\.0\.0\.1:\d+)/)) as unknown as [string, string];
});

afterAll(() => {
  killStrayClis();
  rmSync(dataDir, { recursive: true, force: true });
});

async function submit(task: string): Promise<string> {
  const response = await fetch(`${url}/jobs`, { method: 'POST', headers: { 'content-type': 'application/yaml' }, body: task });
  expect(response.status).toBe(202);
  return ((await response.json()) as { jobId: string }).jobId;
}

async function cancel(jobId: string): Promise<number> {
  return (await fetch(`${url}/jobs/${jobId}`, { method: 'DELETE' })).status;
}

interface View {
  status: string;
  failureReason: string | null;
  attempts: { attempt: number; outcome: string | null; decision: string | null }[];
}

async function view(jobId: string): Promise<View> {
  return (await (await fetch(`${url}/jobs/${jobId}`)).json()) as View;
}

async function ended(jobId: string): Promise<View> {
  return waitFor(`${jobId} to end`, async () => {
    const current = await view(jobId);
    return ['CANCELLED', 'SUCCEEDED', 'FAILED', 'FAILED_CONTROLLER'].includes(current.status) ? current : undefined;
  });
}

const LONG_JOB = yaml`
  run: |
    sleep 300 &
    sleep 300
`;

describe('cancel at any moment, through a real server', () => {
  it('cancels 20 jobs right after their 20 submits: serve stays up, all CANCELLED, nothing left running', { timeout: 120_000 }, async () => {
    const ids = await Promise.all(Array.from({ length: 20 }, () => submit(LONG_JOB)));
    const answers = await Promise.all(ids.map((id) => cancel(id)));
    expect(answers.every((status) => status === 202 || status === 200)).toBe(true);
    const views = await Promise.all(ids.map((id) => ended(id)));

    expect(views.map((v) => v.status)).toEqual(ids.map(() => 'CANCELLED'));
    expect(serve.child.exitCode).toBeNull();
    await waitFor('every process of the 20 jobs to be gone', () => (ids.every((id) => processesOfJob(id).length === 0) ? true : undefined));
    expect(serve.stderr()).not.toMatch(/JobCancelled|Unhandled|Error:/);
  });

  it.each([
    ['while it runs', 'running'],
    ['twice while it runs', 'running-twice'],
    ['during its restart backoff', 'backoff'],
  ])('cancels a job %s', { timeout: 60_000 }, async (_name, moment) => {
    const task =
      moment === 'backoff'
        ? yaml`
            resources:
              job_recovery:
                recover_on_exit_codes: [29]
                restart_backoff: {initial_seconds: 600, factor: 1, max_seconds: 600, jitter: none}
            run: exit 29
          `
        : LONG_JOB;
    const jobId = await submit(task);
    await waitFor(`${jobId} to reach the moment`, async () => {
      const current = await view(jobId);
      if (moment === 'backoff') return current.status === 'RECOVERING' ? true : undefined;
      return current.status === 'RUNNING' && processesOfJob(jobId).some((p) => p.command === 'sleep 300') ? true : undefined;
    });
    expect(await cancel(jobId)).toBe(202);
    if (moment === 'running-twice') expect([200, 202]).toContain(await cancel(jobId));
    const final = await ended(jobId);

    expect(final.status).toBe('CANCELLED');
    expect(await cancel(jobId)).toBe(200);
    // The decision is stored before ReleaseInstances runs, as on AWS: the processes go next.
    await waitFor(`the processes of ${jobId} to be gone`, () => (processesOfJob(jobId).length === 0 ? true : undefined), 10_000);
    expect(serve.child.exitCode).toBeNull();
  });

  it('ends serve on SIGTERM during a backoff with that job CANCELLED, not FAILED_CONTROLLER', { timeout: 60_000 }, async () => {
    const own = mkdtempSync(path.join(tmpdir(), 'relaunch-sigterm-'));
    try {
      const server = startCli(['serve', '--data-dir', own, '--port', '0'], { cwd: own });
      const [, base] = (await waitForOutput(server, /relaunch API on (http:\/\/127\.0\.0\.1:\d+)/)) as unknown as [string, string];
      const response = await fetch(`${base}/jobs`, {
        method: 'POST',
        headers: { 'content-type': 'application/yaml' },
        body: 'resources:\n  job_recovery:\n    recover_on_exit_codes: [29]\n    restart_backoff: {initial_seconds: 600, factor: 1, max_seconds: 600, jitter: none}\nrun: exit 29\n',
      });
      const { jobId } = (await response.json()) as { jobId: string };
      await waitFor('the backoff', async () => (((await (await fetch(`${base}/jobs/${jobId}`)).json()) as View).status === 'RECOVERING' ? true : undefined));
      server.child.kill('SIGTERM');
      const exit = await server.finished;
      expect(exit.code).toBe(0);

      const after = startCli(['status', jobId, '--json', '--data-dir', own], { cwd: own });
      const shown = JSON.parse((await after.finished).stdout) as View;
      expect(shown.status).toBe('CANCELLED');
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  });
});
