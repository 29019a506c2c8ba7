// The scale simulation: N jobs submitted within a minute, run through relaunch's real use
// cases, recovery policy and state machine (the ASL `cdk deploy` ships, walked by
// step-functions.ts) in virtual time, against fakes of AWS that enforce its published
// limits (limits.ts): EC2's request and instance-launch buckets, vCPU quotas and spot
// pools that run out; Step Functions' StartExecution and state-transition buckets;
// Lambda's concurrency; DynamoDB's capacity per partition (metered-store.ts); API
// Gateway's throttle. Every count the cost model prices comes out of this run.
//
// Why a discrete-event simulation, not the local runtime: 10,000 jobs of several hours
// each, with their heartbeats, would take hours of wall time and thousands of processes;
// here nothing sleeps, each event runs to completion in time order, and a run of 10,000
// jobs takes minutes on two cores. The trade-off: use cases never interleave (each event
// is atomic), so races between writers are not exercised here (test/ does that), and
// the durations of Lambda invocations, boots and runs are modelled, not measured
// (MODEL below, printed with the results).
//
// What the agents do: each node of a launched attempt boots, heartbeats through the API
// (the real heartbeat use case) every HEARTBEAT_INTERVAL_SECONDS, reports its setup and
// run phases (the real report use case), and shuts its instance down. A job's script
// says how each of its attempts ends: a spot preemption (EC2's interruption warning, then
// the instance terminated two minutes later, both through the real instance-event use
// case), a lost on-demand instance (terminated with no warning), an exit code listed in
// recover_on_exit_codes, or success.

import { InMemoryJobStore } from '../../lib/adapters/memory-job-store.ts';
import { InMemoryJobSecrets } from '../../lib/adapters/memory-job-secrets.ts';
import { NoCapacityError, StaleAttemptError, TransientError } from '../../lib/errors.ts';
import { instanceTypeInfo } from '../../lib/instance-types.ts';
import { MemoryLaunchPace, type LaunchPaceConfig } from '../../lib/launch-pace.ts';
import type { InstanceRef } from '../../lib/model.ts';
import { planFleets } from '../../lib/launch-plan.ts';
import type { Market } from '../../lib/policy/types.ts';
import type { Compute, LaunchRequest, LaunchResult } from '../../lib/ports.ts';
import { isTerminal, JobStatus } from '../../lib/status.ts';
import { heartbeat, onExecutionEnded, onInstanceEvent, reportPhase, submitJob, type InstanceEvent, type UseCaseDeps } from '../../lib/usecases/index.ts';
import { startQueuedJobs } from '../../lib/usecases/start-queued.ts';
import { awaitAttemptTask, controllerTasks } from '../../lib/usecases/task-handlers.ts';
import { AWAIT_STATES, HEARTBEAT_INTERVAL_SECONDS, StateName, type TaskStateName } from '../../lib/workflow/contract.ts';
import type { AslDefinition } from '../../infra/asl.ts';
import { LambdaName, TASK_LAMBDAS } from '../../infra/lambda-catalog.ts';
import { EventQueue, seededRandom, TokenBucket } from './des.ts';
import { AWS_LIMITS, DYNAMODB_PARTITION, LAMBDA_CONCURRENCY, VCPU_QUOTAS, type BucketLimit } from './limits.ts';
import { MeteredJobStore, MeteredLaunchPace, PartitionMeter, type JobListProjection } from './metered-store.ts';
import { StepFunctionsSim, type TaskError } from './step-functions.ts';

/** What a run simulates. */
export interface ScaleOptions {
  readonly jobs: number;
  readonly seed: number;
  /** The controller's definition (renderControllerAsl()): rendering it is the caller's, so tests render it once. */
  readonly asl: AslDefinition;
  /** The shared launch pace's bucket; a huge one is the pace switched off. */
  readonly pace: LaunchPaceConfig;
  /** JobListIndex's projection as metered. */
  readonly jobListProjection: JobListProjection;
  /** Overrides of AWS's buckets, for tests (a small StartExecution bucket). */
  readonly limits?: Partial<Record<keyof typeof AWS_LIMITS, Pick<BucketLimit, 'burst' | 'perSecond'>>>;
  /** Spot capacity of each (zone, instance type) pool: drawn uniformly in this range. */
  readonly spotPoolCapacity?: readonly [number, number];
  /** The submits are spread evenly over this many seconds (60 by default). */
  readonly submitSeconds?: number;
  /** How long a job's run phase lasts, drawn uniformly in this range (s); MODEL.runSeconds by default. */
  readonly runSeconds?: readonly [number, number];
  /** Virtual time after which the run stops, finished or not (hours). */
  readonly maxHours?: number;
  /**
   * Every job's shape instead of a drawn one: its nodes, and how each of its attempts ends
   * (the last one always succeeds). The stack's cost per job prices one that succeeds at once.
   */
  readonly jobShape?: { readonly nodes: number; readonly attempts: readonly AttemptScript[] };
}

