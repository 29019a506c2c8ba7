// The world the contract suite runs in: moto_server standing in for AWS, relaunch stacks
// "deployed" onto it from their synthesized templates (deploy.ts), and the real Lambda
// handlers run in this process, each with exactly the environment its template gives it,
// one invocation at a time. Every AWS call they make goes to moto, and is recorded for the
// IAM check (recorder.ts, iam.ts), which runs after every test.
//
// moto records a state machine's executions but does not run them (it would invoke the
// Lambdas in Docker). So each deployment's own definition, read from its template, runs on
// aws-local-stepfunctions (LocalWorkflow, the local runtime's engine), its Task states
// bound to the real handlers: a StartExecution, SendTask* or StopExecution a handler sends
// to moto is then applied to that engine too, as Step Functions would apply it. moto's
// GetExecutionHistory is canned (always a finished execution), so the suite answers it
// from the engine: the one call moto does not answer. EventBridge is the suite: it sends
// the execution ends and the EC2 events a test asks for to their handlers.

import { afterAll, afterEach, beforeAll, expect, vi } from 'vitest';
import { DescribeInstancesCommand, EC2Client, type Instance } from '@aws-sdk/client-ec2';
import { InvalidToken } from '@aws-sdk/client-sfn';
import { GetParameterCommand, GetParametersByPathCommand, SSMClient } from '@aws-sdk/client-ssm';
import type { StateMachineDefinition } from 'aws-local-stepfunctions';
import type { RelaunchConfig } from '../../../infra/config.ts';
import { LAMBDA_NAMES, TASK_LAMBDAS, type LambdaName } from '../../../infra/lambda-catalog.ts';
import { LocalWorkflow, type LocalExecutionResult, type LocalTaskHandler, type TaskClock } from '../../../local/local-workflow.ts';
import { agentSecretName, agentSecretPath } from '../../../lib/agent/secret-parameter.ts';
import { TagKey } from '../../../lib/agent/tags.ts';
import { EC2_DETAIL_TYPES, EXECUTION_STATUS_CHANGE, UNRECORDED_END_STATUSES } from '../../../lib/aws-events.ts';
import { BOOT_TIMEOUT_SECONDS_PATH, StateName, TASK_STATES, type ExecutionInput } from '../../../lib/workflow/contract.ts';
import { resolveString } from '../../support/cfn-intrinsics.ts';
import { createNetwork, deploy, type Deployment } from './deploy.ts';
import { describeRefusal, observer, refusals } from './iam.ts';
import { MOTO_ACCOUNT, startMoto, useMotoEnvironment, type Moto } from './moto.ts';
import { installRecorder, inScope, takeCalls, type CallScope, type RecordedCall } from './recorder.ts';

type Json = Parameters<LocalTaskHandler>[0];
/** The handlers' own deps module (functions/shared/deps.ts), as loaded beside them. */
export type FunctionDeps = typeof import('../../../functions/shared/deps.ts');
type Handler = (event: unknown, context?: unknown) => Promise<unknown>;

/** The caller of the IAM-authorized routes, as API Gateway names a SigV4 signer. */
export const USER_ARN = `arn:aws:iam::${MOTO_ACCOUNT}:user/tester`;

/** Something that happened in the world, that a test may wait for. */
export type WorldEvent =
  | { readonly kind: 'awaiting'; readonly deployment: string; readonly jobId: string; readonly attempt: number; readonly state: string }
  | { readonly kind: 'task'; readonly deployment: string; readonly jobId: string; readonly state: string; readonly output: unknown }
  | { readonly kind: 'ended'; readonly deployment: string; readonly jobId: string; readonly executionName: string; readonly result: LocalExecutionResult };

/** An API answer, its body parsed. */
export interface ApiAnswer {
  readonly statusCode: number;
  readonly body: Record<string, unknown>;
  readonly headers: Record<string, string>;
}

