// Step Functions for the scale simulation: the Workflow port, and an interpreter that walks
// the controller's ASL as rendered from the definition `cdk deploy` ships (infra/asl.ts),
// in virtual time. It supports exactly what that definition uses: Task (Lambda, and Lambda
// with .waitForTaskToken) with Retry, Catch, ResultPath, ResultSelector, Parameters,
// TimeoutSeconds, TimeoutSecondsPath and HeartbeatSeconds; Choice (IsPresent, BooleanEquals,
// StringEquals, NumericGreaterThan); Wait with SecondsPath; Succeed; Fail. Anything else
// in the definition is an error at load, so a new state type cannot be skipped silently.
//
// Billing and quotas: every state entered is a state transition, and so is every retry
// of a Task (the pricing page counts retries); each takes a token from the account's
// StateTransition bucket, and one that finds none is delayed until it can (Step Functions
// slows executions rather than failing them). StartExecution has its own bucket; a start
// that finds it empty is refused with a TransientError, as SfnWorkflow reports a throttle.

import { StaleAttemptError, TransientError } from '../../lib/errors.ts';
import type { Random, Workflow } from '../../lib/ports.ts';
import type { ExecutionInput } from '../../lib/workflow/contract.ts';
import type { AslDefinition } from '../../infra/asl.ts';
import type { EventQueue, TokenBucket } from './des.ts';

/** The error a Lambda invocation beyond the account's concurrency gets, as Step Functions names it. */
export const LAMBDA_THROTTLED = 'Lambda.TooManyRequestsException';

/** What the interpreter needs from the rest of the simulation. */
export interface StepFunctionsHost {
  readonly queue: EventQueue;
  readonly random: Random;
  readonly startExecution: TokenBucket;
  readonly transitions: TokenBucket;
  /**
   * Runs a Task state's handler as one Lambda invocation starting now: null when Lambda
   * refused it (concurrency), else its outcome and how long it ran (ms).
   */
  invoke(state: string, input: unknown): Promise<{ readonly durationMs: number; readonly result: { ok: true; value: unknown } | { ok: false; error: TaskError } } | null>;
  /** Told when an execution ends. */
  ended(execution: ExecutionView, status: 'SUCCEEDED' | 'FAILED', error: TaskError | null): void;
}

/** An error as Step Functions carries it. */
export interface TaskError {
  readonly Error: string;
  readonly Cause: string;
}

/** What the host may read of an execution. */
export interface ExecutionView {
  readonly name: string;
  readonly arn: string;
  readonly input: ExecutionInput;
}

/** Counts the simulation reports. */
export interface StepFunctionsCounts {
  transitions: number;
  retries: number;
  transitionsDelayed: number;
  startsThrottled: number;
  starts: number;
  lambdaThrottles: number;
  /** SendTaskSuccess, SendTaskFailure, SendTaskHeartbeat calls that reached an open task or were refused. */
  taskTokenCalls: number;
  readonly enteredByState: Map<string, number>;
  /** How long each execution waited in WaitForLaunchPace, in total (s). */
  launchPaceWaits: number;
}

type State = Record<string, unknown>;
interface Retrier {
  readonly ErrorEquals: readonly string[];
  readonly IntervalSeconds?: number;
  readonly MaxAttempts?: number;
  readonly BackoffRate?: number;
  readonly MaxDelaySeconds?: number;
  readonly JitterStrategy?: string;
}
interface Catcher {
  readonly ErrorEquals: readonly string[];
  readonly ResultPath?: string | null;
  readonly Next: string;
}

interface Execution extends ExecutionView {
  done: boolean;
}

interface OpenTask {
  readonly execution: Execution;
  readonly stateName: string;
  readonly input: unknown;
  readonly retries: number[];
  lastBeatAt: number;
  closed: boolean;
}

const SUPPORTED_FIELDS: Readonly<Record<string, readonly string[]>> = {
  Task: ['Type', 'Resource', 'Next', 'End', 'Retry', 'Catch', 'ResultPath', 'ResultSelector', 'Parameters', 'TimeoutSeconds', 'TimeoutSecondsPath', 'HeartbeatSeconds'],
  Choice: ['Type', 'Choices', 'Default'],
  Wait: ['Type', 'SecondsPath', 'Next'],
  Succeed: ['Type'],
  Fail: ['Type', 'Error', 'ErrorPath', 'Cause', 'CausePath'],
};
const WAIT_FOR_TOKEN = 'arn:aws:states:::lambda:invoke.waitForTaskToken';
/** How long Step Functions takes to pass a SendTask* call or a Lambda's answer on (modelled). */
const HANDOFF_MS = 50;

