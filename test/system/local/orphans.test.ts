// A data folder outlives its runtime: a job left live by a runtime that stopped (its
// processes died with it) is ended FAILED_CONTROLLER by the next runtime that opens it.

import path from 'node:path';
import { DynamoDBClient, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { startDynalite } from '../../../local/dynalite.ts';
import { JOB_CREATED_REASON } from '../../../lib/adapters/job-store-rules.ts';
import type { JobRecord } from '../../../lib/model.ts';
import { getJob } from '../../../lib/usecases/index.ts';
import { LOCAL_TABLE_NAME } from '../../../local/runtime.ts';
import { initialCounters } from '../../../lib/policy/decide.ts';
import { parseTaskFile } from '../../../lib/task-file/parse.ts';
import { alive, runToEnd, statusTrail, stored, useLocalRuntimes, waitFor, waitUntilAwaiting, yaml } from '../../support/local-harness.ts';

const open = useLocalRuntimes();

const ORPHAN_REASON =
  "relaunch's controller failed: LocalRuntimeStopped: the local runtime running this job stopped before it ended";

/** A job as the runtime writes it at submit, before its first attempt: PENDING. */
function pendingJob(jobId: string, at: string): JobRecord {
  return {
    jobId,
    name: null,
    spec: parseTaskFile('run: echo never\n').spec,
    status: 'PENDING',
    counters: initialCounters(false),
    attemptCount: 0,
    executionArn: null,
    failureReason: null,
    createdAt: at,
    updatedAt: at,
  };
}

describe('jobs left live by a runtime that stopped', () => {
  it('are ended FAILED_CONTROLLER with the reason, and finished jobs are left alone', async () => {
    const first = await open({ inMemory: false });
    const done = await runToEnd(first, yaml`
      run: echo done
    `);
    const { jobId } = await first.runtime.submit(yaml`
      run: sleep 30
    `);
    await waitUntilAwaiting(first, jobId, 1);
    const [pid] = await waitFor('the job process', () => {
      const pids = first.runtime.deps.compute.liveGroups();
      return pids.length === 1 ? pids : undefined;
    });
    await first.runtime.close();
    expect(alive(pid as number)).toBe(false);

    const second = await open({ inMemory: false, dataDir: first.dataDir });
    const orphan = await stored(second, jobId);

    expect(orphan.job).toMatchObject({ status: 'FAILED_CONTROLLER', failureReason: ORPHAN_REASON, attemptCount: 1 });
    expect(orphan.attempts[0]?.outcome).toEqual({ kind: 'LOST', reason: ORPHAN_REASON });
    expect(orphan.attempts[0]?.endedAt).not.toBeNull();
    expect(statusTrail(orphan.events)).toEqual(['PENDING', 'STARTING', 'RUNNING', 'FAILED_CONTROLLER']);
    expect(orphan.events.at(-1)).toMatchObject({ from: 'RUNNING', to: 'FAILED_CONTROLLER', attempt: 1, reason: ORPHAN_REASON });

    // The job that had finished is exactly as it was.
    const after = await stored(second, done.jobId);
    expect(after).toEqual({ job: done.job, attempts: done.attempts, events: done.events });
    expect(after.events[0]?.reason).toBe(JOB_CREATED_REASON);
  });

  it('ends a job that never got to its first attempt, written PENDING by the runtime that stopped', async () => {
    const first = await open({ inMemory: false });
    const at = new Date().toISOString();
    await first.runtime.deps.store.createJob(pendingJob('j-orphan-pending', at));
    await first.runtime.close();

    const second = await open({ inMemory: false, dataDir: first.dataDir });
    const orphan = await stored(second, 'j-orphan-pending');
    expect(orphan.job).toMatchObject({ status: 'FAILED_CONTROLLER', failureReason: ORPHAN_REASON, attemptCount: 0 });
    expect(orphan.attempts).toEqual([]);
    expect(orphan.events.map((e) => [e.from, e.to, e.attempt])).toEqual([
      [null, 'PENDING', null],
      ['PENDING', 'FAILED_CONTROLLER', null],
    ]);
  });

  it('repairs a job whose attempt a crash left unwritten (attemptCount 1, no attempt row): it ends FAILED_CONTROLLER, saying so, and the folder opens', async () => {
    const first = await open({ inMemory: false });
    const at = new Date().toISOString();
    const { store } = first.runtime.deps;
    await store.createJob(pendingJob('j-half-written', at));
    await store.changeStatus('j-half-written', { from: 'PENDING', to: 'STARTING', reason: 'launching attempt 1', attempt: 1, at });
    await first.runtime.close();
    // What a kill -9 between the two writes of a launch left, before those writes were made whole.
    const dynamo = await startDynalite({ path: path.join(first.dataDir, 'db') });
    const client = new DynamoDBClient({ endpoint: dynamo.endpoint, region: 'local', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
    await client.send(
      new UpdateItemCommand({
        TableName: LOCAL_TABLE_NAME,
        Key: { pk: { S: 'JOB#j-half-written' }, sk: { S: 'JOB' } },
        UpdateExpression: 'SET attemptCount = :one',
        ExpressionAttributeValues: { ':one': { N: '1' } },
      }),
    );
    client.destroy();
    await dynamo.close();

    const second = await open({ inMemory: false, dataDir: first.dataDir });
    const reason =
      "relaunch's controller failed: LocalRuntimeStopped: the local runtime running this job stopped before it ended; its attempt 1 was never written (a write a crash cut in half)";
    const repaired = await stored(second, 'j-half-written');
    expect(repaired.job).toMatchObject({ status: 'FAILED_CONTROLLER', failureReason: reason, attemptCount: 1 });
    expect(repaired.attempts).toEqual([]);
    expect(statusTrail(repaired.events)).toEqual(['PENDING', 'STARTING', 'FAILED_CONTROLLER']);
    expect(second.notices).toEqual([`repaired job j-half-written: ${reason}`]);
    // Every command reads it from now on.
    expect(await getJob('j-half-written', second.runtime.deps)).toMatchObject({ status: 'FAILED_CONTROLLER', attempts: [] });
  });
});