/** How a job's attempt ends. */
export type AttemptScript = 'preempt' | 'lost' | 'exit29' | 'success';

/** The modelled durations (ms) and sizes the results depend on. */
export const MODEL = {
  lambdaMs: {
    [LambdaName.launchAttempt]: 1200,
    [LambdaName.awaitAttempt]: 60,
    [LambdaName.evaluatePolicy]: 80,
    [LambdaName.releaseInstances]: 400,
    [LambdaName.recordControllerFailure]: 200,
    [LambdaName.continueAsNew]: 100,
    [LambdaName.api]: 60,
    [LambdaName.onEc2Event]: 60,
    [LambdaName.onExecutionEnded]: 100,
    [LambdaName.janitor]: 1500,
    /** Invoked by each execution's end (not simulated here; the stack's cost per job counts it): a job with no transient mount is one read. */
    [LambdaName.deleteTransientMounts]: 100,
  } as Readonly<Record<string, number>>,
  submitMs: 150,
  lambdaMemoryGb: 0.5,
  bootSeconds: [30, 90] as const,
  setupSeconds: 2,
  runSeconds: [240, 720] as const,
  spotShare: 0.6,
  instanceTypes: ['m6i.large', 'm6i.xlarge', 'c6i.xlarge', 'r6i.large'] as const,
  zones: ['us-east-1a', 'us-east-1b', 'us-east-1c', 'us-east-1d', 'us-east-1f'] as const,
  janitorEveryMinutes: 10,
  /** The EC2 adapter's own retries of a throttled call (Ec2Compute.withRetries: 8, 0.5 s doubling to 20 s). */
  ec2RetryDelaysMs: [500, 1000, 2000, 4000, 8000, 16_000, 20_000, 20_000] as const,
  agentRetryMs: 1000,
  eventDeliveryMs: 500,
  interruptionNoticeSeconds: 120,
} as const;

const REGION = 'us-east-1';
const LISTED_EXIT_CODE = 29;

/** Everything a run measured. */
export interface ScaleResult {
  readonly jobs: number;
  readonly virtualSeconds: number;
  readonly eventsRun: number;
  readonly statuses: ReadonlyMap<string, number>;
  /** FAILED jobs by cause: a status and the class of its reason. */
  readonly failedByCause: ReadonlyMap<string, number>;
  readonly unfinished: number;
  readonly attempts: number;
  readonly instancesLaunched: number;
  readonly firstLaunchSeconds: number;
  readonly lastJobStartSeconds: number;
  readonly instancesByLastJobStart: number;
  readonly launchesWaitedForPace: number;
  readonly ec2: {
    readonly createFleetCalls: number;
    readonly requestLimitExceeded: number;
    readonly instanceLaunchesThrottled: number;
    readonly insufficientCapacity: number;
    readonly vcpuLimitExceeded: number;
    readonly terminateCalls: number;
    readonly otherCalls: number;
    readonly peakVcpus: Readonly<Record<Market, number>>;
  };
  readonly sfn: StepFunctionsSim['counts'];
  readonly lambda: {
    readonly invocations: ReadonlyMap<string, number>;
    readonly gbSeconds: number;
    readonly peakConcurrency: number;
    readonly throttles: number;
  };
  readonly dynamo: {
    readonly writeUnits: number;
    readonly writeCalls: number;
    readonly readUnits: number;
    readonly throttledCalls: number;
    readonly throttledByPartition: ReadonlyMap<string, number>;
    readonly peakWrites: ReadonlyMap<string, { amount: number; second: number }>;
    readonly peakReads: ReadonlyMap<string, { amount: number; second: number }>;
  };
  readonly api: { readonly requests: number; readonly throttled: number; readonly submits: number };
  readonly eventBridge: { readonly ec2Events: number; readonly executionEvents: number };
  readonly ssmCalls: number;
  readonly instanceHours: ReadonlyMap<string, number>;
  readonly startExecutionThrottles: number;
  readonly janitorStarts: number;
  readonly agentErrors: ReadonlyMap<string, number>;
  readonly handlerErrors: ReadonlyMap<string, number>;
}

interface Instance {
  readonly id: string;
  readonly jobId: string;
  readonly attempt: number;
  readonly rank: number;
  readonly pool: string;
  readonly market: Market;
  readonly instanceType: string;
  readonly vcpus: number;
  readonly launchedAt: number;
  alive: boolean;
}