/** Options of a deployment in the world. */
export interface DeployOptions {
  /** The zones of its subnets, in its home region. @default ['us-east-1a', 'us-east-1b'] */
  readonly zones?: readonly string[];
  /** The rest of its configuration (its network is made in moto). */
  readonly config?: Omit<Partial<RelaunchConfig>, 'vpcId' | 'subnetsByZone'>;
  /**
   * Rewrites an execution's input as the engine starts it, by its name (a test that needs
   * an execution far into its history).
   */
  readonly startInput?: (input: ExecutionInput, executionName: string) => Record<string, unknown>;
}

/** One relaunch stack in the world, its handlers and its executions. */
export class StackInWorld {
  readonly workflow: LocalWorkflow;
  private handlers: Record<LambdaName, Handler> | undefined;
  private resetDeps: (() => void) | undefined;
  private deps: FunctionDeps | undefined;
  /** Execution names by the ARN moto gave them. */
  private readonly executionNames = new Map<string, string>();
  /** The latest state each execution entered. */
  private readonly currentState = new Map<string, string>();
  private readonly ends: Promise<void>[] = [];
  /** Execution ends whose handlers failed (a test fails on them). */
  readonly endFailures: string[] = [];
  /** Answers the suite gives instead of moto, once each, in order: AWS behaviour moto has no way to show. */
  private readonly injected: { readonly service: string; readonly operation: string; readonly answer: (call: RecordedCall) => Record<string, unknown> }[] = [];

  constructor(
    readonly world: World,
    readonly deployment: Deployment,
    private readonly options: DeployOptions,
  ) {
    this.workflow = new LocalWorkflow({
      definition: engineDefinition(deployment),
      tasks: () => this.taskHandlers(),
      // Long enough that no test meets it; the suite sends heartbeats when it means to.
      heartbeatTimeoutMs: 30 * 60 * 1000,
      onTransition: (executionName, state) => this.currentState.set(executionName, state),
      onEnded: (execution, result) => {
        this.ends.push(
          this.executionEnded(execution.jobId, execution.arn, result).catch((error: unknown) => {
            this.endFailures.push(`${execution.arn}: ${(error as Error).message}`);
          }),
        );
      },
    });
  }

  get id(): string {
    return this.deployment.id;
  }

  /** Imports the handlers in a module registry of their own, each with its environment set. */
  async load(): Promise<void> {
    await this.world.exclusively(() => this.importHandlers());
  }

  private async importHandlers(): Promise<void> {
    vi.resetModules();
    const loaded: Partial<Record<LambdaName, Handler>> = {};
    for (const name of LAMBDA_NAMES) {
      const restore = this.world.applyEnvironment(this.deployment, name);
      try {
        loaded[name] = ((await import(`../../../functions/${name}/handler.ts`)) as { handler: Handler }).handler;
      } finally {
        restore();
      }
    }
    this.deps = (await import('../../../functions/shared/deps.ts')) as FunctionDeps;
    this.resetDeps = this.deps.resetDeps;
    this.handlers = loaded as Record<LambdaName, Handler>;
  }

  /**
   * Runs `body` as function `name` would run its calls: alone in the world, with the
   * function's environment and fresh clients from the handlers' own deps, its AWS calls
   * recorded for the IAM check. For a port's calls that no state of the machine makes yet.
   */
  async asFunction<T>(name: LambdaName, body: (deps: FunctionDeps) => Promise<T>): Promise<T> {
    const deps = this.deps;
    if (deps === undefined) throw new Error(`${this.id}: handlers not loaded`);
    return this.world.exclusively(async () => {
      const restore = this.world.applyEnvironment(this.deployment, name);
      try {
        deps.resetDeps();
        return await inScope(this.scope(name), () => body(deps));
      } finally {
        restore();
      }
    });
  }

