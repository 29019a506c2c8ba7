// A runtime that does not answer (SIGSTOP), with real processes: status, logs, cancel and
// run each wait a bounded time (RELAUNCH_RUNTIME_WAIT_SECONDS, short here) and say so,
// naming the runtime's pid; a submit given up on is made at most once, and running the
// same command again after SIGCONT gets that job, never a second one.

import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { JobView } from '../../../lib/views.ts';
import { killStrayClis, parseStdout, removeTempDirs, runCli, SLOW, startCli, tempDir, waitForOutput, writeTask } from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

/** What a stack trace looks like on stderr. */
const STACK_LINE = /^\s+at /m;

describe('a frozen runtime', { timeout: 3 * SLOW }, () => {
  it('status, logs, cancel and run say it is not answering, with its pid; a retried run after SIGCONT gets the job its abandoned submit made', async () => {
    const dir = await tempDir('frozen');
    const data = join(dir, 'data');
    const server = startCli(['serve', '--port', '0', '--data-dir', data], { cwd: dir });
    const [, url] = (await waitForOutput(server, /relaunch API on (http:\/\/127\.0\.0\.1:\d+)/)) as unknown as [string, string];
    const pid = server.child.pid as number;
    const first = await runCli(['run', await writeTask(dir, 'first.yaml', 'run: echo first\n'), '--data-dir', data], { cwd: dir });
    expect(first.code, first.stderr).toBe(0);
    const jobId = /(j-[0-9a-z]+-[0-9a-z]+) SUCCEEDED/.exec(first.stdout)?.[1] as string;
    const second = await writeTask(dir, 'second.yaml', 'run: echo second\n');
    const env = { RELAUNCH_RUNTIME_WAIT_SECONDS: '2' };

    process.kill(pid, 'SIGSTOP');
    try {
      const said = `the local runtime of ${data} (pid ${pid}, ${url}) is not answering`;
      for (const args of [['status'], ['logs', jobId], ['cancel', jobId], ['run', second]]) {
        const result = await runCli([...args, '--data-dir', data], { cwd: dir, env });
        expect(result.code, `${args[0]}: ${result.stderr}`).toBe(1);
        expect(result.stderr).not.toMatch(STACK_LINE);
        expect(result.stderr).toContain(`error: ${said}: no answer to `);
        expect(result.stderr).toContain(`within 2 s (RELAUNCH_RUNTIME_WAIT_SECONDS sets the wait). It may be stopped (kill -CONT ${pid} resumes it)`);
        if (args[0] === 'run') expect(result.stderr).toContain('running this same command again submits it under the same key, so it is made once');
      }
    } finally {
      process.kill(pid, 'SIGCONT');
    }

    // The same command again: the key of the submit it gave up on, so the job is made once.
    const retried = await runCli(['run', second, '--data-dir', data, '--json'], { cwd: dir });
    expect(retried.code, retried.stderr).toBe(0);
    const retriedJob = parseStdout<JobView>(retried);
    expect(retriedJob.status).toBe('SUCCEEDED');

    const status = await runCli(['status', '--json', '--data-dir', data], { cwd: dir });
    expect(status.code, status.stderr).toBe(0);
    const jobs = parseStdout<{ jobs: JobView[] }>(status).jobs;
    expect(jobs.map((job) => job.jobId).sort()).toEqual([jobId, retriedJob.jobId].sort());
    // The cancel given up on found a job that had already ended: it stays SUCCEEDED.
    expect(jobs.find((job) => job.jobId === jobId)?.status).toBe('SUCCEEDED');

    server.child.kill('SIGTERM');
    expect((await server.finished).code).toBe(0);
  });
});