interface JobPlan {
  readonly name: string;
  readonly yaml: string;
  readonly script: readonly AttemptScript[];
  readonly runSeconds: number;
  launched: number;
  jobId?: string;
  startedAt?: number;
}

/** Runs the simulation to its end (every job terminal) or to `maxHours` of virtual time. */
export async function runScaleSimulation(options: ScaleOptions): Promise<ScaleResult> {
  const sim = new Simulation(options);
  return sim.run();
}

class Simulation {
  readonly queue = new EventQueue(Date.parse('2026-12-01T00:00:00Z'));
  readonly random;
  readonly options: ScaleOptions;
  readonly meter: PartitionMeter;
  readonly inner = new InMemoryJobStore();
  readonly store: MeteredJobStore;
  readonly sfn: StepFunctionsSim;
  readonly deps: UseCaseDeps;
  readonly buckets: Record<keyof typeof AWS_LIMITS, TokenBucket>;
  readonly plans: JobPlan[] = [];
  readonly planByName = new Map<string, JobPlan>();
  readonly instances = new Map<string, Instance>();
  readonly byAttempt = new Map<string, Instance[]>();
  readonly pools = new Map<string, number>();
  readonly vcpusInUse: Record<Market, number> = { spot: 0, 'on-demand': 0 };
  readonly peakVcpus: Record<Market, number> = { spot: 0, 'on-demand': 0 };
  readonly lambdaEnds: number[] = [];
  readonly invocations = new Map<string, number>();
  readonly statuses = new Map<string, number>();
  readonly failedByCause = new Map<string, number>();
  readonly instanceHours = new Map<string, number>();
  readonly agentErrors = new Map<string, number>();
  readonly handlerErrors = new Map<string, number>();
  readonly ended = new Set<string>();
  gbSeconds = 0;
  peakConcurrency = 0;
  lambdaThrottles = 0;
  extraMs = 0;
  terminal = 0;
  instanceCounter = 0;
  ec2 = { createFleetCalls: 0, requestLimitExceeded: 0, instanceLaunchesThrottled: 0, insufficientCapacity: 0, vcpuLimitExceeded: 0, terminateCalls: 0, otherCalls: 0 };
  api = { requests: 0, throttled: 0, submits: 0 };
  eventBridge = { ec2Events: 0, executionEvents: 0 };
  ssmCalls = 0;
  attempts = 0;
  instancesLaunched = 0;
  firstLaunchAt: number | null = null;
  launches: { at: number; instances: number }[] = [];
  janitorStarts = 0;

  constructor(options: ScaleOptions) {
    this.options = options;
    this.random = seededRandom(options.seed);
    this.meter = new PartitionMeter(this.queue, DYNAMODB_PARTITION.writeUnitsPerSecond, DYNAMODB_PARTITION.readUnitsPerSecond);
    this.store = new MeteredJobStore(this.inner, this.meter, options.jobListProjection);
    this.buckets = Object.fromEntries(
      Object.entries(AWS_LIMITS).map(([name, limit]) => {
        const chosen = options.limits?.[name as keyof typeof AWS_LIMITS] ?? limit;
        return [name, new TokenBucket(chosen.burst, chosen.perSecond)];
      }),
    ) as Record<keyof typeof AWS_LIMITS, TokenBucket>;
    // The simulated jobs reuse no node (no reuse_nodes, no FAILOVER): join is never asked for.
    const compute: Compute = {
      launch: (request) => this.launch(request),
      release: (jobId, attempt) => this.release(jobId, attempt),
      hold: (jobId, attempt) => this.release(jobId, attempt),
      join: async (jobId, attempt) => {
        throw new Error(`the scale simulation reuses no node, yet job ${jobId} attempt ${attempt} asked to join kept nodes`);
      },
    };
    const pace = new MeteredLaunchPace(new MemoryLaunchPace(options.pace), this.meter, options.pace);
    this.sfn = new StepFunctionsSim(
      options.asl,
      {
        queue: this.queue,
        random: this.random,
        startExecution: this.buckets.sfnStartExecution,
        transitions: this.buckets.sfnStateTransitions,
        invoke: (state, input) => this.invokeTask(state, input),
        ended: (execution, status, error) => this.executionEnded(execution.input.jobId, execution.arn, status, error),
      },
      StateName.WaitForLaunchPace,
    );
    this.deps = { store: this.store, compute, workflow: this.sfn, clock: this.queue, random: this.random, secrets: new InMemoryJobSecrets(), pace };
    this.tasks = controllerTasks(this.deps);
    this.awaitTask = awaitAttemptTask(this.deps);
    const [low, high] = options.spotPoolCapacity ?? [10, 120];
    for (const zone of MODEL.zones) for (const type of MODEL.instanceTypes) this.pools.set(`${zone}/${type}`, Math.round(low + this.random() * (high - low)));
  }

