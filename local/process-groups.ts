// The processes of local nodes: stopping them, and finding the ones a runtime that died
// left behind. Every process of a node carries RELAUNCH_INSTANCE_ID in its environment
// (children inherit it), so a node's processes are found wherever they went, even out of
// its process group (`setsid`), and a group id the OS has since reused is never signalled.

import { readdirSync, readFileSync } from 'node:fs';

/** The environment variable that marks every process of a local node. */
export const INSTANCE_MARK = 'RELAUNCH_INSTANCE_ID';

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
 * The live processes that carry `instanceId`'s mark, read from /proc (zombies, already
 * dead, carry no environment and are left out). Where /proc does not exist (not Linux),
 * the node's group `pgid` stands for them.
 */
export function markedProcesses(instanceId: string, pgid: number): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return groupAlive(pgid) ? [pgid] : [];
  }
  const mark = `${INSTANCE_MARK}=${instanceId}`;
  return entries.filter((entry) => /^[0-9]+$/.test(entry) && environmentOf(entry).includes(mark)).map(Number);
}

/**
 * Sends a signal to every process of a node; returns how many there were. Only marked
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

/** Kills (SIGKILL) every process of a node; returns how many there were. */
export function killMarked(instanceId: string, pgid: number): number {
  return signalMarked(instanceId, pgid, 'SIGKILL');
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

function environmentOf(pid: string): string[] {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  } catch {
    return [];
  }
}
