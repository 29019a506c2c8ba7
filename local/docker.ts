// Docker on this machine, for tasks that name a Docker image: whether it can run
// containers (the client and a daemon it reaches), and removing a node's container when
// its local instance goes (a container is the daemon's child, outside the node's group).

import { spawn, spawnSync } from 'node:child_process';
import type { InputIssue } from '../lib/errors.ts';
import type { TaskSpec } from '../lib/spec/types.ts';

/** How long `docker info` may take before docker counts as unusable. */
const INFO_TIMEOUT_MS = 15_000;

/** The container a node's agent runs setup and run in (lib/agent/script.ts names it so). */
export function containerName(instanceId: string): string {
  return `relaunch-${instanceId}`;
}

/**
 * Why docker cannot run containers here, or null when it can. Once it could, it is not
 * asked again; a failure is asked again next time (a daemon that was starting may be up).
 */
let dockerUsable = false;
export function dockerUnusable(): string | null {
  if (dockerUsable) return null;
  const info = spawnSync('docker', ['info', '--format', '{{.ServerVersion}}'], { encoding: 'utf8', timeout: INFO_TIMEOUT_MS });
  if (info.error !== undefined) {
    return (info.error as NodeJS.ErrnoException).code === 'ENOENT' ? 'docker is not on PATH' : `docker info failed: ${info.error.message}`;
  }
  if (info.status !== 0) {
    const reason = `${info.stderr}${info.stdout}`.trim().split('\n').find((line) => line.trim() !== '') ?? `exit status ${info.status}`;
    return `docker info failed: ${reason}`;
  }
  dockerUsable = true;
  return null;
}

/** A task that names a Docker image, where docker cannot run it: the problem, at submit. */
export async function localTaskProblems(spec: TaskSpec): Promise<InputIssue[]> {
  const image = spec.resources.containerImage;
  if (image === undefined) return [];
  const problem = dockerUnusable();
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