  readonly tasks: ReturnType<typeof controllerTasks>;
  readonly awaitTask: ReturnType<typeof awaitAttemptTask>;

  async run(): Promise<ScaleResult> {
    const n = this.options.jobs;
    for (let i = 0; i < n; i += 1) {
      const plan = this.planJob(i);
      this.plans.push(plan);
      this.planByName.set(plan.name, plan);
      this.queue.at(this.queue.epochMs + Math.floor((i * (this.options.submitSeconds ?? 60) * 1000) / n), () => this.submit(plan));
    }
    this.scheduleJanitor();
    const stopAt = this.queue.epochMs + (this.options.maxHours ?? 72) * 3_600_000;
    await this.queue.run(() => (this.terminal >= n && this.sfn.running === 0) || this.queue.nowMs > stopAt);
    return this.result();
  }

  planJob(index: number): JobPlan {
    const r = this.random;
    const nodes = 1 + Math.floor(r() * 8);
    const spot = r() < MODEL.spotShare;
    const type = MODEL.instanceTypes[Math.floor(r() * MODEL.instanceTypes.length)] as string;
    const disruptions = Math.floor(r() * 4);
    const restarts = Math.floor(r() * 4);
    const script: AttemptScript[] = [...Array<AttemptScript>(disruptions).fill(spot ? 'preempt' : 'lost'), ...Array<AttemptScript>(restarts).fill('exit29')];
    for (let i = script.length - 1; i > 0; i -= 1) {
      const j = Math.floor(r() * (i + 1));
      [script[i], script[j]] = [script[j] as AttemptScript, script[i] as AttemptScript];
    }
    script.push('success');
    const shape = this.options.jobShape;
    if (shape !== undefined) script.splice(0, script.length, ...shape.attempts, 'success');
    const name = `job-${String(index).padStart(5, '0')}`;
    const yaml = [
      `name: ${name}`,
      `num_nodes: ${shape?.nodes ?? nodes}`,
      'resources:',
      '  cloud: aws',
      `  instance_type: ${type}`,
      `  use_spot: ${spot}`,
      '  job_recovery:',
      `    recover_on_exit_codes: [${LISTED_EXIT_CODE}]`,
      'run: python train.py',
      '',
    ].join('\n');
    const [low, high] = this.options.runSeconds ?? MODEL.runSeconds;
    return { name, yaml, script, runSeconds: Math.round(low + r() * (high - low)), launched: 0 };
  }

  // --- surfaces: the API, EventBridge, the janitor -------------------------------------

  /** One request through API Gateway to the API Lambda; retried by the caller when refused. */
  apiCall(what: string, durationMs: number, call: () => Promise<void>): void {
    const now = this.queue.nowMs;
    this.api.requests += 1;
    if (!this.buckets.apiGateway.tryTake(1, now) || !this.lambdaStart(LambdaName.api, durationMs)) {
      this.api.throttled += 1;
      this.queue.after(MODEL.agentRetryMs, () => this.apiCall(what, durationMs, call));
      return;
    }
    this.queue.after(0, async () => {
      try {
        await call();
      } catch (error) {
        if (error instanceof TransientError) {
          this.queue.after(MODEL.agentRetryMs * 2, () => this.apiCall(what, durationMs, call));
          return;
        }
        this.count(this.agentErrors, `${what}: ${(error as Error).name}`);
      }
    });
  }

  submit(plan: JobPlan): void {
    this.api.submits += 1;
    this.apiCall('submit', MODEL.submitMs, async () => {
      const { jobId } = await submitJob({ body: plan.yaml }, this.deps);
      plan.jobId = jobId;
    });
  }

  scheduleJanitor(): void {
    this.queue.after(MODEL.janitorEveryMinutes * 60_000, async () => {
      if (this.terminal >= this.options.jobs) return;
      if (this.lambdaStart(LambdaName.janitor, MODEL.lambdaMs[LambdaName.janitor] as number)) {
        const round = await startQueuedJobs(this.deps);
        this.janitorStarts += round.started.length;
      }
      this.scheduleJanitor();
    });
  }

