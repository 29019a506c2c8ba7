// Hostile YAML against real processes: task bodies and files, and chaos files, shaped to
// cost a parser the most for their size. Each is refused naming the limit and the key it is
// under; a job running meanwhile never notices (the issue's case stalled `serve` for 382 s,
// and a job running then was lost, then failed its controller).

import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { HOSTILE_CHAOS, HOSTILE_TASKS } from '../../../bench/hostile-texts.ts';
import { killStrayClis, removeTempDirs, runCli, SLOW, startCli, tempDir, waitFor, waitForOutput, waitForPid, writeTask } from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

const SHAPE = 'expected at most 8192 keys and list items in all, got more; refused before parsing';
const ENVS = HOSTILE_TASKS[0] as { readonly text: string };

describe('hostile YAML', { timeout: SLOW }, () => {
  it('24 bodies of tens of thousands of keys at once, while a job runs: each a 400 naming envs, and the job ends on its first attempt', async () => {
    const dir = await tempDir('hostile-bodies');
    const data = join(dir, 'data');
    const server = startCli(['serve', '--port', '0', '--data-dir', data], { cwd: dir });
    const [, url] = (await waitForOutput(server, /relaunch API on (http:\/\/127\.0\.0\.1:\d+)/)) as unknown as [string, string];
    const gate = join(dir, 'gate');
    const pidfile = join(dir, 'pid');
    const task = ['run: |', `  echo $$ > ${pidfile}`, `  while [ ! -f ${gate} ]; do sleep 0.1; done`, ''].join('\n');
    const submitted = await fetch(`${url}/jobs`, { method: 'POST', headers: { 'content-type': 'application/yaml' }, body: task });
    const { jobId } = (await submitted.json()) as { jobId: string };
    await waitForPid(pidfile);

    const answers = await Promise.all(
      Array.from({ length: 24 }, async () => {
        const response = await fetch(`${url}/jobs`, { method: 'POST', headers: { 'content-type': 'application/yaml' }, body: ENVS.text });
        return { status: response.status, body: (await response.json()) as unknown };
      }),
    );
    for (const answer of answers) {
      expect(answer).toEqual({ status: 400, body: { error: 'the task is not valid (1 issue)', issues: [{ path: 'envs', message: SHAPE, line: 2 }] } });
    }

    await writeFile(gate, '');
    const job = await waitFor('the job to end', async () => {
      const view = (await (await fetch(`${url}/jobs/${jobId}`)).json()) as { status: string; attempts: unknown[] };
      return view.status === 'SUCCEEDED' || view.status.startsWith('FAILED') ? view : undefined;
    });
    expect(job).toMatchObject({ status: 'SUCCEEDED', attempts: [{ attempt: 1, outcome: 'EXITED', exitCodes: [0], decision: 'SUCCEED' }] });
    server.child.kill('SIGTERM');
    expect((await server.finished).code).toBe(0);
  });

  it('relaunch validate and run refuse such a task file, and run such a chaos file, with status 2 naming the key', async () => {
    const dir = await tempDir('hostile-files');
    const hostile = await writeTask(dir, 'hostile.yaml', ENVS.text);
    const validated = await runCli(['validate', hostile], { cwd: dir });
    expect(validated.code).toBe(2);
    expect(validated.stderr).toContain(`envs: ${SHAPE} (line 2)`);
    const run = await runCli(['run', hostile, '--data-dir', join(dir, 'data')], { cwd: dir });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`envs: ${SHAPE} (line 2)`);

    const task = await writeTask(dir, 'task.yaml', 'run: echo hi\n');
    const chaos = await writeTask(dir, 'chaos.yaml', HOSTILE_CHAOS);
    const chaotic = await runCli(['run', task, '--chaos', chaos, '--data-dir', join(dir, 'data')], { cwd: dir });
    expect(chaotic.code).toBe(2);
    expect(chaotic.stderr).toContain(`attempts: ${SHAPE} (line 2)`);
  });
});
