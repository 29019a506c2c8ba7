// Reports and EC2 events in every order: the same outcome whichever of two messages comes
// first, or both at once, on both stores (InMemoryJobStore, DynamoJobStore on dynalite).

import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { DynamoJobStore } from '../../../../lib/adapters/dynamo-job-store/index.ts';
import { InMemoryJobStore } from '../../../../lib/adapters/memory-job-store.ts';
import { StaleAttemptError } from '../../../../lib/errors.ts';
import type { AttemptOutcome, Phase } from '../../../../lib/policy/types.ts';
import type { JobStore } from '../../../../lib/ports.ts';
import { onInstanceEvent } from '../../../../lib/usecases/instance-event.ts';
import { getJob } from '../../../../lib/usecases/queries.ts';
import { fakeInstanceId } from '../../../support/fakes/fake-compute.ts';
import { useDynalite } from '../../../support/fixtures/dynalite.ts';
import { givenLaunched, harness, report, taskSpec, tokenFor, type Harness } from '../../../support/usecases-harness.ts';

/** One message about an attempt: a node's report, or EC2's word on a node's instance. */
type Message =
  | { readonly report: Phase; readonly rank: number; readonly code: number }
  | { readonly warning: true; readonly rank: number }
  | { readonly gone: 'terminated' | 'shutting-down' | 'stopped'; readonly rank: number };

const setup = (rank: number, code = 0): Message => ({ report: 'setup', rank, code });
const run = (rank: number, code: number): Message => ({ report: 'run', rank, code });
const warning = (rank: number): Message => ({ warning: true, rank });
const gone = (rank: number, state: 'terminated' | 'shutting-down' | 'stopped' = 'terminated'): Message => ({ gone: state, rank });

/** A job of its own in `store`, attempt 1 launched and awaited. */
interface World {
  readonly h: Harness;
  readonly jobId: string;
}

async function world(store: JobStore, numNodes: number): Promise<World> {
  const h = harness(store);
  const jobId = `j-order-${randomUUID().slice(0, 8)}`;
  await givenLaunched(h, taskSpec({ numNodes }), jobId);
  return { h, jobId };
}

/** Delivers a message as the API or EventBridge would; says how it was answered. */
async function deliver({ h, jobId }: World, message: Message): Promise<string> {
  if ('report' in message) {
    try {
      return (await report(h, 1, message.report, message.code, message.rank, jobId)).status;
    } catch (error) {
      if (error instanceof StaleAttemptError) return 'stale';
      throw error;
    }
  }
  const instanceId = fakeInstanceId(jobId, 1, message.rank);
  const time = h.clock.now().toISOString();
  const event =
    'warning' in message
      ? ({ instanceId, kind: 'SPOT_INTERRUPTION_WARNING', time } as const)
      : ({ instanceId, kind: 'STATE_CHANGE', state: message.gone, time } as const);
  return (await onInstanceEvent(event, h.deps)).action;
}

const ORDERS = ['first then second', 'second then first', 'both at once'] as const;
type Order = (typeof ORDERS)[number];

async function deliverPair(w: World, first: Message, second: Message, order: Order): Promise<void> {
  switch (order) {
    case 'first then second':
      await deliver(w, first);
      await deliver(w, second);
      return;
    case 'second then first':
      await deliver(w, second);
      await deliver(w, first);
      return;
    case 'both at once':
      await Promise.all([deliver(w, first), deliver(w, second)]);
  }
}

interface Scenario {
  readonly name: string;
  readonly numNodes: number;
  /** Delivered in order before the pair. */
  readonly before: readonly Message[];
  readonly first: Message;
  readonly second: Message;
  /** Delivered in order after the pair: late messages that must change nothing. */
  readonly after: readonly Message[];
  readonly expected: AttemptOutcome;
}

const exited = (...codes: number[]): AttemptOutcome => ({
  kind: 'EXITED',
  phase: 'run',
  nodes: codes.map((exitCode, rank) => ({ rank, exitCode })),
});