  /** An EC2 event on the default bus, delivered by relaunch's rule to the on-ec2-event Lambda. */
  ec2Event(event: InstanceEvent): void {
    this.eventBridge.ec2Events += 1;
    const deliver = async (): Promise<void> => {
      if (!this.lambdaStart(LambdaName.onEc2Event, MODEL.lambdaMs[LambdaName.onEc2Event] as number)) {
        this.queue.after(MODEL.agentRetryMs, deliver);
        return;
      }
      try {
        await onInstanceEvent(event, this.deps);
      } catch (error) {
        if (error instanceof TransientError) {
          this.queue.after(MODEL.agentRetryMs * 5, deliver);
          return;
        }
        this.count(this.handlerErrors, `on-ec2-event: ${(error as Error).name}: ${(error as Error).message.slice(0, 80)}`);
      }
    };
    this.queue.after(MODEL.eventDeliveryMs, deliver);
  }

  // --- Lambda -------------------------------------------------------------------------

  /** Starts an invocation now if the account's concurrency allows; false when throttled. */
  lambdaStart(name: string, durationMs: number): boolean {
    const now = this.queue.nowMs;
    const ends = this.lambdaEnds;
    while (ends.length > 0 && (ends[0] as number) <= now) heapPop(ends);
    if (ends.length >= LAMBDA_CONCURRENCY.limit) {
      this.lambdaThrottles += 1;
      return false;
    }
    heapPush(ends, now + durationMs);
    this.peakConcurrency = Math.max(this.peakConcurrency, ends.length);
    this.count(this.invocations, name);
    this.gbSeconds += (durationMs / 1000) * MODEL.lambdaMemoryGb;
    return true;
  }

  async invokeTask(state: string, input: unknown): Promise<{ durationMs: number; result: { ok: true; value: unknown } | { ok: false; error: TaskError } } | null> {
    const lambda = TASK_LAMBDAS[state as TaskStateName];
    const base = MODEL.lambdaMs[lambda] as number;
    const now = this.queue.nowMs;
    const ends = this.lambdaEnds;
    while (ends.length > 0 && (ends[0] as number) <= now) heapPop(ends);
    if (ends.length >= LAMBDA_CONCURRENCY.limit) {
      this.lambdaThrottles += 1;
      return null;
    }
    this.extraMs = 0;
    let result: { ok: true; value: unknown } | { ok: false; error: TaskError };
    try {
      const handler = (AWAIT_STATES as readonly string[]).includes(state) ? this.awaitTask : this.tasks[state];
      if (handler === undefined) throw new Error(`no handler for ${state}`);
      result = { ok: true, value: await handler(input) };
    } catch (error) {
      const e = error as Error;
      if (!(error instanceof TransientError)) this.count(this.handlerErrors, `${state}: ${e.name}: ${e.message.slice(0, 100)}`);
      result = { ok: false, error: { Error: e.name, Cause: e.message } };
    }
    const durationMs = base + this.extraMs;
    heapPush(ends, now + durationMs);
    this.peakConcurrency = Math.max(this.peakConcurrency, ends.length);
    this.count(this.invocations, lambda);
    this.gbSeconds += (durationMs / 1000) * MODEL.lambdaMemoryGb;
    return { durationMs, result };
  }

  /**
   * An execution's end, as Step Functions announces it on the default bus: the
   * on-execution-ended Lambda (the real use case) finishes a job its execution left live,
   * then the job's status is counted.
   */
  executionEnded(jobId: string, executionArn: string, status: 'SUCCEEDED' | 'FAILED', error: TaskError | null): void {
    this.eventBridge.executionEvents += 1;
    const deliver = async (): Promise<void> => {
      if (!this.lambdaStart(LambdaName.onExecutionEnded, MODEL.lambdaMs[LambdaName.onExecutionEnded] as number)) {
        this.queue.after(MODEL.agentRetryMs, deliver);
        return;
      }
      try {
        await onExecutionEnded({ jobId, executionArn, status, ...(error === null ? {} : { error: error.Error, cause: error.Cause }) }, this.deps);
      } catch (caught) {
        if (caught instanceof TransientError) {
          this.queue.after(MODEL.agentRetryMs * 5, deliver);
          return;
        }
        this.count(this.handlerErrors, `on-execution-ended: ${(caught as Error).name}: ${(caught as Error).message.slice(0, 80)}`);
      }
      const job = await this.inner.getJob(jobId);
      if (!isTerminal(job.status)) {
        this.count(this.handlerErrors, `execution ended with job ${job.status}`);
        return;
      }
      if (this.ended.has(jobId)) return;
      this.ended.add(jobId);
      this.terminal += 1;
      this.count(this.statuses, job.status);
      if (job.status !== JobStatus.SUCCEEDED) this.count(this.failedByCause, `${job.status}: ${causeOf(job.failureReason)}`);
    };
    this.queue.after(MODEL.eventDeliveryMs, deliver);
  }

