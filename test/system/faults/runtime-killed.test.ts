// `kill -9` of the runtime while jobs run: nothing of a job outlives it (with a cgroup per
// node) or outlives the next start (with the environment mark alone), and no report it had
// stored is lost. The runtime is a real `relaunch serve`
// process; the restart is a runtime opened on the same data folder.

import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killStrayClis } from '../../support/cli.ts';
import { nodeDir } from '../../../local/paths.ts';
import { reportCodes, statusTrail, stored, useLocalRuntimes, waitFor, yaml } from '../../support/local-harness.ts';
import { CGROUPS_SWITCH, nodeTracking } from '../../../local/process-groups.ts';
import { processesOfJob, serve } from './world.ts';

const open = useLocalRuntimes();
const folders: string[] = [];
afterAll(() => {
  killStrayClis();
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

/**
 * How the runtime follows a node's processes: a cgroup per node where this machine allows
 * one (as root it does here), else the environment mark alone (RELAUNCH_CGROUPS=off).
 */
const tracking = nodeTracking();
const TRACKINGS = [
  ...(tracking.kind === 'cgroup' ? [{ name: 'with a cgroup per node: nothing of the jobs is left', env: {}, escaped: [] as string[] }] : []),
  { name: 'with the environment mark alone: the next start kills what escaped', env: { [CGROUPS_SWITCH]: 'off' }, escaped: ['sleep 300'] },
];

describe('the runtime killed with SIGKILL', () => {
  it.each(TRACKINGS)('takes its jobs\' processes with it and keeps every stored report, $name', { timeout: 60_000 }, async ({ env, escaped }) => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'relaunch-kill9-'));
    folders.push(dataDir);
    const server = await serve(dataDir, env);

    // Node 1 finishes at once and its report is stored; node 0 runs on, with a child that
    // leaves the node's process group (setsid), as daemons do.
    const jobId = await server.submit(
      yaml`
        num_nodes: 2
        run: |
          if [ "$RELAUNCH_NODE_RANK" -eq 1 ]; then echo "node 1 done"; exit 0; fi
          setsid sleep 300 &
          sleep 300
      `,
    );
    const other = await server.submit('run: sleep 300\n');
    // Node 1's agent shuts its instance down once its run report is acknowledged.
    const node1Done = path.join(nodeDir(dataDir, jobId, 1, 1), 'shutdown');
    await waitFor('node 1 reported and every node running', async () => {
      const view = await server.job(jobId);
      const escaped = processesOfJob(jobId).some((p) => p.command === 'sleep 300');
      return view.status === 'RUNNING' && escaped && existsSync(node1Done) && processesOfJob(other).length > 0 ? view : undefined;
    });
    const before = processesOfJob(jobId);

    server.cli.child.kill('SIGKILL');
    await server.cli.finished;
    // Each node's watcher saw the runtime go and killed its cgroup, or, without one, its
    // group and the job's: then only the child that left them is left.
    const left = await waitFor('the nodes\' processes to be gone', () => {
      const now = processesOfJob(jobId);
      return now.length === escaped.length && processesOfJob(other).length === 0 ? now : undefined;
    });
    expect(before.length).toBeGreaterThan(left.length);
    expect(left.map((p) => p.command)).toEqual(escaped);

    const t = await open({ inMemory: false, dataDir });
    expect(processesOfJob(jobId)).toEqual([]);
    const orphan = await stored(t, jobId);
    expect(orphan.job.status).toBe('FAILED_CONTROLLER');
    const killed = escaped.length === 0 ? '' : '; 1 of its processes was still running and has been killed';
    expect(orphan.job.failureReason).toBe(`relaunch's controller failed: LocalRuntimeStopped: the local runtime running this job stopped before it ended${killed}`);
    expect(reportCodes(orphan.attempts)).toEqual([expect.arrayContaining(['setup:0@1', 'run:0@1'])]);
    expect(orphan.attempts[0]?.instances.map((i) => typeof i.processGroupId)).toEqual(['number', 'number']);
    expect(statusTrail(orphan.events)).toEqual(['PENDING', 'STARTING', 'RUNNING', 'FAILED_CONTROLLER']);
    const second = await stored(t, other);
    expect(second.job.failureReason).toBe(
      "relaunch's controller failed: LocalRuntimeStopped: the local runtime running this job stopped before it ended",
    );
  });
});
