// cgroup v2 at /sys/fs/cgroup for a test, on a machine that mounts it elsewhere or not at
// all: each command runs in a private mount namespace (unshare -m) that mounts cgroup2 at
// /sys/fs/cgroup, where the agent looks for it. The hierarchy is the machine's own, so a
// cgroup made there is real and outlives the namespace: a test makes one parent cgroup of
// its own (`TestCgroup`), runs what it tests beneath it, and removes it and everything in
// it after, touching no other cgroup.

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

const MOUNT = 'mount -t cgroup2 none /sys/fs/cgroup';

/** How long `remove` waits for the processes it killed to leave their cgroups: a limit against a hang. */
const REMOVE_LIMIT_SECONDS = 20;

/** Runs the shell `script` (its $0 `name`, then `args`) with cgroup2 mounted at /sys/fs/cgroup in a mount namespace of its own. */
function inCgroup2(script: string, name: string, ...args: string[]): { readonly status: number | null; readonly stdout: string; readonly stderr: string; readonly error?: Error } {
  return spawnSync('unshare', ['-m', 'sh', '-c', `${MOUNT} && ${script}`, name, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
}

/** Whether cgroup2 can be mounted here in a private mount namespace, and if not, why not. */
export type Cgroup2Support = { readonly available: true } | { readonly available: false; readonly reason: string };

/** Tries it: root, unshare on PATH, and the kernel willing to mount cgroup2 in a new mount namespace. */
export function cgroup2Support(): Cgroup2Support {
  if (process.getuid?.() !== 0) return { available: false, reason: 'not root: mounting cgroup2 needs root' };
  const probe = inCgroup2('stat -f -c %T /sys/fs/cgroup', 'probe');
  if (probe.error !== undefined) return { available: false, reason: `unshare cannot run: ${probe.error.message}` };
  if (probe.status !== 0 || probe.stdout.trim() !== 'cgroup2fs') {
    return { available: false, reason: `cgroup2 cannot be mounted in a private mount namespace: ${probe.stderr.trim() || `got ${probe.stdout.trim()}`}` };
  }
  return { available: true };
}

/**
 * A parent cgroup a test makes, `/relaunch-test-<random>` at the hierarchy's root; its paths
 * are as /proc/<pid>/cgroup's `0::` line names them (from the root, with a leading slash).
 */
export class TestCgroup {
  readonly name = `relaunch-test-${randomBytes(6).toString('hex')}`;

  /** Makes it; throws, naming it, when it cannot be made. */
  create(): void {
    const made = inCgroup2('mkdir "/sys/fs/cgroup/$0"', this.name);
    if (made.status !== 0) throw new Error(`cannot make the cgroup /${this.name}: ${made.stderr.trim()}`);
  }

  /**
   * A command and its arguments that run the arguments after them (exec'd, the same pid) in
   * this cgroup, cgroup2 mounted at /sys/fs/cgroup in a mount namespace of their own.
   */
  get launcher(): string[] {
    return ['unshare', '-m', 'sh', '-c', `${MOUNT} && echo $$ >"/sys/fs/cgroup/$0/cgroup.procs" && exec "$@"`, this.name];
  }

  /** It and every cgroup beneath it, parents first (/relaunch-test-…/…); none when it is gone. */
  list(): string[] {
    const found = inCgroup2('cd /sys/fs/cgroup && if [ -d "$0" ]; then find "$0" -type d; fi', this.name);
    if (found.status !== 0) throw new Error(`cannot list the cgroup /${this.name}: ${found.stderr.trim()}`);
    return found.stdout
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => `/${line}`)
      .sort();
  }

  /**
   * Kills every process in it or beneath it (cgroup.kill, or each pid where the kernel has
   * no cgroup.kill), waits until it holds none, and removes it and every cgroup beneath it,
   * deepest first. Nothing when it is gone already; throws, saying what is left, when it
   * cannot.
   */
  remove(): void {
    const script = `
      d=/sys/fs/cgroup/$0
      [ -d "$d" ] || exit 0
      i=0
      until grep -qx 'populated 0' "$d/cgroup.events"; do
        if [ -e "$d/cgroup.kill" ]; then echo 1 >"$d/cgroup.kill"; else find "$d" -name cgroup.procs -exec cat {} + | xargs -r kill -KILL 2>/dev/null; fi
        i=$((i + 1))
        if [ "$i" -gt $(( $1 * 10 )) ]; then echo "processes are still in it after $1 s" >&2; exit 1; fi
        sleep 0.1
      done
      find "$d" -depth -type d -exec rmdir {} +
    `;
    const removed = inCgroup2(script, this.name, String(REMOVE_LIMIT_SECONDS));
    if (removed.status !== 0) throw new Error(`cannot remove the cgroup /${this.name}: ${removed.stderr.trim()}`);
  }
}

/** A launcher (as `TestCgroup.launcher`) under which the agent finds no cgroup v2, or why there is none. */
export type WithoutCgroup2 = { readonly launcher: readonly string[] } | { readonly reason: string };

/**
 * How to run a command where /sys/fs/cgroup is no cgroup v2, whatever this machine mounts
 * there: as root, in a mount namespace of its own with a tmpfs over /sys/fs/cgroup (what a
 * cgroup v1 machine shows); not root, as it is (the agent makes cgroups only as root).
 */
export function withoutCgroup2(): WithoutCgroup2 {
  if (process.getuid?.() !== 0) return { launcher: [] };
  const hide = 'mount -t tmpfs none /sys/fs/cgroup';
  const probe = spawnSync('unshare', ['-m', 'sh', '-c', `${hide} && stat -f -c %T /sys/fs/cgroup`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
  if (probe.error !== undefined) return { reason: `unshare cannot run: ${probe.error.message}` };
  if (probe.status !== 0 || probe.stdout.trim() !== 'tmpfs') return { reason: `/sys/fs/cgroup cannot be hidden in a private mount namespace: ${probe.stderr.trim() || `got ${probe.stdout.trim()}`}` };
  return { launcher: ['unshare', '-m', 'sh', '-c', `${hide} && exec "$@"`, 'without-cgroup2'] };
}