  // --- EC2 ----------------------------------------------------------------------------

  /**
   * A call against an EC2 request or resource bucket, retried as Ec2Compute retries a
   * throttled call: returns when it got through (adding the wait to the invocation's
   * duration), or throws the TransientError the adapter throws after its last retry.
   */
  ec2Call(bucket: TokenBucket, tokens: number, at: number, what: string): number {
    const free = bucket.earliest(tokens, at);
    let t = at;
    for (const delay of [0, ...MODEL.ec2RetryDelaysMs]) {
      t += delay;
      if (t >= free) {
        // Taken when the bucket first had them: between then and this retry it refilled
        // for everyone, so charging the retry's own later time would overdraw it.
        bucket.take(tokens, free);
        return t;
      }
      this.ec2.requestLimitExceeded += 1;
      if (what === 'RunInstances') this.ec2.instanceLaunchesThrottled += tokens;
    }
    this.extraMs += t - at;
    throw new TransientError(`EC2 ${what}: RequestLimitExceeded after the SDK's retries and ${MODEL.ec2RetryDelaysMs.length} of relaunch's own`);
  }

  async launch(request: LaunchRequest): Promise<LaunchResult> {
    const { spec } = request;
    const nodes = spec.numNodes;
    const plan = planFleets({ spec, history: request.history, regions: [REGION], zonesByRegion: { [REGION]: [...MODEL.zones] }, market: request.market });
    const start = this.queue.nowMs + this.extraMs;
    let t = start;
    const tried: string[] = [];
    for (const fleet of plan) {
      this.ec2.createFleetCalls += 1;
      this.ec2.otherCalls += 2; // CreateLaunchTemplate, DeleteLaunchTemplate
      t = this.ec2Call(this.buckets.ec2CreateFleetRequests, 1, t, 'CreateFleet');
      const fits = fleet.overrides
        .map((override) => ({ override, pool: `${override.zone}/${override.instanceType}`, vcpus: (instanceTypeInfo(override.instanceType)?.vcpus ?? 2) * nodes }))
        .filter((candidate) => {
          if (this.vcpusInUse[fleet.market] + candidate.vcpus > VCPU_QUOTAS[fleet.market]) {
            this.ec2.vcpuLimitExceeded += 1;
            tried.push(`${candidate.pool}: VcpuLimitExceeded`);
            return false;
          }
          if (fleet.market === 'spot' && (this.pools.get(candidate.pool) ?? 0) < nodes) {
            this.ec2.insufficientCapacity += 1;
            tried.push(`${candidate.pool}: InsufficientInstanceCapacity`);
            return false;
          }
          return true;
        });
      // Spot: price-capacity-optimized, approximated as the pool with the most room; on-demand: in order.
      const chosen = fleet.market === 'spot' ? fits.sort((a, b) => (this.pools.get(b.pool) ?? 0) - (this.pools.get(a.pool) ?? 0))[0] : fits[0];
      if (chosen === undefined) continue;
      t = this.ec2Call(this.buckets.ec2InstanceLaunches, nodes, t, 'RunInstances');
      this.extraMs += t - start;
      const instances = this.startInstances(request, fleet.market, chosen.override.instanceType, chosen.pool, chosen.vcpus / nodes, t);
      return { placement: { region: REGION, zone: chosen.override.zone, instanceType: chosen.override.instanceType }, instances };
    }
    this.extraMs += t - start;
    throw new NoCapacityError(`no capacity for job ${request.jobId} attempt ${request.attempt} (${request.market}, ${nodes} nodes): tried ${tried.slice(0, 5).join(', ')}`);
  }

  startInstances(request: LaunchRequest, market: Market, instanceType: string, pool: string, vcpus: number, at: number): InstanceRef[] {
    const nodes = request.spec.numNodes;
    if (market === 'spot') this.pools.set(pool, (this.pools.get(pool) ?? 0) - nodes);
    this.vcpusInUse[market] += vcpus * nodes;
    this.peakVcpus[market] = Math.max(this.peakVcpus[market], this.vcpusInUse[market]);
    this.ec2.otherCalls += 2; // DescribeInstances, CreateTags
    this.ssmCalls += nodes; // one SecureString per node
    this.attempts += 1;
    this.instancesLaunched += nodes;
    this.firstLaunchAt ??= at;
    this.launches.push({ at, instances: nodes });
    const plan = this.planByName.get(request.spec.name ?? '');
    if (plan === undefined) throw new Error(`no plan for ${request.spec.name}`);
    plan.startedAt ??= at;
    const script = plan.script[plan.launched] ?? 'success';
    plan.launched += 1;
    const refs: InstanceRef[] = [];
    const list: Instance[] = [];
    for (let rank = 0; rank < nodes; rank += 1) {
      this.instanceCounter += 1;
      const id = `i-${this.instanceCounter.toString(16).padStart(17, '0')}`;
      const instance: Instance = { id, jobId: request.jobId, attempt: request.attempt, rank, pool, market, instanceType, vcpus, launchedAt: at, alive: true };
      this.instances.set(id, instance);
      list.push(instance);
      refs.push({ instanceId: id, nodeRank: rank, privateIp: `10.0.${rank}.${this.instanceCounter % 250}` });
    }
    this.byAttempt.set(`${request.jobId}#${request.attempt}`, list);
    for (const instance of list) this.startAgent(instance, request.callbackSecret, script, plan.runSeconds, at);
    return refs;
  }

