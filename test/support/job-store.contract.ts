// The JobStore contract: one suite that every JobStore adapter must pass, given a factory
// that makes a fresh, empty store for each test.

import { beforeEach, describe, expect, it } from 'vitest';
import { ConcurrentUpdateError, IllegalTransitionError, JobNotFoundError, StaleAttemptError } from '../../lib/errors.ts';
import type { AttemptRecord, InstanceRef, JobRecord, NodeReport, StoredDecision } from '../../lib/model.ts';
import type { AttemptOutcome, RecoveryCounters } from '../../lib/policy/types.ts';
import { basisOf } from '../../lib/outcome.ts';
import type { IdempotencyClaim, JobStore, StatusChange } from '../../lib/ports.ts';
import { JOB_CREATED_REASON } from '../../lib/adapters/job-store-rules.ts';
import type { TaskSpec } from '../../lib/task-file/types.ts';
import { JobStatus } from '../../lib/status.ts';
import { newJobRecord } from '../../lib/usecases/submit-job.ts';
import { attemptRecord } from './fixtures/records.ts';

/** Makes a fresh, empty store; called before every test. */
export type JobStoreFactory = () => JobStore | Promise<JobStore>;

const T0 = '2026-01-02T03:04:05.000Z';
const T1 = '2026-01-02T03:04:06.000Z';
const T2 = '2026-01-02T03:04:07.000Z';
const T3 = '2026-01-02T03:04:08.000Z';

/** A spec that exercises what a map attribute must keep: nesting, nulls, empty lists, '' and unicode. */
export const richSpec: TaskSpec = {
  name: 'train-ünïcødé-模型',
  workdir: null,
  numNodes: 2,
  envs: { EMPTY: '', GREETING: 'héllo wörld 👋', PATHS: 'a:b:c' },
  setup: 'pip install -r requirements.txt\n',
  run: 'torchrun --nnodes=$SKYPILOT_NUM_NODES train.py # ✓\n',
  resources: {
    cloud: 'aws',
    region: 'us-east-1',
    zone: null,
    instanceType: null,
    cpus: { value: 4, orMore: true },
    memoryGb: null,
    accelerators: [],
    useSpot: true,
    diskSizeGb: 256,
    imageId: { kind: 'per-region', byRegion: { 'us-east-1': 'ami-0123', 'eu-west-1': 'ami-0456' } },
    jobRecovery: {
      strategy: 'EAGER_NEXT_REGION',
      maxRestartsOnErrors: 3,
      recoverOnExitCodes: [29, 64, 65],
      failOnExitCodes: [],
      maxRestartsOnExitCodes: null,
      restartBackoff: { initialSeconds: 1.5, factor: 2, maxSeconds: 60, jitter: 'full' },
      onDemandFallbackAfter: null,
    },
  },
};

/** Job-1 with the rich spec, unnamed, submitted 2026-01-01: for adapter tests outside the contract. */
export const sampleJob: JobRecord = { ...newJobRecord('job-1', richSpec, '2026-01-01T00:00:00.000Z'), name: null };

const freshCounters: RecoveryCounters = {
  restartsOnErrors: 0,
  restartsOnExitCodes: 0,
  recoveryCount: 0,
  consecutivePreemptions: 0,
  market: 'spot',
};

function makeJob(jobId: string, overrides: Partial<JobRecord> = {}): JobRecord {
  return { ...newJobRecord(jobId, richSpec, T0), ...overrides };
}

function makeAttempt(jobId: string, attempt: number, overrides: Partial<AttemptRecord> = {}): AttemptRecord {
  return attemptRecord(jobId, attempt, T1, overrides);
}

function report(nodeRank: number, phase: 'setup' | 'run', exitCode: number, outputTail = 'done'): NodeReport {
  return { nodeRank, phase, exitCode, outputTail, reportedAt: T2 };
}

function change(from: JobStatus, to: JobStatus, overrides: Partial<StatusChange> = {}): StatusChange {
  return { from, to, reason: `${from} to ${to}`, attempt: null, at: T1, ...overrides };
}

const exited: AttemptOutcome = { kind: 'EXITED', phase: 'run', nodes: [{ rank: 0, exitCode: 1 }] };
const restartDecision: StoredDecision = {
  action: 'RESTART',
  rule: 'RESTART_ON_ERROR',
  status: JobStatus.RECOVERING,
  reason: 'exit code 1 is an ordinary failure; restart 1 of 3',
  delaySeconds: 0,
  decidedAt: T3,
};
const chargedCounters: RecoveryCounters = { ...freshCounters, restartsOnErrors: 1, recoveryCount: 1 };

/** What a store under the contract can show. */
export interface JobStoreContractOptions {
  /**
   * Whether writes racing each other are each whole or not at all, one winning. False for
   * moto, which is not atomic when two writes to one item run at once (a limit of moto, not
   * of DynamoDB): under load it let an adopt and a release of one standby both succeed, and
   * lost ranks from eight concurrent ADDs to one set. The races are shown on dynalite and
   * the in-memory store.
   * @default true
   */
  readonly atomicRaces?: boolean;
}

