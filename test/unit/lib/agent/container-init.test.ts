// The task container's first process (agent.sh's CONTAINER_INIT), run for real as PID 1 of
// a PID namespace of its own, as docker runs it: on docker stop's SIGTERM it passes the
// signal to the job (a docker exec'd process, not its child) and waits until the job has
// ended, so the job gets its grace period inside a container too. Making a PID namespace
// needs root, as CI has; elsewhere the test is skipped, saying why.

import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../../support/fixtures/wait.ts';

const AGENT = join(import.meta.dirname, '../../../../lib/agent/agent.sh');

/** CONTAINER_INIT as bash reads it from agent.sh. */
function containerInit(): string {
  const line = readFileSync(AGENT, 'utf8')
    .split('\n')
    .find((candidate) => candidate.startsWith('declare +x CONTAINER_INIT='));
  if (line === undefined) throw new Error('agent.sh declares no CONTAINER_INIT');
  return execFileSync('bash', ['-c', `${line}\nprintf '%s' "$CONTAINER_INIT"`], { encoding: 'utf8' });
}

/** Whether process `pid` has a handler for `signal` (SigCgt in /proc/<pid>/status). */
function catches(pid: number, signal: 'SIGTERM'): boolean {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return false;
  }
  const caught = /^SigCgt:\s*([0-9a-f]+)$/m.exec(status)?.[1];
  return caught !== undefined && (BigInt(`0x${caught}`) & (1n << BigInt(constants.signals[signal] - 1))) !== 0n;
}

const ROOT = process.getuid?.() === 0;
const folders: string[] = [];
/** The process groups a test started (the container's, the job's), killed after it. */
const groups: number[] = [];
afterEach(() => {
  for (const group of groups.splice(0)) {
    // 0 (a process that never started) would name this test's own group.
    if (group <= 0) continue;
    try {
      process.kill(-group, 'SIGKILL');
    } catch {
      // Ended already.
    }
  }
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

describe.skipIf(!ROOT)(`the container's first process${ROOT ? '' : ' (skipped: a PID namespace needs root)'}`, () => {
  it("passes docker stop's SIGTERM to the job, and ends only once the job has saved its checkpoint and ended", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relaunch-container-init-'));
    folders.push(dir);
    // unshare forks the init, which becomes PID 1 of the new namespace.
    const container = spawn('unshare', ['--pid', '--fork', '--mount-proc', 'bash', '-c', containerInit()], { stdio: 'ignore', detached: true });
    groups.push(container.pid ?? 0);
    const ended = new Promise<boolean>((resolve) => container.once('exit', () => resolve(existsSync(join(dir, 'checkpoint')))));
    const init = await waitFor('the container init', () => {
      try {
        const child = readFileSync(`/proc/${container.pid}/task/${container.pid}/children`, 'utf8').trim();
        return child === '' ? undefined : Number(child.split(' ')[0]);
      } catch {
        return undefined;
      }
    });
    // PID 1 of a namespace drops a signal it has no handler for: docker stop comes once
    // the init has its TERM trap, as it does in a container that has been running.
    await waitFor('the init to trap TERM', () => (catches(init, 'SIGTERM') ? true : undefined));
    // The job, as docker exec starts it: in the namespace, not the init's child.
    const job = `trap 'echo saving; sleep 1; echo step-42 > "$1/checkpoint"; exit 0' TERM; : > "$1/started"; while :; do sleep 0.1; done`;
    const jobProcess = spawn('nsenter', ['--target', String(init), '--pid', '--mount', 'bash', '-c', job, 'job', dir], { stdio: 'ignore', detached: true });
    groups.push(jobProcess.pid ?? 0);
    await waitFor('the job to start', () => (existsSync(join(dir, 'started')) ? true : undefined));

    process.kill(init, 'SIGTERM');

    // The checkpoint was there when the init (and with it the container) ended.
    expect(await ended).toBe(true);
    expect(readFileSync(join(dir, 'checkpoint'), 'utf8')).toBe('step-42\n');
  });
});
