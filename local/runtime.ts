// The embedded runtime: the controller's ASL on aws-local-stepfunctions, jobs as local
// process groups, and dynalite persisted under a data folder, wired to the same use cases
// the Lambdas run.

import { Agent } from 'node:http';
import path from 'node:path';
import { mkdirSync } from 'node:fs';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { StateMachineDefinition } from 'aws-local-stepfunctions';
import { renderControllerAsl } from '../infra/asl.ts';
import { DynamoJobStore } from '../lib/adapters/dynamo-job-store.ts';
import { ensureTable, startDynalite, type LocalDynamo } from '../lib/adapters/dynalite.ts';
import { StaleAttemptError } from '../lib/errors.ts';
import type { Clock, Random, Workflow } from '../lib/ports.ts';
import { isTerminal } from '../lib/status.ts';
import {
  cancelJob,
  heartbeat,
  onInstanceEvent,
  recordControllerFailure,
  reportPhase,
  submitJob,
  type SubmitJobResult,
  type UseCaseDeps,
} from '../lib/usecases/index.ts';
import { HEARTBEAT_TIMEOUT_SECONDS, StateName } from '../lib/workflow/contract.ts';
import { AwaitTaskInputSchema, awaitAttemptTask, controllerTasks } from '../lib/workflow/task-handlers.ts';
import { LocalWorkflow, type LocalExecutionResult, type LocalTaskHandler } from './local-workflow.ts';
import { LocalProcessCompute, type LocalAgentSink } from './process-compute.ts';

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
  /** How often a local node beats. @default 30000 */
  readonly heartbeatIntervalMs?: number;
  /** How long after run starts a requested preemption strikes. @default 300 */
  readonly preemptAfterMs?: number;
  readonly clock?: Clock;
  readonly random?: Random;
  /** Every state the controller enters, for progress output and transition counts. */
  readonly onTransition?: (executionName: string, stateName: string) => void;
  /** Errors no caller is waiting for (a node's report that failed unexpectedly). */
  readonly onError?: (error: unknown) => void;
}

/** What `submit` may add to a task. */
export interface LocalSubmitOptions {
  readonly envOverrides?: Readonly<Record<string, string>>;
  /** Attempts (1-based) to interrupt as a spot preemption would. */
  readonly preemptAttempts?: readonly number[];
}

const systemClock: Clock = { now: () => new Date() };

/** One runtime per data folder: it owns the database while open. */
export class LocalRuntime {
  private closed = false;

  private constructor(
    private readonly dynamo: LocalDynamo,
    private readonly preemptions: Map<string, ReadonlySet<number>>,
    private readonly client: DynamoDBClient,
    readonly deps: UseCaseDeps & { readonly store: DynamoJobStore; readonly compute: LocalProcessCompute; readonly workflow: LocalWorkflow },
    readonly dataDir: string,
  ) {}

