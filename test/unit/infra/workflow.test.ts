// The controller's definition, as rendered for the local runtime: valid ASL, contract names,
// retries and catches on every task, and a bounded number of transitions per attempt.

import '../../../local/polyfill.ts';
import aslValidator from 'asl-validator';
import { StateMachine } from 'aws-local-stepfunctions';
import { describe, expect, it } from 'vitest';
import { renderControllerAsl } from '../../../infra/asl.ts';
import { LAMBDA_NEEDS, TASK_LAMBDAS } from '../../../infra/lambda-catalog.ts';
import { TASK_TIMEOUT_MARGIN_SECONDS } from '../../../infra/workflow.ts';
import { localControllerDefinition } from '../../../local/runtime.ts';
import { InstancesStillRunningError, TransientError } from '../../../lib/errors.ts';
import { JobStatus } from '../../../lib/status.ts';
import {
  AWAIT_ERROR_PATH,
  AWAITED_PATH,
  BOOT_TIMEOUT_SECONDS_PATH,
  CONTROLLER_ERROR_PATH,
  AWAIT_STATES,
  HEARTBEAT_TIMEOUT_SECONDS,
  LAMBDA_CRASH_ERRORS,
  LAMBDA_TRANSIENT_ERRORS,
  LAUNCH_WAIT_SECONDS_PATH,
  STANDBY_PATH,
  StateName,
  TASK_STATES,
  WorkflowError,
  type WorkflowState,
} from '../../../lib/workflow/contract.ts';

process.env.CDK_VALIDATION = 'false';
const asl = renderControllerAsl();
type AslState = Record<string, unknown> & { Type: string };
const states = asl.States as Record<string, AslState>;
const state = (name: string): AslState => {
  const found = states[name];
  if (found === undefined) throw new Error(`no state ${name}`);
  return found;
};

/** Every state a state can go to, by Next, Default, Choices and Catch. */
function successors(name: string): string[] {
  const s = state(name);
  const out = new Set<string>();
  if (typeof s.Next === 'string') out.add(s.Next);
  if (typeof s.Default === 'string') out.add(s.Default);
  for (const choice of (s.Choices as { Next: string }[] | undefined) ?? []) out.add(choice.Next);
  for (const c of (s.Catch as { Next: string }[] | undefined) ?? []) out.add(c.Next);
  return [...out];
}

/** Every simple cycle through `start`, as the list of states entered. */
function loopsThrough(start: string): string[][] {
  const loops: string[][] = [];
  const walk = (at: string, path: string[]): void => {
    for (const next of successors(at)) {
      if (next === start) loops.push([...path, next]);
      else if (!path.includes(next)) walk(next, [...path, next]);
    }
  };
  walk(start, []);
  return loops;
}

