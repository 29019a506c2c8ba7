// Submitting a job: parse the task, store the job, start the controller's execution.

import { createHash } from 'node:crypto';
import { IdempotencyKeyReusedError, InvalidTaskSpecError, type InputIssue } from '../errors.ts';
import type { IdempotencyClaim, JobEnded } from '../ports.ts';
import { retryOnConflict } from './retry.ts';
import { initialCounters } from '../policy/decide.ts';
import { resolveJob } from '../task-file/secrets.ts';
import { parseJobFile, parseTaskObject, type ParsedJob } from '../task-file/parse.ts';
import { taskPath } from '../located-yaml/path.ts';
import type { ParsedTask, SpecWarning, TaskSpec } from '../task-file/types.ts';
import { newJobId } from '../ids.ts';
import type { JobRecord, PipelineState } from '../model.ts';
import { JobStatus } from '../status.ts';
import { nowIso, type UseCaseDeps } from './deps.ts';
import { startController } from './start-controller.ts';

/** A task to run: YAML text, or an already-parsed object (a JSON body). */
export interface SubmitJobInput {
  readonly body: string | unknown;
  /**
   * Set or override `envs` (`--env K=V`); these win over the file's values and follow the
   * same rules (names, sizes, count, the task's total size: lib/task-file/limits.ts).
   */
  readonly envOverrides?: Readonly<Record<string, string>>;
  /**
   * Set or add `secrets` (`--secret NAME[=VALUE]`); every secret the file leaves null must
   * be given here. Same rules as the file's secrets.
   */
  readonly secretOverrides?: Readonly<Record<string, string>>;
  /**
   * Makes a repeated submit safe (a client retrying after a lost answer): the caller's key,
   * already checked by the surface that took it, and who the caller is (keys of different
   * callers never meet). Absent, every submit makes a job.
   */
  readonly idempotency?: { readonly key: string; readonly caller: string };
  /**
   * What the compute behind this surface cannot run, found at submit rather than at the
   * first launch (on AWS: user data over EC2's limit, a workdir it does not upload).
   */
  readonly computeProblems?: (spec: TaskSpec) => Promise<readonly InputIssue[]>;
  /** Told of a job this submit ended (its execution could not start), once it is stored. */
  readonly onJobEnded?: (ended: JobEnded) => Promise<void>;
}

/** The job's id and the spec's warnings, to show the user. */
export interface SubmitJobResult {
  readonly jobId: string;
  readonly warnings: readonly SpecWarning[];
  /** True when an earlier submit with the same idempotency key made the job. */
  readonly replayed: boolean;
}

/** How long an idempotency key names its job: a retried submit comes back well within it. */
export const IDEMPOTENCY_KEY_LIFETIME_MS = 24 * 60 * 60 * 1000;

/** Tries of a claim that lost a race to a claim that then vanished (lapsed, or a new id taken). */
const CLAIM_TRIES = 3;

/**
 * Parses the task and applies the env overrides (an invalid task, an invalid override, a
 * task they make too large, or one the compute cannot run throws InvalidTaskSpecError and
 * stores nothing), creates
 * the job PENDING with fresh counters, and starts its execution, named by the job id. A
 * start Step Functions throttles (or answers with a 5xx) leaves the job queued: PENDING,
 * with no execution, until startQueuedJobs starts it. If the execution cannot start for
 * any other reason, the job is marked FAILED_CONTROLLER with the reason, so it never sits
 * PENDING forever, and the error is rethrown.
 *
 * With an idempotency key, the job and the caller's claim on the key are written together
 * (JobStore.createJobOnce), so of any number of submits with one key, at once or within
 * IDEMPOTENCY_KEY_LIFETIME_MS, one makes a job and the others answer its id (`replayed`).
 * A repeat that finds the job still PENDING with no execution (the first submit stopped
 * before starting it) starts it: an execution is named by its job, so two starts make one.
 * A repeat whose task differs (after env overrides) throws IdempotencyKeyReusedError.
 */