  /**
   * Runs a Lambda handler as Lambda would: alone (one invocation at a time in the world),
   * with its function's environment and fresh clients, its AWS calls recorded.
   */
  async invoke(name: LambdaName, event: unknown): Promise<unknown> {
    const handler = this.handlers?.[name];
    if (handler === undefined) throw new Error(`${this.id}: handlers not loaded`);
    return this.world.exclusively(async () => {
      const restore = this.world.applyEnvironment(this.deployment, name);
      try {
        this.resetDeps?.();
        return await inScope(this.scope(name), () => handler(event, lambdaContext(this.deployment.functions[name].functionName)));
      } finally {
        restore();
      }
    });
  }

  /** A request to the REST API, through the api Lambda, as API Gateway's proxy sends it. */
  async api(method: string, path: string, options: { body?: string; headers?: Record<string, string>; caller?: string | null } = {}): Promise<ApiAnswer> {
    const caller = options.caller === undefined ? USER_ARN : options.caller;
    const [bare, query] = path.split('?', 2) as [string, string | undefined];
    const answer = (await this.invoke('api', {
      httpMethod: method,
      path: bare,
      headers: { 'content-type': 'application/json', ...options.headers },
      queryStringParameters: query === undefined ? null : Object.fromEntries(new URLSearchParams(query)),
      body: options.body ?? null,
      isBase64Encoded: false,
      requestContext: { identity: { userArn: caller, sourceIp: '198.51.100.7' } },
    })) as { statusCode: number; body: string; headers?: Record<string, string> };
    return { statusCode: answer.statusCode, body: answer.body === '' ? {} : (JSON.parse(answer.body) as Record<string, unknown>), headers: answer.headers ?? {} };
  }

  /** Submits a task file (YAML) and returns its job id; the execution starts as the API starts it. */
  async submit(yaml: string): Promise<string> {
    const answer = await this.api('POST', '/jobs', { body: yaml, headers: { 'content-type': 'application/yaml' } });
    if (answer.statusCode !== 202) throw new Error(`submit answered ${answer.statusCode}: ${JSON.stringify(answer.body)}`);
    return answer.body.jobId as string;
  }

  /** The job as `GET /jobs/{id}` answers it. */
  async job(jobId: string): Promise<Record<string, unknown> & { status: string; attempts: Record<string, unknown>[] }> {
    const answer = await this.api('GET', `/jobs/${jobId}`);
    if (answer.statusCode !== 200) throw new Error(`GET /jobs/${jobId} answered ${answer.statusCode}: ${JSON.stringify(answer.body)}`);
    return answer.body as Record<string, unknown> & { status: string; attempts: Record<string, unknown>[] };
  }

  /** The agents of an attempt's nodes (rank order), each with the secret it reads from its own parameter in moto. */
  async agents(jobId: string, attempt: number): Promise<Agent[]> {
    const instances = await this.world.instances(this.deployment.region, { [TagKey.jobId]: jobId, [TagKey.attempt]: String(attempt) });
    const ranked = instances
      .filter((instance) => instance.State?.Name !== 'terminated')
      .sort((a, b) => Number(tagOf(a, TagKey.nodeRank)) - Number(tagOf(b, TagKey.nodeRank)));
    const ssm = new SSMClient({ region: this.deployment.region, endpoint: this.world.moto.endpoint });
    return Promise.all(
      ranked.map(async (instance) => {
        const name = agentSecretName(agentSecretPath(this.deployment.namePrefix), instance.InstanceId as string);
        const parameter = await ssm.send(new GetParameterCommand({ Name: name, WithDecryption: true }));
        const [secret] = (parameter.Parameter?.Value ?? '').split(' ');
        return new Agent(this, jobId, attempt, Number(tagOf(instance, TagKey.nodeRank)), instance.InstanceId as string, secret as string);
      }),
    );
  }

