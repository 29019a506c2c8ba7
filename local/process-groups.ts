// The processes of local nodes: stopping them, and finding the ones a runtime that died
// left behind. Two means, the first where the machine allows it:
//
// - A cgroup per node (cgroup v2, `<mount>/relaunch-nodes/<instance id>`): the node's
//   launcher joins it before it starts anything, and every process started under it stays
//   in it, whatever it does to its session, group or environment (a daemon started with
//   `env -i setsid`). It needs a writable cgroup v2 hierarchy: root, or a delegated one.
// - A mark in the environment: every process of a node carries RELAUNCH_INSTANCE_ID
//   (children inherit it), so a node's processes are found wherever they went, even out of
//   its process group (`setsid`), and a group id the OS has since reused is never
//   signalled. A process that empties its environment (`env -i`) loses it.
//
// Both are looked at by instance id alone, so the next runtime on a data folder finds what
// a runtime that died left, with nothing but the instance ids it stored.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync, type Dirent } from 'node:fs';
import path from 'node:path';

/** The environment variable that marks every process of a local node. */
export const INSTANCE_MARK = 'RELAUNCH_INSTANCE_ID';

/** Set to `off`, nodes get no cgroup even where the machine allows one: the mark alone tracks them. */
export const CGROUPS_SWITCH = 'RELAUNCH_CGROUPS';

/** The folder of the node cgroups, under cgroup v2's mount. */
const CGROUPS_FOLDER = 'relaunch-nodes';

/** How this machine lets the runtime follow a node's processes. */
export type NodeTracking =
  | { readonly kind: 'cgroup'; readonly folder: string }
  | { readonly kind: 'environment'; readonly reason: string };

let tracking: NodeTracking | undefined;

/**
 * Whether nodes get a cgroup each here, found once per process: cgroup v2 mounted, its
 * `relaunch-nodes` folder made (or there), a process moved into a cgroup of it (a
 * short-lived probe, never this process), and RELAUNCH_CGROUPS not `off`. Otherwise the
 * reason, and the mark alone.
 */
export function nodeTracking(): NodeTracking {
  tracking ??= findTracking();
  return tracking;
}

function findTracking(): NodeTracking {
  if (process.env[CGROUPS_SWITCH] === 'off') return { kind: 'environment', reason: `${CGROUPS_SWITCH}=off` };
  const mount = cgroup2Mount();
  if (mount === null) return { kind: 'environment', reason: 'no cgroup v2 hierarchy is mounted' };
  const folder = path.join(mount, CGROUPS_FOLDER);
  const probe = path.join(folder, `probe-${process.pid}`);
  try {
    mkdirSync(probe, { recursive: true });
  } catch (error) {
    return { kind: 'environment', reason: `cannot make a cgroup under ${mount}: ${(error as Error).message}` };
  }
  try {
    const moved = spawnSync('sh', ['-c', 'echo $$ >"$1/cgroup.procs"', 'probe', probe], { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
    if (moved.status !== 0) return { kind: 'environment', reason: `cannot move a process into ${probe}: ${moved.stderr.trim()}` };
    return { kind: 'cgroup', folder };
  } finally {
    removeCgroup(probe);
  }
}

/** Where cgroup v2 is mounted (the unified hierarchy), from this process's mount table. */
function cgroup2Mount(): string | null {
  let table: string;
  try {
    table = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return null;
  }
  for (const line of table.split('\n')) {
    // "id parent major:minor root mountpoint options ... - fstype source superoptions"
    const [before, after] = line.split(' - ');
    if (after?.split(' ')[0] === 'cgroup2') return before?.split(' ')[4] ?? null;
  }
  return null;
}

/** The node's cgroup folder, which may not exist; null where nodes get none. */
export function nodeCgroupPath(instanceId: string): string | null {
  const found = nodeTracking();
  return found.kind === 'cgroup' ? path.join(found.folder, instanceId) : null;
}

/** Makes the node's cgroup for its launcher to join; its folder, or null where nodes get none (or it could not be made). */
export function makeNodeCgroup(instanceId: string): string | null {
  const folder = nodeCgroupPath(instanceId);
  if (folder === null) return null;
  try {
    mkdirSync(folder, { recursive: true });
    return folder;
  } catch {
    return null;
  }
}

/** Removes the node's cgroup once nothing is left in it (it is refused while a process is). */
export function removeNodeCgroup(instanceId: string): void {
  const folder = nodeCgroupPath(instanceId);
  if (folder !== null) removeCgroup(folder);
}

/**
 * Removes the cgroup and those beneath it, deepest first (rmdir refuses a cgroup with one
 * beneath it): the agent's phase cgroups under a node's, should it have ended before it
 * removed them.
 */
function removeCgroup(folder: string): void {
  for (const cgroup of cgroupsBeneath(folder).reverse()) {
    try {
      rmdirSync(cgroup);
    } catch {
      // Gone already, or a process is still in it: the next release or runtime tries again.
    }
  }
}

/** The cgroup and every cgroup beneath it, each before those beneath it; [] when it is gone. */
function cgroupsBeneath(folder: string): string[] {
  let entries: Dirent[];
  try {
    entries = readdirSync(folder, { withFileTypes: true });
  } catch {
    return [];
  }
  return [folder, ...entries.filter((entry) => entry.isDirectory()).flatMap((entry) => cgroupsBeneath(path.join(folder, entry.name)))];
}

/**
 * Sends a signal to a whole process group; a group that is gone is not an error. Only a
 * real group id is signalled: `kill(-1)` would reach every process, `kill(-0)` our own.
 */
export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  if (!Number.isInteger(pgid) || pgid <= 1) return;
  try {
    process.kill(-pgid, signal);
  } catch {
    // No such group any more: nothing to signal.
  }
}

/**
 * The live processes of a node: those in its cgroup and those that carry its mark, read
 * from /proc (zombies, already dead, are left out). Where /proc does not exist (not
 * Linux), the node's group `pgid` stands for them.
 */
export function markedProcesses(instanceId: string, pgid: number): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return groupAlive(pgid) ? [pgid] : [];
  }
  const mark = `${INSTANCE_MARK}=${instanceId}`;
  const inCgroup = new Set(cgroupMembers(instanceId));
  return entries
    .filter((entry) => /^[0-9]+$/.test(entry))
    .map(Number)
    // A zombie's environment reads empty, so the mark leaves it out by itself.
    .filter((pid) => (inCgroup.has(pid) ? alive(pid) : environmentOf(pid).includes(mark)));
}

