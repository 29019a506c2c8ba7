// A daemon a job starts out of everything that marks it as the job's: a new session
// (setsid) and an empty environment (env -i), so neither the node's process group nor its
// RELAUNCH_INSTANCE_ID reaches it. It must still not outlive its node, nor, on a node a
// restart in place reuses, the attempt that started it.

import { readdirSync, readFileSync } from 'node:fs';
import { randomInt } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { nodeTracking } from '../../../local/process-groups.ts';
import { runToEnd, useLocalRuntimes, waitFor, yaml } from '../../support/local-harness.ts';

const open = useLocalRuntimes();

/** The live processes whose command line is exactly `command` (zombies left out). */
function processesRunning(command: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/stat`, 'utf8').replace(/^.*\) /, '').charAt(0) === 'Z') continue;
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ').trim() === command) found.push(Number(entry));
    } catch {
      // Gone while we looked.
    }
  }
  return found;
}

/** A sleep no other test runs: its length is this run's own. */
const daemon = `sleep ${randomInt(100_000, 999_999)}`;

afterEach(() => {
  // Whatever the outcome, no daemon of this test is left for the next.
  for (const pid of processesRunning(daemon)) process.kill(pid, 'SIGKILL');
});

/** Where nodes get no cgroup (not root, no cgroup v2), such a daemon escapes by design (docs/local-runtime.md). */
const tracking = nodeTracking();

describe.skipIf(tracking.kind !== 'cgroup')(`a daemon started with env -i setsid${tracking.kind === 'cgroup' ? '' : ` (skipped: ${tracking.reason})`}`, () => {
  it('is killed when its node goes, though it left the node\'s group and environment', { timeout: 60_000 }, async () => {
    const t = await open();
    const job = await runToEnd(t, yaml`
      run: |
        env -i setsid ${daemon} </dev/null >/dev/null 2>&1 &
        while [ -z "$(pgrep -fx '${daemon}')" ]; do sleep 0.05; done
        echo started it
    `);

    expect(job.view.status).toBe('SUCCEEDED');
    await waitFor('the daemon to be gone', () => (processesRunning(daemon).length === 0 ? true : undefined), 15_000);
  });

  it('is killed before the next attempt starts on its node, in a restart in place, though it ignores SIGTERM', { timeout: 60_000 }, async () => {
    const t = await open();
    const job = await runToEnd(t, yaml`
      resources:
        job_recovery:
          recover_on_exit_codes: [3]
          reuse_nodes: {setup: skip}
      run: |
        if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then
          env -i setsid sh -c 'trap "" TERM; exec ${daemon}' </dev/null >/dev/null 2>&1 &
          while [ -z "$(pgrep -fx '${daemon}')" ]; do sleep 0.05; done
          pgrep -fx '${daemon}' > daemon.pid
          exit 3
        fi
        # A zombie (killed, not yet reaped by whoever it was orphaned to) is gone.
        state=$(ps -o stat= -p "$(cat daemon.pid)")
        case $state in "" | Z*) echo "attempt 2: the daemon of attempt 1 is gone" ;; *) echo "attempt 2: the daemon of attempt 1 is alive ($state)" ;; esac
    `);

    expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 1 });
    expect(job.attempts[1]?.instances[0]?.reusedFrom).toBe(1);
    expect(job.attempts[1]?.reports.find((report) => report.phase === 'run')?.outputTail).toBe('attempt 2: the daemon of attempt 1 is gone');
  });
});
