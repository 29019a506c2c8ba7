// `relaunch run TASK.yaml`: submit a job and follow it to the end (or return at once with --detach).

import type { Command } from 'commander';
import { formatIssue, InvalidInputError } from '../../lib/errors.ts';
import type { ParsedJob } from '../../lib/task-file/parse.ts';
import { envNameProblem } from '../../lib/task-file/envs.ts';
import { resolveJob } from '../../lib/task-file/secrets.ts';
import { JobStatus } from '../../lib/status.ts';
import { errorMessage } from '../../lib/usecases/deps.ts';
import type { JobView } from '../../lib/views.ts';
import { configuredApi, isLoopback, runtimeTarget, withTargetOptions, type Target, type TargetOptions } from '../context.ts';
import { ApiError, HttpJobsClient, LocalRuntimeGoneError } from '../jobs-client.ts';
import type { LocalSubmitOptions } from '../../local/runtime.ts';
import { ensureBuckets, S3SourceStore, s3Client, tagCreatedBuckets } from '../s3-sources.ts';
import { exitStatusOfSignal, exitWith, ExitStatus, reportError, subcommand, type Io } from '../exit.ts';
import { followJob } from '../follow.ts';
import { countersLine } from './status.ts';
import { launchOverridesOf, readWithOverrides, withLaunchOverrideOptions, type LaunchOverrides } from '../launch-overrides.ts';
import { LocalSourceStore, RecordingSourceStore, uploadSources } from '../sources.ts';
import { sourcesDir } from '../../local/paths.ts';
import { ensureLocalBuckets, markCreatedBuckets, removeCreatedBuckets } from '../local-buckets.ts';
import type { ChaosPlan } from '../../lib/chaos-file/types.ts';
import { chaosIssuesForTask, mergeChaos, NO_CHAOS, preemptAttemptsPlan } from '../../local/chaos.ts';
import { readChaosFile } from '../chaos-file.ts';
import { parseDuration } from '../../lib/chaos-file/parse.ts';
import { markSetupNoticeShown, setupNotice } from '../setup-notice.ts';

/** Options of `relaunch run`. */
export interface RunOptions extends TargetOptions, LaunchOverrides {
  readonly yes?: boolean;
  readonly json?: boolean;
  readonly detach?: boolean;
  readonly env?: readonly string[];
  readonly secret?: readonly string[];
  readonly preemptAttempts?: readonly number[];
  readonly chaos?: string;
  /** `--boot`: every new node's emulated boot, in ms (the chaos plan's bootMs). */
  readonly boot?: number;
}

/** The `run` subcommand. */
export function runCommand(io: Io): Command {
  return withTargetOptions(
    withLaunchOverrideOptions(
      subcommand('run', io)
        .description('run a task and bring it back per its job_recovery policy; follows the job to the end')
        .argument('<task>', 'the task file (SkyPilot YAML)')
        .option('--json', 'print only the final job as one JSON object')
        .option('--detach', 'return the job id at once; the job runs in the background'),
    )
      .option('-y, --yes', 'taken for `sky jobs launch -y`: relaunch asks nothing before it runs')
      .option('--env <KEY[=VALUE]>', "set or override an env of the task: KEY=VALUE, or KEY for this shell's $KEY (repeatable)", collect, [])
      .option('--secret <NAME[=VALUE]>', "give a secret of the task: NAME takes this shell's $NAME, NAME=VALUE the value (repeatable)", collect, [])
      .option('--preempt-attempts <list>', 'interrupt these attempts as a spot preemption would (local only), e.g. 1,3', attemptList)
      .option('--chaos <file>', 'inject the faults of this chaos file: preemptions, lost or silent nodes, no capacity... (local only)')
      .option('--boot <duration>', "emulate each new node's boot: its process starts this long after its launch, e.g. 30s; a node kept for the next attempt gets none (local only)", bootDuration),
  ).action(async (file: string, options: RunOptions) => exitWith(await runTask(file, options, io)));
}

