// The embedded runtime: the controller's ASL on aws-local-stepfunctions, each node a local
// process group running the real agent against the local API, EC2's events emitted by the
// local compute, and dynalite persisted under a data folder, all wired to the same use
// cases the Lambdas run.

import { removeContainer } from './docker.ts';
import { localTaskProblems } from './mounts.ts';
import { FileJobSecrets } from './file-job-secrets.ts';
import { Agent } from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { mkdirSync } from 'node:fs';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { StateMachineDefinition } from 'aws-local-stepfunctions';
import { readControllerAsl } from '../infra/controller-asl.ts';
import { DynamoJobStore } from '../lib/adapters/dynamo-job-store/index.ts';
import { DynamoLaunchPace } from '../lib/adapters/dynamo-launch-pace.ts';
import { EC2_LAUNCH_PACE, type LaunchPaceConfig } from '../lib/launch-pace.ts';
import { ensureTable, startDynalite, type LocalDynamo } from './dynalite.ts';
import { InvalidInputError, RelaunchError, StaleAttemptError, TransientError } from '../lib/errors.ts';
import { isStopped, type AttemptRecord, type JobRecord } from '../lib/model.ts';
import type { Clock, Random, Workflow } from '../lib/ports.ts';
import { isTerminal, JobStatus } from '../lib/status.ts';
import { errorMessage, nowIso } from '../lib/usecases/deps.ts';
import { settleAttempt } from '../lib/usecases/settle-attempt.ts';
import { leftReports } from './left-reports.ts';
import { FileJobLogs } from './file-job-logs.ts';
import {
  cancelJob,
  deleteTransientMounts,
  evaluatePolicy,
  onExecutionEnded,
  onInstanceEvent,
  recordControllerFailure,
  releaseInstances,
  submitJob,
  type SubmitJobResult,
  type UseCaseDeps,
} from '../lib/usecases/index.ts';
import { BOOT_TIMEOUT_SECONDS_PATH, HEARTBEAT_TIMEOUT_SECONDS, StateName } from '../lib/workflow/contract.ts';
import { AwaitTaskInputSchema, awaitAttemptTask, controllerTasks } from '../lib/usecases/task-handlers.ts';
import type { ChaosPlan } from '../lib/chaos-file/types.ts';
import { mergeChaos, NO_CHAOS } from './chaos.ts';
import { LocalJobBuckets } from './job-buckets.ts';
import { LocalWorkflow, type LocalExecutionResult, type LocalTaskHandler, type TaskClock } from './local-workflow.ts';
import { LocalProcessCompute } from './process-compute.ts';
import { killMarked } from './process-groups.ts';
import { LocalApiServer } from './server.ts';
import { DataDirInUseError, lockFileIdentity, OwnerLock, ownerLockPath } from './owner-lock.ts';
import { liveOwnerInfo, removeServerInfo, untrustedMessage, type OwnerRole } from './server-info.ts';

/** The table's name in the local DynamoDB. */
export const LOCAL_TABLE_NAME = 'relaunch-jobs';

/** Options of the local runtime. */
export interface LocalRuntimeOptions {
  /** The data folder: the database, logs and jobs' working folders. @default `.relaunch` */
  readonly dataDir: string;
  /** Keep the database in memory (tests); logs still go to dataDir. @default false */
  readonly inMemory?: boolean;
  /** A waiting attempt with no heartbeat for this long is lost. @default HEARTBEAT_TIMEOUT_SECONDS */
  readonly heartbeatTimeoutMs?: number;
  /** How often a local node's agent beats. @default 30000 */
  readonly heartbeatIntervalMs?: number;
  /** The API's port on 127.0.0.1 (0: any free one). @default 0 */
  readonly port?: number;
  /**
   * Who opens the folder, as server.json tells other commands: a runtime that does not
   * take jobs refuses `POST /jobs` from them (it closes when its own work is done).
   * @default { command: 'serve', takesJobs: true }
   */
  readonly role?: OwnerRole;
  /** Faults to inject into every job (`relaunch serve --chaos`). @default none */
  readonly chaos?: ChaosPlan;
  /** The launch pace's bucket. @default EC2_LAUNCH_PACE */
  readonly launchPace?: LaunchPaceConfig;
  readonly clock?: Clock;
  readonly random?: Random;
  /** Every state the controller enters, for progress output and transition counts. */
  readonly onTransition?: (executionName: string, stateName: string) => void;
  /** Errors no caller is waiting for (an EC2 event or a janitor's write that failed). */
  readonly onError?: (error: unknown) => void;
  /** What opening the folder repaired (a write a crash cut in half), one line each. */
  readonly onNotice?: (message: string) => void;
}

