// A runtime that answers its nodes late, as 200 jobs at once on two busy cores make it do:
// a node that is only kept waiting must never end its attempt by giving up on the runtime.
// The delays are injected (a report held in the store, a node's network cut for a while),
// so the test does not depend on the machine's load. They last longer than the minute a
// local agent once gave the runtime before shutting its node down, which made the
// controller end a healthy attempt LOST and relaunch it.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { nodeDir } from '../../../local/paths.ts';
import { finish, reportCodes, useLocalRuntimes, yaml } from '../../support/local-harness.ts';
import { chaos, processesOfJob } from './world.ts';

const open = useLocalRuntimes();

/** How long the runtime keeps both nodes waiting: past a minute, with room for a busy machine. */
const LATE_MS = 70_000;

describe('a runtime that answers its nodes late', () => {
  it('stores a run report held for over a minute and reads a secret kept from a node as long: both jobs succeed on attempt 1', async () => {
    const t = await open();
    const { store } = t.runtime.deps;
    // The first run report of the first job waits LATE_MS in the store, as behind a long
    // queue of writes; the agent's tries in the meantime (each given up after 30 s) wait
    // with it, until the same moment.
    const addReport = store.addReport.bind(store);
    let heldJob: string | null = null;
    let heldUntil: number | null = null;
    store.addReport = async (jobId, attempt, report) => {
      if (jobId === heldJob && attempt === 1 && report.phase === 'run') {
        heldUntil ??= Date.now() + LATE_MS;
        await sleep(heldUntil - Date.now());
      }
      return addReport(jobId, attempt, report);
    };

    const held = await t.runtime.submit(yaml`
      run: echo "held report"
    `);
    heldJob = held.jobId;
    // The second job's node has no network from its boot for LATE_MS: its secret (SSM, on
    // the runtime's API) is not readable until then. Its instance metadata still answers.
    const cut = await t.runtime.submit(
      yaml`
        run: echo "late secret"
      `,
      { chaos: chaos`
        faults:
          - {attempt: 1, silence: {from: boot, for: ${LATE_MS / 1000}s}}
      ` },
    );
    const [heldJobEnd, cutJobEnd] = await Promise.all([finish(t, held.jobId), finish(t, cut.jobId)]);

    for (const job of [heldJobEnd, cutJobEnd]) {
      expect(job.view).toMatchObject({ status: 'SUCCEEDED', recoveryCount: 0 });
      expect(job.view.attempts).toMatchObject([{ attempt: 1, outcome: 'EXITED', exitCodes: [0], decision: 'SUCCEED' }]);
      expect(reportCodes(job.attempts)).toEqual([['setup:0@0', 'run:0@0']]);
      expect(processesOfJob(job.jobId)).toEqual([]);
    }
    const agentLog = (jobId: string) => readFileSync(path.join(nodeDir(t.dataDir, jobId, 1, 0), 'agent.log'), 'utf8');
    // Each node did meet the delay: the report went unanswered, the secret unread.
    expect(heldUntil).not.toBeNull();
    expect(agentLog(held.jobId)).toMatch(/the run report got HTTP 000; retrying[\s\S]*reported run exit code 0/);
    expect(agentLog(cut.jobId)).toContain('the callback secret is not readable yet');
    // The attempt ended when the held report was stored, not before.
    expect(Date.parse(heldJobEnd.attempts[0]?.endedAt ?? '')).toBeGreaterThanOrEqual((heldUntil ?? 0) - 1_000);
    expect(t.errors).toEqual([]);
  }, 240_000);
});
