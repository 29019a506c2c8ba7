// LocalWorkflow: the Workflow port over aws-local-stepfunctions, running the same ASL that
// `cdk deploy` ships, in this process. Task tokens, heartbeats and their timeout are kept
// here, since the engine leaves `.waitForTaskToken` and HeartbeatSeconds to its caller.

import './polyfill.ts';
import { randomUUID } from 'node:crypto';
import { StateMachine, type StateMachineDefinition } from 'aws-local-stepfunctions';
import { StaleAttemptError } from '../lib/errors.ts';
import type { Workflow } from '../lib/ports.ts';
import { WorkflowError, type ExecutionInput } from '../lib/workflow/contract.ts';

type Json = Parameters<StateMachine['run']>[0];

/** A local task handler: the state's input in, its result out. */
export type LocalTaskHandler = (input: Json) => Promise<Json>;

/** How one execution ended. */
export interface LocalExecutionResult {
  readonly status: 'SUCCEEDED' | 'FAILED' | 'ABORTED';
  readonly output?: unknown;
  readonly error?: string;
  readonly cause?: string;
  /** State transitions (StateEntered events) this execution made. */
  readonly transitions: number;
}

interface Waiter {
  resolve(output: Json): void;
  reject(error: Error): void;
  readonly clock: TaskClock;
  /** The heartbeat timeout's timer, or the task's own timeout's. */
  timer: NodeJS.Timeout | undefined;
}

/** The clock a waiting task runs on, as its state in the ASL sets it. */
export type TaskClock =
  /** HeartbeatSeconds: fails with States.HeartbeatTimeout after heartbeatTimeoutMs without a beat. */
  | { readonly kind: 'heartbeat' }
  /** TimeoutSeconds(Path): fails with States.Timeout once `ms` have passed, heartbeats aside. */
  | { readonly kind: 'timeout'; readonly ms: number };

interface LocalExecution {
  readonly arn: string;
  readonly abort: () => void;
  readonly done: Promise<LocalExecutionResult>;
  readonly progress: ExecutionProgress;
  /** Settles every step of the execution still in flight, as the runtime shuts down. */
  readonly halt: (error: Error) => void;
}

interface ExecutionProgress {
  /** Task handlers of this execution running now. */
  inFlight: number;
  ended: boolean;
  /** A stop asked for while a step ran: it happens when that step ends. */
  stopRequested: boolean;
}

/** The error a step still in flight ends with when the runtime stops. */
export const LOCAL_RUNTIME_STOPPED = 'LocalRuntimeStopped';

/** An error whose name a Catch clause matches, as Step Functions reports it. */
export class NamedWorkflowError extends Error {
  constructor(
    override readonly name: string,
    message: string,
  ) {
    super(message);
  }
}

/** Options of the local workflow. */
export interface LocalWorkflowOptions {
  readonly definition: StateMachineDefinition;
  /** The handler of every Task state, by state name; built lazily (handlers need this workflow). */
  readonly tasks: () => Readonly<Record<string, LocalTaskHandler>>;
  /** A waiting task with no heartbeat for this long fails with States.HeartbeatTimeout. */
  readonly heartbeatTimeoutMs: number;
  /** Called with every StateEntered event, for progress and transition counts. */
  readonly onTransition?: (executionName: string, stateName: string) => void;
  /** Called once each execution has ended, however it ended (the janitor's cue). */
  readonly onEnded?: (execution: { readonly arn: string; readonly jobId: string }, result: LocalExecutionResult) => void;
}

/** Runs executions of the controller in this process. */
export class LocalWorkflow implements Workflow {
  private readonly machine: StateMachine;
  private readonly executions = new Map<string, LocalExecution>();
  private readonly waiters = new Map<string, Waiter>();