/** What `submit` may add to a task. */
export interface LocalSubmitOptions {
  readonly envOverrides?: Readonly<Record<string, string>>;
  /** Secrets given at submit (`--secret`), stored apart from the job. */
  readonly secretOverrides?: Readonly<Record<string, string>>;
  /** Faults to inject into this job's attempts (`relaunch run --chaos`). */
  readonly chaos?: ChaosPlan;
  /**
   * The caller's idempotency key: a submit with a key already used answers that job (a
   * command retrying a submit it gave up on gets the job the first try made).
   */
  readonly idempotencyKey?: string;
}

/** Whose idempotency keys the local runtime's submits are: one user's commands on one machine. */
const LOCAL_CALLER = 'local';

/**
 * The longest timer the local engine can set (Node's setTimeout holds 2^31-1 ms). A Task
 * with no TimeoutSeconds gets 60 s from the engine; on AWS it has none, so AwaitAttempt
 * is given this instead: its heartbeat timeout stays the only clock of an attempt.
 */
export const LOCAL_MAX_TASK_SECONDS = Math.floor((2 ** 31 - 1) / 1000);

/** The janitor's pauses between tries of a write the database refused. */
const JANITOR_FIRST_RETRY_MS = 500;
const JANITOR_MAX_RETRY_MS = 10_000;

const systemClock: Clock = { now: () => new Date() };

/** One runtime per data folder: it owns the database while open. */
export class LocalRuntime {
  private closed = false;
  /** Aborted by close: ends the janitor's pauses at once. */
  private readonly closing = new AbortController();
  private server: LocalApiServer | null = null;
  /** Janitor runs not finished yet, by job: close and waitForJob wait for them. */
  private readonly cleanups = new Map<string, Promise<unknown>>();