/** The pids in the node's cgroup (zombies among them), none where it has none. */
function cgroupMembers(instanceId: string): number[] {
  const folder = nodeCgroupPath(instanceId);
  return folder === null ? [] : membersBeneath(folder);
}

/** The pids in a cgroup and in those beneath it (the agent's phase cgroups under a node's). */
function membersBeneath(folder: string): number[] {
  return cgroupsBeneath(folder).flatMap((cgroup) => {
    try {
      return readFileSync(path.join(cgroup, 'cgroup.procs'), 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map(Number);
    } catch {
      return [];
    }
  });
}

/**
 * Sends a signal to every process of a node; returns how many there were. Only the node's
 * processes are signalled: the group id alone may belong to someone else by now.
 */
export function signalMarked(instanceId: string, pgid: number, signal: NodeJS.Signals): number {
  const pids = markedProcesses(instanceId, pgid);
  for (const pid of pids) {
    if (pid <= 1) continue;
    try {
      process.kill(pid === pgid && !hasProc() ? -pid : pid, signal);
    } catch {
      // It ended on its own meanwhile.
    }
  }
  return pids.length;
}

/**
 * Kills (SIGKILL) every process of a node; returns how many there were. Its cgroup, where it
 * has one, is killed whole at once (`cgroup.kill`), so a process forking meanwhile cannot
 * slip out; then each process found is killed, the marked ones outside the cgroup included.
 */
export function killMarked(instanceId: string, pgid: number): number {
  const folder = nodeCgroupPath(instanceId);
  const found = markedProcesses(instanceId, pgid).length;
  if (folder !== null && existsSync(path.join(folder, 'cgroup.kill'))) {
    try {
      writeFileSync(path.join(folder, 'cgroup.kill'), '1');
    } catch {
      // Gone meanwhile: its processes with it.
    }
  }
  signalMarked(instanceId, pgid, 'SIGKILL');
  return found;
}

function hasProc(): boolean {
  try {
    readdirSync('/proc/self');
    return true;
  } catch {
    return false;
  }
}

function groupAlive(pgid: number): boolean {
  if (!Number.isInteger(pgid) || pgid <= 1) return false;
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The process group of a live process, from /proc (null when it is gone, or there is no /proc). */
export function processGroupOf(pid: number): number | null {
  try {
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so after the last ")".
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ');
    const group = Number(fields[2]);
    return Number.isInteger(group) ? group : null;
  } catch {
    return null;
  }
}

/** Whether a process runs (a zombie is dead). */
function alive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').charAt(0) !== 'Z';
  } catch {
    return false;
  }
}

function environmentOf(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  } catch {
    return [];
  }
}