export async function submitJob(
  input: SubmitJobInput,
  deps: Pick<UseCaseDeps, 'store' | 'workflow' | 'clock' | 'random' | 'secrets'>,
): Promise<SubmitJobResult> {
  const { store, clock, random } = deps;
  const parsed = typeof input.body === 'string' ? parseJobFile(input.body) : singleTask(parseTaskObject(input.body));
  const { specs, values } = resolveJob(parsed, { envs: input.envOverrides, secrets: input.secretOverrides });
  const problems = await taskProblems(specs, parsed.pipeline !== null, input.computeProblems);
  if (problems.length > 0) throw new InvalidTaskSpecError(problems);
  const [spec] = specs as [TaskSpec, ...TaskSpec[]];
  const pipeline: PipelineState | null = parsed.pipeline === null ? null : { name: parsed.pipeline.name, tasks: specs, current: 0 };
  const record = (jobId: string, at: string): JobRecord => ({
    ...newJobRecord(jobId, spec, at),
    ...(pipeline === null ? {} : { name: pipeline.name ?? spec.name, pipeline }),
  });
  // Stored before the job that names them, so no launch can find a job without them; a
  // job that is then not written leaves none behind.
  const hasSecrets = Object.keys(values).length > 0;
  const storeSecrets = async (jobId: string) => {
    if (hasSecrets) await deps.secrets.put(jobId, values);
  };
  const forgetSecretsOnError = async <T>(jobId: string, write: () => Promise<T>): Promise<T> => {
    try {
      return await write();
    } catch (error) {
      if (hasSecrets) await deps.secrets.delete(jobId);
      throw error;
    }
  };
  const { idempotency } = input;
  if (idempotency === undefined) {
    const jobId = newJobId(clock, random);
    await storeSecrets(jobId);
    await forgetSecretsOnError(jobId, () => store.createJob(record(jobId, nowIso(clock))));
    await startController(jobId, deps, input.onJobEnded);
    return { jobId, warnings: parsed.warnings, replayed: false };
  }

  const fingerprint = taskFingerprint(pipeline === null ? spec : pipeline, values);
  const held = await retryOnConflict(CLAIM_TRIES, async () => {
    const now = clock.now();
    const claim: IdempotencyClaim = {
      key: idempotencyClaimKey(idempotency.caller, idempotency.key),
      jobId: newJobId(clock, random),
      fingerprint,
      expiresAt: new Date(now.getTime() + IDEMPOTENCY_KEY_LIFETIME_MS).toISOString(),
    };
    await storeSecrets(claim.jobId);
    const holder = await forgetSecretsOnError(claim.jobId, () => store.createJobOnce(record(claim.jobId, now.toISOString()), claim, now.toISOString()));
    const created = holder.jobId === claim.jobId;
    // Another submit with this key made the job: the secrets stored for this one go.
    if (!created && hasSecrets) await deps.secrets.delete(claim.jobId);
    return { holder, created };
  });
  if (held.created) {
    await startController(held.holder.jobId, deps, input.onJobEnded);
    return { jobId: held.holder.jobId, warnings: parsed.warnings, replayed: false };
  }
  if (held.holder.fingerprint !== fingerprint) throw new IdempotencyKeyReusedError(held.holder.jobId);
  const job = await store.getJob(held.holder.jobId);
  if (job.status === JobStatus.PENDING && job.executionArn === null) await startController(job.jobId, deps, input.onJobEnded);
  return { jobId: job.jobId, warnings: parsed.warnings, replayed: true };
}

/**
 * What a claim is stored under: SHA-256 of the caller and their key, so a key is only ever
 * compared with the same caller's, and no key text (any length, any bytes the surface let
 * through) reaches a table key.
 */
export function idempotencyClaimKey(caller: string, key: string): string {
  return createHash('sha256').update(JSON.stringify([caller, key]), 'utf8').digest('hex');
}

/** A one-task file's parse as a job's. */
function singleTask(task: ParsedTask): ParsedJob {
  return { pipeline: null, tasks: [task], warnings: task.warnings };
}

/** What the compute cannot run, task by task (a pipeline's paths carry `task N: `). */
async function taskProblems(specs: readonly TaskSpec[], isPipeline: boolean, check: SubmitJobInput['computeProblems']): Promise<InputIssue[]> {
  if (check === undefined) return [];
  const found = await Promise.all(specs.map((spec) => check(spec)));
  return found.flatMap((issues, index) =>
    isPipeline ? issues.map((issue) => ({ ...issue, path: taskPath(index, issue.path) })) : issues,
  );
}

/**
 * SHA-256 of the task (or pipeline) as parsed, and of its secrets' values: the same task in
 * YAML or JSON, with other comments or key order, is the same request; any change to what
 * would run, a secret's value included, is a different one.
 */
export function taskFingerprint(spec: TaskSpec | PipelineState, secrets: Readonly<Record<string, string>> = {}): string {
  const request = Object.keys(secrets).length === 0 ? spec : { task: spec, secrets };
  return createHash('sha256').update(JSON.stringify(canonical(request)), 'utf8').digest('hex');
}

/** A value with every object's keys sorted, so its JSON does not depend on insertion order. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, canonical((value as Record<string, unknown>)[key])]),
  );
}

/**
 * A job as submitJob stores it, created at `at`: PENDING, with fresh counters for its
 * market, no attempt and no execution yet.
 */
export function newJobRecord(jobId: string, spec: TaskSpec, at: string): JobRecord {
  return {
    jobId,
    name: spec.name,
    spec,
    status: JobStatus.PENDING,
    counters: initialCounters(spec.resources.useSpot),
    attemptCount: 0,
    executionArn: null,
    failureReason: null,
    createdAt: at,
    updatedAt: at,
  };
}
