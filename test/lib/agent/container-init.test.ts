// The task container's first process (agent.sh's CONTAINER_INIT), run for real as PID 1 of
// a PID namespace of its own, as docker runs it: on docker stop's SIGTERM it passes the
// signal to the job (a docker exec'd process, not its child) and waits until the job has
// ended, so the job gets its grace period inside a container too. Making a PID namespace
// needs root, as CI has; elsewhere the test is skipped, saying why.

import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../fixtures/wait.ts';

const AGENT = join(import.meta.dirname, '../../../lib/agent/agent.sh');

/** CONTAINER_INIT as bash reads it from agent.sh. */
function containerInit(): string {
  const line = readFileSync(AGENT, 'utf8')
    .split('\n')
    .find((candidate) => candidate.startsWith('declare +x CONTAINER_INIT='));
  if (line === undefined) throw new Error('agent.sh declares no CONTAINER_INIT');
  return execFileSync('bash', ['-c', `${line}\nprintf '%s' "$CONTAINER_INIT"`], { encoding: 'utf8' });
}

const ROOT = process.getuid?.() === 0;
const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

describe.skipIf(!ROOT)(`the container's first process${ROOT ? '' : ' (skipped: a PID namespace needs root)'}`, () => {
  it("passes docker stop's SIGTERM to the job, and ends only once the job has saved its checkpoint and ended", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relaunch-container-init-'));
    folders.push(dir);
    // unshare forks the init, which becomes PID 1 of the new namespace.
    const container = spawn('unshare', ['--pid', '--fork', '--mount-proc', 'bash', '-c', containerInit()], { stdio: 'ignore', detached: true });
    const ended = new Promise<boolean>((resolve) => container.once('exit', () => resolve(existsSync(join(dir, 'checkpoint')))));
    try {
      const init = await waitFor('the container init', () => {
        try {
          const child = readFileSync(`/proc/${container.pid}/task/${container.pid}/children`, 'utf8').trim();
          return child === '' ? undefined : Number(child.split(' ')[0]);
        } catch {
          return undefined;
        }
      });
      // The job, as docker exec starts it: in the namespace, not the init's child.
      const job = `trap 'echo saving; sleep 1; echo step-42 > "$1/checkpoint"; exit 0' TERM; : > "$1/started"; while :; do sleep 0.1; done`;
      spawn('nsenter', ['--target', String(init), '--pid', '--mount', 'bash', '-c', job, 'job', dir], { stdio: 'ignore', detached: true });
      await waitFor('the job to start', () => (existsSync(join(dir, 'started')) ? true : undefined));

      process.kill(init, 'SIGTERM');

      // The checkpoint was there when the init (and with it the container) ended.
      expect(await ended).toBe(true);
      expect(readFileSync(join(dir, 'checkpoint'), 'utf8')).toBe('step-42\n');
    } finally {
      try {
        process.kill(-(container.pid ?? 0), 'SIGKILL');
      } catch {
        // Ended already.
      }
    }
  });
});