  async release(jobId: string, attempt: number): Promise<void> {
    const key = `${jobId}#${attempt}`;
    const list = this.byAttempt.get(key) ?? [];
    this.ec2.otherCalls += 1; // DescribeInstances by tag
    this.ssmCalls += 1; // DeleteParameters for the attempt's secrets
    const alive = list.filter((instance) => instance.alive);
    if (alive.length > 0) {
      this.ec2.terminateCalls += 1;
      const at = this.queue.nowMs + this.extraMs;
      const t = this.ec2Call(this.buckets.ec2TerminateRequests, 1, at, 'TerminateInstances');
      const done = this.ec2Call(this.buckets.ec2InstanceTerminations, alive.length, t, 'TerminateInstances (instances)');
      this.extraMs += done - at;
      for (const instance of alive) this.terminate(instance);
    }
    this.byAttempt.delete(key);
  }

  /** The instance goes: capacity back, its hours counted, EC2's state-change events sent. */
  terminate(instance: Instance): void {
    if (!instance.alive) return;
    instance.alive = false;
    const now = this.queue.nowMs;
    if (instance.market === 'spot') this.pools.set(instance.pool, (this.pools.get(instance.pool) ?? 0) + 1);
    this.vcpusInUse[instance.market] -= instance.vcpus;
    const hours = (now - instance.launchedAt) / 3_600_000;
    const key = `${instance.instanceType} ${instance.market}`;
    this.instanceHours.set(key, (this.instanceHours.get(key) ?? 0) + hours);
    const time = new Date(now).toISOString();
    this.ec2Event({ instanceId: instance.id, kind: 'STATE_CHANGE', state: 'shutting-down', time });
    this.queue.after(30_000, () => this.ec2Event({ instanceId: instance.id, kind: 'STATE_CHANGE', state: 'terminated', time: new Date(this.queue.nowMs).toISOString() }));
    this.instances.delete(instance.id);
  }

  // --- agents -------------------------------------------------------------------------

  startAgent(instance: Instance, secret: string, script: AttemptScript, runSeconds: number, launchedAt: number): void {
    const [low, high] = MODEL.bootSeconds;
    const bootAt = launchedAt + (low + this.random() * (high - low)) * 1000;
    const credentials = { jobId: instance.jobId, attempt: instance.attempt, nodeRank: instance.rank, secret };
    const agent = { beating: true };
    const beat = (): void => {
      if (!instance.alive || !agent.beating) return;
      this.apiCall('heartbeat', MODEL.lambdaMs[LambdaName.api] as number, async () => {
        try {
          await heartbeat(credentials, this.deps);
        } catch (error) {
          if (error instanceof StaleAttemptError) {
            agent.beating = false;
            return;
          }
          throw error;
        }
      });
      this.queue.after(HEARTBEAT_INTERVAL_SECONDS * 1000, beat);
    };
    const report = (phase: 'setup' | 'run', exitCode: number): void => {
      if (!instance.alive) return;
      this.apiCall('report', MODEL.lambdaMs[LambdaName.api] as number, async () => {
        if (!instance.alive) return;
        try {
          // setup's report says how long setup ran, as the agent's does (it is stored with it).
          const ran = phase === 'setup' ? { setupMs: MODEL.setupSeconds * 1000 } : {};
          await reportPhase({ ...credentials, phase, exitCode, ...ran, outputTail: '' }, this.deps);
        } catch (error) {
          if (!(error instanceof StaleAttemptError)) throw error;
        }
        if (phase === 'run') {
          agent.beating = false;
          // The agent shuts its instance down once its final report is in.
          this.queue.after(5000, () => this.terminate(instance));
        }
      });
    };
    this.queue.at(bootAt, beat);
    const runStart = bootAt + MODEL.setupSeconds * 1000;
    this.queue.at(runStart, () => report('setup', 0));
    const runEnd = runStart + runSeconds * 1000;
    if (script === 'preempt' || script === 'lost') {
      if (instance.rank !== 0) {
        this.queue.at(runEnd, () => report('run', 0));
        return;
      }
      const hitAt = runStart + (0.1 + 0.7 * this.random()) * runSeconds * 1000;
      if (script === 'preempt') {
        this.queue.at(hitAt, () => {
          if (instance.alive) this.ec2Event({ instanceId: instance.id, kind: 'SPOT_INTERRUPTION_WARNING', time: new Date(this.queue.nowMs).toISOString() });
        });
        this.queue.at(hitAt + MODEL.interruptionNoticeSeconds * 1000, () => this.terminate(instance));
      } else this.queue.at(hitAt, () => this.terminate(instance));
      return;
    }
    const code = script === 'exit29' && instance.rank === 0 ? LISTED_EXIT_CODE : 0;
    this.queue.at(runEnd, () => report('run', code));
  }