const SCENARIOS: readonly Scenario[] = [
  {
    name: 'one node: a warning and the final report 0 (then the instance goes): succeeds',
    numNodes: 1,
    before: [setup(0)],
    first: warning(0),
    second: run(0, 0),
    after: [gone(0)],
    expected: exited(0),
  },
  {
    name: 'one node, warned: the final report 1 and the instance going: preempted',
    numNodes: 1,
    before: [setup(0), warning(0)],
    first: run(0, 1),
    second: gone(0),
    after: [],
    expected: { kind: 'PREEMPTED' },
  },
  {
    name: 'one node, no warning: setup 0 and the instance going before run reports: lost',
    numNodes: 1,
    before: [],
    first: setup(0),
    second: gone(0),
    after: [],
    expected: { kind: 'LOST', reason: 'instance {0} was terminated', nodes: [0] },
  },
  {
    name: 'two nodes: node 0 shut down after its final report, and node 1\'s final report 0: succeeds',
    numNodes: 2,
    before: [setup(0), setup(1), run(0, 0)],
    first: gone(0, 'shutting-down'),
    second: run(1, 0),
    after: [gone(0), gone(1)],
    expected: exited(0, 0),
  },
  {
    name: 'two nodes: node 0 shut down after its final report, and node 1\'s final report 3: the reports decide',
    numNodes: 2,
    before: [setup(0), setup(1), run(0, 0)],
    first: gone(0),
    second: run(1, 3),
    after: [gone(1)],
    expected: exited(0, 3),
  },
  {
    name: 'two nodes: node 1 warned, node 0 exits 1 (its peer vanished) and node 1\'s instance goes: preempted',
    numNodes: 2,
    before: [setup(0), setup(1), warning(1)],
    first: run(0, 1),
    second: gone(1),
    after: [gone(0)],
    expected: { kind: 'PREEMPTED' },
  },
  {
    name: 'two nodes, warned: node 0 shut down after reporting 0, node 1 reports 0: succeeds',
    numNodes: 2,
    before: [setup(0), setup(1), warning(1), run(0, 0)],
    first: gone(0),
    second: run(1, 0),
    after: [gone(1)],
    expected: exited(0, 0),
  },
  {
    name: 'two nodes, no warning: node 0 shut down after reporting 0, node 1\'s instance goes before its report: lost',
    numNodes: 2,
    before: [setup(0), setup(1), run(0, 0)],
    first: gone(0),
    second: gone(1, 'stopped'),
    after: [run(1, 0)],
    expected: { kind: 'LOST', reason: 'instance {1} was stopped', nodes: [1] },
  },
];

/** An outcome without the ranks of its nodes gone, which depend on which message decided first. */
function withoutNodesGone(outcome: AttemptOutcome | null): AttemptOutcome | null {
  if (outcome === null || (outcome.kind !== 'PREEMPTED' && outcome.kind !== 'LOST')) return outcome;
  const { nodes: _nodes, ...rest } = outcome;
  return rest;
}

/** The expected outcome with `{rank}` in a LOST reason replaced by that node's instance id. */
function withInstanceIds(outcome: AttemptOutcome, jobId: string): AttemptOutcome {
  if (outcome.kind !== 'LOST') return outcome;
  return { ...outcome, reason: outcome.reason.replace(/\{(\d+)\}/, (_, rank: string) => fakeInstanceId(jobId, 1, Number(rank))) };
}

const dynalite = useDynalite();
let dynamoStore: DynamoJobStore;

beforeAll(async () => {
  dynamoStore = new DynamoJobStore({ client: dynalite.client(), tableName: await dynalite.freshTable('order') });
});

const STORES: readonly { readonly name: string; readonly make: () => JobStore }[] = [
  { name: 'InMemoryJobStore', make: () => new InMemoryJobStore() },
  // Fresh job ids per test keep the tests apart on one table.
  { name: 'DynamoJobStore on dynalite', make: () => dynamoStore },
];