describe('the rendered controller ASL', () => {
  it('passes asl-validator, including path and ARN checks', () => {
    const result = aslValidator(structuredClone(asl), { checkPaths: true, checkArn: true });
    expect(result.errorsText()).toBe('');
    expect(result.isValid).toBe(true);
  });

  it('names every state from the contract (plus the one launch Choice) and names every contract state', () => {
    const known = new Set<string>(Object.values(StateName));
    expect(Object.keys(states).filter((name) => !known.has(name))).toEqual([]);
    expect([...known].filter((name) => !(name in states))).toEqual([]);
    expect(asl.StartAt).toBe(StateName.LaunchAttempt);
  });

  it('stays on JSONPath and never uses ResultPath "$" (the local engine writes it as a key)', () => {
    const text = JSON.stringify(asl);
    expect(text).not.toContain('JSONata');
    expect(text).not.toMatch(/"ResultPath":"\$"/);
  });

  it('retries Lambda transient errors with backoff, a cap and full jitter on every Task', () => {
    for (const name of TASK_STATES) {
      expect((state(name).Retry as unknown[])[0], name).toEqual(
        expect.objectContaining({
          ErrorEquals: [...LAMBDA_TRANSIENT_ERRORS],
          BackoffRate: 2,
          MaxDelaySeconds: expect.any(Number),
          JitterStrategy: 'FULL',
        }),
      );
    }
  });

  /** Each Retry's error list, in order, for a Task state. */
  const retriedErrors = (name: string): string[][] => (state(name).Retry as Retrier[]).map((retry) => retry.ErrorEquals);
  type Retrier = { ErrorEquals: string[]; IntervalSeconds: number; MaxAttempts: number; BackoffRate: number; MaxDelaySeconds?: number; JitterStrategy?: string };
  const lambdaTasks = TASK_STATES.filter((name) => !(AWAIT_STATES as readonly string[]).includes(name));

  it.each(lambdaTasks)('retries %s on exactly: Lambda service errors, TransientError, a dead Lambda and its own timeout', (name) => {
    const expected = [[...LAMBDA_TRANSIENT_ERRORS], [TransientError.errorName], [...LAMBDA_CRASH_ERRORS, WorkflowError.Timeout]];
    if (name === StateName.ReleaseInstances) expected.push([InstancesStillRunningError.errorName]);
    expect(retriedErrors(name)).toEqual(expected);
    expect(LAMBDA_CRASH_ERRORS).toContain('Lambda.Unknown');
  });

  it.each(AWAIT_STATES)('retries %s on a failed or dead Lambda but never on States.Timeout, the boot clock its Catch sends to the policy', (name) => {
    expect(retriedErrors(name)).toEqual([[...LAMBDA_TRANSIENT_ERRORS], [TransientError.errorName], [...LAMBDA_CRASH_ERRORS]]);
    const retried = retriedErrors(name).flat();
    for (const broad of [WorkflowError.Timeout, WorkflowError.All, 'States.TaskFailed']) expect(retried, name).not.toContain(broad);
    expect((state(name).Catch as { ErrorEquals: string[] }[])[0]?.ErrorEquals).toContain(WorkflowError.Timeout);
  });

  it('bounds every retry, backs off and spreads it with full jitter, so retries end and executions do not retry in step', () => {
    for (const name of TASK_STATES) {
      for (const retry of state(name).Retry as Retrier[]) {
        expect(retry.MaxAttempts, `${name} ${retry.ErrorEquals.join()}`).toBeGreaterThan(0);
        expect(retry.MaxAttempts, `${name} ${retry.ErrorEquals.join()}`).toBeLessThanOrEqual(6);
        expect(retry.BackoffRate, `${name} ${retry.ErrorEquals.join()}`).toBeGreaterThan(1);
        if (retry.ErrorEquals.includes(InstancesStillRunningError.errorName)) continue;
        expect(retry, `${name} ${retry.ErrorEquals.join()}`).toMatchObject({ MaxDelaySeconds: expect.any(Number), JitterStrategy: 'FULL' });
      }
    }
  });

  it.each(lambdaTasks)('gives %s a timeout a little above its Lambda\'s, so the Lambda times out first', (name) => {
    const lambdaSeconds = LAMBDA_NEEDS[TASK_LAMBDAS[name]].timeoutSeconds;
    expect(state(name).TimeoutSeconds).toBe(lambdaSeconds + TASK_TIMEOUT_MARGIN_SECONDS);
    expect(TASK_TIMEOUT_MARGIN_SECONDS).toBeGreaterThanOrEqual(10);
    expect(TASK_TIMEOUT_MARGIN_SECONDS).toBeLessThanOrEqual(60);
  });

  it('retries a release whose instances were still running when its wait budget ran out', () => {
    expect(state(StateName.ReleaseInstances).Retry).toContainEqual(
      expect.objectContaining({ ErrorEquals: [InstancesStillRunningError.errorName], MaxAttempts: expect.any(Number) }),
    );
  });

  it('sends any other Task error to RecordControllerFailure, which ends in ControllerFailed', () => {
    for (const name of TASK_STATES.filter((n) => n !== StateName.RecordControllerFailure)) {
      expect(state(name).Catch, name).toContainEqual({
        ErrorEquals: [WorkflowError.All],
        ResultPath: CONTROLLER_ERROR_PATH,
        Next: StateName.RecordControllerFailure,
      });
    }
    const record = state(StateName.RecordControllerFailure);
    expect(record.Next).toBe(StateName.ControllerFailed);
    expect(record.Catch).toEqual([expect.objectContaining({ ErrorEquals: [WorkflowError.All], Next: StateName.ControllerFailed })]);
    expect(state(StateName.ControllerFailed)).toMatchObject({ Type: 'Fail', Error: JobStatus.FAILED_CONTROLLER });
  });

  it('parks AwaitBoot on a task token with the job\'s boot_timeout and no heartbeat clock, then goes on to AwaitAttempt', () => {
    const awaitBoot = state(StateName.AwaitBoot);
    expect(awaitBoot).toMatchObject({
      Resource: 'arn:aws:states:::lambda:invoke.waitForTaskToken',
      TimeoutSecondsPath: BOOT_TIMEOUT_SECONDS_PATH,
      ResultPath: AWAITED_PATH,
      Next: StateName.AwaitAttempt,
      Parameters: {
        Payload: {
          'jobId.$': '$.jobId',
          'attempt.$': '$.attempt',
          'taskToken.$': '$$.Task.Token',
          state: StateName.AwaitBoot,
          'bootTimeoutSeconds.$': BOOT_TIMEOUT_SECONDS_PATH,
        },
      },
    });
    expect(awaitBoot).not.toHaveProperty('HeartbeatSeconds');
    expect(awaitBoot).not.toHaveProperty('TimeoutSeconds');
    expect(state(StateName.AwaitOrEvaluate).Default).toBe(StateName.AwaitBoot);
  });

  it('parks AwaitAttempt on a task token with a heartbeat clock only', () => {
    const awaitAttempt = state(StateName.AwaitAttempt);
    expect(awaitAttempt).toMatchObject({
      Resource: 'arn:aws:states:::lambda:invoke.waitForTaskToken',
      HeartbeatSeconds: HEARTBEAT_TIMEOUT_SECONDS,
      ResultPath: AWAITED_PATH,
      Next: StateName.EvaluateRecoveryPolicy,
      Parameters: {
        Payload: { 'jobId.$': '$.jobId', 'attempt.$': '$.attempt', 'taskToken.$': '$$.Task.Token', state: StateName.AwaitAttempt },
      },
    });
    expect(awaitAttempt).not.toHaveProperty('TimeoutSeconds');
    expect(awaitAttempt).not.toHaveProperty('TimeoutSecondsPath');
  });

  it.each([StateName.AwaitBoot, StateName.AwaitAttempt])('sends %s\'s never-up, lost, timed-out and cancelled attempts to the policy', (name) => {
    const catches = state(name).Catch as { ErrorEquals: string[]; Next: string; ResultPath: string }[];
    expect(catches[0]).toEqual({
      ErrorEquals: [WorkflowError.HeartbeatTimeout, WorkflowError.Timeout, WorkflowError.JobCancelled],
      ResultPath: AWAIT_ERROR_PATH,
      Next: StateName.EvaluateRecoveryPolicy,
    });
  });

  it('sends a launch with a later slot to WaitForLaunchPace, which waits $.launchWaitSeconds and launches again', () => {
    expect((state(StateName.AwaitOrEvaluate).Choices as unknown[])[0]).toEqual({
      Variable: LAUNCH_WAIT_SECONDS_PATH,
      IsPresent: true,
      Next: StateName.WaitForLaunchPace,
    });
    expect(state(StateName.WaitForLaunchPace)).toEqual({ Type: 'Wait', SecondsPath: LAUNCH_WAIT_SECONDS_PATH, Next: StateName.LaunchAttempt });
  });

  it('makes at most 8 transitions per attempt on every loop, 10 with a standby, by walking the graph', () => {
    const loops = loopsThrough(StateName.LaunchAttempt);
    expect(loops.length).toBeGreaterThanOrEqual(3);
    const plain = loops.filter((loop) => !loop.includes(StateName.LaunchStandby));
    for (const loop of plain) expect(loop.length, loop.join(' → ')).toBeLessThanOrEqual(8);
    expect(Math.max(...plain.map((loop) => loop.length))).toBe(8);
    // A standby adds LaunchStandby and a second AwaitAttempt (a simple cycle enters AwaitAttempt once).
    const [withStandby] = loopsThrough(StateName.AwaitAttempt).filter((loop) => loop.includes(StateName.LaunchStandby));
    expect(withStandby).toEqual([StateName.LaunchStandby, StateName.AwaitAttempt]);
    // No other loop avoids LaunchAttempt: nothing spins while a job runs. That one is taken
    // once per attempt at most: a warning asks for a standby only while none was started
    // (askForStandby), and LaunchStandby starts one, or records why not, every time it runs.
    for (const name of Object.keys(states).filter((n) => n !== StateName.LaunchAttempt)) {
      const loops = loopsThrough(name).filter((loop) => !loop.includes(StateName.LaunchAttempt));
      const expected = name === StateName.AwaitAttempt ? [[StateName.LaunchStandby, StateName.AwaitAttempt]] : name === StateName.LaunchStandby ? [[StateName.AwaitAttempt, StateName.LaunchStandby]] : [];
      expect(loops, name).toEqual(expected);
    }
  });

  it('sends AwaitAttempt, on StandbyWanted, to LaunchStandby, which keeps no error and goes back to waiting', () => {
    expect(state(StateName.AwaitAttempt).Catch).toContainEqual({ ErrorEquals: [WorkflowError.StandbyWanted], ResultPath: null, Next: StateName.LaunchStandby });
    // Before the catch-all, which would otherwise take it.
    const catches = (state(StateName.AwaitAttempt).Catch as { ErrorEquals: string[] }[]).map((c) => c.ErrorEquals.join());
    expect(catches.indexOf(WorkflowError.StandbyWanted)).toBeLessThan(catches.indexOf(WorkflowError.All));
    expect(JSON.stringify(state(StateName.AwaitBoot).Catch)).not.toContain(WorkflowError.StandbyWanted);
    expect(state(StateName.LaunchStandby)).toMatchObject({
      Type: 'Task',
      Parameters: { 'jobId.$': '$.jobId', 'standbyFor.$': '$.attempt' },
      ResultPath: STANDBY_PATH,
      Next: StateName.AwaitAttempt,
    });
    expect(TASK_LAMBDAS[StateName.LaunchStandby]).toBe(TASK_LAMBDAS[StateName.LaunchAttempt]);
  });
});