  constructor(private readonly options: LocalWorkflowOptions) {
    // The definition is relaunch's own, checked by the engine's validator in the tests
    // (test/unit/infra/asl-file.test.ts): checking it again at every start costs 0.3 s of CPU.
    this.machine = new StateMachine(options.definition, { validationOptions: { noValidate: true } });
  }

  async start(executionName: string, input: ExecutionInput): Promise<string> {
    const existing = this.executions.get(executionName);
    if (existing !== undefined) return existing.arn;
    const arn = `arn:relaunch:local:execution:${executionName}`;
    // The engine may call the first handler before run() returns: the counter exists first.
    const progress: ExecutionProgress = { inFlight: 0, ended: false, stopRequested: false };
    let abort = (): void => undefined;
    // Rejected on shutdown: a step still in flight then ends at once for the engine, which
    // clears its timer for that Task (up to 2^31-1 ms long) only when the step's promise
    // settles; the handler itself runs on to its own end.
    let halt: (error: Error) => void = () => undefined;
    const halted = new Promise<never>((_resolve, reject) => {
      halt = reject;
    });
    halted.catch(() => undefined);
    const handlers: Record<string, LocalTaskHandler> = {};
    for (const [state, handler] of Object.entries(this.options.tasks())) {
      handlers[state] = async (taskInput) => {
        progress.inFlight += 1;
        try {
          return await Promise.race([handler(taskInput), halted]);
        } finally {
          progress.inFlight -= 1;
          if (progress.inFlight === 0 && progress.stopRequested) abort();
        }
      };
    }
    const run = this.machine.run(input as unknown as Json, {
      overrides: { taskResourceLocalHandlers: handlers },
      context: { Execution: { Id: arn, Name: executionName, Input: input as unknown as Json }, Task: { Token: 'local' } },
    });
    abort = run.abort;
    const execution: LocalExecution = { arn, abort: run.abort, done: this.follow(executionName, run), progress, halt };
    void execution.done.then((result) => {
      progress.ended = true;
      this.options.onEnded?.({ arn, jobId: input.jobId }, result);
    });
    this.executions.set(executionName, execution);
    return arn;
  }

  /**
   * Stops the execution where no step of it runs: at once when it waits on a timer (the
   * backoff Wait between attempts, a Retry's pause), else as soon as the running step
   * ends, so no step is left half done. Resolves whether it will stop (false: it has
   * ended); its end reaches `onEnded` as ABORTED.
   */
  async stopBetweenSteps(executionArn: string, _cause: string): Promise<boolean> {
    const execution = [...this.executions.values()].find((e) => e.arn === executionArn);
    if (execution === undefined || execution.progress.ended) return false;
    if (execution.progress.inFlight > 0) execution.progress.stopRequested = true;
    else execution.abort();
    return true;
  }

  /** Resolves when the named execution ends; rejects for a name never started. */
  async result(executionName: string): Promise<LocalExecutionResult> {
    const execution = this.executions.get(executionName);
    if (execution === undefined) throw new Error(`no local execution named ${executionName}`);
    return execution.done;
  }

