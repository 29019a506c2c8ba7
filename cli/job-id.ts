// A job given on the command line, by its id or by its name (as `sky jobs` takes either):
// checked before any store sees it, so a string that can name no job (2 KB long, `../x`)
// is bad input, not a store's key-size error; a name is then looked up among the jobs.

import { InvalidInputError } from '../lib/errors.ts';
import { isJobId } from '../lib/ids.ts';
import { isTerminal } from '../lib/status.ts';
import { MAX_NAME_LENGTH } from '../lib/task-file/limits.ts';
import { TASK_NAME } from '../lib/task-file/schema.ts';
import type { JobSummary } from '../lib/views.ts';

/** The longest part of a bad argument the message repeats. */
const SHOWN_CHARS = 40;

/** A job as the user named it: its id, or the name its task file (or `--name`) gave it. */
export type JobRef = { readonly id: string } | { readonly name: string };

/**
 * Commander's parser for a `<job>` argument: a job id, else a job name (a task's `name`),
 * else exit 2 saying what either looks like. An id-shaped string is always an id.
 */
export function jobRefArgument(value: string): JobRef {
  if (isJobId(value)) return { id: value };
  if (value.length <= MAX_NAME_LENGTH && TASK_NAME.test(value)) return { name: value };
  const shown = value.length > SHOWN_CHARS ? `${JSON.stringify(value.slice(0, SHOWN_CHARS))}... (${value.length} characters)` : JSON.stringify(value);
  throw new InvalidInputError([{ path: '<job>', message: `expected a job id such as j-0m8x2k1qz-4fz0aa or a job's name such as train-llama, got ${shown}` }]);
}

/** What a name is looked up in: the jobs, newest first. */
export interface JobLister {
  listJobs(): Promise<JobSummary[]>;
}

/**
 * The id of the job a reference names. A name means the newest job of that name (as a
 * name does wherever an id is taken); with `live`, the one job of that name still running,
 * and several such is ambiguous (cancelling the wrong one could not be undone).
 *
 * @throws InvalidInputError at `<job>` when no job has the name, or listing the ids when
 *   `live` finds several (exit 2).
 */
export async function resolveJob(ref: JobRef, lister: JobLister, options: { readonly live?: boolean } = {}): Promise<string> {
  if ('id' in ref) return ref.id;
  const named = (await lister.listJobs()).filter((job) => job.name === ref.name);
  if (named.length === 0) throw new InvalidInputError([{ path: '<job>', message: `no job named ${ref.name} (nor with that id): relaunch status lists the jobs` }]);
  if (options.live !== true) return newest(named).jobId;
  const live = named.filter((job) => !isTerminal(job.status));
  if (live.length === 0) return newest(named).jobId;
  if (live.length > 1) {
    const ids = live.map((job) => job.jobId).join(', ');
    throw new InvalidInputError([{ path: '<job>', message: `${live.length} jobs named ${ref.name} are running (${ids}): give the id of the one you mean` }]);
  }
  return live[0]?.jobId ?? newest(named).jobId;
}

/** The newest job of a list, by its submit time (an id sorts by it too, for jobs of one millisecond). */
function newest(jobs: readonly JobSummary[]): JobSummary {
  return [...jobs].sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.jobId.localeCompare(a.jobId))[0] as JobSummary;
}