/**
 * Validates the file here (so errors carry its line numbers), submits it, and follows the
 * job. Exit status: 0 when it SUCCEEDED, 1 when it failed or was cancelled, 2 for bad input
 * or an API that cannot be reached, 130 or 143 when Ctrl-C or SIGTERM stopped the command.
 */
export async function runTask(file: string, options: RunOptions, io: Io): Promise<number> {
  let target: Target | null = null;
  try {
    const envOverrides = parseEnvs(options.env ?? [], process.env);
    const secretOverrides = parseSecrets(options.secret ?? [], process.env);
    const { text, parsed } = await readWithOverrides(file, launchOverridesOf(options));
    const { tasks, warnings } = parsed;
    // The overrides checked and every secret given before anything is opened: exit 2
    // naming what is wrong, as the submit itself would.
    resolveJob(parsed, { envs: envOverrides, secrets: secretOverrides });
    for (const warning of warnings) io.err(`warning: ${formatIssue(warning)}`);
    const chaos = await chaosOf(options, Math.max(...tasks.map((task) => task.spec.numNodes)));
    // Relative sources are read from where the command runs, as SkyPilot reads them, whatever
    // folder the task file is in (`relaunch run configs/train.yaml` with `workdir: .`).
    const sources = await withSources(text, parsed, process.cwd(), options, io);
    // Said before the job is submitted, so it comes before any line of the setup's own.
    const notice = configuredApi(options) === null ? setupNotice(parsed, options.dataDir) : null;
    if (notice !== null) io.err(notice);

    const submitted = await submitToTarget(options, sources.body, { envOverrides, secretOverrides, chaos }).catch(async (error: unknown) => {
      // Refused: what was made for this job goes again, and the refusal is what is said.
      await sources.refused().catch((cleanup: unknown) => io.err(`warning: could not remove what run made for the refused job: ${errorMessage(cleanup)}`));
      throw error;
    });
    target = submitted.target;
    const { jobId } = submitted;
    if (notice !== null) {
      try {
        markSetupNoticeShown(options.dataDir);
      } catch (error) {
        io.err(`warning: could not note in ${options.dataDir} that the setup notice was shown, so the next run shows it again: ${errorMessage(error)}`);
      }
    }
    // The job runs either way: a bucket left unmarked is only kept after it.
    await sources.submitted(jobId).catch((error: unknown) => {
      io.err(`warning: could not mark the buckets run created as made for ${jobId}, so its end keeps them: ${errorMessage(error)}`);
    });
    if (options.detach === true) {
      io.out(options.json === true ? JSON.stringify({ jobId }) : jobId);
      return ExitStatus.OK;
    }
    if (target.pageUrl !== null && options.json !== true) io.err(`jobs page: ${target.pageUrl}/#/jobs/${jobId} (while this runs)`);
    const { view, signal } = await followUntilDone(target, jobId, options, io);
    if (options.json === true) io.out(JSON.stringify(view, null, 2));
    else io.out(summary(view));
    // Stopped by a signal: the shell's convention (128 + its number: 130 for Ctrl-C), so a
    // script tells an interrupted run from a job that failed.
    if (signal !== null) return exitStatusOfSignal(signal);
    return view.status === JobStatus.SUCCEEDED ? ExitStatus.OK : ExitStatus.JOB_FAILED;
  } catch (error) {
    return reportError(io, error);
  } finally {
    await target?.close();
  }
}

/** Tries of a submit a local runtime refused because it was stopping, or did not take because it had gone (another is found, or started, each time). */
const SUBMIT_TRIES = 3;

/**
 * Opens the target and submits the task: attached or detached, a local job goes to the
 * data folder's runtime, started in the background when none serves it (context.ts
 * `runtimeTarget`), so any number of runs share one. A local runtime that stopped taking
 * jobs between the look and the submit (a background `serve` about to exit) answers 409
 * and took nothing: the target is opened again, which waits for it to go, and the task
 * submitted there.
 */