  /** Sends an EC2 event about an instance to on-ec2-event, as its rule would. */
  async ec2Event(instanceId: string, event: { interruption: true } | { rebalance: true } | { state: string }): Promise<unknown> {
    const detailType = 'interruption' in event ? EC2_DETAIL_TYPES.interruption : 'rebalance' in event ? EC2_DETAIL_TYPES.rebalance : EC2_DETAIL_TYPES.stateChange;
    const detail =
      'interruption' in event
        ? { 'instance-id': instanceId, 'instance-action': 'terminate' }
        : 'rebalance' in event
          ? { 'instance-id': instanceId }
          : { 'instance-id': instanceId, state: event.state };
    return this.invoke('on-ec2-event', {
      version: '0',
      id: `event-${instanceId}-${Date.now()}`,
      'detail-type': detailType,
      source: 'aws.ec2',
      account: this.deployment.account,
      time: new Date().toISOString(),
      region: this.deployment.region,
      resources: [`arn:aws:ec2:${this.deployment.region}:${this.deployment.account}:instance/${instanceId}`],
      detail,
    });
  }

  /**
   * The next `service:operation` call gets `answer`'s result (or its throw) instead of
   * moto's: for what AWS does that moto cannot (an account without the spot role).
   */
  answerNext(service: string, operation: string, answer: (call: RecordedCall) => Record<string, unknown>): void {
    this.injected.push({ service, operation, answer });
  }

  /** Resolves with the first event (past or future) that `match` accepts. */
  next(match: (event: WorldEvent) => boolean): Promise<WorldEvent> {
    return this.world.next((event) => event.deployment === this.id && match(event));
  }

  /** Resolves once the job's attempt has stored its task token in `state` (AwaitBoot or AwaitAttempt). */
  async awaiting(jobId: string, attempt: number, state: string): Promise<void> {
    await this.next((event) => event.kind === 'awaiting' && event.jobId === jobId && event.attempt === attempt && event.state === state);
  }

  /** Resolves with how the job's execution named `executionName` (default: the job's first) ended, once its end handlers ran. */
  async ended(jobId: string, executionName = jobId): Promise<LocalExecutionResult> {
    const event = await this.next((e) => e.kind === 'ended' && e.jobId === jobId && e.executionName === executionName);
    return (event as Extract<WorldEvent, { kind: 'ended' }>).result;
  }

  /** Waits for every execution end this stack has seen to be handled. */
  async settled(): Promise<void> {
    await Promise.all(this.ends);
  }

  /** The suite's hooks for calls this deployment's functions make. */
  private scope(fn: LambdaName): CallScope {
    return {
      deployment: this.id,
      fn,
      observe: observer(this.world.moto),
      answer: async (call) => {
        const index = this.injected.findIndex((injected) => injected.service === call.service && injected.operation === call.operation);
        if (index >= 0) return (this.injected.splice(index, 1)[0] as (typeof this.injected)[number]).answer(call);
        return call.service === 'SFN' && call.operation === 'GetExecutionHistory' ? this.history(call) : undefined;
      },
      after: async (call) => {
        if (call.service === 'SFN') await this.applyToEngine(call);
      },
    };
  }

  /** moto's answer is canned; the engine knows whether the execution sits in a Wait. */
  private async history(call: RecordedCall): Promise<Record<string, unknown>> {
    const name = this.executionNames.get(String(call.input.executionArn));
    const state = name === undefined ? undefined : this.currentState.get(name);
    const inWait = state === StateName.WaitBeforeRelaunch || state === StateName.WaitForLaunchPace;
    return { events: [{ id: 1, timestamp: new Date(), type: inWait ? 'WaitStateEntered' : 'TaskStateEntered' }] };
  }

