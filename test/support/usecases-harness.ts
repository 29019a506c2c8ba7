// The world the use-case tests run in: an in-memory store (or one a test brings), recording fakes, a clock tests move.

import { InMemoryJobSecrets } from '../../lib/adapters/memory-job-secrets.ts';
import { InMemoryJobStore } from '../../lib/adapters/memory-job-store.ts';
import type { JobRecord } from '../../lib/model.ts';
import type { Clock, JobStore } from '../../lib/ports.ts';
import type { RecoveryPolicy, TaskSpec } from '../../lib/task-file/types.ts';
import { MemoryLaunchPace, type LaunchPaceConfig } from '../../lib/launch-pace.ts';
import type { UseCaseDeps } from '../../lib/usecases/deps.ts';
import { launchAttempt } from '../../lib/usecases/launch-attempt.ts';
import { newJobRecord } from '../../lib/usecases/submit-job.ts';
import { awaitAttempt } from '../../lib/usecases/await-attempt.ts';
import { reportPhase } from '../../lib/usecases/report-phase.ts';
import type { Phase } from '../../lib/policy/types.ts';
import type { WorkflowState } from '../../lib/workflow/contract.ts';
import { FakeCompute } from './fakes/fake-compute.ts';
import { FakeWorkflow } from './fakes/fake-workflow.ts';
import * as fixtures from './fixtures/specs.ts';

/**
 * A clock that stands still until a test moves it. A use case's sleep moves it to the end
 * of the wait by itself (after letting whatever else is under way run first), unless the
 * test holds it (`hold()`): then a sleep ends only when `advance` reaches its end.
 */
export class TestClock implements Clock {
  #ms: number;
  #held = false;
  readonly #sleepers: { until: number; wake: () => void }[] = [];
  constructor(start = '2026-03-01T12:00:00.000Z') {
    this.#ms = Date.parse(start);
  }
  now(): Date {
    return new Date(this.#ms);
  }
  advance(seconds: number): void {
    this.#ms += seconds * 1000;
    for (const sleeper of this.#sleepers.filter((s) => s.until <= this.#ms)) {
      this.#sleepers.splice(this.#sleepers.indexOf(sleeper), 1);
      sleeper.wake();
    }
  }
  /** Sleeps end only when the test advances the clock past them. */
  hold(): void {
    this.#held = true;
  }
  /** How many sleeps are waiting for the clock. */
  get sleeping(): number {
    return this.#sleepers.length;
  }
  sleep(ms: number): Promise<void> {
    const until = this.#ms + ms;
    if (!this.#held) {
      return new Promise((resolve) =>
        setImmediate(() => {
          this.#ms = Math.max(this.#ms, until);
          resolve();
        }),
      );
    }
    return new Promise((wake) => this.#sleepers.push({ until, wake }));
  }
}

/** A small task on a spot m5.large; `useSpot` and the policy are what most tests vary. */
export function taskSpec(options: { numNodes?: number; useSpot?: boolean; recovery?: Partial<RecoveryPolicy> } = {}): TaskSpec {
  return fixtures.taskSpec({
    numNodes: options.numNodes ?? 1,
    resources: {
      instanceType: 'm5.large',
      useSpot: options.useSpot ?? true,
      jobRecovery: fixtures.recoveryPolicy(options.recovery),
    },
  });
}

/** Everything a test needs, wired together. */
export interface Harness {
  readonly store: JobStore;
  readonly compute: FakeCompute;
  readonly workflow: FakeWorkflow;
  readonly clock: TestClock;
  readonly secrets: InMemoryJobSecrets;
  readonly pace: MemoryLaunchPace;
  readonly deps: UseCaseDeps;
}

/** The fakes around `store`: an in-memory one unless a test brings another (DynamoJobStore on dynalite). */
export function harness(store: JobStore = new InMemoryJobStore(), paceConfig?: LaunchPaceConfig): Harness {
  const compute = new FakeCompute();
  const workflow = new FakeWorkflow();
  const clock = new TestClock();
  let draws = 0;
  // A fixed sequence, so ids and jitter differ between calls but not between runs.
  const random = (): number => ((draws += 1) * 0.137) % 1;
  const secrets = new InMemoryJobSecrets();
  const pace = new MemoryLaunchPace(paceConfig);
  return { store, compute, workflow, clock, secrets, pace, deps: { store, compute, workflow, clock, random, secrets, pace } };
}

export const JOB_ID = 'j-00mm8abcd-test01';

/** Stores a job as submitJob would, without going through the parser. */
export async function givenJob(
  h: Harness,
  spec: TaskSpec = taskSpec(),
  jobId = JOB_ID,
): Promise<JobRecord> {
  const job = newJobRecord(jobId, spec, h.clock.now().toISOString());
  await h.store.createJob(job);
  return job;
}

/** A job (this spec) whose attempt 1 is launched and awaited; returns the launch's state. */
export async function givenLaunched(h: Harness, spec: TaskSpec = taskSpec(), jobId = JOB_ID): Promise<WorkflowState> {
  await givenJob(h, spec, jobId);
  return launchAndAwait(h, initialState(jobId));
}

/** Attempt 1 lost and attempt 2 launched, the policy skipped: attempt 1 is now a stale one. */
export async function givenReplacedAttempt(h: Harness): Promise<void> {
  const at = h.clock.now().toISOString();
  await h.store.endAttempt(JOB_ID, 1, { kind: 'LOST', reason: 'replaced by the test' }, at);
  await h.store.changeStatus(JOB_ID, { from: 'STARTING', to: 'RECOVERING', reason: 't', attempt: 1, at });
  await launchAttempt({ jobId: JOB_ID, attempt: 1, attemptsInExecution: 1 }, h.deps);
}

/** The state the execution starts with. */
export function initialState(jobId = JOB_ID): WorkflowState {
  return { jobId, attempt: 0, attemptsInExecution: 0 };
}

/** The token AwaitAttempt gets for an attempt, in these tests. */
export function tokenFor(attempt: number): string {
  return `token-${attempt}`;
}

/** LaunchAttempt then AwaitAttempt, as the machine runs them; returns the launch's state. */
export async function launchAndAwait(h: Harness, state: WorkflowState): Promise<WorkflowState> {
  const launched = await launchAttempt(state, h.deps);
  await awaitAttempt({ jobId: launched.jobId, attempt: launched.attempt, taskToken: tokenFor(launched.attempt) }, h.deps);
  return launched;
}

/** A report from node `nodeRank` of an attempt, with the secret compute handed it. */
export async function report(
  h: Harness,
  attempt: number,
  phase: Phase,
  exitCode: number,
  nodeRank = 0,
  jobId = JOB_ID,
): Promise<{ status: 'accepted' | 'duplicate' }> {
  return reportPhase(
    { jobId, attempt, nodeRank, phase, exitCode, outputTail: `${phase} ended with ${exitCode}`, secret: h.compute.secretFor(jobId, attempt) },
    h.deps,
  );
}
