// A node's final report racing its instance's `terminated` event, with real concurrency:
// DynamoJobStore on one dynalite, both use cases in flight at once, 100 rounds each.

import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { DynamoJobStore } from '../../../../lib/adapters/dynamo-job-store/index.ts';
import { StaleAttemptError } from '../../../../lib/errors.ts';
import type { AttemptRecord, NodeReport } from '../../../../lib/model.ts';
import { onInstanceEvent, type InstanceEvent } from '../../../../lib/usecases/instance-event.ts';
import { fakeInstanceId } from '../../../support/fakes/fake-compute.ts';
import { useDynalite } from '../../../support/fixtures/dynalite.ts';
import { stagger } from '../../../support/fixtures/stagger.ts';
import { givenLaunched, harness, report, taskSpec } from '../../../support/usecases-harness.ts';

const ROUNDS = 100;
/** 100 rounds of real DynamoDB writes: well under a minute alone, longer beside a full suite on 2 cores. */
const RACE_TIMEOUT_MS = 180_000;

const dynalite = useDynalite();
let store: HookedStore;

/** A DynamoJobStore that calls `onReportStored` once, as soon as a report is stored. */
class HookedStore extends DynamoJobStore {
  onReportStored: (() => void) | undefined;

  override async addReport(jobId: string, attempt: number, report: NodeReport): Promise<{ attempt: AttemptRecord; duplicate: boolean }> {
    const added = await super.addReport(jobId, attempt, report);
    const hook = this.onReportStored;
    this.onReportStored = undefined;
    hook?.();
    return added;
  }
}

beforeAll(async () => {
  store = new HookedStore({ client: dynalite.client(), tableName: await dynalite.freshTable('race') });
});

/** A single-node job of its own, launched and awaited; returns it and its instance's `terminated` event. */
async function launchedRound(round: number) {
  const h = harness(store);
  const jobId = `j-race-${round}-${randomUUID().slice(0, 8)}`;
  await givenLaunched(h, taskSpec(), jobId);
  const terminated: InstanceEvent = {
    instanceId: fakeInstanceId(jobId, 1, 0),
    kind: 'STATE_CHANGE',
    state: 'terminated',
    time: h.clock.now().toISOString(),
  };
  return { h, jobId, terminated };
}

/** The report's answer, or the name of the error it was refused with. */
async function answerOf(sent: Promise<{ status: string }>): Promise<string> {
  try {
    return (await sent).status;
  } catch (error) {
    if (error instanceof StaleAttemptError) return error.name;
    throw error;
  }
}


describe('a final exit-0 report racing its instance\'s terminated event (DynamoJobStore on dynalite)', { timeout: RACE_TIMEOUT_MS }, () => {
  it(`ends EXITED 0 with the report accepted in every one of ${ROUNDS} rounds when the instance goes as the report is stored`, async () => {
    const wrong: string[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const { h, jobId, terminated } = await launchedRound(round);
      let event: Promise<unknown> | undefined;
      // The agent shuts its instance down once its report is in: the event is under way
      // while the report path is still deciding and ending the attempt.
      store.onReportStored = () => {
        event = stagger(round).then(() => onInstanceEvent(terminated, h.deps));
      };
      const answer = await answerOf(report(h, 1, 'run', 0, 0, jobId));
      await event;
      const attempt = await store.getAttempt(jobId, 1);
      const closings = h.workflow.closings.map((c) => (c.kind === 'resume' ? JSON.stringify(c.output) : c.kind));
      const exited0 =
        attempt.outcome?.kind === 'EXITED' && attempt.outcome.nodes.length === 1 && attempt.outcome.nodes[0]?.exitCode === 0;
      if (!exited0 || !['accepted', 'duplicate'].includes(answer) || closings.join() !== '{"outcome":"EXITED"}') {
        wrong.push(`round ${round}: ${JSON.stringify(attempt.outcome)}, report ${answer}, task ${closings.join()}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it(`never overrides an accepted report in ${ROUNDS} rounds when both start at the same moment`, async () => {
    const tally = { exited: 0, lostBeforeTheReport: 0 };
    const wrong: string[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const { h, jobId, terminated } = await launchedRound(round);
      const [answer] = await Promise.all([answerOf(report(h, 1, 'run', 0, 0, jobId)), onInstanceEvent(terminated, h.deps)]);
      const { outcome } = await store.getAttempt(jobId, 1);
      const exited0 = outcome?.kind === 'EXITED' && outcome.nodes[0]?.exitCode === 0;
      if (exited0 && ['accepted', 'duplicate'].includes(answer)) tally.exited += 1;
      // The instance went before the report reached the store: the report is refused as
      // stale, so the agent is never told its code counted when it did not.
      else if (outcome?.kind === 'LOST' && answer === 'StaleAttemptError') tally.lostBeforeTheReport += 1;
      else wrong.push(`round ${round}: ${JSON.stringify(outcome)}, report ${answer}`);
    }
    expect(wrong).toEqual([]);
    expect(tally.exited + tally.lostBeforeTheReport).toBe(ROUNDS);
    console.info(`report and terminated event started together: ${JSON.stringify(tally)}`);
  });
});