describe('the controller on the local engine, as the local runtime runs it', () => {
  const local = localControllerDefinition();
  type Step = (state: WorkflowState) => WorkflowState;
  const decide = (action: string, status: JobStatus, delaySeconds = 0): Step => (s) => ({
    ...s,
    decision: { action: action as 'SUCCEED', status, reason: `${action} because`, delaySeconds, continueAsNew: false },
  });

  /** Errors a state's handler throws on its first visits, one per visit, before it answers. */
  type Faults = Partial<Record<string, Error[]>>;

  /** Each launch's answer: launched, not (no capacity), or given a later slot by the launch pace. */
  type Launch = boolean | 'paced';

  async function run(launches: Launch[], awaits: (() => unknown)[], decisions: Step[], boots: (() => unknown)[] = [], faults: Faults = {}) {
    let launch = 0;
    let booted = 0;
    let awaited = 0;
    let decided = 0;
    const seen: string[] = [];
    const launchInputs: WorkflowState[] = [];
    const standbyInputs: unknown[] = [];
    const handlers = {
      [StateName.LaunchAttempt]: async (s: WorkflowState) => {
        launchInputs.push(s);
        const answer = launches[launch++] ?? true;
        if (answer === 'paced') return { jobId: s.jobId, attempt: s.attempt, attemptsInExecution: s.attemptsInExecution, launchWaitSeconds: 30, launchReserved: true };
        return { jobId: s.jobId, attempt: s.attempt + 1, attemptsInExecution: s.attemptsInExecution + 1, launched: answer, bootTimeoutSeconds: 1 };
      },
      [StateName.AwaitBoot]: async () => (boots[booted++] ?? (() => ({ booted: true })))(),
      [StateName.AwaitAttempt]: async () => awaits[awaited++]?.(),
      [StateName.EvaluateRecoveryPolicy]: async (s: WorkflowState) => (decisions[decided++] as Step)(s),
      [StateName.LaunchStandby]: async (input: { jobId: string; standbyFor: number }) => {
        standbyInputs.push(input);
        return { attempt: input.standbyFor + 1, launched: true, reason: 'launched as a standby' };
      },
      [StateName.ReleaseInstances]: async (s: WorkflowState) => s,
      [StateName.ContinueAsNewExecution]: async (s: WorkflowState) => s,
      [StateName.RecordControllerFailure]: async (s: WorkflowState & { controllerError: { Error: string } }) => ({
        ...s,
        decision: {
          action: 'FAIL',
          status: JobStatus.FAILED_CONTROLLER,
          reason: `recorded ${s.controllerError.Error}`,
          delaySeconds: 0,
          continueAsNew: false,
        },
      }),
    };
    const calls: Record<string, number> = {};
    const faulty = Object.fromEntries(
      Object.entries(handlers).map(([name, handler]) => [
        name,
        async (input: never) => {
          calls[name] = (calls[name] ?? 0) + 1;
          const fault = faults[name]?.[calls[name] - 1];
          if (fault !== undefined) throw fault;
          return handler(input);
        },
      ]),
    );
    const machine = new StateMachine(structuredClone(local) as never, { validationOptions: { checkArn: false } });
    const execution = machine.run({ jobId: 'j1', attempt: 0, attemptsInExecution: 0 } as never, {
      overrides: {
        taskResourceLocalHandlers: faulty as never,
        waitTimeOverrides: { [StateName.WaitBeforeRelaunch]: 0, [StateName.WaitForLaunchPace]: 0 },
        // Retries without their backoff, so a test waits for nothing.
        retryIntervalOverrides: Object.fromEntries(TASK_STATES.map((name) => [name, 0])),
      },
      context: { Task: { Token: 'token' } },
    });
    const logging = (async () => {
      for await (const event of execution.eventLogs) if (event.type === 'StateEntered') seen.push(event.state.name);
    })();
    const result = await execution.result.then(
      (output: unknown) => ({ output, error: undefined as unknown }),
      (error: unknown) => ({ output: undefined, error }),
    );
    await logging.catch(() => undefined);
    return { ...result, seen, calls, launchInputs, standbyInputs };
  }

  const named = (name: string, message = `${name} (from the test)`): Error => Object.assign(new Error(message), { name });

  it('retries TransientError within seconds on the local engine, whose only 5xx is a full disk the janitor waits out', () => {
    for (const name of TASK_STATES) {
      const retries = ((local.States as Record<string, AslState>)[name]?.Retry ?? []) as { ErrorEquals: string[]; IntervalSeconds: number; BackoffRate: number; MaxAttempts: number }[];
      const transient = retries.find((retry) => retry.ErrorEquals.includes(TransientError.errorName));
      expect(transient, name).toMatchObject({ IntervalSeconds: 1, BackoffRate: 1 });
      expect(transient?.MaxAttempts, name).toBe((state(name).Retry as { ErrorEquals: string[]; MaxAttempts: number }[]).find((r) => r.ErrorEquals.includes(TransientError.errorName))?.MaxAttempts);
    }
  });

  const cancelled = () => {
    throw Object.assign(new Error('cancelled by the user'), { name: WorkflowError.JobCancelled });
  };

  it('relaunches after a preemption (with and without backoff) and succeeds, 7 or 8 transitions per attempt', async () => {
    const { output, seen } = await run(
      [true, true, true],
      [() => ({ outcome: 'PREEMPTED' }), () => ({ outcome: 'PREEMPTED' }), () => ({ outcome: 'EXITED' })],
      [decide('RECOVER', 'RECOVERING'), decide('RECOVER', 'RECOVERING', 1), decide('SUCCEED', 'SUCCEEDED')],
    );
    expect(output).toMatchObject({ attempt: 3, awaited: { outcome: 'EXITED' } });
    // States entered from each LaunchAttempt up to the next one (the last ends in JobSucceeded).
    const starts = seen.flatMap((name, index) => (name === StateName.LaunchAttempt ? [index] : []));
    const perAttempt = starts.map((start, i) => (starts[i + 1] ?? seen.length - 1) - start);
    expect(perAttempt).toEqual([7, 8, 7]);
    expect(seen.at(-1)).toBe(StateName.JobSucceeded);
  });

  it('on StandbyWanted launches a standby given the job and the warned attempt, keeps its answer and no error, and waits again', async () => {
    let evaluated: WorkflowState | undefined;
    const wanted = () => {
      throw named(WorkflowError.StandbyWanted, 'the spot interruption warning on attempt 1 asks for attempt 2 as its standby');
    };
    const { output, seen, standbyInputs } = await run(
      [true, true],
      [wanted, () => ({ outcome: 'PREEMPTED' }), () => ({ outcome: 'EXITED' })],
      [(s) => ((evaluated = s), decide('RECOVER', 'RECOVERING')(s)), decide('SUCCEED', 'SUCCEEDED')],
    );
    expect(seen.slice(0, 7)).toEqual([
      StateName.LaunchAttempt,
      StateName.AwaitOrEvaluate,
      StateName.AwaitBoot,
      StateName.AwaitAttempt,
      StateName.LaunchStandby,
      StateName.AwaitAttempt,
      StateName.EvaluateRecoveryPolicy,
    ]);
    expect(standbyInputs).toEqual([{ jobId: 'j1', standbyFor: 1 }]);
    expect(evaluated).toMatchObject({ attempt: 1, standby: { attempt: 2, launched: true }, awaited: { outcome: 'PREEMPTED' } });
    expect(evaluated).not.toHaveProperty('awaitError');
    expect(output).toMatchObject({ attempt: 2 });
  });

  it('waits in WaitForLaunchPace when the pace gives a launch a later slot, then runs LaunchAttempt again holding it', async () => {
    const { output, seen, launchInputs } = await run(['paced', true], [() => ({ outcome: 'EXITED' })], [decide('SUCCEED', 'SUCCEEDED')]);
    expect(seen.slice(0, 5)).toEqual([
      StateName.LaunchAttempt,
      StateName.AwaitOrEvaluate,
      StateName.WaitForLaunchPace,
      StateName.LaunchAttempt,
      StateName.AwaitOrEvaluate,
    ]);
    expect(launchInputs[1]).toMatchObject({ attempt: 0, launchReserved: true });
    // The launch's answer replaces the state: no wait is left over for the attempt.
    expect(output).not.toHaveProperty('launchWaitSeconds');
    expect(seen.at(-1)).toBe(StateName.JobSucceeded);
  });

  it('fails AwaitBoot with States.Timeout once its boot_timeout passes, and goes to the policy', async () => {
    let evaluated: WorkflowState | undefined;
    const never = () => new Promise(() => undefined);
    const { seen, calls } = await run([true], [], [(s) => ((evaluated = s), decide('FAIL', JobStatus.FAILED_NO_RESOURCE)(s))], [never]);
    expect(evaluated?.awaitError).toMatchObject({ Error: WorkflowError.Timeout });
    // The boot clock running out is an outcome, not a fault: never retried.
    expect(calls[StateName.AwaitBoot]).toBe(1);
    expect(seen).not.toContain(StateName.AwaitAttempt);
  });

  it('skips both waits when nothing launched and fails with the decision status and reason', async () => {
    const { error, seen } = await run([false], [], [decide('FAIL', JobStatus.FAILED_NO_RESOURCE)]);
    expect(seen).not.toContain(StateName.AwaitBoot);
    expect(seen).not.toContain(StateName.AwaitAttempt);
    expect(seen).toContain(StateName.AwaitOrEvaluate);
    expect(String((error as { cause?: Error }).cause?.name ?? error)).toContain(JobStatus.FAILED_NO_RESOURCE);
  });

  it('routes a cancelled AwaitAttempt to the policy with the error at awaitError', async () => {
    let evaluated: WorkflowState | undefined;
    const { seen } = await run([true], [cancelled], [(s) => ((evaluated = s), decide('FAIL', JobStatus.CANCELLED)(s))]);
    expect(evaluated?.awaitError).toMatchObject({ Error: WorkflowError.JobCancelled });
    expect(seen.at(-1)).toBe(StateName.JobFailed);
  });

  it('retries steps that hit a transient fault or whose Lambda died, and the job goes on as if nothing happened', async () => {
    const transient = named(TransientError.errorName);
    const { output, seen, calls } = await run([true], [() => ({ outcome: 'EXITED' })], [decide('SUCCEED', 'SUCCEEDED')], [], {
      [StateName.LaunchAttempt]: [transient, named('Lambda.Unknown')],
      [StateName.AwaitBoot]: [transient],
      [StateName.AwaitAttempt]: [named('Sandbox.Timedout')],
      [StateName.EvaluateRecoveryPolicy]: [transient, transient],
      [StateName.ReleaseInstances]: [named('Lambda.Unknown')],
    });
    expect(output).toMatchObject({ attempt: 1, decision: { action: 'SUCCEED' } });
    expect(calls).toMatchObject({
      [StateName.LaunchAttempt]: 3,
      [StateName.AwaitBoot]: 2,
      [StateName.AwaitAttempt]: 2,
      [StateName.EvaluateRecoveryPolicy]: 3,
      [StateName.ReleaseInstances]: 2,
    });
    expect(seen).not.toContain(StateName.RecordControllerFailure);
    expect(seen.at(-1)).toBe(StateName.JobSucceeded);
  });

  it('gives up on a transient fault that outlasts its retries: RecordControllerFailure, then ControllerFailed', async () => {
    const transient = Array.from({ length: 10 }, () => named(TransientError.errorName, 'DynamoDB GetItem: throttled'));
    const { error, seen, calls } = await run([true], [() => ({ outcome: 'EXITED' })], [decide('SUCCEED', 'SUCCEEDED')], [], {
      [StateName.EvaluateRecoveryPolicy]: transient,
    });
    const retries = (state(StateName.EvaluateRecoveryPolicy).Retry as { ErrorEquals: string[]; MaxAttempts: number }[]).find((r) =>
      r.ErrorEquals.includes(TransientError.errorName),
    );
    expect(calls[StateName.EvaluateRecoveryPolicy]).toBe(1 + (retries?.MaxAttempts ?? NaN));
    expect(seen.slice(-2)).toEqual([StateName.RecordControllerFailure, StateName.ControllerFailed]);
    expect((error as { cause?: Error }).cause).toMatchObject({ message: `recorded ${TransientError.errorName}` });
  });

  it('turns a handler crash into ControllerFailed after RecordControllerFailure', async () => {
    const { error, seen } = await run([true], [() => ({ outcome: 'EXITED' })], [() => { throw new Error('boom'); }]);
    expect(seen.slice(-2)).toEqual([StateName.RecordControllerFailure, StateName.ControllerFailed]);
    const cause = (error as { cause?: Error }).cause;
    expect(cause).toMatchObject({ name: JobStatus.FAILED_CONTROLLER, message: 'recorded Error' });
  });
});