async function submitToTarget(options: RunOptions, body: string, submit: LocalSubmitOptions): Promise<{ target: Target; jobId: string }> {
  for (let tries = 1; ; tries += 1) {
    const target = await runtimeTarget(options);
    try {
      return { target, jobId: (await target.client.submit(body, submit)).jobId };
    } catch (error) {
      await target.close();
      // A background runtime stopping (409), or gone between the look and the submit (nothing
      // answered at all): open again, which waits for it to go and starts another. A submit
      // it may have read is sent again under the same key (submit-record.ts), so it is made once.
      const gone = error instanceof LocalRuntimeGoneError || (error instanceof ApiError && error.statusCode === 409);
      if (!gone || configuredApi(options) !== null || tries >= SUBMIT_TRIES) throw error;
    }
  }
}

/**
 * Follows the job. Ctrl-C (or SIGTERM) cancels a local job, whichever runtime runs it, so
 * no process outlives the command; with a deployed API, Ctrl-C only stops following.
 */
async function followUntilDone(target: Target, jobId: string, options: RunOptions, io: Io): Promise<{ view: JobView; signal: NodeJS.Signals | null }> {
  const stop = new AbortController();
  let received: NodeJS.Signals | null = null;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stop.signal.aborted) return;
    received = signal;
    stop.abort();
    io.err(target.local ? `cancelling ${jobId}` : `stopped following ${jobId}; it goes on (relaunch cancel ${jobId})`);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const quiet = options.json === true;
    // One follower to the end: the cancel's lines follow what was printed, never all of it again.
    const onAbort = target.local ? async (): Promise<void> => void (await target.client.cancel(jobId)) : undefined;
    const view = await followJob(target.client, jobId, io, { progress: !quiet, output: !quiet, signal: stop.signal, onAbort });
    return { view, signal: received };
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

function summary(view: JobView): string {
  const reason = view.failureReason === null ? '' : `: ${view.failureReason}`;
  // A standby the job did not take (let go unused, or about to be) never ran: it is no attempt to count.
  const attempts = view.attempts.filter((attempt) => attempt.standby === null || attempt.standby.state === 'adopted').length;
  return `${view.jobId} ${view.status} after ${attempts} attempt${attempts === 1 ? '' : 's'}; ${countersLine(view)}${reason}`;
}

/**
 * The file with its local sources uploaded (lib/task-file/mounts.ts names them `upload:...`):
 * into the data folder for a local runtime, into the stack's bucket for a deployed API,
 * which also gets the buckets MOUNTs name created when missing.
 */
async function withSources(text: string, parsed: ParsedJob, base: string, options: RunOptions, io: Io): Promise<SubmittedSources> {
  const api = configuredApi(options);
  if (api === null) {
    const store = new RecordingSourceStore(new LocalSourceStore(sourcesDir(options.dataDir)));
    const body = await uploadSources(text, parsed, base, store, io, [options.dataDir]);
    const created = await ensureLocalBuckets(parsed, options.dataDir, io).catch(async (error: unknown) => {
      await store.removeStored();
      throw error;
    });
    return {
      body,
      submitted: (jobId) => markCreatedBuckets(options.dataDir, created, jobId),
      async refused() {
        await store.removeStored();
        await removeCreatedBuckets(options.dataDir, created);
      },
    };
  }
  const usesData = parsed.tasks.some(({ spec }) => spec.workdir !== null || (spec.fileMounts ?? []).length > 0);
  if (!usesData) return { body: text, submitted: () => Promise.resolve(), refused: () => Promise.resolve() };
  const location = await new HttpJobsClient(api, { sign: !isLoopback(api) }).sourcesLocation().catch((error: unknown) => {
    if (!(error instanceof ApiError) || error.statusCode !== 404) throw error;
    throw new InvalidInputError([{ path: '--api', message: `expected an API that takes uploads, but ${api} keeps none in S3 (a local server): give its --data-dir instead of --api` }]);
  });
  const s3 = s3Client(location);
  let created: string[];
  let body: string;
  try {
    body = await uploadSources(text, parsed, base, new S3SourceStore(s3, location), io, [options.dataDir]);
    created = await ensureBuckets(parsed, s3, location, io);
  } finally {
    s3.destroy();
  }
  return {
    body,
    // An archive in the stack's bucket is named by its content and may serve another job
    // already; the bucket's expiry removes it when none does.
    refused: () => Promise.resolve(),
    async submitted(jobId) {
      if (created.length === 0) return;
      const tagging = s3Client(location);
      try {
        await tagCreatedBuckets(tagging, created, jobId);
      } finally {
        tagging.destroy();
      }
    },
  };
}