describe.each(STORES)('messages in every order ($name)', ({ make }) => {
  const cases = SCENARIOS.flatMap((scenario) => ORDERS.map((order) => ({ ...scenario, order })));

  it.each(cases)('$name ($order)', async ({ numNodes, before, first, second, after, expected, order }) => {
    const w = await world(make(), numNodes);
    for (const message of before) await deliver(w, message);
    await deliverPair(w, first, second, order);
    for (const message of after) await deliver(w, message);

    const attempt = await w.h.store.getAttempt(w.jobId, 1);
    expect(withoutNodesGone(attempt.outcome)).toEqual(withoutNodesGone(withInstanceIds(expected, w.jobId)));
    // Which nodes went is known only when an instance's end decided it (a failing report
    // after a warning decides first otherwise): the ranks named are only ever nodes gone.
    const goneRanks = [first, second, ...after].flatMap((message) => ('gone' in message ? [message.rank] : []));
    const named = attempt.outcome?.kind === 'PREEMPTED' || attempt.outcome?.kind === 'LOST' ? (attempt.outcome.nodes ?? []) : [];
    for (const rank of named) expect(goneRanks).toContain(rank);
    // The execution is resumed once, with that outcome.
    expect(w.h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: expected.kind } }]);
    // Every report stored stays on the attempt and is shown, whatever decided it.
    const view = await getJob(w.jobId, w.h.deps);
    const shownRun = attempt.reports.filter((r) => r.phase === 'run');
    if (expected.kind !== 'EXITED' && shownRun.length > 0) {
      const codes = Array.from({ length: numNodes }, (_, rank) => shownRun.find((r) => r.nodeRank === rank)?.exitCode ?? null);
      expect(view.attempts[0]).toMatchObject({ outcome: expected.kind, phase: 'run', exitCodes: codes });
    }
  });
});

/**
 * `store`, with `hook` run (once) just before the first endAttempt call that `when` picks,
 * so a test can put another message exactly between a decision's read and its write.
 */
function pausingBeforeEnd(store: JobStore, when: (outcome: AttemptOutcome) => boolean, hook: () => Promise<unknown>): JobStore {
  let armed = true;
  return new Proxy(store, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (property === 'endAttempt') {
        return async (...args: Parameters<JobStore['endAttempt']>) => {
          if (armed && when(args[2])) {
            armed = false;
            await hook();
          }
          return target.endAttempt(...args);
        };
      }
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

describe.each(STORES)('a message stored between another\'s decision and its end ($name)', ({ make }) => {
  it('an instance event that read no final report, then the report is stored: the event\'s end is refused, the report decides', async () => {
    const later: { world?: World } = {};
    // The report's first half (stored, not yet decided) lands between the event's read and its write.
    const store = pausingBeforeEnd(make(), (outcome) => outcome.kind === 'LOST', async () => {
      const { h, jobId } = later.world as World;
      await h.store.addReport(jobId, 1, { nodeRank: 0, phase: 'run', exitCode: 0, outputTail: '', reportedAt: h.clock.now().toISOString() });
    });
    const w = await world(store, 1);
    later.world = w;

    const result = await onInstanceEvent(
      { instanceId: fakeInstanceId(w.jobId, 1, 0), kind: 'STATE_CHANGE', state: 'terminated', time: w.h.clock.now().toISOString() },
      w.h.deps,
    );

    expect(result).toEqual({ action: 'ended', reason: `attempt 1 of job ${w.jobId} ended: the nodes' reports decide it (EXITED)` });
    expect((await w.h.store.getAttempt(w.jobId, 1)).outcome).toEqual(exited(0));
    expect(w.h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'EXITED' } }]);
  });

  it('a failing report decided with no warning, then a warning is noted: the attempt ends PREEMPTED naming the warned node, the code kept', async () => {
    const later: { world?: World } = {};
    const store = pausingBeforeEnd(make(), (outcome) => outcome.kind === 'EXITED', () => deliver(later.world as World, warning(1)));
    const w = await world(store, 2);
    later.world = w;

    expect(await deliver(w, run(0, 1))).toBe('accepted');

    const attempt = await w.h.store.getAttempt(w.jobId, 1);
    expect(attempt.outcome).toEqual({ kind: 'PREEMPTED', nodes: [1] });
    expect(attempt.reports.map((r) => [r.nodeRank, r.phase, r.exitCode])).toEqual([[0, 'run', 1]]);
    expect(w.h.workflow.closings).toEqual([{ kind: 'resume', taskToken: tokenFor(1), output: { outcome: 'PREEMPTED' } }]);
    expect((await getJob(w.jobId, w.h.deps)).attempts[0]).toMatchObject({ outcome: 'PREEMPTED', phase: 'run', exitCodes: [1, null] });
  });
});