/** Runs the whole JobStore contract against stores made by `makeStore`. */
export function describeJobStoreContract(name: string, makeStore: JobStoreFactory, options: JobStoreContractOptions = {}): void {
  /** A test of two writes racing: skipped, and so shown as such, where the store cannot keep them atomic. */
  const race = options.atomicRaces === false ? it.skip : it;

  describe(`JobStore contract: ${name}`, () => {
    let store: JobStore;

    beforeEach(async () => {
      store = await makeStore();
    });

    /** A job that is RUNNING with attempt 1 started. */
    async function runningJobWithAttempt(jobId = 'job-1'): Promise<void> {
      await store.createJob(makeJob(jobId));
      await store.changeStatus(jobId, change('PENDING', 'STARTING'));
      await store.putAttempt(makeAttempt(jobId, 1));
      await store.changeStatus(jobId, change('STARTING', 'RUNNING', { attempt: 1 }));
    }

    describe('jobs', () => {
      it('gives back exactly the job it was given, nested spec, nulls, empty lists and unicode included', async () => {
        const job = makeJob('job-1', { executionArn: 'arn:aws:states:us-east-1:1:execution:m:job-1' });
        await store.createJob(job);
        const stored = await store.getJob('job-1');
        expect(stored).toEqual(job);
        expect(stored.spec.envs.EMPTY).toBe('');
        expect(stored.spec.resources.accelerators).toEqual([]);
        expect(stored.spec.resources.zone).toBeNull();
      });

      it('refuses a second job with the same id and keeps the first', async () => {
        await store.createJob(makeJob('job-1'));
        await expect(store.createJob(makeJob('job-1', { name: 'other' }))).rejects.toBeInstanceOf(
          ConcurrentUpdateError,
        );
        expect((await store.getJob('job-1')).name).toBe(richSpec.name);
      });

      it('answers JobNotFoundError for a job that does not exist', async () => {
        await expect(store.getJob('nope')).rejects.toBeInstanceOf(JobNotFoundError);
      });

      it.each<[string, (s: JobStore) => Promise<unknown>]>([
        ['changeStatus', (s) => s.changeStatus('nope', change('PENDING', 'STARTING'))],
        ['setExecution', (s) => s.setExecution('nope', 'arn')],
        ['putAttempt', (s) => s.putAttempt(makeAttempt('nope', 1))],
        ['getAttempt', (s) => s.getAttempt('nope', 1)],
        ['listAttempts', (s) => s.listAttempts('nope')],
        ['setInstances', (s) => s.setInstances('nope', 1, { region: 'us-east-1', zone: null, instanceType: 'm5.large' }, [])],
        ['setTaskToken', (s) => s.setTaskToken('nope', 1, 'token', 'AwaitAttempt')],
        ['recordHeartbeat', (s) => s.recordHeartbeat('nope', 1, T1, 0)],
        ['noteInterruption', (s) => s.noteInterruption('nope', 1, T1)],
        ['addReport', (s) => s.addReport('nope', 1, report(0, 'run', 0))],
        ['endAttempt', (s) => s.endAttempt('nope', 1, exited, T2)],
        ['endAttempt on a basis', (s) => s.endAttempt('nope', 1, exited, T2, { reports: 0, interruptionNoticed: false })],
        ['recordDecision', (s) => s.recordDecision('nope', 1, restartDecision, chargedCounters, change('RUNNING', 'RECOVERING'))],
        ['listEvents', (s) => s.listEvents('nope')],
      ])('%s on a missing job answers JobNotFoundError', async (_name, call) => {
        await expect(call(store)).rejects.toBeInstanceOf(JobNotFoundError);
      });

      it('lists jobs newest first, ties broken by id, and honours the limit', async () => {
        expect(await store.listJobs()).toEqual([]);
        await store.createJob(makeJob('job-b', { createdAt: T1, updatedAt: T1 }));
        await store.createJob(makeJob('job-old', { createdAt: T0, updatedAt: T0 }));
        await store.createJob(makeJob('job-new', { createdAt: T2, updatedAt: T2 }));
        await store.createJob(makeJob('job-a', { createdAt: T1, updatedAt: T1 }));
        const ids = (jobs: JobRecord[]) => jobs.map((j) => j.jobId);
        expect(ids(await store.listJobs())).toEqual(['job-new', 'job-b', 'job-a', 'job-old']);
        expect(ids(await store.listJobs({ limit: 2 }))).toEqual(['job-new', 'job-b']);
        expect(await store.listJobs({ limit: 1 })).toEqual([makeJob('job-new', { createdAt: T2, updatedAt: T2 })]);
      });

      it('queues each job from its creation until its execution is recorded or it ends, oldest first', async () => {
        expect(await store.listQueued({ limit: 10 })).toEqual([]);
        await store.createJob(makeJob('job-b', { createdAt: T1, updatedAt: T1 }));
        await store.createJob(makeJob('job-old', { createdAt: T0, updatedAt: T0 }));
        await store.createJob(makeJob('job-new', { createdAt: T2, updatedAt: T2 }));
        await store.createJob(makeJob('job-a', { createdAt: T1, updatedAt: T1 }));
        // Created with its execution already known: never queued.
        await store.createJob(makeJob('job-started', { createdAt: T0, updatedAt: T0, executionArn: 'arn:exec:started' }));
        const ids = (jobs: JobRecord[]) => jobs.map((j) => j.jobId);
        expect(ids(await store.listQueued({ limit: 10 }))).toEqual(['job-old', 'job-a', 'job-b', 'job-new']);
        expect(ids(await store.listQueued({ limit: 2 }))).toEqual(['job-old', 'job-a']);
        await store.setExecution('job-old', 'arn:exec:old');
        await store.changeStatus('job-new', { from: 'PENDING', to: 'CANCELLING', reason: 'user', attempt: null, at: T2 });
        expect(ids(await store.listQueued({ limit: 10 }))).toEqual(['job-a', 'job-b', 'job-new']);
        await store.changeStatus('job-new', { from: 'CANCELLING', to: 'CANCELLED', reason: 'user', attempt: null, at: T2 });
        expect(ids(await store.listQueued({ limit: 10 }))).toEqual(['job-a', 'job-b']);
        expect(await store.listQueued({ limit: 0 })).toEqual([]);
      });

      it('records the execution that controls the job', async () => {
        await store.createJob(makeJob('job-1'));
        await store.setExecution('job-1', 'arn:exec:1');
        await store.setExecution('job-1', 'arn:exec:2');
        expect((await store.getJob('job-1')).executionArn).toBe('arn:exec:2');
      });

      it('keeps stored state away from objects the caller passed in or got back', async () => {
        const job = structuredClone(makeJob('job-1')) as { -readonly [K in keyof JobRecord]: JobRecord[K] };
        await store.createJob(job);
        job.status = JobStatus.FAILED;
        const got = (await store.getJob('job-1')) as unknown as { status: string; spec: { envs: Record<string, string> } };
        try {
          got.status = 'MUTATED';
          got.spec.envs.EMPTY = 'mutated';
        } catch {
          // A frozen record refuses the write, which is just as good.
        }
        expect(await store.getJob('job-1')).toEqual(makeJob('job-1'));
      });
    });

    describe('status changes', () => {
      it('writes a creation row with no `from` when the job is created', async () => {
        await store.createJob(makeJob('job-1'));
        expect(await store.listEvents('job-1')).toEqual([
          { jobId: 'job-1', at: T0, from: null, to: 'PENDING', attempt: null, reason: expect.any(String) },
        ]);
      });

      it('changes the status from the expected one, applies the patch, and writes the EVENT row', async () => {
        await store.createJob(makeJob('job-1'));
        const updated = await store.changeStatus(
          'job-1',
          change('PENDING', 'FAILED_CONTROLLER', { reason: 'could not start', at: T2 }),
          { failureReason: 'could not start: ✗', counters: chargedCounters },
        );
        expect(updated).toEqual(
          makeJob('job-1', {
            status: JobStatus.FAILED_CONTROLLER,
            failureReason: 'could not start: ✗',
            counters: chargedCounters,
            updatedAt: T2,
          }),
        );
        expect(await store.getJob('job-1')).toEqual(updated);
        expect((await store.listEvents('job-1')).at(-1)).toEqual({
          jobId: 'job-1',
          at: T2,
          from: 'PENDING',
          to: 'FAILED_CONTROLLER',
          attempt: null,
          reason: 'could not start',
        });
      });

      it('leaves failureReason alone when the patch omits it and clears it when the patch says null', async () => {
        await store.createJob(makeJob('job-1', { failureReason: 'earlier' }));
        await store.changeStatus('job-1', change('PENDING', 'STARTING'));
        expect((await store.getJob('job-1')).failureReason).toBe('earlier');
        await store.changeStatus('job-1', change('STARTING', 'RUNNING'), { failureReason: null });
        expect((await store.getJob('job-1')).failureReason).toBeNull();
      });

      it('refuses a change whose `from` is not the current status and writes nothing', async () => {
        await store.createJob(makeJob('job-1'));
        await expect(store.changeStatus('job-1', change('RUNNING', 'SUCCEEDED'))).rejects.toBeInstanceOf(
          ConcurrentUpdateError,
        );
        expect(await store.getJob('job-1')).toEqual(makeJob('job-1'));
        expect(await store.listEvents('job-1')).toHaveLength(1);
      });

      it('refuses a transition lib/status.ts does not allow, even from the current status, and writes nothing', async () => {
        await store.createJob(makeJob('job-1'));
        await expect(store.changeStatus('job-1', change('PENDING', 'SUCCEEDED'))).rejects.toBeInstanceOf(
          IllegalTransitionError,
        );
        await store.putAttempt(makeAttempt('job-1', 1));
        await expect(
          store.recordDecision('job-1', 1, restartDecision, chargedCounters, change('PENDING', 'RECOVERING')),
        ).rejects.toBeInstanceOf(IllegalTransitionError);
        expect((await store.getJob('job-1')).status).toBe('PENDING');
        expect((await store.getAttempt('job-1', 1)).decision).toBeNull();
        expect(await store.listEvents('job-1')).toHaveLength(1);
      });

      it('lists events oldest first, in write order when times are equal', async () => {
        await store.createJob(makeJob('job-1'));
        await store.changeStatus('job-1', change('PENDING', 'STARTING', { at: T1 }));
        await store.changeStatus('job-1', change('STARTING', 'RUNNING', { at: T1, attempt: 1 }));
        await store.changeStatus('job-1', change('RUNNING', 'CANCELLING', { at: T1 }));
        await store.changeStatus('job-1', change('CANCELLING', 'CANCELLED', { at: T2 }));
        const events = await store.listEvents('job-1');
        expect(events.map((e) => [e.from, e.to, e.attempt])).toEqual([
          [null, 'PENDING', null],
          ['PENDING', 'STARTING', null],
          ['STARTING', 'RUNNING', 1],
          ['RUNNING', 'CANCELLING', null],
          ['CANCELLING', 'CANCELLED', null],
        ]);
      });

      race('lets exactly one of two racing changes from the same status win', async () => {
        await store.createJob(makeJob('job-1'));
        const results = await Promise.allSettled([
          store.changeStatus('job-1', change('PENDING', 'STARTING')),
          store.changeStatus('job-1', change('PENDING', 'CANCELLED')),
        ]);
        const won = results.filter((r) => r.status === 'fulfilled');
        const lost = results.filter((r) => r.status === 'rejected');
        expect(won).toHaveLength(1);
        expect(lost).toHaveLength(1);
        expect((lost[0] as PromiseRejectedResult).reason).toBeInstanceOf(ConcurrentUpdateError);
        const winner = (won[0] as PromiseFulfilledResult<JobRecord>).value.status;
        expect((await store.getJob('job-1')).status).toBe(winner);
        expect((await store.listEvents('job-1')).map((e) => e.to)).toEqual(['PENDING', winner]);
      });
    });

    describe('attempts', () => {
      it('gives back exactly the attempt it was given', async () => {
        await store.createJob(makeJob('job-1'));
        const full = makeAttempt('job-1', 1, {
          market: 'on-demand',
          placement: { region: 'eu-west-1', zone: null, instanceType: 'g5.xlarge' },
          instances: [
            { instanceId: 'i-0aaa', nodeRank: 0, privateIp: '10.0.0.1' },
            { instanceId: 'i-0bbb', nodeRank: 1, privateIp: null },
          ],
          taskToken: 'token/with+odd=chars',
          reports: [report(0, 'run', 0, 'épilogue ✓\nlast line 🚀'), report(1, 'run', 137, '')],
          outcome: {
            kind: 'EXITED',
            phase: 'run',
            nodes: [
              { rank: 0, exitCode: 0 },
              { rank: 1, exitCode: null, unknownReason: 'agent never reported', killedByController: true },
            ],
          },
          decision: restartDecision,
          lastHeartbeatAt: T2,
          interruptionNoticedAt: T2,
          endedAt: T3,
        });
        await store.putAttempt(full);
        expect(await store.getAttempt('job-1', 1)).toEqual(full);
        expect(await store.listAttempts('job-1')).toEqual([full]);
      });

      it('starts attempts only in sequence and bumps attemptCount', async () => {
        await store.createJob(makeJob('job-1'));
        await expect(store.putAttempt(makeAttempt('job-1', 2))).rejects.toBeInstanceOf(ConcurrentUpdateError);
        await store.putAttempt(makeAttempt('job-1', 1));
        expect((await store.getJob('job-1')).attemptCount).toBe(1);
        await expect(store.putAttempt(makeAttempt('job-1', 1))).rejects.toBeInstanceOf(ConcurrentUpdateError);
        await expect(store.putAttempt(makeAttempt('job-1', 3))).rejects.toBeInstanceOf(ConcurrentUpdateError);
        await store.putAttempt(makeAttempt('job-1', 2, { market: 'on-demand' }));
        expect((await store.getJob('job-1')).attemptCount).toBe(2);
        expect((await store.listAttempts('job-1')).map((a) => [a.attempt, a.market])).toEqual([
          [1, 'spot'],
          [2, 'on-demand'],
        ]);
      });

      race('lets exactly one of two racing starts of the same attempt win', async () => {
        await store.createJob(makeJob('job-1'));
        const results = await Promise.allSettled([
          store.putAttempt(makeAttempt('job-1', 1, { market: 'spot' })),
          store.putAttempt(makeAttempt('job-1', 1, { market: 'on-demand' })),
        ]);
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
        expect((results.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason).toBeInstanceOf(
          ConcurrentUpdateError,
        );
        expect((await store.getJob('job-1')).attemptCount).toBe(1);
        expect(await store.listAttempts('job-1')).toHaveLength(1);
      });

      it('lists attempts oldest first past nine (numbers, not text, order them)', async () => {
        await store.createJob(makeJob('job-1'));
        for (let n = 1; n <= 11; n += 1) await store.putAttempt(makeAttempt('job-1', n));
        expect((await store.listAttempts('job-1')).map((a) => a.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        expect(await store.listAttempts('job-1')).toHaveLength(11);
      });

      it('lists no attempts for a job that has none', async () => {
        await store.createJob(makeJob('job-1'));
        expect(await store.listAttempts('job-1')).toEqual([]);
      });

      it('answers StaleAttemptError for an attempt the job does not have', async () => {
        await store.createJob(makeJob('job-1'));
        await expect(store.getAttempt('job-1', 1)).rejects.toBeInstanceOf(StaleAttemptError);
        await expect(store.addReport('job-1', 1, report(0, 'run', 0))).rejects.toBeInstanceOf(StaleAttemptError);
        await expect(store.endAttempt('job-1', 1, exited, T2)).rejects.toBeInstanceOf(StaleAttemptError);
        await expect(store.endAttempt('job-1', 1, exited, T2, { reports: 0, interruptionNoticed: false })).rejects.toBeInstanceOf(
          StaleAttemptError,
        );
      });

      it('finds the attempt that owns an instance, and null for an unknown instance', async () => {
        await store.createJob(makeJob('job-1'));
        await store.createJob(makeJob('job-2'));
        await store.putAttempt(makeAttempt('job-1', 1, { instances: [{ instanceId: 'i-early', nodeRank: 0, privateIp: null }] }));
        await store.putAttempt(makeAttempt('job-2', 1));
        await store.setInstances('job-2', 1, { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm5.large' }, [
          { instanceId: 'i-head', nodeRank: 0, privateIp: '10.0.0.1' },
          { instanceId: 'i-worker', nodeRank: 1, privateIp: '10.0.0.2' },
        ]);
        expect(await store.findAttemptByInstance('i-early')).toMatchObject({ jobId: 'job-1', attempt: 1 });
        const found = await store.findAttemptByInstance('i-worker');
        expect(found).toEqual(await store.getAttempt('job-2', 1));
        expect(found?.placement).toEqual({ region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm5.large' });
        expect(await store.findAttemptByInstance('i-nobody')).toBeNull();
      });

      it('records instances once', async () => {
        await runningJobWithAttempt();
        const placement = { region: 'us-east-1', zone: null, instanceType: 'm5.large' };
        await store.setInstances('job-1', 1, placement, [{ instanceId: 'i-1', nodeRank: 0, privateIp: null }]);
        await expect(
          store.setInstances('job-1', 1, placement, [{ instanceId: 'i-2', nodeRank: 0, privateIp: null }]),
        ).rejects.toBeInstanceOf(ConcurrentUpdateError);
        expect((await store.getAttempt('job-1', 1)).instances).toEqual([{ instanceId: 'i-1', nodeRank: 0, privateIp: null }]);
        expect(await store.findAttemptByInstance('i-2')).toBeNull();
      });

      it('stores the task token with its state and returns the attempt, even one that has already ended', async () => {
        await runningJobWithAttempt();
        expect(await store.setTaskToken('job-1', 1, 'token-1', 'AwaitBoot')).toEqual(
          makeAttempt('job-1', 1, { taskToken: 'token-1', tokenState: 'AwaitBoot' }),
        );
        await store.endAttempt('job-1', 1, { kind: 'PREEMPTED' }, T2);
        const after = await store.setTaskToken('job-1', 1, 'token-2', 'AwaitAttempt');
        expect(after).toMatchObject({ taskToken: 'token-2', tokenState: 'AwaitAttempt', outcome: { kind: 'PREEMPTED' }, endedAt: T2 });
        expect(await store.getAttempt('job-1', 1)).toEqual(after);
      });

      it('records heartbeats and their nodes while the attempt is live and refuses them after it ended', async () => {
        await runningJobWithAttempt();
        expect(await store.recordHeartbeat('job-1', 1, T1, 2)).toMatchObject({ lastHeartbeatAt: T1, nodesHeardFrom: [2] });
        expect(await store.recordHeartbeat('job-1', 1, T2, 0)).toMatchObject({ lastHeartbeatAt: T2, nodesHeardFrom: [0, 2] });
        // A node's second beat adds nothing.
        expect((await store.recordHeartbeat('job-1', 1, T2, 2)).nodesHeardFrom).toEqual([0, 2]);
        await store.endAttempt('job-1', 1, exited, T3);
        await expect(store.recordHeartbeat('job-1', 1, T3, 1)).rejects.toBeInstanceOf(StaleAttemptError);
        expect(await store.getAttempt('job-1', 1)).toMatchObject({ lastHeartbeatAt: T2, nodesHeardFrom: [0, 2] });
      });

      it("notes each node's first heartbeat and the job's progress in the heartbeat's write, and the stop asked once", async () => {
        await runningJobWithAttempt();
        await store.recordHeartbeat('job-1', 1, T1, 1);
        await store.recordHeartbeat('job-1', 1, T2, 1, { step: 1200, at: T1, nodeRank: 1 });
        await store.recordHeartbeat('job-1', 1, T2, 0);
        await store.noteStopAsked('job-1', 1, T2);
        await store.endAttempt('job-1', 1, exited, T3);
        await store.noteStopAsked('job-1', 1, T3);

        expect(await store.getAttempt('job-1', 1)).toMatchObject({
          nodeMarks: { '0': { firstHeartbeatAt: T2 }, '1': { firstHeartbeatAt: T1 } },
          progress: { step: 1200, at: T1, nodeRank: 1 },
          stopAskedAt: T2,
        });
      });

      it('notes the instances gone once, after the attempt ended too; absent until then', async () => {
        await runningJobWithAttempt();
        expect((await store.getAttempt('job-1', 1)).instancesGoneAt).toBeUndefined();
        await store.endAttempt('job-1', 1, exited, T2);
        await store.noteInstancesGone('job-1', 1, T3);
        await store.noteInstancesGone('job-1', 1, T0);

        expect((await store.getAttempt('job-1', 1)).instancesGoneAt).toBe(T3);
      });

      race('keeps every node of concurrent first heartbeats', async () => {
        await runningJobWithAttempt();
        await Promise.all(Array.from({ length: 8 }, (_, rank) => store.recordHeartbeat('job-1', 1, T2, rank)));
        expect((await store.getAttempt('job-1', 1)).nodesHeardFrom).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      });

      it('keeps the first interruption notice, and none on an attempt that already ended', async () => {
        await runningJobWithAttempt();
        expect((await store.noteInterruption('job-1', 1, T1)).interruptionNoticedAt).toBe(T1);
        expect((await store.noteInterruption('job-1', 1, T2)).interruptionNoticedAt).toBe(T1);
        await store.putAttempt(makeAttempt('job-1', 2));
        await store.endAttempt('job-1', 2, exited, T2);
        expect((await store.noteInterruption('job-1', 2, T3)).interruptionNoticedAt).toBeNull();
      });

      it('keeps the node the first warning named with it, and none named by a later one', async () => {
        await runningJobWithAttempt();
        expect((await store.getAttempt('job-1', 1)).interruptionNode).toBeUndefined();
        expect((await store.noteInterruption('job-1', 1, T1, 2)).interruptionNode).toBe(2);
        expect((await store.noteInterruption('job-1', 1, T2, 0)).interruptionNode).toBe(2);
        expect((await store.noteRebalance('job-1', 1, T1, 0)).rebalanceNode).toBe(0);
        expect((await store.noteRebalance('job-1', 1, T2, 3)).rebalanceNode).toBe(0);
        const noted = await store.getAttempt('job-1', 1);
        expect([noted.interruptionNoticedAt, noted.interruptionNode, noted.rebalanceNoticedAt, noted.rebalanceNode]).toEqual([T1, 2, T1, 0]);
      });
    });

    describe('reports', () => {
      it('stores each (node, phase) once, in arrival order, and answers a repeat as a duplicate', async () => {
        await runningJobWithAttempt();
        const first = await store.addReport('job-1', 1, report(0, 'setup', 0, 'setup ✓'));
        expect(first.duplicate).toBe(false);
        expect(first.attempt.reports).toEqual([report(0, 'setup', 0, 'setup ✓')]);
        await store.addReport('job-1', 1, report(1, 'run', 3, 'ünïcødé tail 🚀\n'));
        await store.addReport('job-1', 1, report(0, 'run', 0));

        const repeat = await store.addReport('job-1', 1, report(1, 'run', 99, 'a different story'));
        expect(repeat.duplicate).toBe(true);
        const expected = [report(0, 'setup', 0, 'setup ✓'), report(1, 'run', 3, 'ünïcødé tail 🚀\n'), report(0, 'run', 0)];
        expect(repeat.attempt.reports).toEqual(expected);
        expect((await store.getAttempt('job-1', 1)).reports).toEqual(expected);
      });

      it('refuses a new report once the attempt has an outcome, but still answers a repeat as a duplicate', async () => {
        await runningJobWithAttempt();
        await store.addReport('job-1', 1, report(0, 'run', 1));
        await store.endAttempt('job-1', 1, exited, T2);
        await expect(store.addReport('job-1', 1, report(1, 'run', 0))).rejects.toBeInstanceOf(StaleAttemptError);
        const repeat = await store.addReport('job-1', 1, report(0, 'run', 1));
        expect(repeat.duplicate).toBe(true);
        expect((await store.getAttempt('job-1', 1)).reports).toEqual([report(0, 'run', 1)]);
      });

      it('takes a stopped phase (its tail, no code) after the attempt ended, once, and leaves the outcome as it was', async () => {
        await runningJobWithAttempt();
        await store.addReport('job-1', 1, report(0, 'setup', 0));
        await store.endAttempt('job-1', 1, { kind: 'CANCELLED' }, T2);
        const stopped: NodeReport = { nodeRank: 0, phase: 'run', stopped: 'shutdown', outputTail: 'step 3\nsaving ✓\n', reportedAt: T3 };

        expect(await store.addReport('job-1', 1, stopped)).toMatchObject({ duplicate: false, attempt: { outcome: { kind: 'CANCELLED' }, endedAt: T2 } });
        expect((await store.addReport('job-1', 1, stopped)).duplicate).toBe(true);
        // A code is still refused after the end.
        await expect(store.addReport('job-1', 1, report(1, 'run', 0))).rejects.toBeInstanceOf(StaleAttemptError);
        expect((await store.getAttempt('job-1', 1)).reports).toEqual([report(0, 'setup', 0), stopped]);
      });
    });

    describe('ending an attempt', () => {
      it('sets the outcome once; a repeat loses and sees the stored outcome', async () => {
        await runningJobWithAttempt();
        const first = await store.endAttempt('job-1', 1, exited, T2);
        expect(first.won).toBe(true);
        expect(first.attempt).toMatchObject({ outcome: exited, endedAt: T2 });
        const second = await store.endAttempt('job-1', 1, { kind: 'LOST', reason: 'heartbeat lost' }, T3);
        expect(second.won).toBe(false);
        expect(second.attempt).toEqual(first.attempt);
        expect(await store.getAttempt('job-1', 1)).toEqual(first.attempt);
      });

      it('ends on the facts it was decided on, and refuses, changing nothing, once a report was added since', async () => {
        await runningJobWithAttempt();
        await store.addReport('job-1', 1, report(0, 'setup', 0));
        const basis = basisOf(await store.getAttempt('job-1', 1));
        expect(basis).toEqual({ reports: 1, interruptionNoticed: false });
        await store.addReport('job-1', 1, report(0, 'run', 0));

        const refused = await store.endAttempt('job-1', 1, { kind: 'LOST', reason: 'instance gone' }, T2, basis);
        expect(refused.won).toBe(false);
        expect(refused.attempt).toMatchObject({ outcome: null, endedAt: null, reports: [report(0, 'setup', 0), report(0, 'run', 0)] });
        expect(await store.getAttempt('job-1', 1)).toEqual(refused.attempt);

        const won = await store.endAttempt('job-1', 1, exited, T3, { reports: 2, interruptionNoticed: false });
        expect(won.won).toBe(true);
        expect(won.attempt).toMatchObject({ outcome: exited, endedAt: T3 });
      });

      it('refuses an end decided with no warning once one was noted, and ends on a basis that has it', async () => {
        await runningJobWithAttempt();
        await store.addReport('job-1', 1, report(0, 'run', 1));
        await store.noteInterruption('job-1', 1, T1);

        const refused = await store.endAttempt('job-1', 1, exited, T2, { reports: 1, interruptionNoticed: false });
        expect(refused).toMatchObject({ won: false, attempt: { outcome: null, interruptionNoticedAt: T1 } });

        const won = await store.endAttempt('job-1', 1, { kind: 'PREEMPTED' }, T2, { reports: 1, interruptionNoticed: true });
        expect(won).toMatchObject({ won: true, attempt: { outcome: { kind: 'PREEMPTED' }, interruptionNoticedAt: T1 } });
        const late = await store.endAttempt('job-1', 1, exited, T3, { reports: 1, interruptionNoticed: true });
        expect(late).toMatchObject({ won: false, attempt: { outcome: { kind: 'PREEMPTED' }, endedAt: T2 } });
      });

      it('refuses an end whose basis holds a warning the attempt does not have', async () => {
        await runningJobWithAttempt();
        const refused = await store.endAttempt('job-1', 1, { kind: 'PREEMPTED' }, T2, { reports: 0, interruptionNoticed: true });
        expect(refused).toMatchObject({ won: false, attempt: { outcome: null } });
      });

      race('lets a report and an end decided before it race: either the report is stored and the end refused, or the reverse', async () => {
        await runningJobWithAttempt();
        const basis = basisOf(await store.getAttempt('job-1', 1));
        const [added, ended] = await Promise.allSettled([
          store.addReport('job-1', 1, report(0, 'run', 0)),
          store.endAttempt('job-1', 1, { kind: 'LOST', reason: 'instance gone' }, T2, basis),
        ]);
        const stored = await store.getAttempt('job-1', 1);
        if (added.status === 'fulfilled') {
          expect(ended).toMatchObject({ status: 'fulfilled', value: { won: false } });
          expect(stored).toMatchObject({ outcome: null, reports: [report(0, 'run', 0)] });
        } else {
          expect(added.reason).toBeInstanceOf(StaleAttemptError);
          expect(ended).toMatchObject({ status: 'fulfilled', value: { won: true } });
          expect(stored).toMatchObject({ outcome: { kind: 'LOST' }, reports: [] });
        }
      });

      race('lets exactly one of two racing ends win', async () => {
        await runningJobWithAttempt();
        const results = await Promise.all([
          store.endAttempt('job-1', 1, exited, T2),
          store.endAttempt('job-1', 1, { kind: 'PREEMPTED' }, T3),
        ]);
        expect(results.filter((r) => r.won)).toHaveLength(1);
        const winner = results.find((r) => r.won);
        const stored = await store.getAttempt('job-1', 1);
        expect(stored).toEqual(winner?.attempt);
        expect(results.find((r) => !r.won)?.attempt).toEqual(stored);
      });
    });

    describe('decisions', () => {
      async function endedAttempt(): Promise<void> {
        await runningJobWithAttempt();
        await store.endAttempt('job-1', 1, exited, T2);
      }

      it('stores the decision, the counters, the status and the EVENT row together', async () => {
        await endedAttempt();
        const transition = change('RUNNING', 'RECOVERING', { reason: restartDecision.reason, attempt: 1, at: T3 });
        const updated = await store.recordDecision('job-1', 1, restartDecision, chargedCounters, transition);
        expect(updated).toMatchObject({ status: 'RECOVERING', counters: chargedCounters, updatedAt: T3, attemptCount: 1 });
        expect(await store.getJob('job-1')).toEqual(updated);
        expect((await store.getAttempt('job-1', 1)).decision).toEqual(restartDecision);
        expect((await store.listEvents('job-1')).at(-1)).toEqual({
          jobId: 'job-1',
          at: T3,
          from: 'RUNNING',
          to: 'RECOVERING',
          attempt: 1,
          reason: restartDecision.reason,
        });
      });

      it('sets the failure reason in the same write when given one, and leaves it alone otherwise', async () => {
        await endedAttempt();
        const fail: StoredDecision = { ...restartDecision, action: 'FAIL', rule: 'ERROR_BUDGET_EXHAUSTED', status: JobStatus.FAILED };
        const updated = await store.recordDecision('job-1', 1, fail, chargedCounters, change('RUNNING', 'FAILED'), {
          failureReason: 'exit code 1; no restarts left ✗',
        });
        expect(updated).toMatchObject({ status: 'FAILED', failureReason: 'exit code 1; no restarts left ✗' });
        expect(await store.getJob('job-1')).toEqual(updated);

        await runningJobWithAttempt('job-2');
        await store.endAttempt('job-2', 1, exited, T2);
        await store.recordDecision('job-2', 1, restartDecision, chargedCounters, change('RUNNING', 'RECOVERING'));
        expect((await store.getJob('job-2')).failureReason).toBeNull();
      });

      it("moves a pipeline to its next task in the same write: the task's spec and the pipeline's place", async () => {
        await endedAttempt();
        const before = await store.getJob('job-1');
        const next = { ...before.spec, name: 'second', numNodes: 3 };
        const pipeline = { name: 'p ✓', tasks: [before.spec, next], current: 1 };
        const moveOn: StoredDecision = { ...restartDecision, action: 'NEXT_TASK', rule: 'ALL_EXITED_ZERO', status: JobStatus.PENDING };

        const updated = await store.recordDecision('job-1', 1, moveOn, chargedCounters, change('RUNNING', 'PENDING'), { nextTask: { spec: next, pipeline } });

        expect(updated).toMatchObject({ status: 'PENDING', spec: next, pipeline, counters: chargedCounters });
        expect(await store.getJob('job-1')).toEqual(updated);
      });

      it('writes nothing when the job is not in the expected status', async () => {
        await endedAttempt();
        const jobBefore = await store.getJob('job-1');
        const eventsBefore = await store.listEvents('job-1');
        await expect(
          store.recordDecision('job-1', 1, restartDecision, chargedCounters, change('STARTING', 'RECOVERING')),
        ).rejects.toBeInstanceOf(ConcurrentUpdateError);
        expect(await store.getJob('job-1')).toEqual(jobBefore);
        expect((await store.getAttempt('job-1', 1)).decision).toBeNull();
        expect(await store.listEvents('job-1')).toEqual(eventsBefore);
      });

      it('writes nothing when the attempt already has a decision', async () => {
        await endedAttempt();
        await store.recordDecision('job-1', 1, restartDecision, chargedCounters, change('RUNNING', 'RECOVERING'));
        await store.changeStatus('job-1', change('RECOVERING', 'STARTING'));
        const jobBefore = await store.getJob('job-1');
        const eventsBefore = await store.listEvents('job-1');
        const other: StoredDecision = { ...restartDecision, action: 'FAIL', status: JobStatus.FAILED };
        await expect(
          store.recordDecision('job-1', 1, other, { ...chargedCounters, restartsOnErrors: 2 }, change('STARTING', 'FAILED')),
        ).rejects.toBeInstanceOf(ConcurrentUpdateError);
        expect(await store.getJob('job-1')).toEqual(jobBefore);
        expect((await store.getAttempt('job-1', 1)).decision).toEqual(restartDecision);
        expect(await store.listEvents('job-1')).toEqual(eventsBefore);
      });

      it('writes nothing for an attempt the job does not have', async () => {
        await endedAttempt();
        const jobBefore = await store.getJob('job-1');
        const eventsBefore = await store.listEvents('job-1');
        await expect(
          store.recordDecision('job-1', 2, restartDecision, chargedCounters, change('RUNNING', 'RECOVERING')),
        ).rejects.toBeInstanceOf(StaleAttemptError);
        expect(await store.getJob('job-1')).toEqual(jobBefore);
        expect(await store.listEvents('job-1')).toEqual(eventsBefore);
      });

      race('lets exactly one of two racing decisions win', async () => {
        await endedAttempt();
        const results = await Promise.allSettled([
          store.recordDecision('job-1', 1, restartDecision, chargedCounters, change('RUNNING', 'RECOVERING')),
          store.recordDecision(
            'job-1',
            1,
            { ...restartDecision, action: 'FAIL', status: JobStatus.FAILED },
            chargedCounters,
            change('RUNNING', 'FAILED'),
          ),
        ]);
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
        const lost = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
        expect(lost.reason).toBeInstanceOf(ConcurrentUpdateError);
        const job = await store.getJob('job-1');
        expect((await store.getAttempt('job-1', 1)).decision?.status).toBe(job.status);
        expect((await store.listEvents('job-1')).filter((e) => e.from === 'RUNNING')).toHaveLength(1);
      });
    });

    describe('standbys', () => {
      /** Attempt 2 of job-1 started as the standby of attempt 1, on an interruption warning. */
      function standby(overrides: Partial<AttemptRecord> = {}): AttemptRecord {
        return makeAttempt('job-1', 2, { standby: { for: 1, on: 'interruption' }, ...overrides });
      }

      it('starts a standby beside the live attempt, which stays the live one, and gives it back as it was given', async () => {
        await runningJobWithAttempt();
        await store.putStandby(standby());
        expect((await store.getJob('job-1')).attemptCount).toBe(1);
        expect(await store.getAttempt('job-1', 2)).toEqual(standby());
        expect((await store.listAttempts('job-1')).map((a) => a.attempt)).toEqual([1, 2]);
        // Fields only some attempts have are absent on the others, never null.
        expect(await store.getAttempt('job-1', 1)).toEqual(makeAttempt('job-1', 1));
      });

      it.each<[string, () => AttemptRecord]>([
        ['for an attempt that is not the live one', () => makeAttempt('job-1', 3, { standby: { for: 2, on: 'interruption' } })],
        ['numbered other than right after the attempt it is for', () => makeAttempt('job-1', 3, { standby: { for: 1, on: 'rebalance' } })],
        ['without a mark', () => makeAttempt('job-1', 2)],
      ])('refuses a standby %s', async (_name, make) => {
        await runningJobWithAttempt();
        await expect(store.putStandby(make())).rejects.toBeInstanceOf(ConcurrentUpdateError);
        expect((await store.listAttempts('job-1')).map((a) => a.attempt)).toEqual([1]);
      });

      it('refuses a second standby of the same number and keeps the first', async () => {
        await runningJobWithAttempt();
        await store.putStandby(standby());
        await expect(store.putStandby(standby({ secretHash: 'b'.repeat(64) }))).rejects.toBeInstanceOf(ConcurrentUpdateError);
        expect((await store.getAttempt('job-1', 2)).secretHash).toBe('a'.repeat(64));
      });

      it('takes heartbeats and reports of a standby that holds, and finds it by its instances', async () => {
        await runningJobWithAttempt();
        await store.putStandby(standby());
        await store.setInstances('job-1', 2, { region: 'us-east-1', zone: 'us-east-1b', instanceType: 'm5.large' }, [{ instanceId: 'i-standby', nodeRank: 0, privateIp: null }]);
        expect((await store.recordHeartbeat('job-1', 2, T2, 0)).nodesHeardFrom).toEqual([0]);
        expect((await store.addReport('job-1', 2, report(0, 'setup', 0))).duplicate).toBe(false);
        expect((await store.findAttemptByInstance('i-standby'))?.attempt).toBe(2);
      });

      it('adopts a standby once: the job moves on to it, and it says when', async () => {
        await runningJobWithAttempt();
        await store.putStandby(standby());
        const adopted = await store.adoptStandby('job-1', 2, T3);
        expect(adopted.standby).toEqual({ for: 1, on: 'interruption', adoptedAt: T3 });
        expect((await store.getJob('job-1')).attemptCount).toBe(2);
        await expect(store.adoptStandby('job-1', 2, T3)).rejects.toBeInstanceOf(ConcurrentUpdateError);
        expect((await store.releaseStandby('job-1', 2, T3, 'too late')).released).toBe(false);
        expect((await store.getAttempt('job-1', 2)).standby).toEqual({ for: 1, on: 'interruption', adoptedAt: T3 });
      });

      it("adopts a standby of the warned node alone with the nodes kept beside it: in its instances and found by them, in the adoption's one write", async () => {
        await runningJobWithAttempt();
        const placement = { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm5.large' };
        const old = [0, 1, 2].map((rank) => ({ instanceId: `i-old-${rank}`, nodeRank: rank, privateIp: `10.0.0.${rank + 1}` }));
        await store.setInstances('job-1', 1, placement, old);
        const beside = [old[0], old[2]] as InstanceRef[];
        await store.putStandby(standby({ standby: { for: 1, on: 'interruption', beside } }));
        await store.setInstances('job-1', 2, placement, [{ instanceId: 'i-new-1', nodeRank: 1, privateIp: '10.0.0.9' }]);
        expect((await store.findAttemptByInstance('i-old-0'))?.attempt).toBe(1);

        const kept = beside.map((node) => ({ ...node, reusedFrom: 1, runningAt: T3 }));
        const adopted = await store.adoptStandby('job-1', 2, T3, kept);
        expect(adopted.instances.map((node) => [node.instanceId, node.nodeRank, node.reusedFrom])).toEqual([
          ['i-old-0', 0, 1],
          ['i-new-1', 1, undefined],
          ['i-old-2', 2, 1],
        ]);
        expect(adopted.standby).toEqual({ for: 1, on: 'interruption', beside, adoptedAt: T3 });
        expect(await store.getAttempt('job-1', 2)).toEqual(adopted);
        // An EC2 event on a kept node ends the attempt it serves now.
        expect((await store.findAttemptByInstance('i-old-0'))?.attempt).toBe(2);
        expect((await store.findAttemptByInstance('i-old-2'))?.attempt).toBe(2);
        expect((await store.findAttemptByInstance('i-old-1'))?.attempt).toBe(1);
        // A second adoption is refused and moves nothing.
        await expect(store.adoptStandby('job-1', 2, T3, kept)).rejects.toBeInstanceOf(ConcurrentUpdateError);
        expect((await store.getAttempt('job-1', 2)).instances).toHaveLength(3);
      });

      it('releases a standby once, ended then, and refuses its heartbeats and new reports after', async () => {
        await runningJobWithAttempt();
        await store.putStandby(standby());
        await store.addReport('job-1', 2, report(0, 'setup', 0));
        const first = await store.releaseStandby('job-1', 2, T2, 'not needed: attempt 1 succeeded');
        expect(first.released).toBe(true);
        expect(first.attempt.standby).toEqual({ for: 1, on: 'interruption', releasedAt: T2, releaseReason: 'not needed: attempt 1 succeeded' });
        expect(first.attempt.endedAt).toBe(T2);
        expect(first.attempt.outcome).toBeNull();
        const again = await store.releaseStandby('job-1', 2, T3, 'another reason');
        expect(again).toEqual({ attempt: first.attempt, released: false });
        await expect(store.recordHeartbeat('job-1', 2, T3, 0)).rejects.toBeInstanceOf(StaleAttemptError);
        await expect(store.addReport('job-1', 2, report(0, 'run', 0))).rejects.toBeInstanceOf(StaleAttemptError);
        // The agent retrying the report it already sent is still answered as a duplicate.
        expect((await store.addReport('job-1', 2, report(0, 'setup', 0))).duplicate).toBe(true);
        await expect(store.adoptStandby('job-1', 2, T3)).rejects.toBeInstanceOf(ConcurrentUpdateError);
        expect((await store.getJob('job-1')).attemptCount).toBe(1);
      });

      it('keeps the end of a standby that ended before it was released', async () => {
        await runningJobWithAttempt();
        await store.putStandby(standby());
        await store.addReport('job-1', 2, report(0, 'setup', 1));
        await store.endAttempt('job-1', 2, { kind: 'EXITED', phase: 'setup', nodes: [{ rank: 0, exitCode: 1 }] }, T1);
        const { attempt } = await store.releaseStandby('job-1', 2, T3, 'not needed');
        expect(attempt.endedAt).toBe(T1);
        expect(attempt.outcome?.kind).toBe('EXITED');
      });

      it('retires only a released standby, moving the job past it so the next launch follows it', async () => {
        await runningJobWithAttempt();
        await store.putStandby(standby());
        await expect(store.retireStandby('job-1', 2)).rejects.toBeInstanceOf(ConcurrentUpdateError);
        await store.releaseStandby('job-1', 2, T2, 'not launched: no capacity');
        await store.retireStandby('job-1', 2);
        expect((await store.getJob('job-1')).attemptCount).toBe(2);
        await expect(store.retireStandby('job-1', 2)).rejects.toBeInstanceOf(ConcurrentUpdateError);
        await store.putAttempt(makeAttempt('job-1', 3));
        expect((await store.getJob('job-1')).attemptCount).toBe(3);
      });

      race('lets one of two racing writers settle a standby: adopted or released, never both', async () => {
        await runningJobWithAttempt();
        await store.putStandby(standby());
        const [adopt, release] = await Promise.allSettled([store.adoptStandby('job-1', 2, T2), store.releaseStandby('job-1', 2, T2, 'not needed')]);
        const adopted = adopt.status === 'fulfilled';
        const released = release.status === 'fulfilled' && release.value.released;
        expect(adopted !== released).toBe(true);
        const stored = (await store.getAttempt('job-1', 2)).standby;
        expect(stored?.adoptedAt !== undefined).toBe(adopted);
        expect(stored?.releasedAt !== undefined).toBe(released);
        expect((await store.getJob('job-1')).attemptCount).toBe(adopted ? 2 : 1);
      });

      it('keeps the first rebalance recommendation and the first run start, and notes none on an ended attempt', async () => {
        await runningJobWithAttempt();
        expect((await store.noteRebalance('job-1', 1, T1)).rebalanceNoticedAt).toBe(T1);
        expect((await store.noteRebalance('job-1', 1, T2)).rebalanceNoticedAt).toBe(T1);
        expect((await store.getAttempt('job-1', 1)).interruptionNoticedAt).toBeNull();
        await store.noteRunStart('job-1', 1, T2);
        await store.noteRunStart('job-1', 1, T3);
        expect((await store.getAttempt('job-1', 1)).runStartedAt).toBe(T2);
        await store.putAttempt(makeAttempt('job-1', 2));
        await store.endAttempt('job-1', 2, exited, T2);
        expect((await store.noteRebalance('job-1', 2, T3)).rebalanceNoticedAt).toBeUndefined();
      });
    });

    describe('idempotency claims', () => {
      const KEY = 'a'.repeat(64);
      const claim = (jobId: string, overrides: Partial<IdempotencyClaim> = {}): IdempotencyClaim => ({
        key: KEY,
        jobId,
        fingerprint: 'f1',
        expiresAt: T2,
        ...overrides,
      });

      it('creates the job with its creation row and holds the key for it', async () => {
        const held = await store.createJobOnce(makeJob('job-1'), claim('job-1'), T0);
        expect(held).toEqual(claim('job-1'));
        expect((await store.getJob('job-1')).status).toBe(JobStatus.PENDING);
        expect((await store.listEvents('job-1')).map((e) => e.reason)).toEqual([JOB_CREATED_REASON]);
      });

      it('answers a second claim on a held key with the first, and creates nothing', async () => {
        await store.createJobOnce(makeJob('job-1'), claim('job-1'), T0);
        const held = await store.createJobOnce(makeJob('job-2'), claim('job-2', { fingerprint: 'f2' }), T1);
        expect(held).toEqual(claim('job-1'));
        await expect(store.getJob('job-2')).rejects.toBeInstanceOf(JobNotFoundError);
        expect((await store.listJobs()).map((j) => j.jobId)).toEqual(['job-1']);
      });

      it('lets a new job take a key whose claim has lapsed (at expiresAt exactly)', async () => {
        await store.createJobOnce(makeJob('job-1'), claim('job-1'), T0);
        const held = await store.createJobOnce(makeJob('job-2'), claim('job-2', { expiresAt: T3 }), T2);
        expect(held).toEqual(claim('job-2', { expiresAt: T3 }));
        expect((await store.getJob('job-2')).jobId).toBe('job-2');
        expect(await store.createJobOnce(makeJob('job-3'), claim('job-3'), T2)).toMatchObject({ jobId: 'job-2' });
      });

      it('keeps keys apart', async () => {
        await store.createJobOnce(makeJob('job-1'), claim('job-1'), T0);
        const held = await store.createJobOnce(makeJob('job-2'), claim('job-2', { key: 'b'.repeat(64) }), T0);
        expect(held.jobId).toBe('job-2');
        expect(await store.listJobs()).toHaveLength(2);
      });

      it('refuses a job id that exists and leaves the key free', async () => {
        await store.createJob(makeJob('job-1'));
        await expect(store.createJobOnce(makeJob('job-1'), claim('job-1'), T0)).rejects.toBeInstanceOf(ConcurrentUpdateError);
        expect(await store.createJobOnce(makeJob('job-2'), claim('job-2'), T0)).toMatchObject({ jobId: 'job-2' });
      });

      race('lets exactly one of two racing claims on a key create its job; the other sees it or lost the race', async () => {
        const results = await Promise.allSettled([
          store.createJobOnce(makeJob('job-1'), claim('job-1'), T0),
          store.createJobOnce(makeJob('job-2'), claim('job-2'), T0),
        ]);
        const jobs = await store.listJobs();
        expect(jobs).toHaveLength(1);
        for (const result of results) {
          if (result.status === 'fulfilled') expect(result.value.jobId).toBe(jobs[0]?.jobId);
          else expect(result.reason).toBeInstanceOf(ConcurrentUpdateError);
        }
      });
    });
  });
}