  /**
   * A fresh task token that `resume`, `fail` and `heartbeat` recognise; the promise is the
   * task's result. With a `timeout` clock the engine fails the state itself at the same
   * moment (TimeoutSecondsPath); the waiter's own timer then only lets the token go.
   */
  waitForTaskToken(clock: TaskClock = { kind: 'heartbeat' }): { token: string; result: Promise<Json> } {
    const token = `local-token-${randomUUID()}`;
    const result = new Promise<Json>((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, clock, timer: undefined };
      this.waiters.set(token, waiter);
      waiter.timer =
        clock.kind === 'heartbeat'
          ? this.heartbeatTimer(token)
          : this.failTimer(token, clock.ms, WorkflowError.Timeout, `the task did not end within ${Math.round(clock.ms / 1000)} s`);
    });
    return { token, result };
  }

  async resume(taskToken: string, output: unknown): Promise<void> {
    const waiter = this.take(taskToken);
    waiter.resolve(output as Json);
  }

  async fail(taskToken: string, error: string, cause: string): Promise<void> {
    const waiter = this.take(taskToken);
    waiter.reject(new NamedWorkflowError(error, cause));
  }

  /** Forgets a token that was handed out but never stored: nothing will resume it. */
  withdraw(taskToken: string): void {
    const waiter = this.waiters.get(taskToken);
    if (waiter === undefined) return;
    clearTimeout(waiter.timer);
    this.waiters.delete(taskToken);
  }

  /** Restarts a heartbeat clock; a task on a timeout clock takes the beat and keeps its deadline. */
  async heartbeat(taskToken: string): Promise<void> {
    const waiter = this.waiters.get(taskToken);
    if (waiter === undefined) throw new StaleAttemptError('the task this heartbeat is for is no longer waiting');
    if (waiter.clock.kind !== 'heartbeat') return;
    clearTimeout(waiter.timer);
    waiter.timer = this.heartbeatTimer(taskToken);
  }

  /**
   * Aborts every execution, ends every step still in flight and forgets every waiting task
   * (shutdown): nothing of the engine is left pending, so no timer of it keeps the process
   * up. A step ended this way fails with LocalRuntimeStopped, which no Retry matches, in an
   * execution already aborted, so no Catch runs either: the jobs stay as they are in the
   * table, for the next runtime on the folder.
   */
  stopAll(): void {
    for (const [token, waiter] of this.waiters) {
      clearTimeout(waiter.timer);
      this.waiters.delete(token);
    }
    const stopped = new NamedWorkflowError(LOCAL_RUNTIME_STOPPED, 'the local runtime stopped while this step ran');
    for (const execution of this.executions.values()) {
      execution.abort();
      execution.halt(stopped);
    }
  }

  private take(taskToken: string): Waiter {
    const waiter = this.waiters.get(taskToken);
    if (waiter === undefined) throw new StaleAttemptError('the task this token belongs to is no longer waiting');
    clearTimeout(waiter.timer);
    this.waiters.delete(taskToken);
    return waiter;
  }

  private heartbeatTimer(token: string): NodeJS.Timeout {
    const ms = this.options.heartbeatTimeoutMs;
    return this.failTimer(token, ms, WorkflowError.HeartbeatTimeout, `no heartbeat for ${Math.round(ms / 1000)} s`);
  }

  /** Fails the waiting task with `error` after `ms`, unless it ended first. */
  private failTimer(token: string, ms: number, error: string, cause: string): NodeJS.Timeout {
    const timer = setTimeout(() => {
      const waiter = this.waiters.get(token);
      if (waiter === undefined) return;
      this.waiters.delete(token);
      waiter.reject(new NamedWorkflowError(error, cause));
    }, ms);
    timer.unref();
    return timer;
  }

  private async follow(executionName: string, run: ReturnType<StateMachine['run']>): Promise<LocalExecutionResult> {
    let transitions = 0;
    const counting = (async () => {
      for await (const event of run.eventLogs) {
        if (event.type === 'StateEntered') {
          transitions += 1;
          this.options.onTransition?.(executionName, event.state.name);
        }
      }
    })();
    try {
      const output = await run.result;
      await counting;
      return { status: 'SUCCEEDED', output, transitions };
    } catch (error) {
      await counting.catch(() => undefined);
      const { name, message } = describeFailure(error);
      if (name === 'ExecutionAbortedError') return { status: 'ABORTED', transitions };
      return { status: 'FAILED', error: name, cause: message, transitions };
    }
  }
}

/** The engine wraps a Fail state's Error/Cause in its ExecutionError; unwrap them. */
function describeFailure(error: unknown): { name: string; message: string } {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) };
  const inner = (error as { cause?: unknown }).cause;
  if (inner instanceof Error) return { name: inner.name, message: inner.message };
  return { name: error.name, message: error.message };
}
