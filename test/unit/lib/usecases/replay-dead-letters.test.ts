// The janitor's replay: each dead letter goes through the use case its rule feeds, once;
// what fails stays, what cannot be read stays, and a letter received too often is left.

import { describe, expect, it } from 'vitest';
import type { DeadLetter, DeadLetters } from '../../../../lib/ports.ts';
import { MAX_REPLAYS, REPLAY_BATCH, replayDeadLetters } from '../../../../lib/usecases/replay-dead-letters.ts';
import { executionArn, executionStatusChange, instanceStateChange, onFailureRecord } from '../../../support/fixtures/events/shapes.ts';
import { givenLaunched, harness as baseHarness, JOB_ID, tokenFor, type Harness } from '../../../support/usecases-harness.ts';

/** The one node's instance, with an id EC2's events carry (the fake's ids are not hex). */
const INSTANCE = 'i-0abc123def4567890';

/** The usual harness, whose launches get INSTANCE. */
function harness(): Harness {
  const h = baseHarness();
  const launch = h.compute.launch.bind(h.compute);
  h.compute.launch = async (request) => ({
    ...(await launch(request)),
    instances: [{ instanceId: INSTANCE, nodeRank: 0, privateIp: '10.0.0.1' }],
  });
  return h;
}

/** Queues held in memory: `receive` hands out every letter still there, `remove` deletes it. */
class HeldLetters implements DeadLetters {
  readonly removed: DeadLetter[] = [];
  readonly asked: number[] = [];
  constructor(readonly letters: DeadLetter[]) {}
  async receive(max: number): Promise<DeadLetter[]> {
    this.asked.push(max);
    return this.letters.filter((l) => !this.removed.includes(l)).slice(0, max);
  }
  async remove(letter: DeadLetter): Promise<void> {
    this.removed.push(letter);
  }
}

function letter(body: unknown, receiveCount = 1, queue = 'ec2-events-undelivered'): DeadLetter {
  return { queue, body: typeof body === 'string' ? body : JSON.stringify(body), receiveCount, receipt: `r-${Math.random()}` };
}

describe('replayDeadLetters', () => {
  it('applies an undelivered termination to its attempt (LOST, the task resumed) and deletes the letter; a second replay finds none', async () => {
    const h = harness();
    await givenLaunched(h);
    const held = new HeldLetters([letter(instanceStateChange(INSTANCE, 'terminated'))]);

    const replayed = await replayDeadLetters(held, h.deps);

    expect(replayed).toEqual([{ queue: 'ec2-events-undelivered', outcome: 'applied', detail: expect.stringMatching(/^ended: /) }]);
    expect((await h.store.getAttempt(JOB_ID, 1)).outcome).toMatchObject({ kind: 'LOST' });
    expect(h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'LOST' } }]);
    expect(held.removed).toHaveLength(1);
    expect(await replayDeadLetters(held, h.deps)).toEqual([]);
    expect(held.asked).toEqual([REPLAY_BATCH, REPLAY_BATCH]);
  });

  it('unwraps Lambda\'s on-failure record, and takes a late duplicate as the no-op it is', async () => {
    const h = harness();
    await givenLaunched(h);
    const gone = instanceStateChange(INSTANCE, 'terminated');
    const held = new HeldLetters([letter(onFailureRecord(gone), 1, 'ec2-events-failed'), letter(gone)]);

    const replayed = await replayDeadLetters(held, h.deps);

    expect(replayed.map((r) => [r.queue, r.outcome, r.detail.split(':')[0]])).toEqual([
      ['ec2-events-failed', 'applied', 'ended'],
      ['ec2-events-undelivered', 'applied', 'ignored'],
    ]);
    expect(h.workflow.closings).toHaveLength(1);
    expect(held.removed).toHaveLength(2);
  });

  it('applies an execution\'s end: a job being cancelled ends CANCELLED, its instances released', async () => {
    const h = harness();
    await givenLaunched(h);
    await h.store.setExecution(JOB_ID, executionArn(JOB_ID));
    await h.store.changeStatus(JOB_ID, { from: 'STARTING', to: 'CANCELLING', reason: 'cancelled by the user', attempt: 1, at: h.clock.now().toISOString() });
    const held = new HeldLetters([letter(executionStatusChange(JOB_ID, 'ABORTED'), 1, 'execution-events-undelivered')]);

    expect(await replayDeadLetters(held, h.deps)).toMatchObject([{ outcome: 'applied' }]);

    expect((await h.store.getJob(JOB_ID)).status).toBe('CANCELLED');
    expect(h.compute.releases.map((r) => r.attempt)).toEqual([1]);
  });

  it.each([
    ['a body that is not JSON', '{"detail-type":', 'the message is not JSON'],
    ['an event relaunch has no rule for', { 'detail-type': 'EC2 AMI State Change', detail: {} }, 'neither an EC2 event'],
    ['an EC2 event with a malformed instance id', instanceStateChange('not-an-instance', 'terminated'), 'neither an EC2 event'],
    ['an on-failure record around garbage', onFailureRecord('garbage'), 'neither an EC2 event'],
  ])('leaves %s in its queue, reported unreadable', async (_name, body, detail) => {
    const h = harness();
    const held = new HeldLetters([letter(body)]);
    const replayed = await replayDeadLetters(held, h.deps);
    expect(replayed).toEqual([{ queue: 'ec2-events-undelivered', outcome: 'unreadable', detail: expect.stringContaining(detail) }]);
    expect(held.removed).toEqual([]);
  });

  it('keeps a letter whose use case fails for the next replay, and leaves one received too often for an operator', async () => {
    const h = harness();
    await givenLaunched(h);
    h.store.findAttemptByInstance = async () => {
      throw new Error('ProvisionedThroughputExceededException');
    };
    const gone = instanceStateChange(INSTANCE, 'terminated');
    const held = new HeldLetters([letter(gone, MAX_REPLAYS), letter(gone, MAX_REPLAYS + 1)]);

    const replayed = await replayDeadLetters(held, h.deps);

    expect(replayed).toEqual([
      { queue: 'ec2-events-undelivered', outcome: 'failed', detail: 'ProvisionedThroughputExceededException' },
      { queue: 'ec2-events-undelivered', outcome: 'given up', detail: `received ${MAX_REPLAYS + 1} times; left for an operator` },
    ]);
    expect(held.removed).toEqual([]);
  });
});