  /** What Step Functions does with a call moto has just accepted. */
  private async applyToEngine(call: RecordedCall): Promise<void> {
    const input = call.input;
    switch (call.operation) {
      case 'StartExecution': {
        if (input.stateMachineArn !== this.stateMachineArn) return;
        const name = String(input.name);
        this.executionNames.set(String(call.output?.executionArn), name);
        const start = JSON.parse(String(input.input)) as ExecutionInput;
        await this.workflow.start(name, (this.options.startInput?.(start, name) ?? start) as ExecutionInput);
        return;
      }
      case 'SendTaskSuccess':
        return this.onToken(call, () => this.workflow.resume(String(input.taskToken), JSON.parse(String(input.output))));
      case 'SendTaskFailure':
        return this.onToken(call, () => this.workflow.fail(String(input.taskToken), String(input.error), String(input.cause)));
      case 'SendTaskHeartbeat':
        return this.onToken(call, () => this.workflow.heartbeat(String(input.taskToken)));
      case 'StopExecution': {
        const name = this.executionNames.get(String(input.executionArn));
        if (name !== undefined) await this.workflow.stopBetweenSteps(`arn:relaunch:local:execution:${name}`, String(input.cause ?? ''));
        return;
      }
      default:
        return;
    }
  }

  /**
   * moto accepts any token; Step Functions refuses one whose task has ended. The engine
   * knows which are live, so a stale one is refused here as Step Functions refuses it.
   */
  private async onToken(call: RecordedCall, apply: () => Promise<void>): Promise<void> {
    try {
      await apply();
    } catch (error) {
      const stale = new InvalidToken({ message: `the task token is no longer valid (${(error as Error).message})`, $metadata: {} });
      call.error = { name: stale.name, message: stale.message };
      throw stale;
    }
  }

  private get stateMachineArn(): string {
    return this.deployment.only('AWS::StepFunctions::StateMachine').physical.attributes.Arn as string;
  }

  /** Every Task state of the definition, bound to the real handler of the function its template names. */
  private taskHandlers(): Record<string, LocalTaskHandler> {
    const bound: Record<string, LocalTaskHandler> = {};
    for (const state of TASK_STATES) {
      const fn = TASK_LAMBDAS[state];
      if (state === StateName.AwaitBoot || state === StateName.AwaitAttempt) {
        bound[state] = (input) => this.awaitOnToken(fn, input);
        continue;
      }
      bound[state] = async (input) => {
        const output = await this.invoke(fn, input);
        const jobId = (input as { jobId?: string }).jobId ?? '';
        this.world.emit({ kind: 'task', deployment: this.id, jobId, state, output });
        return output as Json;
      };
    }
    return bound;
  }

  /** A `.waitForTaskToken` Task: a fresh token, given to the await-attempt Lambda to store. */
  private async awaitOnToken(fn: LambdaName, input: Json): Promise<Json> {
    const { Payload } = input as unknown as { Payload: { jobId: string; attempt: number; state: string; bootTimeoutSeconds?: number } };
    const clock: TaskClock =
      Payload.state === StateName.AwaitBoot && Payload.bootTimeoutSeconds !== undefined ? { kind: 'timeout', ms: Payload.bootTimeoutSeconds * 1000 } : { kind: 'heartbeat' };
    const { token, result } = this.workflow.waitForTaskToken(clock);
    result.catch(() => undefined);
    try {
      await this.invoke(fn, { ...Payload, taskToken: token });
    } catch (error) {
      this.workflow.withdraw(token);
      throw error;
    }
    this.world.emit({ kind: 'awaiting', deployment: this.id, jobId: Payload.jobId, attempt: Payload.attempt, state: Payload.state });
    return result;
  }

