// Which jobs a runtime takes from other commands: a runtime that is not `relaunch serve`
// takes none (it closes when its own work ends), and a serve about to exit stops taking
// them, but only once every submission it already took is stored.

import http from 'node:http';
import { describe, expect, it, vi } from 'vitest';
import { findLocalServer } from '../../../local/server-info.ts';
import { useLocalRuntimes, type TestRuntime } from '../../support/local-harness.ts';

const open = useLocalRuntimes();

/** POST /jobs with a task, as another command would send it: the status and the parsed body. */
function submit(t: TestRuntime, task = 'run: echo hi\n'): Promise<{ status: number | undefined; body: Record<string, unknown> }> {
  const { port, host } = new URL(t.runtime.url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/jobs', headers: { host, 'content-type': 'application/yaml' } }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(text) as Record<string, unknown> }));
    });
    req.on('error', reject);
    req.end(task);
  });
}

describe("a runtime's intake of jobs from other commands", () => {
  it("refuses every submit with 409 when it belongs to a `relaunch run`, saying whose it is; its own jobs run", async () => {
    const t = await open({ role: { command: 'run', takesJobs: false } });
    const answer = await submit(t);
    expect(answer.status).toBe(409);
    expect(answer.body.error).toBe(
      `this data folder belongs to \`relaunch run\` (pid ${process.pid}), whose runtime takes no other jobs and stops when its own work ends: start \`relaunch serve\` on the folder to share it between jobs, or give another --data-dir`,
    );
    expect(await t.runtime.deps.store.listJobs()).toEqual([]);
    expect(findLocalServer(t.dataDir)).toMatchObject({ command: 'run', takesJobs: false });
    await t.runtime.submit('run: echo mine\n');
    expect(await t.runtime.deps.store.listJobs()).toHaveLength(1);
  });

  it('stops taking jobs only once the submit it is answering is stored, then refuses with 409 until it takes them again', async () => {
    const t = await open();
    // The first submit is held inside its write until the test lets it go.
    let release = (): void => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let arrived = (): void => undefined;
    const writing = new Promise<void>((resolve) => (arrived = resolve));
    const { store } = t.runtime.deps;
    const createJob = store.createJob.bind(store);
    vi.spyOn(store, 'createJob').mockImplementationOnce(async (job) => {
      arrived();
      await held;
      return createJob(job);
    });
    const first = submit(t);
    await writing;

    let stopped = false;
    const stopping = t.runtime.stopTakingJobs().then(() => (stopped = true));
    expect(findLocalServer(t.dataDir)).toMatchObject({ command: 'serve', takesJobs: false });
    const refused = await submit(t);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toBe(`the runtime serving this data folder (pid ${process.pid}) is stopping and takes no more jobs: submit again once it has stopped`);
    expect(stopped).toBe(false);

    release();
    expect((await first).status).toBe(202);
    await stopping;
    expect(await t.runtime.deps.store.listJobs()).toHaveLength(1);

    t.runtime.resumeTakingJobs();
    expect(findLocalServer(t.dataDir)).toMatchObject({ takesJobs: true });
    expect((await submit(t)).status).toBe(202);
  });
});
