// Docker on this machine, for tasks that name a Docker image: whether it can run
// containers (the client and a daemon it reaches), and removing a node's container when
// its local instance goes (a container is the daemon's child, outside the node's group).

import { execFile, spawn, type ExecFileException } from 'node:child_process';
import { CONTAINER_PREFIX } from '../lib/agent/script.ts';
import type { InputIssue } from '../lib/errors.ts';
import type { TaskSpec } from '../lib/task-file/types.ts';

/** How long `docker info` may take before docker counts as unusable. */
const INFO_TIMEOUT_MS = 15_000;

/** The container a node's agent runs setup and run in (lib/agent/script.ts names it so). */
export function containerName(instanceId: string): string {
  return `${CONTAINER_PREFIX}${instanceId}`;
}

/**
 * Why docker cannot run containers here, or null when it can. Once it could, it is not
 * asked again; a failure is asked again next time (a daemon that was starting may be up).
 * Asynchronous, so a slow daemon never holds up the API's other requests.
 */
let dockerUsable = false;
export async function dockerUnusable(): Promise<string | null> {
  if (dockerUsable) return null;
  const answer = await new Promise<{ error: ExecFileException | null; stdout: string; stderr: string }>((resolve) => {
    execFile('docker', ['info', '--format', '{{.ServerVersion}}'], { timeout: INFO_TIMEOUT_MS, encoding: 'utf8' }, (error, stdout, stderr) =>
      resolve({ error, stdout, stderr }),
    );
  });
  if (answer.error === null) {
    dockerUsable = true;
    return null;
  }
  if ((answer.error as NodeJS.ErrnoException).code === 'ENOENT') return 'docker is not on PATH';
  const reason = `${answer.stderr}${answer.stdout}`.trim().split('\n').find((line) => line.trim() !== '') ?? answer.error.message;
  return `docker info failed: ${reason}`;
}

/** A task that names a Docker image, where docker cannot run it: the problem, at submit. */
export async function dockerProblems(spec: TaskSpec): Promise<InputIssue[]> {
  const image = spec.resources.containerImage;
  if (image === undefined) return [];
  const problem = await dockerUnusable();
  if (problem === null) return [];
  return [{ path: 'resources.image_id', message: `expected docker to be usable here to run docker:${image} locally, but ${problem}` }];
}

/** Removes a node's container, if it has one; resolves when docker has answered (or after 30 s). */
export function removeContainer(instanceId: string): Promise<void> {
  return new Promise((resolve) => {
    const child = spawn('docker', ['rm', '-f', containerName(instanceId)], { stdio: 'ignore' });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    const done = () => {
      clearTimeout(timer);
      resolve();
    };
    child.once('error', done);
    child.once('close', done);
  });
}