/**
 * The task as submitted (local sources replaced by what they were stored as), and what is
 * done once the submit named the job: the buckets `run` created are marked as made for it,
 * so its end can delete those its mounts say not to keep.
 */
interface SubmittedSources {
  readonly body: string;
  submitted(jobId: string): Promise<void>;
  /** Undoes what was made for a submit that was refused: archives stored, bucket folders created (locally). */
  refused(): Promise<void>;
}

/**
 * The faults to inject: the chaos file's, then `--preempt-attempts`'s; `--boot` over the
 * file's `boot`. Read before anything is opened, so a bad file or a node the task lacks
 * ends the command with nothing submitted.
 */
async function chaosOf(options: RunOptions, numNodes: number): Promise<ChaosPlan> {
  const file = options.chaos === undefined ? NO_CHAOS : await readChaosFile(options.chaos);
  const fromOptions = preemptAttemptsPlan(options.preemptAttempts ?? []);
  const plan = mergeChaos(file, options.boot === undefined ? fromOptions : { ...fromOptions, bootMs: options.boot });
  const issues = chaosIssuesForTask(plan, numNodes);
  if (issues.length > 0) throw new InvalidInputError(issues);
  return plan;
}

/**
 * `--env` values, as `sky jobs launch` takes them: `KEY=VALUE` as given, `KEY` alone from
 * `environment` (the caller's shell); a key must be a shell variable name.
 */
export function parseEnvs(pairs: readonly string[], environment: NodeJS.ProcessEnv): Record<string, string> {
  // Entries, not assignments: `--env __proto__=x` must reach the spec's check as a key.
  const envs = new Map<string, string>();
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    const key = at < 0 ? pair : pair.slice(0, at);
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) {
      throw new InvalidInputError([{ path: '--env', message: `expected KEY=VALUE or KEY with KEY a variable name, got "${pair}"` }]);
    }
    const value = at < 0 ? environment[key] : pair.slice(at + 1);
    if (value === undefined) {
      const message = `expected "${key}" to be set in this environment (--env KEY takes your shell's value): export it, or give --env ${key}=VALUE`;
      throw new InvalidInputError([{ path: '--env', message }]);
    }
    envs.set(key, value);
  }
  return Object.fromEntries(envs);
}

/**
 * `--secret` values: `NAME=VALUE` as given, `NAME` from `environment` (so the value stays
 * out of the command line and the shell's history).
 */
export function parseSecrets(given: readonly string[], environment: NodeJS.ProcessEnv): Record<string, string> {
  const secrets = new Map<string, string>();
  for (const entry of given) {
    const at = entry.indexOf('=');
    const name = at < 0 ? entry : entry.slice(0, at);
    const problem = envNameProblem(name);
    if (problem !== undefined) throw new InvalidInputError([{ path: '--secret', message: `${problem} (given as NAME or NAME=VALUE)` }]);
    const value = at < 0 ? environment[name] : entry.slice(at + 1);
    if (value === undefined) {
      throw new InvalidInputError([{ path: '--secret', message: `${name} is not set in this environment: export it, or give --secret ${name}=VALUE` }]);
    }
    secrets.set(name, value);
  }
  return Object.fromEntries(secrets);
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** `--boot 30s` → 30000; anything but a duration is a usage error naming `--boot`. */
export function bootDuration(value: string): number {
  return parseDuration(value, '--boot');
}

/** `1,3` → [1, 3]; anything else is a usage error. */
export function attemptList(value: string): number[] {
  const parts = value.split(',').map((part) => part.trim());
  if (parts.some((part) => !/^[1-9][0-9]*$/.test(part))) {
    throw new InvalidInputError([
      { path: '--preempt-attempts', message: `expected attempt numbers (1-based) separated by commas, got "${value}"` },
    ]);
  }
  return parts.map(Number);
}