/** The controller's executions over the ASL, behind the Workflow port. */
export class StepFunctionsSim implements Workflow {
  readonly counts: StepFunctionsCounts = {
    transitions: 0,
    retries: 0,
    transitionsDelayed: 0,
    startsThrottled: 0,
    starts: 0,
    lambdaThrottles: 0,
    taskTokenCalls: 0,
    enteredByState: new Map(),
    launchPaceWaits: 0,
  };
  readonly #executions = new Map<string, Execution>();
  readonly #tasks = new Map<string, OpenTask>();
  #tokens = 0;

  constructor(
    readonly asl: AslDefinition,
    readonly host: StepFunctionsHost,
    /** The Wait state whose waits are the launch pace's (counted apart). */
    readonly paceWaitState: string,
  ) {
    for (const [name, state] of Object.entries(asl.States)) {
      const fields = SUPPORTED_FIELDS[String(state.Type)];
      if (fields === undefined) throw new Error(`state ${name}: type ${String(state.Type)} is not supported by the simulation`);
      const unknown = Object.keys(state).filter((field) => !fields.includes(field));
      if (unknown.length > 0) throw new Error(`state ${name}: field(s) ${unknown.join(', ')} are not supported by the simulation`);
    }
  }

  /** Executions that have not ended. */
  get running(): number {
    let count = 0;
    for (const execution of this.#executions.values()) if (!execution.done) count += 1;
    return count;
  }

  async start(executionName: string, input: ExecutionInput): Promise<string> {
    const arn = `arn:aws:states:us-east-1:000000000000:execution:relaunch-controller:${executionName}`;
    const existing = this.#executions.get(executionName);
    if (existing !== undefined) return existing.arn;
    const now = this.host.queue.nowMs;
    if (!this.host.startExecution.tryTake(1, now)) {
      this.counts.startsThrottled += 1;
      throw new TransientError(`Step Functions StartExecution: ThrottlingException (rate exceeded) for ${executionName}`);
    }
    this.counts.starts += 1;
    const execution: Execution = { name: executionName, arn, input, done: false };
    this.#executions.set(executionName, execution);
    this.host.queue.after(HANDOFF_MS, () => this.#enter(execution, this.asl.StartAt, input, null));
    return arn;
  }

  async resume(taskToken: string, output: unknown): Promise<void> {
    const task = this.#open(taskToken);
    task.closed = true;
    this.#tasks.delete(taskToken);
    this.host.queue.after(HANDOFF_MS, () => this.#succeedTask(task.execution, task.stateName, task.input, output));
  }

  async fail(taskToken: string, error: string, cause: string): Promise<void> {
    const task = this.#open(taskToken);
    task.closed = true;
    this.#tasks.delete(taskToken);
    this.host.queue.after(HANDOFF_MS, () => this.#failTask(task.execution, task.stateName, task.input, task.retries, { Error: error, Cause: cause }));
  }

  async heartbeat(taskToken: string): Promise<void> {
    this.#open(taskToken).lastBeatAt = this.host.queue.nowMs;
  }

  async stopBetweenSteps(): Promise<boolean> {
    // No job is cancelled in the simulation.
    return false;
  }

  #open(taskToken: string): OpenTask {
    this.counts.taskTokenCalls += 1;
    const task = this.#tasks.get(taskToken);
    if (task === undefined || task.closed) throw new StaleAttemptError(`the task of token ${taskToken} has ended`);
    return task;
  }

  /** Enters a state: one transition (delayed while the account's bucket is empty). */
  async #enter(execution: Execution, name: string, input: unknown, retries: number[] | null): Promise<void> {
    const queue = this.host.queue;
    const at = this.host.transitions.earliest(1, queue.nowMs);
    if (at > queue.nowMs) {
      this.counts.transitionsDelayed += 1;
      queue.at(at, () => this.#enter(execution, name, input, retries));
      return;
    }
    this.host.transitions.take(1, at);
    this.counts.transitions += 1;
    if (retries === null) this.counts.enteredByState.set(name, (this.counts.enteredByState.get(name) ?? 0) + 1);
    else this.counts.retries += 1;
    const state = this.#state(name);
    switch (state.Type) {
      case 'Choice':
        return this.#enter(execution, choose(state, input), input, null);
      case 'Wait': {
        const seconds = Number(getPath(input, String(state.SecondsPath)));
        if (!Number.isInteger(seconds) || seconds < 0) {
          return this.#end(execution, 'FAILED', { Error: 'States.Runtime', Cause: `${name}: SecondsPath gave ${String(seconds)}` });
        }
        if (name === this.paceWaitState) this.counts.launchPaceWaits += seconds;
        queue.after(seconds * 1000, () => this.#enter(execution, String(state.Next), input, null));
        return;
      }
      case 'Succeed':
        return this.#end(execution, 'SUCCEEDED', null);
      case 'Fail': {
        const error = state.ErrorPath === undefined ? String(state.Error) : String(getPath(input, String(state.ErrorPath)));
        const cause = state.CausePath === undefined ? String(state.Cause ?? '') : String(getPath(input, String(state.CausePath)));
        return this.#end(execution, 'FAILED', { Error: error, Cause: cause });
      }
      default:
        return this.#runTask(execution, name, state, input, retries ?? []);
    }
  }

  async #runTask(execution: Execution, name: string, state: State, input: unknown, retries: number[]): Promise<void> {
    const queue = this.host.queue;
    if (state.Resource === WAIT_FOR_TOKEN) {
      const token = `${execution.name}:${name}:${(this.#tokens += 1)}`;
      const parameters = state.Parameters as { Payload: Record<string, unknown> };
      const payload = resolveParameters(parameters.Payload, input, token);
      const task: OpenTask = { execution, stateName: name, input, retries, lastBeatAt: queue.nowMs, closed: false };
      this.#tasks.set(token, task);
      const invoked = await this.host.invoke(name, payload);
      if (invoked === null) {
        task.closed = true;
        this.#tasks.delete(token);
        this.counts.lambdaThrottles += 1;
        return this.#failTask(execution, name, input, retries, { Error: LAMBDA_THROTTLED, Cause: 'Rate Exceeded.' });
      }
      if (!invoked.result.ok) {
        const error = invoked.result.error;
        if (!task.closed) {
          task.closed = true;
          this.#tasks.delete(token);
          queue.after(invoked.durationMs, () => this.#failTask(execution, name, input, retries, error));
        }
        return;
      }
      if (task.closed) return;
      if (state.TimeoutSecondsPath !== undefined) {
        const seconds = Number(getPath(input, String(state.TimeoutSecondsPath)));
        queue.after(seconds * 1000, () => this.#timeOut(token, task, { Error: 'States.Timeout', Cause: `${name} timed out after ${seconds} s` }));
      }
      if (state.HeartbeatSeconds !== undefined) this.#watchHeartbeat(token, task, Number(state.HeartbeatSeconds) * 1000);
      return;
    }
    const invoked = await this.host.invoke(name, input);
    if (invoked === null) {
      this.counts.lambdaThrottles += 1;
      return this.#failTask(execution, name, input, retries, { Error: LAMBDA_THROTTLED, Cause: 'Rate Exceeded.' });
    }
    const { result } = invoked;
    const timeoutMs = state.TimeoutSeconds === undefined ? Number.POSITIVE_INFINITY : Number(state.TimeoutSeconds) * 1000;
    if (invoked.durationMs > timeoutMs) {
      queue.after(timeoutMs, () => this.#failTask(execution, name, input, retries, { Error: 'States.Timeout', Cause: `${name} timed out after ${timeoutMs / 1000} s` }));
      return;
    }
    queue.after(invoked.durationMs, () =>
      result.ok ? this.#succeedTask(execution, name, input, result.value) : this.#failTask(execution, name, input, retries, result.error),
    );
  }

  #watchHeartbeat(token: string, task: OpenTask, heartbeatMs: number): void {
    const check = async (): Promise<void> => {
      if (task.closed) return;
      const due = task.lastBeatAt + heartbeatMs;
      if (due > this.host.queue.nowMs) {
        this.host.queue.at(due, check);
        return;
      }
      await this.#timeOut(token, task, { Error: 'States.HeartbeatTimeout', Cause: `no heartbeat for ${heartbeatMs / 1000} s` });
    };
    this.host.queue.after(heartbeatMs, check);
  }

  #timeOut(token: string, task: OpenTask, error: TaskError): Promise<void> | undefined {
    if (task.closed) return undefined;
    task.closed = true;
    this.#tasks.delete(token);
    return this.#failTask(task.execution, task.stateName, task.input, task.retries, error);
  }

  async #succeedTask(execution: Execution, name: string, input: unknown, result: unknown): Promise<void> {
    const state = this.#state(name);
    const selected = state.ResultSelector === undefined ? result : resolveParameters(state.ResultSelector as Record<string, unknown>, result, null);
    const output = applyResultPath(input, state.ResultPath as string | null | undefined, selected);
    return this.#enter(execution, String(state.Next), output, null);
  }

  async #failTask(execution: Execution, name: string, input: unknown, retries: number[], error: TaskError): Promise<void> {
    const state = this.#state(name);
    const retriers = (state.Retry ?? []) as Retrier[];
    const index = retriers.findIndex((retrier) => matches(retrier.ErrorEquals, error.Error));
    if (index >= 0) {
      const retrier = retriers[index] as Retrier;
      const done = retries[index] ?? 0;
      if (done < (retrier.MaxAttempts ?? 3)) {
        const next = [...retries];
        next[index] = done + 1;
        const base = Math.min((retrier.IntervalSeconds ?? 1) * (retrier.BackoffRate ?? 2) ** done, retrier.MaxDelaySeconds ?? Number.POSITIVE_INFINITY);
        const delay = retrier.JitterStrategy === 'FULL' ? this.host.random() * base : base;
        this.host.queue.after(delay * 1000, () => this.#enter(execution, name, input, next));
        return;
      }
    }
    const catcher = ((state.Catch ?? []) as Catcher[]).find((candidate) => matches(candidate.ErrorEquals, error.Error));
    if (catcher === undefined) return this.#end(execution, 'FAILED', error);
    const output = catcher.ResultPath === null ? input : applyResultPath(input, catcher.ResultPath, error);
    return this.#enter(execution, catcher.Next, output, null);
  }

  #end(execution: Execution, status: 'SUCCEEDED' | 'FAILED', error: TaskError | null): void {
    execution.done = true;
    this.host.ended(execution, status, error);
  }

  #state(name: string): State {
    const state = this.asl.States[name];
    if (state === undefined) throw new Error(`the definition has no state ${name}`);
    return state;
  }
}

function matches(errorEquals: readonly string[], error: string): boolean {
  return errorEquals.includes(error) || errorEquals.includes('States.ALL');
}

interface ChoiceRule {
  readonly Variable: string;
  readonly Next: string;
  readonly IsPresent?: boolean;
  readonly BooleanEquals?: boolean;
  readonly StringEquals?: string;
  readonly NumericGreaterThan?: number;
}

function choose(state: State, input: unknown): string {
  for (const rule of state.Choices as ChoiceRule[]) {
    const value = getPath(input, rule.Variable);
    const keys = Object.keys(rule).filter((key) => key !== 'Variable' && key !== 'Next');
    if (keys.length !== 1) throw new Error(`a Choice rule with ${keys.join(', ')} is not supported by the simulation`);
    if (rule.IsPresent !== undefined && (value !== undefined) === rule.IsPresent) return rule.Next;
    if (rule.BooleanEquals !== undefined && value === rule.BooleanEquals) return rule.Next;
    if (rule.StringEquals !== undefined && value === rule.StringEquals) return rule.Next;
    if (rule.NumericGreaterThan !== undefined && typeof value === 'number' && value > rule.NumericGreaterThan) return rule.Next;
  }
  if (state.Default === undefined) throw new Error('no Choice rule matched and there is no Default (States.NoChoiceMatched)');
  return String(state.Default);
}

/** A JSONPath of the form `$`, `$.a` or `$.a.b` (all the definition uses). */
function steps(path: string): string[] {
  if (path === '$') return [];
  if (!path.startsWith('$.')) throw new Error(`path ${path} is not supported by the simulation`);
  return path.slice(2).split('.');
}

function getPath(value: unknown, path: string): unknown {
  let current = value;
  for (const step of steps(path)) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[step];
  }
  return current;
}

function applyResultPath(input: unknown, path: string | null | undefined, result: unknown): unknown {
  if (path === undefined || path === '$') return result;
  if (path === null) return input;
  const [head, ...rest] = steps(path);
  if (head === undefined) return result;
  const base = (input ?? {}) as Record<string, unknown>;
  return { ...base, [head]: rest.length === 0 ? result : applyResultPath(base[head], `$.${rest.join('.')}`, result) };
}

function resolveParameters(template: Record<string, unknown>, input: unknown, token: string | null): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(template)) {
    if (!key.endsWith('.$')) {
      out[key] = value;
      continue;
    }
    const path = String(value);
    if (path === '$$.Task.Token') {
      if (token === null) throw new Error('$$.Task.Token outside a .waitForTaskToken task');
      out[key.slice(0, -2)] = token;
    } else out[key.slice(0, -2)] = getPath(input, path);
  }
  return out;
}