  /** EventBridge's part: the execution's end to the rules' targets, as the stack routes them. */
  private async executionEnded(jobId: string, localArn: string, result: LocalExecutionResult): Promise<void> {
    const name = localArn.replace('arn:relaunch:local:execution:', '');
    const executionArn = [...this.executionNames].find(([, known]) => known === name)?.[0] ?? localArn;
    const status = result.status;
    const event = {
      version: '0',
      id: `end-${name}`,
      'detail-type': EXECUTION_STATUS_CHANGE,
      source: 'aws.states',
      account: this.deployment.account,
      time: new Date().toISOString(),
      region: this.deployment.region,
      resources: [executionArn],
      detail: {
        executionArn,
        stateMachineArn: this.stateMachineArn,
        name,
        status,
        input: JSON.stringify({ jobId, attempt: 0, attemptsInExecution: 0 }),
        error: result.error ?? null,
        cause: result.cause ?? null,
      },
    };
    try {
      if ((UNRECORDED_END_STATUSES as readonly string[]).includes(status)) await this.invoke('on-execution-ended', event);
      await this.invoke('delete-transient-mounts', event);
    } finally {
      this.world.emit({ kind: 'ended', deployment: this.id, jobId, executionName: name, result });
    }
  }
}

/** One node's agent, as the suite plays it: the API's agent routes with its secret. */
export class Agent {
  constructor(
    private readonly stack: StackInWorld,
    readonly jobId: string,
    readonly attempt: number,
    readonly nodeRank: number,
    readonly instanceId: string,
    readonly secret: string,
  ) {}

  heartbeat(): Promise<ApiAnswer> {
    return this.post('heartbeat', { nodeRank: this.nodeRank });
  }

  report(phase: 'setup' | 'run', exitCode: number, outputTail = ''): Promise<ApiAnswer> {
    return this.post('report', { nodeRank: this.nodeRank, phase, exitCode, outputTail });
  }

  /** A holding node (a standby's) asking whether to go on to run. */
  hold(): Promise<ApiAnswer> {
    return this.post('hold', { nodeRank: this.nodeRank });
  }

  /** The same request with another attempt's number in the path (a secret used where it is not valid). */
  holdAs(attempt: number): Promise<ApiAnswer> {
    return this.stack.api('POST', `/jobs/${this.jobId}/attempts/${attempt}/hold`, {
      body: JSON.stringify({ nodeRank: this.nodeRank }),
      headers: { authorization: `Bearer ${this.secret}` },
      caller: null,
    });
  }

  dataCredentials(): Promise<ApiAnswer> {
    return this.post('data-credentials', { nodeRank: this.nodeRank });
  }

  private post(route: string, body: unknown): Promise<ApiAnswer> {
    return this.stack.api('POST', `/jobs/${this.jobId}/attempts/${this.attempt}/${route}`, {
      body: JSON.stringify(body),
      headers: { authorization: `Bearer ${this.secret}` },
      caller: null,
    });
  }
}

/** moto, the deployments on it, and the suite's own view of what moto holds. */
export class World {
  readonly stacks = new Map<string, StackInWorld>();
  private readonly events: WorldEvent[] = [];
  private readonly waiters: { match: (event: WorldEvent) => boolean; resolve: (event: WorldEvent) => void }[] = [];
  private queue: Promise<unknown> = Promise.resolve();
  private baseEnv: NodeJS.ProcessEnv = {};

  constructor(readonly moto: Moto) {
    this.baseEnv = { ...process.env };
  }

  /** The id of the x86_64 Amazon Linux AMI moto publishes, as an account's SSM parameters name it. */
  async amazonLinuxAmi(): Promise<string> {
    const ssm = new SSMClient({ region: 'us-east-1', endpoint: this.moto.endpoint });
    try {
      const published = await ssm.send(new GetParametersByPathCommand({ Path: '/aws/service/ami-amazon-linux-latest' }));
      const ami = published.Parameters?.find((p) => p.Name?.endsWith('x86_64'))?.Value;
      if (ami === undefined) throw new Error('moto publishes no x86_64 Amazon Linux AMI');
      return ami;
    } finally {
      ssm.destroy();
    }
  }