  /**
   * Opens the data folder: starts dynalite on it, creates the table on first use, and
   * ends any job a previous runtime left live (it died with its processes) as
   * FAILED_CONTROLLER.
   */
  static async open(options: LocalRuntimeOptions): Promise<LocalRuntime> {
    const dataDir = path.resolve(options.dataDir);
    mkdirSync(dataDir, { recursive: true });
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
      return await LocalRuntime.assemble(options, dataDir, dynamo, client);
    } catch (error) {
      client.destroy();
      await dynamo.close();
      throw error;
    }
  }

  private static async assemble(
    options: LocalRuntimeOptions,
    dataDir: string,
    dynamo: LocalDynamo,
    client: DynamoDBClient,
  ): Promise<LocalRuntime> {
    await ensureTable(client, LOCAL_TABLE_NAME);
    const store = new DynamoJobStore({ client, tableName: LOCAL_TABLE_NAME });
    const clock = options.clock ?? systemClock;
    const random = options.random ?? Math.random;
    const onError = options.onError ?? (() => undefined);

    // The compute reports through the use cases, which need the workflow, which needs the
    // task handlers, which need the compute: the closures below read `deps` only once
    // it exists.
    const preemptions = new Map<string, ReadonlySet<number>>();
    const sink = agentSink(() => deps, onError);
    const compute = new LocalProcessCompute({
      dataDir,
      sink,
      preemptions: (jobId) => preemptions.get(jobId) ?? new Set(),
      preemptAfterMs: options.preemptAfterMs,
      heartbeatIntervalMs: options.heartbeatIntervalMs,
      onError,
    });
    const workflow = new LocalWorkflow({
      definition: renderControllerAsl() as unknown as StateMachineDefinition,
      tasks: () => localTasks(deps),
      heartbeatTimeoutMs: options.heartbeatTimeoutMs ?? HEARTBEAT_TIMEOUT_SECONDS * 1000,
      onTransition: options.onTransition,
    });
    const deps: LocalRuntime['deps'] = { store, compute, workflow, clock, random };
    const runtime = new LocalRuntime(dynamo, preemptions, client, deps, dataDir);
    await runtime.endOrphans();
    return runtime;
  }

  /** Submits a task (YAML text) and starts its execution. */
  async submit(body: string, options: LocalSubmitOptions = {}): Promise<SubmitJobResult> {
    const preempt = new Set(options.preemptAttempts ?? []);
    const { workflow } = this.deps;
    // The preemptions must be known before the execution can reach its first launch.
    const registering: Workflow = {
      start: async (name, input) => {
        if (preempt.size > 0) this.preemptions.set(input.jobId, preempt);
        return workflow.start(name, input);
      },
      resume: (token, output) => workflow.resume(token, output),
      fail: (token, error, cause) => workflow.fail(token, error, cause),
      heartbeat: (token) => workflow.heartbeat(token),
    };
    return submitJob({ body, envOverrides: options.envOverrides ?? {} }, { ...this.deps, workflow: registering });
  }

  /** Resolves when the job's execution (and any it continued as) has ended. */
  async waitForJob(jobId: string): Promise<LocalExecutionResult> {
    for (;;) {
      const job = await this.deps.store.getJob(jobId);
      const name = job.executionArn === null ? jobId : job.executionArn.slice(job.executionArn.lastIndexOf(':') + 1);
      const result = await this.deps.workflow.result(name);
      const after = await this.deps.store.getJob(jobId);
      if (after.executionArn === job.executionArn || isTerminal(after.status)) return result;
    }
  }

  /** Cancels a job through the same use case `DELETE /jobs/{id}` runs. */
  async cancel(jobId: string): Promise<string> {
    return (await cancelJob(jobId, this.deps)).status;
  }

  /** Kills every job process, stops every execution and closes the database. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.deps.compute.releaseAll();
    this.deps.workflow.stopAll();
    this.client.destroy();
    await this.dynamo.close();
  }

  /** Jobs left live by a runtime that is gone: nothing runs them any more. */
  private async endOrphans(): Promise<void> {
    const jobs = await this.deps.store.listJobs();
    for (const job of jobs.filter((j) => !isTerminal(j.status))) {
      await recordControllerFailure(
        {
          jobId: job.jobId,
          attempt: job.attemptCount,
          attemptsInExecution: 0,
          controllerError: { Error: 'LocalRuntimeStopped', Cause: 'the local runtime running this job stopped before it ended' },
        },
        this.deps,
      );
    }
  }
}

/** Binds every Task state of the ASL to its use case; AwaitAttempt waits on a local token. */
function localTasks(deps: LocalRuntime['deps']): Record<string, LocalTaskHandler> {
  const tasks = controllerTasks(deps);
  const storeToken = awaitAttemptTask(deps);
  const bound: Record<string, LocalTaskHandler> = {};
  for (const [name, handler] of Object.entries(tasks)) bound[name] = async (input) => (await handler(input)) as never;
  bound[StateName.AwaitAttempt] = async (input) => {
    const { Payload } = AwaitTaskInputSchema.parse(input);
    const { token, result } = deps.workflow.waitForTaskToken();
    try {
      await storeToken({ ...Payload, taskToken: token });
    } catch (error) {
      // Nobody will resume a token that was never stored: withdraw it, so its heartbeat
      // timer cannot fail a promise no one awaits.
      deps.workflow.withdraw(token);
      throw error;
    }
    return result;
  };
  return bound;
}

/** The agent's API calls, made in-process. A late call for an ended attempt is expected. */
function agentSink(deps: () => UseCaseDeps, onError: (error: unknown) => void): LocalAgentSink {
  const tolerant = async (call: () => Promise<unknown>): Promise<void> => {
    try {
      await call();
    } catch (error) {
      if (!(error instanceof StaleAttemptError)) onError(error);
    }
  };
  return {
    heartbeat: (c) => tolerant(() => heartbeat(c, deps())),
    report: (c) => tolerant(() => reportPhase(c, deps())),
    instanceEvent: (e) => tolerant(() => onInstanceEvent(e, deps())),
  };
}
