// AwaitBoot storing its token while the nodes' first heartbeats arrive, with real
// concurrency: DynamoJobStore on one dynalite, every write in flight at once, 100 rounds.
// Whatever the order, the task learns that every node is up; with one node silent, never.

import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { DynamoJobStore } from '../../../../lib/adapters/dynamo-job-store/index.ts';
import { awaitAttempt } from '../../../../lib/usecases/await-attempt.ts';
import { heartbeat } from '../../../../lib/usecases/heartbeat.ts';
import { launchAttempt } from '../../../../lib/usecases/launch-attempt.ts';
import { StateName } from '../../../../lib/workflow/contract.ts';
import { useDynalite } from '../../../support/fixtures/dynalite.ts';
import { stagger } from '../../../support/fixtures/stagger.ts';
import { givenJob, harness, initialState, taskSpec, type Harness } from '../../../support/usecases-harness.ts';

const ROUNDS = 100;
/** 100 rounds of real DynamoDB writes: well under a minute alone, longer beside a full suite on 2 cores. */
const RACE_TIMEOUT_MS = 180_000;
const NODES = 3;

const dynalite = useDynalite();
let store: DynamoJobStore;

beforeAll(async () => {
  store = new DynamoJobStore({ client: dynalite.client(), tableName: await dynalite.freshTable('boot-race') });
});


async function launchedRound(round: number): Promise<{ h: Harness; jobId: string }> {
  const h = harness(store);
  const jobId = `j-boot-${round}-${randomUUID().slice(0, 8)}`;
  await givenJob(h, taskSpec({ numNodes: NODES }), jobId);
  await launchAttempt(initialState(jobId), h.deps);
  return { h, jobId };
}

/** The token stored and the first heartbeats of `ranks`, all at once. */
async function race(h: Harness, jobId: string, round: number, ranks: readonly number[]): Promise<void> {
  const token = `boot-${jobId}`;
  const store = () => awaitAttempt({ jobId, attempt: 1, taskToken: token, state: StateName.AwaitBoot, bootTimeoutSeconds: 600 }, h.deps);
  const beat = (nodeRank: number) => heartbeat({ jobId, attempt: 1, nodeRank, secret: h.compute.secretFor(jobId, 1) }, h.deps);
  await Promise.all([store, ...ranks.map((rank) => () => beat(rank))].map((call, index) => stagger(round + index).then(call)));
}

describe('AwaitBoot\'s token racing the nodes\' first heartbeats (DynamoJobStore on dynalite)', { timeout: RACE_TIMEOUT_MS }, () => {
  it(`resumes AwaitBoot with booted in every one of ${ROUNDS} rounds once all ${NODES} nodes beat`, async () => {
    const wrong: string[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const { h, jobId } = await launchedRound(round);
      await race(h, jobId, round, [0, 1, 2]);
      const booted = h.workflow.closings.filter((c) => c.kind === 'resume' && JSON.stringify(c.output) === '{"booted":true}');
      const attempt = await store.getAttempt(jobId, 1);
      if (booted.length !== 1 || attempt.nodesHeardFrom.join() !== '0,1,2' || h.workflow.heartbeats.length > 0) {
        wrong.push(`round ${round}: ${h.workflow.closings.length} closings, heard ${attempt.nodesHeardFrom.join()}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it(`never resumes AwaitBoot in ${ROUNDS} rounds while one node of ${NODES} is silent`, async () => {
    const wrong: string[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const { h, jobId } = await launchedRound(round);
      const silent = round % NODES;
      await race(h, jobId, round, [0, 1, 2].filter((rank) => rank !== silent));
      if (h.workflow.closings.length > 0) wrong.push(`round ${round}: node ${silent} silent, yet ${JSON.stringify(h.workflow.closings)}`);
    }
    expect(wrong).toEqual([]);
  });
});