  /**
   * Makes a network in moto, deploys the shipped app's stack on it (named from its prefix,
   * `Relaunch` for the default one) and loads its handlers.
   */
  async deploy(options: DeployOptions = {}): Promise<StackInWorld> {
    const zones = options.zones ?? ['us-east-1a', 'us-east-1b'];
    const network = await createNetwork(this.moto, zones[0]?.slice(0, -1) ?? 'us-east-1', zones);
    const deployment = await deploy(this.moto, { namePrefix: 'relaunch', ...options.config, vpcId: network.vpcId, subnetsByZone: network.subnetsByZone });
    const stack = new StackInWorld(this, deployment, options);
    await stack.load();
    this.stacks.set(deployment.id, stack);
    return stack;
  }

  /** Sets a function's environment (and nothing of another's) over the world's; returns what restores it. */
  applyEnvironment(deployment: Deployment, name: LambdaName): () => void {
    const before = { ...process.env };
    replaceEnvironment({
      ...this.baseEnv,
      ...deployment.functions[name].environment,
      AWS_REGION: deployment.region,
      AWS_DEFAULT_REGION: deployment.region,
      AWS_LAMBDA_FUNCTION_NAME: deployment.functions[name].functionName,
      POWERTOOLS_LOG_LEVEL: 'SILENT',
      POWERTOOLS_TRACE_ENABLED: 'false',
      POWERTOOLS_METRICS_DISABLED: 'true',
    });
    return () => replaceEnvironment(before);
  }

  /** Runs `body` once every invocation queued before it has finished. */
  exclusively<T>(body: () => Promise<T>): Promise<T> {
    const run = this.queue.then(body, body);
    this.queue = run.catch(() => undefined);
    return run;
  }

  emit(event: WorldEvent): void {
    this.events.push(event);
    for (const waiter of [...this.waiters]) {
      if (!waiter.match(event)) continue;
      this.waiters.splice(this.waiters.indexOf(waiter), 1);
      waiter.resolve(event);
    }
  }

  next(match: (event: WorldEvent) => boolean): Promise<WorldEvent> {
    const past = this.events.find(match);
    if (past !== undefined) return Promise.resolve(past);
    return new Promise((resolve) => this.waiters.push({ match, resolve }));
  }

  /** Instances in moto carrying every tag given (any state). */
  async instances(region: string, tags: Readonly<Record<string, string>>): Promise<Instance[]> {
    const ec2 = new EC2Client({ region, endpoint: this.moto.endpoint });
    const filters = Object.entries(tags).map(([key, value]) => ({ Name: `tag:${key}`, Values: [value] }));
    const answer = await ec2.send(new DescribeInstancesCommand({ Filters: filters }));
    return (answer.Reservations ?? []).flatMap((reservation) => reservation.Instances ?? []);
  }

  /** The IAM check of every call since the last one: each must be allowed by its function's role. */
  async checkCalls(): Promise<{ calls: RecordedCall[]; refused: string[]; endFailures: string[] }> {
    for (const stack of this.stacks.values()) await stack.settled();
    const calls = takeCalls();
    const deployments = new Map([...this.stacks].map(([id, stack]) => [id, stack.deployment]));
    const refused = (await refusals(calls, deployments)).map(describeRefusal);
    const endFailures = [...this.stacks.values()].flatMap((stack) => stack.endFailures.splice(0));
    return { calls, refused, endFailures };
  }
}

/** Makes process.env exactly `values` (in place: the SDK and Node keep reading the same object). */
function replaceEnvironment(values: NodeJS.ProcessEnv): void {
  for (const key of Object.keys(process.env)) if (!(key in values)) delete process.env[key];
  Object.assign(process.env, values);
}

/** An error as the SDK throws an AWS error code. */
export function awsError(code: string, message: string): Error {
  return Object.assign(new Error(message), { name: code, Code: code, $fault: 'client', $metadata: { httpStatusCode: 400 } });
}

/** A tag's value on an instance. */
export function tagOf(instance: Instance, key: string): string | undefined {
  return instance.Tags?.find((tag) => tag.Key === key)?.Value;
}

/** The functions whose calls the IAM check has seen in this file, for a final coverage check. */
export const checkedFunctions = new Set<string>();

