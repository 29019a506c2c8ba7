// Submitting a job: parse the task, store the job, start the controller's execution.

import { initialCounters } from '../policy/decide.ts';
import { withEnvOverrides } from '../spec/envs.ts';
import { parseTaskFile, parseTaskObject } from '../spec/parse.ts';
import type { SpecWarning, TaskSpec } from '../spec/types.ts';
import { newJobId } from '../ids.ts';
import type { JobRecord } from '../model.ts';
import { JobStatus } from '../status.ts';
import { errorMessage, nowIso, type UseCaseDeps } from './deps.ts';

/** A task to run: YAML text, or an already-parsed object (a JSON body). */
export interface SubmitJobInput {
  readonly body: string | unknown;
  /**
   * Set or override `envs` (`--env K=V`); these win over the file's values and follow the
   * same rules (names, sizes, count, the task's total size: lib/spec/limits.ts).
   */
  readonly envOverrides?: Readonly<Record<string, string>>;
}

/** The new job's id and the spec's warnings, to show the user. */
export interface SubmitJobResult {
  readonly jobId: string;
  readonly warnings: readonly SpecWarning[];
}

/**
 * Parses the task and applies the env overrides (an invalid task, an invalid override, or
 * a task they make too large throws InvalidTaskSpecError and stores nothing), creates
 * the job PENDING with fresh counters, and starts its execution, named by the job id. If
 * the execution cannot start, the job is marked FAILED_CONTROLLER with the reason, so it
 * never sits PENDING forever, and the error is rethrown.
 */
export async function submitJob(
  input: SubmitJobInput,
  deps: Pick<UseCaseDeps, 'store' | 'workflow' | 'clock' | 'random'>,
): Promise<SubmitJobResult> {
  const { store, workflow, clock, random } = deps;
  const parsed = typeof input.body === 'string' ? parseTaskFile(input.body) : parseTaskObject(input.body);
  const spec: TaskSpec = withEnvOverrides(parsed.spec, input.envOverrides ?? {});
  const jobId = newJobId(clock, random);
  await store.createJob(newJobRecord(jobId, spec, nowIso(clock)));

  let executionArn: string;
  try {
    executionArn = await workflow.start(jobId, { jobId, attempt: 0, attemptsInExecution: 0 });
  } catch (error) {
    const reason = `could not start the controller: ${errorMessage(error)}`;
    await store.changeStatus(
      jobId,
      { from: JobStatus.PENDING, to: JobStatus.FAILED_CONTROLLER, reason, attempt: null, at: nowIso(clock) },
      { failureReason: reason },
    );
    throw error;
  }
  await store.setExecution(jobId, executionArn);
  return { jobId, warnings: parsed.warnings };
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