  private constructor(
    private readonly lock: OwnerLock,
    private readonly dynamo: LocalDynamo,
    private readonly plans: Map<string, ChaosPlan>,
    private readonly client: DynamoDBClient,
    readonly deps: UseCaseDeps & { readonly store: DynamoJobStore; readonly compute: LocalProcessCompute; readonly workflow: LocalWorkflow },
    readonly dataDir: string,
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Where the runtime serves its API (and its nodes' network). */
  get url(): string {
    if (this.server === null) throw new Error('the local runtime is not serving');
    return this.server.url;
  }

  /**
   * Opens the data folder: takes its lock (one owner at a time), starts dynalite on it,
   * creates the table on first use, stops the processes of any job a previous runtime
   * left live and ends that job FAILED_CONTROLLER, then serves the API on 127.0.0.1.
   *
   * @throws DataDirInUseError when another process owns the folder.
   */
  static async open(options: LocalRuntimeOptions): Promise<LocalRuntime> {
    const dataDir = path.resolve(options.dataDir);
    mkdirSync(dataDir, { recursive: true });
    const lock = OwnerLock.tryAcquire(dataDir);
    if (lock === null) throw new DataDirInUseError(dataDir);
    try {
      // A live process's server.json beside a lock this process could take: the lock file
      // was removed or replaced under that owner (or flock locks nothing). Refused, and the
      // file left to the process that wrote it.
      const live = liveOwnerInfo(dataDir);
      if (live !== null) {
        const why = lockFileIdentity(dataDir) === live.lock ? 'its lock could be taken by another process' : `its lock file ${ownerLockPath(dataDir)} was removed or replaced`;
        throw new InvalidInputError([{ path: '--data-dir', message: untrustedMessage(dataDir, live, why) }]);
      }
      // Whatever a crashed owner left there names a process that no longer owns the folder.
      removeServerInfo(dataDir);
      return await LocalRuntime.openOwned(options, dataDir, lock);
    } catch (error) {
      lock.release();
      throw error;
    }
  }

  private static async openOwned(options: LocalRuntimeOptions, dataDir: string, lock: OwnerLock): Promise<LocalRuntime> {
    const dynamo = await startDynalite(options.inMemory === true ? {} : { path: path.join(dataDir, 'db') });
    const client = new DynamoDBClient({
      endpoint: dynamo.endpoint,
      region: 'local',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      // Hundreds of jobs share this client. With the SDK's default of 50 sockets their
      // writes wait for one and the SDK prints a capacity warning for each burst; dynalite
      // serves one request at a time either way, so this is about the warnings, not speed.
      requestHandler: { httpAgent: new Agent({ keepAlive: true, maxSockets: 1024 }) },
    });
    try {
      return await LocalRuntime.assemble(options, dataDir, lock, dynamo, client);
    } catch (error) {
      client.destroy();
      await dynamo.close();
      throw error;
    }
  }

  private static async assemble(
    options: LocalRuntimeOptions,
    dataDir: string,
    lock: OwnerLock,
    dynamo: LocalDynamo,
    client: DynamoDBClient,
  ): Promise<LocalRuntime> {
    await ensureTable(client, LOCAL_TABLE_NAME);
    const store = new DynamoJobStore({ client, tableName: LOCAL_TABLE_NAME });
    const clock = options.clock ?? systemClock;
    const random = options.random ?? Math.random;
    const onError = options.onError ?? (() => undefined);

    // The compute reports through the use cases, which need the workflow, which needs the
    // task handlers, which need the compute: the closures below read `deps` and `runtime`
    // only once they exist.
    const plans = new Map<string, ChaosPlan>();
    const compute = new LocalProcessCompute({
      dataDir,
      apiUrl: () => runtime.url,
      events: async (event) => {
        await onInstanceEvent(event, deps);
      },
      chaos: (jobId) => mergeChaos(options.chaos ?? NO_CHAOS, plans.get(jobId) ?? NO_CHAOS),
      heartbeatIntervalMs: options.heartbeatIntervalMs,
      heartbeatTimeoutMs: options.heartbeatTimeoutMs,
      onError,
    });
    const workflow = new LocalWorkflow({
      definition: localControllerDefinition(),
      tasks: () => localTasks(deps),
      heartbeatTimeoutMs: options.heartbeatTimeoutMs ?? HEARTBEAT_TIMEOUT_SECONDS * 1000,
      onTransition: options.onTransition,
      onEnded: (execution, result) => runtime.executionEnded(execution, result),
    });
    // The same bucket as on AWS, in the local table: locally it is seldom reached (EC2's
    // 1,000 instances at once), but a test or a sweep can size it with launchPace.
    const pace = new DynamoLaunchPace({ client, tableName: LOCAL_TABLE_NAME, config: options.launchPace ?? EC2_LAUNCH_PACE });
    const deps: LocalRuntime['deps'] = { store, compute, workflow, clock, random, secrets: new FileJobSecrets(dataDir), pace };
    const runtime = new LocalRuntime(lock, dynamo, plans, client, deps, dataDir, onError);
    const notice = options.onNotice ?? (() => undefined);
    for (const undone of dynamo.undone) notice(`repaired the database of ${dataDir}: ${undone}`);
    await runtime.endOrphans(notice);
    runtime.server = await LocalApiServer.start({
      deps: { ...deps, computeProblems: localTaskProblems(dataDir), jobLogs: new FileJobLogs(dataDir) },
      nodes: compute,
      dataDir,
      port: options.port,
      role: options.role ?? { command: 'serve', takesJobs: true },
      lockIdentity: lock.identity,
      submit: (task, submitOptions) => runtime.submit(task, submitOptions),
      onError,
    });
    return runtime;
  }

  /** Submits a task (YAML text) and starts its execution. */
  async submit(body: string, options: LocalSubmitOptions = {}): Promise<SubmitJobResult> {
    const { workflow } = this.deps;
    // The job's faults must be known before its execution can reach its first launch.
    const registering: Workflow = {
      start: async (name, input) => {
        if (options.chaos !== undefined) this.plans.set(input.jobId, options.chaos);
        return workflow.start(name, input);
      },
      resume: (token, output) => workflow.resume(token, output),
      fail: (token, error, cause) => workflow.fail(token, error, cause),
      heartbeat: (token) => workflow.heartbeat(token),
      stopBetweenSteps: (arn, cause) => workflow.stopBetweenSteps(arn, cause),
    };
    const input = {
      body,
      envOverrides: options.envOverrides ?? {},
      secretOverrides: options.secretOverrides ?? {},
      computeProblems: localTaskProblems(this.dataDir),
      ...(options.idempotencyKey === undefined ? {} : { idempotency: { key: options.idempotencyKey, caller: LOCAL_CALLER } }),
    };
    return submitJob(input, { ...this.deps, workflow: registering });
  }

  /** Resolves when the job's execution (and any it continued as) has ended. */
  async waitForJob(jobId: string): Promise<LocalExecutionResult> {
    for (;;) {
      const job = await this.deps.store.getJob(jobId);
      const name = job.executionArn === null ? jobId : job.executionArn.slice(job.executionArn.lastIndexOf(':') + 1);
      const result = await this.deps.workflow.result(name);
      // An execution that ended outside its end states leaves the job to the janitor.
      await this.cleanups.get(jobId);
      const after = await this.deps.store.getJob(jobId);
      if (after.executionArn === job.executionArn || isTerminal(after.status)) return result;
    }
  }

  /**
   * Stops taking jobs from other commands over the API (a background runtime about to
   * exit); resolves once the submissions already taken are stored.
   */
  async stopTakingJobs(): Promise<void> {
    await this.server?.stopTakingJobs();
  }

  /** When a command (not a node's agent) last called the runtime's API, in ms since the epoch. */
  get lastClientAt(): number {
    return this.server?.lastClientAt ?? Date.now();
  }

  /** Takes jobs over the API again. */
  resumeTakingJobs(): void {
    this.server?.resumeTakingJobs();
  }

  /** Cancels a job through the same use case `DELETE /jobs/{id}` runs. */
  async cancel(jobId: string): Promise<string> {
    return (await cancelJob(jobId, this.deps)).status;
  }

  /**
   * Stops every execution, kills every node's processes, closes the database and lets the
   * folder's lock go, last. Jobs still live stay so in the table: the next runtime on this
   * folder ends them.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.closing.abort();
    try {
      this.deps.workflow.stopAll();
      await this.deps.compute.releaseAll();
      await this.server?.close();
      await Promise.all([...this.cleanups.values()]);
      this.client.destroy();
      await this.dynamo.close();
    } finally {
      // server.json goes before the lock, so no reader believes it once another may own the folder.
      removeServerInfo(this.dataDir);
      this.lock.release();
    }
  }

  /**
   * The local janitor (what the EventBridge rules on "Execution Status Change" do on AWS):
   * an execution that ended outside its own end states, a cancel's stop during a backoff
   * among them, leaves its job to `onExecutionEnded`; then, whatever the end, the job's
   * `persistent: false` mounts are deleted.
   */
  private executionEnded(execution: { arn: string; jobId: string }, result: LocalExecutionResult): void {
    if (this.closed) return;
    const event = { jobId: execution.jobId, executionArn: execution.arn, status: result.status, error: result.error, cause: result.cause };
    const finish = async (): Promise<void> => {
      if (result.status !== 'SUCCEEDED') await this.retryUntilStored(() => onExecutionEnded(event, this.deps));
      // Once the job has ended: what its mounts said not to keep (the second EventBridge rule on AWS).
      await this.deleteTransientMounts(event);
    };
    const cleanup: Promise<void> = finish().finally(() => {
      if (this.cleanups.get(execution.jobId) === cleanup) this.cleanups.delete(execution.jobId);
    });
    this.cleanups.set(execution.jobId, cleanup);
  }

  /**
   * Deletes the ended job's `persistent: false` mounts, once: a folder that cannot be
   * deleted (a file the job made read-only) is reported and left, never waited on.
   */
  private async deleteTransientMounts(event: { jobId: string; executionArn: string }): Promise<void> {
    try {
      await deleteTransientMounts(event, { store: this.deps.store, buckets: new LocalJobBuckets(this.dataDir) });
    } catch (error) {
      this.onError(new Error(`could not delete the persistent: false mounts of ${event.jobId}, which stay in ${this.dataDir}: ${errorMessage(error)}`));
    }
  }

  /**
   * Runs a write until it lands: a database that refused it (a full disk) may take it
   * later, and the job must not stay live for want of one write. relaunch's own errors (a
   * lost race, a transition refused) will not change with time and end the tries, except
   * TransientError (how the store reports a database that refused the write); so does
   * closing the runtime: the next one ends the job then.
   */
  private async retryUntilStored(write: () => Promise<unknown>): Promise<void> {
    for (let delay = JANITOR_FIRST_RETRY_MS; !this.closed; delay = Math.min(delay * 2, JANITOR_MAX_RETRY_MS)) {
      try {
        await write();
        return;
      } catch (error) {
        this.onError(error);
        if (error instanceof RelaunchError && !(error instanceof TransientError)) return;
      }
      await sleep(delay, undefined, { signal: this.closing.signal }).catch(() => undefined);
    }
  }

  /**
   * Jobs left live by a runtime that is gone: their nodes' processes are killed first (by
   * the process groups stored with the attempt, checked against each node's mark), then
   * the job ends FAILED_CONTROLLER saying so. A job whose latest attempt was never written
   * (a folder a crash left so before its writes were made whole) is ended all the same,
   * the reason and a notice saying what was missing: a folder is never refused for it.
   */
  private async endOrphans(notice: (message: string) => void): Promise<void> {
    const jobs = await this.deps.store.listJobs();
    for (const job of jobs.filter((j) => !isTerminal(j.status))) {
      const attempt = job.attemptCount > 0 ? await this.latestAttempt(job.jobId, job.attemptCount) : null;
      if (attempt === 'missing') {
        const reason = `${ORPHAN_REASON}; its attempt ${job.attemptCount} was never written (a write a crash cut in half)`;
        await this.endUnrecorded(job, reason);
        notice(`repaired job ${job.jobId}: ${reason}`);
        continue;
      }
      let killed = 0;
      if (attempt !== null) {
        for (const node of attempt.instances) {
          if (node.processGroupId !== undefined) killed += killMarked(node.instanceId, node.processGroupId);
        }
        // A task's container is the docker daemon's child, not in the node's group.
        if (job.spec.resources.containerImage !== undefined) await Promise.all(attempt.instances.map((node) => removeContainer(node.instanceId)));
        if (await this.decideFromNodeFolders(job, attempt, notice)) {
          if (job.executionArn !== null) await this.deleteTransientMounts({ jobId: job.jobId, executionArn: job.executionArn });
          continue;
        }
      }
      const stopped =
        killed === 0
          ? ''
          : killed === 1
            ? '; 1 of its processes was still running and has been killed'
            : `; ${killed} of its processes were still running and have been killed`;
      await recordControllerFailure(
        {
          jobId: job.jobId,
          attempt: job.attemptCount,
          attemptsInExecution: 0,
          controllerError: { Error: 'LocalRuntimeStopped', Cause: `the local runtime running this job stopped before it ended${stopped}` },
        },
        this.deps,
      );
      if (job.executionArn !== null) await this.deleteTransientMounts({ jobId: job.jobId, executionArn: job.executionArn });
    }
  }

  /**
   * Decides what the attempt's nodes reported before the runtime stopped: the reports they
   * wrote in their folders and the database never took (left-reports.ts) are stored, and
   * when the reports on record then decide the attempt (or it had ended already, the
   * policy's step never run), the job's policy is applied as EvaluateRecoveryPolicy would.
   * No node runs any more, so a failure's peers are not waited for. True when that ended
   * the job: its exit codes decided it, not the runtime's end. A decision to relaunch
   * leaves it to the caller, which ends the job FAILED_CONTROLLER with the attempt's codes
   * and decision on record.
   */
  private async decideFromNodeFolders(job: JobRecord, attempt: AttemptRecord, notice: (message: string) => void): Promise<boolean> {
    if (attempt.decision !== null) return false;
    const { store } = this.deps;
    const at = nowIso(this.deps.clock);
    const found = attempt.outcome === null ? leftReports(this.dataDir, attempt, job.spec.numNodes, at) : [];
    let latest = attempt;
    for (const report of found) latest = (await store.addReport(job.jobId, attempt.attempt, report)).attempt;
    const codes =
      found.length > 0
        ? `${found.map((r) => `${r.phase} ${isStopped(r) ? `stopped (${r.stopped})` : `exit code ${r.exitCode}`} on node ${r.nodeRank}`).join(', ')}, found in its nodes' folders`
        : 'its reports stored, its decision not yet made';
    const settled = latest.outcome !== null ? null : await settleAttempt(latest, job.spec, [], at, this.deps, { waitForPeers: false });
    if (settled !== null && !settled.ended) {
      if (found.length > 0) notice(`job ${job.jobId}: stored what attempt ${attempt.attempt}'s nodes wrote before its runtime stopped (${codes})`);
      return false;
    }
    const state = await evaluatePolicy({ jobId: job.jobId, attempt: attempt.attempt, attemptsInExecution: 0 }, this.deps);
    await releaseInstances(state, this.deps);
    const status = state.decision?.status ?? job.status;
    notice(`job ${job.jobId}: attempt ${attempt.attempt} had ended before its runtime stopped (${codes}): ${status}`);
    return isTerminal(status);
  }

  /** The job's latest attempt, or `missing` when its row was never written. */
  private async latestAttempt(jobId: string, attempt: number): Promise<AttemptRecord | 'missing'> {
    try {
      return await this.deps.store.getAttempt(jobId, attempt);
    } catch (error) {
      if (error instanceof StaleAttemptError) return 'missing';
      throw error;
    }
  }

  /**
   * Ends FAILED_CONTROLLER a job whose latest attempt has no row: recordControllerFailure
   * would read that attempt. Its instances were never recorded, so there are none to
   * release by record; its processes died with the runtime that started them (each node's
   * watcher), and its secrets go as for any other end.
   */
  private async endUnrecorded(job: JobRecord, reason: string): Promise<void> {
    const at = this.deps.clock.now().toISOString();
    await this.deps.store.changeStatus(job.jobId, { from: job.status, to: JobStatus.FAILED_CONTROLLER, reason, attempt: job.attemptCount, at }, { failureReason: reason });
    await this.deps.secrets.delete(job.jobId);
  }
}

/** What a job left live by a runtime that stopped ends with (recordControllerFailure's wording of LocalRuntimeStopped). */
const ORPHAN_REASON = "relaunch's controller failed: LocalRuntimeStopped: the local runtime running this job stopped before it ended";

/**
 * The controller's ASL (read from infra/controller.asl.json, the render of the chain `cdk
 * deploy` ships) as the local engine must run it to behave as Step Functions does:
 *
 * - AwaitAttempt without an engine-made 60 s timeout (the engine gives a Task with no
 *   TimeoutSeconds 60 s; Step Functions gives none);
 * - AwaitBoot's TimeoutSecondsPath read where the engine looks: it resolves the path
 *   against the state's Parameters, where Step Functions resolves it against the state's
 *   input, so `$.x` becomes `$.Payload.x` (the payload carries the same value);
 * - TransientError retried within seconds, not minutes: the embedded database is never
 *   throttled, and its one 5xx, a full disk, is waited out by the janitor once the
 *   execution has ended;
 * - the Lambda Tasks without their timeouts (the engine's longest instead). On AWS a
 *   Task's timeout means the invocation was lost, and its retry cannot overlap it. Here
 *   the step runs in this process and is never lost, only late when the process stalls
 *   (a busy event loop, a paused process), and a retry beside it would do the step twice
 *   at once, and end the job FAILED_CONTROLLER when the retries ran out. A stall can still
 *   make an attempt LOST, on its heartbeat clock; it never fails a job's controller.
 */
export function localControllerDefinition(): StateMachineDefinition {
  const asl = readControllerAsl();
  for (const [name, state] of Object.entries(asl.States)) {
    for (const retry of (state.Retry as { ErrorEquals: string[] }[] | undefined) ?? []) {
      if (retry.ErrorEquals.includes(TransientError.errorName)) Object.assign(retry, { IntervalSeconds: 1, BackoffRate: 1, MaxDelaySeconds: 1 });
    }
    const clocked = name === StateName.AwaitBoot || name === StateName.AwaitAttempt;
    if (state.Type === 'Task' && !clocked && typeof state.TimeoutSeconds === 'number') state.TimeoutSeconds = LOCAL_MAX_TASK_SECONDS;
  }
  const awaitState = asl.States[StateName.AwaitAttempt];
  if (awaitState !== undefined && awaitState.TimeoutSeconds === undefined && awaitState.TimeoutSecondsPath === undefined) {
    awaitState.TimeoutSeconds = LOCAL_MAX_TASK_SECONDS;
  }
  const bootState = asl.States[StateName.AwaitBoot];
  if (bootState?.TimeoutSecondsPath === BOOT_TIMEOUT_SECONDS_PATH) {
    bootState.TimeoutSecondsPath = BOOT_TIMEOUT_SECONDS_PATH.replace('$.', '$.Payload.');
  }
  return asl as unknown as StateMachineDefinition;
}

/**
 * Binds every Task state of the ASL to its use case; AwaitBoot and AwaitAttempt wait on a
 * local token, on the clock each state has (AwaitBoot's timeout, AwaitAttempt's heartbeat).
 */
function localTasks(deps: LocalRuntime['deps']): Record<string, LocalTaskHandler> {
  const tasks = controllerTasks(deps);
  const storeToken = awaitAttemptTask(deps);
  const bound: Record<string, LocalTaskHandler> = {};
  for (const [name, handler] of Object.entries(tasks)) bound[name] = async (input) => (await handler(input)) as never;
  const awaitOnToken: LocalTaskHandler = async (input) => {
    const { Payload } = AwaitTaskInputSchema.parse(input);
    const clock: TaskClock =
      Payload.state === StateName.AwaitBoot && Payload.bootTimeoutSeconds !== undefined
        ? { kind: 'timeout', ms: Payload.bootTimeoutSeconds * 1000 }
        : { kind: 'heartbeat' };
    const { token, result } = deps.workflow.waitForTaskToken(clock);
    // A cancel or an end can settle the token while it is being stored, before anyone
    // awaits it: that rejection is this task's result, not an unhandled one.
    result.catch(() => undefined);
    try {
      await storeToken({ ...Payload, taskToken: token });
    } catch (error) {
      // Nobody will resume a token that was never stored: withdraw it, so its timer cannot
      // fail a promise no one awaits.
      deps.workflow.withdraw(token);
      throw error;
    }
    return result;
  };
  bound[StateName.AwaitBoot] = awaitOnToken;
  bound[StateName.AwaitAttempt] = awaitOnToken;
  return bound;
}