/**
 * A world for one test file: moto started before it and stopped after, and the IAM check
 * after every test (a call its function's role does not allow fails that test).
 */
export function useWorld(): () => World {
  let moto: Moto | undefined;
  let world: World | undefined;
  let restoreEnv: (() => void) | undefined;
  beforeAll(async () => {
    installRecorder();
    moto = await startMoto();
    restoreEnv = useMotoEnvironment(moto);
    world = new World(moto);
  });
  afterEach(async () => {
    if (world === undefined) return;
    const { calls, refused, endFailures } = await world.checkCalls();
    for (const call of calls) checkedFunctions.add(call.fn);
    expect(refused, 'AWS calls the functions\' roles do not allow').toEqual([]);
    expect(endFailures, 'execution ends whose handlers failed').toEqual([]);
  });
  afterAll(async () => {
    // Executions a test left running end here, their handlers run while moto still answers.
    for (const stack of world?.stacks.values() ?? []) stack.workflow.stopAll();
    for (const stack of world?.stacks.values() ?? []) await stack.settled();
    restoreEnv?.();
    await moto?.stop();
  });
  return () => {
    if (world === undefined) throw new Error('the world starts in beforeAll');
    return world;
  };
}

/** A Lambda context with what the handlers' loggers read. */
function lambdaContext(functionName: string): Record<string, unknown> {
  return {
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:us-east-1:${MOTO_ACCOUNT}:function:${functionName}`,
    memoryLimitInMB: '512',
    awsRequestId: `request-${Math.random().toString(36).slice(2)}`,
    getRemainingTimeInMillis: () => 60_000,
  };
}

/**
 * The deployment's state machine definition, from its template, as the local engine must
 * run it to behave as Step Functions does (the same two changes the local runtime makes:
 * AwaitAttempt gets no engine-made 60 s timeout; AwaitBoot's TimeoutSecondsPath is read
 * from the Payload, where the engine looks). Each Task state must name the function the
 * catalog binds it to.
 */
function engineDefinition(deployment: Deployment): StateMachineDefinition {
  /** The longest timer Node sets (2^31 - 1 ms); a longer one fires at once. */
  const MAX_TIMER_SECONDS = 2_147_483;
  const { resource } = deployment.only('AWS::StepFunctions::StateMachine');
  const asl = JSON.parse(resolveString(resource.Properties?.DefinitionString, deployment.values)) as { States: Record<string, Record<string, unknown>> };
  for (const state of TASK_STATES) {
    const body = asl.States[state];
    const named = (body?.Parameters as { FunctionName?: string } | undefined)?.FunctionName ?? body?.Resource;
    const expected = deployment.values.physical(functionLogicalId(deployment, TASK_LAMBDAS[state])).attributes.Arn;
    if (named !== expected) throw new Error(`${deployment.id}: state ${state} invokes ${String(named)}, not ${TASK_LAMBDAS[state]} (${expected})`);
  }
  const awaitAttempt = asl.States[StateName.AwaitAttempt];
  if (awaitAttempt !== undefined && awaitAttempt.TimeoutSeconds === undefined) awaitAttempt.TimeoutSeconds = MAX_TIMER_SECONDS;
  const awaitBoot = asl.States[StateName.AwaitBoot];
  if (awaitBoot?.TimeoutSecondsPath === BOOT_TIMEOUT_SECONDS_PATH) awaitBoot.TimeoutSecondsPath = BOOT_TIMEOUT_SECONDS_PATH.replace('$.', '$.Payload.');
  return asl as unknown as StateMachineDefinition;
}

function functionLogicalId(deployment: Deployment, name: LambdaName): string {
  const prefix = `RelaunchFunctions${name.replaceAll('-', '')}`;
  const found = Object.entries(deployment.template.Resources).find(([id, r]) => r.Type === 'AWS::Lambda::Function' && id.startsWith(prefix));
  if (found === undefined) throw new Error(`no function ${name}`);
  return found[0];
}
