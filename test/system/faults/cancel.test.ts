// Cancel at any moment, through the API of a real `relaunch serve`: right after submit, 20
// jobs at once; before launch, during it, while running, during backoff, twice. Serve
// stays up, every job ends CANCELLED, and no process of any job is left.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUNTIME_STOPPED } from '../../../cli/commands/serve.ts';
import { killStrayClis, startCli } from '../../support/cli.ts';
import { waitFor, yaml } from '../../support/local-harness.ts';
import { processesOfJob, serve, type JobAnswer, type Served } from './world.ts';

let server: Served;
let dataDir: string;

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'relaunch-cancel-'));
  server = await serve(dataDir);
});

afterAll(() => {
  killStrayClis();
  rmSync(dataDir, { recursive: true, force: true });
});

async function ended(jobId: string): Promise<JobAnswer> {
  return waitFor(`${jobId} to end`, async () => {
    const current = await server.job(jobId);
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
    const ids = await Promise.all(Array.from({ length: 20 }, () => server.submit(LONG_JOB)));
    const answers = await Promise.all(ids.map((id) => server.cancel(id)));
    expect(answers.every((status) => status === 202 || status === 200)).toBe(true);
    const views = await Promise.all(ids.map((id) => ended(id)));

    expect(views.map((v) => v.status)).toEqual(ids.map(() => 'CANCELLED'));
    expect(server.cli.child.exitCode).toBeNull();
    await waitFor('every process of the 20 jobs to be gone', () => (ids.every((id) => processesOfJob(id).length === 0) ? true : undefined));
    expect(server.cli.stderr()).not.toMatch(/JobCancelled|Unhandled|Error:/);
  });

  it.each([
    ['while it runs', 'running'],
    ['twice while it runs', 'running-twice'],
    ['during its restart backoff', 'backoff'],
    ['whose nodes are held for a restart in place during its backoff', 'held'],
  ])('cancels a job %s', { timeout: 60_000 }, async (_name, moment) => {
    const task =
      moment === 'held'
        ? yaml`
            num_nodes: 2
            resources:
              job_recovery:
                recover_on_exit_codes: [29]
                reuse_nodes: {setup: skip}
                restart_backoff: {initial_seconds: 120, factor: 1, max_seconds: 120, jitter: none}
            run: |
              if [ "$RELAUNCH_NODE_RANK" -eq 1 ]; then exit 29; fi
              sleep 300
          `
        : moment === 'backoff'
        ? yaml`
            resources:
              job_recovery:
                recover_on_exit_codes: [29]
                restart_backoff: {initial_seconds: 600, factor: 1, max_seconds: 600, jitter: none}
            run: exit 29
          `
        : LONG_JOB;
    const jobId = await server.submit(task);
    await waitFor(`${jobId} to reach the moment`, async () => {
      const current = await server.job(jobId);
      if (moment === 'backoff') return current.status === 'RECOVERING' ? true : undefined;
      // Held: the backoff has begun, and both nodes' agents are still up, waiting to be told what next.
      if (moment === 'held') return current.status === 'RECOVERING' && processesOfJob(jobId).length > 0 && processesOfJob(jobId).every((p) => p.command !== 'sleep 300') ? true : undefined;
      return current.status === 'RUNNING' && processesOfJob(jobId).some((p) => p.command === 'sleep 300') ? true : undefined;
    });
    expect(await server.cancel(jobId)).toBe(202);
    if (moment === 'running-twice') expect([200, 202]).toContain(await server.cancel(jobId));
    const final = await ended(jobId);

    expect(final.status).toBe('CANCELLED');
    expect(await server.cancel(jobId)).toBe(200);
    // The decision is stored before ReleaseInstances runs, as on AWS: the processes go next.
    await waitFor(`the processes of ${jobId} to be gone`, () => (processesOfJob(jobId).length === 0 ? true : undefined), 10_000);
    expect(server.cli.child.exitCode).toBeNull();
  });

  it('ends serve on SIGTERM during a backoff with that job CANCELLED, not FAILED_CONTROLLER', { timeout: 60_000 }, async () => {
    const own = mkdtempSync(path.join(tmpdir(), 'relaunch-sigterm-'));
    try {
      const ownServer = await serve(own);
      const jobId = await ownServer.submit(
        'resources:\n  job_recovery:\n    recover_on_exit_codes: [29]\n    restart_backoff: {initial_seconds: 600, factor: 1, max_seconds: 600, jitter: none}\nrun: exit 29\n',
      );
      await waitFor('the backoff', async () => ((await ownServer.job(jobId)).status === 'RECOVERING' ? true : undefined));
      ownServer.cli.child.kill('SIGTERM');
      const exit = await ownServer.cli.finished;
      expect(exit.code).toBe(0);

      const after = startCli(['status', jobId, '--json', '--data-dir', own], { cwd: own });
      const shown = JSON.parse((await after.finished).stdout) as JobAnswer;
      expect(shown.status).toBe('CANCELLED');
      // Not the user's cancel: the reason says the runtime was stopped.
      expect(shown.failureReason).toBe(RUNTIME_STOPPED);
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  });
});