  // --- results ------------------------------------------------------------------------

  count(map: Map<string, number>, key: string, by = 1): void {
    map.set(key, (map.get(key) ?? 0) + by);
  }

  result(): ScaleResult {
    const epoch = this.queue.epochMs;
    const starts = this.plans.map((plan) => plan.startedAt).filter((at): at is number => at !== undefined);
    const lastStart = starts.length === 0 ? epoch : Math.max(...starts);
    const instancesByLastStart = this.launches.filter((launch) => launch.at <= lastStart).reduce((sum, launch) => sum + launch.instances, 0);
    return {
      jobs: this.options.jobs,
      virtualSeconds: (this.queue.nowMs - epoch) / 1000,
      eventsRun: this.queue.ran,
      statuses: this.statuses,
      failedByCause: this.failedByCause,
      unfinished: this.options.jobs - this.terminal,
      attempts: this.attempts,
      instancesLaunched: this.instancesLaunched,
      firstLaunchSeconds: ((this.firstLaunchAt ?? epoch) - epoch) / 1000,
      lastJobStartSeconds: (lastStart - epoch) / 1000,
      instancesByLastJobStart: instancesByLastStart,
      launchesWaitedForPace: this.sfn.counts.enteredByState.get(StateName.WaitForLaunchPace) ?? 0,
      ec2: { ...this.ec2, peakVcpus: this.peakVcpus },
      sfn: this.sfn.counts,
      lambda: { invocations: this.invocations, gbSeconds: this.gbSeconds, peakConcurrency: this.peakConcurrency, throttles: this.lambdaThrottles },
      dynamo: {
        writeUnits: this.meter.use.writeUnits,
        writeCalls: this.meter.use.writeCalls,
        readUnits: this.meter.use.readUnits,
        throttledCalls: this.meter.use.throttledCalls,
        throttledByPartition: this.meter.use.throttledByPartition,
        peakWrites: this.meter.writes.peaks(),
        peakReads: this.meter.reads.peaks(),
      },
      api: this.api,
      eventBridge: this.eventBridge,
      ssmCalls: this.ssmCalls,
      instanceHours: this.instanceHours,
      startExecutionThrottles: this.sfn.counts.startsThrottled,
      janitorStarts: this.janitorStarts,
      agentErrors: this.agentErrors,
      handlerErrors: this.handlerErrors,
    };
  }
}

/** The class of a failure reason, for counting FAILED jobs by cause. */
export function causeOf(reason: string | null): string {
  if (reason === null) return 'no reason';
  if (/throttl|RequestLimitExceeded|ProvisionedThroughput|TooManyRequests|rate exceeded/i.test(reason)) return 'throttling';
  if (/no capacity|InsufficientInstanceCapacity|VcpuLimitExceeded/i.test(reason)) return 'no capacity';
  if (/controller|Error:/.test(reason)) return 'controller fault';
  return 'other';
}

function heapPush(heap: number[], value: number): void {
  heap.push(value);
  let i = heap.length - 1;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if ((heap[parent] as number) <= value) break;
    heap[i] = heap[parent] as number;
    i = parent;
  }
  heap[i] = value;
}

function heapPop(heap: number[]): void {
  const last = heap.pop() as number;
  if (heap.length === 0) return;
  let i = 0;
  for (;;) {
    const left = 2 * i + 1;
    if (left >= heap.length) break;
    const right = left + 1;
    const child = right < heap.length && (heap[right] as number) < (heap[left] as number) ? right : left;
    if ((heap[child] as number) >= last) break;
    heap[i] = heap[child] as number;
    i = child;
  }
  heap[i] = last;
}
