// Signalling local nodes: only real groups and marked processes are ever signalled.

import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { INSTANCE_MARK, killMarked, makeNodeCgroup, markedProcesses, nodeTracking, removeNodeCgroup, signalGroup } from '../../../local/process-groups.ts';
import { waitFor } from '../../support/local-harness.ts';

describe('process groups of local nodes', () => {
  it.each([0, 1, -1, Number.NaN, 1.5])('never signals group id %s (kill(-1) would reach every process)', (pgid) => {
    // SIGCONT is harmless if it ever went out; the point is that nothing is sent.
    expect(() => signalGroup(pgid, 'SIGCONT')).not.toThrow();
    expect(killMarked('local-nobody-1-0', pgid)).toBe(0);
  });

  it('finds a node\'s processes by their mark, even out of its group, and kills only those', async () => {
    const marked = spawn('setsid', ['sleep', '60'], { env: { ...process.env, [INSTANCE_MARK]: 'local-j-test-1-0' }, stdio: 'ignore' });
    const unmarked = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' });
    try {
      const found = await waitFor('the marked sleep', () => {
        const pids = markedProcesses('local-j-test-1-0', unmarked.pid as number);
        return pids.length === 1 ? pids : undefined;
      });
      // The group id given is someone else's: it must not be signalled.
      expect(killMarked('local-j-test-1-0', unmarked.pid as number)).toBe(1);
      await waitFor('the marked sleep to die', () => (markedProcesses('local-j-test-1-0', 0).length === 0 ? true : undefined));
      expect(found).toHaveLength(1);
      expect(unmarked.exitCode).toBeNull();
      expect(unmarked.signalCode).toBeNull();
    } finally {
      marked.kill('SIGKILL');
      unmarked.kill('SIGKILL');
    }
  });

  const tracking = nodeTracking();
  it.skipIf(tracking.kind !== 'cgroup')(`finds a node's processes by its cgroup, a daemon with an empty environment in a session of its own among them, and kills them all${tracking.kind === 'cgroup' ? '' : ` (skipped: ${tracking.reason})`}`, async () => {
    const instanceId = `local-j-cgroup-${process.pid}-1-0`;
    const folder = makeNodeCgroup(instanceId) as string;
    // As the node's launcher does: join the cgroup, then start what the job starts.
    const launcher = spawn('bash', ['-c', 'echo $$ >"$1/cgroup.procs"; env -i setsid sleep 60 </dev/null >/dev/null 2>&1 & sleep 60', 'launcher', folder], {
      detached: true,
      stdio: 'ignore',
    });
    try {
      // bash, its sleep, and the daemon: none of them carries the mark.
      await waitFor('the launcher and both sleeps', () => (markedProcesses(instanceId, 0).length === 3 ? true : undefined));

      expect(killMarked(instanceId, 0)).toBe(3);
      await waitFor('every process of the cgroup to die', () => (markedProcesses(instanceId, 0).length === 0 ? true : undefined));
      await waitFor('the cgroup to be removed once empty', () => {
        removeNodeCgroup(instanceId);
        return existsSync(folder) ? undefined : true;
      });
    } finally {
      launcher.kill('SIGKILL');
    }
  });
});
