// `relaunch serve`: the REST API of a deployed stack, on 127.0.0.1, over the local runtime,
// and the jobs page at `/`.

import type { Command } from 'commander';
import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidInputError } from '../../lib/errors.ts';
import { dataDirDefault, openServedRuntime } from '../context.ts';
import { isTerminal } from '../../lib/status.ts';
import { cancelJob, listJobs } from '../../lib/usecases/index.ts';
import type { LocalRuntime } from '../../local/runtime.ts';
import { NO_CHAOS } from '../../local/chaos.ts';
import { readChaosFile } from '../chaos-file.ts';
import { exitWith, ExitStatus, reportError, subcommand, type Io } from '../exit.ts';

interface ServeOptions {
  readonly port: number;
  readonly dataDir: string;
  readonly exitWhenIdle?: boolean;
  readonly chaos?: string;
}

/**
 * How long a background runtime waits with no live job and no command calling it before it
 * exits, unless RELAUNCH_IDLE_EXIT_SECONDS says otherwise: long enough that runs started
 * one after the other share it, short enough that nothing lingers.
 */
export const DEFAULT_IDLE_EXIT_MS = 30_000;

/** The environment variable that sets the background runtime's idle bound. */
export const IDLE_EXIT_VARIABLE = 'RELAUNCH_IDLE_EXIT_SECONDS';

/**
 * The background runtime's idle bound: RELAUNCH_IDLE_EXIT_SECONDS (seconds, fractions
 * allowed), else DEFAULT_IDLE_EXIT_MS.
 *
 * @throws InvalidInputError naming the variable when it is not a number of seconds.
 */
export function idleExitMs(environment: NodeJS.ProcessEnv = process.env): number {
  const text = environment[IDLE_EXIT_VARIABLE];
  if (text === undefined || text === '') return DEFAULT_IDLE_EXIT_MS;
  if (!/^[0-9]+(\.[0-9]+)?$/.test(text.trim()) || Number(text) > 86_400) {
    throw new InvalidInputError([{ path: IDLE_EXIT_VARIABLE, message: `expected a number of seconds from 0 to 86400, got "${text.slice(0, 40)}"` }]);
  }
  return Math.round(Number(text) * 1000);
}

/** The `serve` subcommand. */
export function serveCommand(io: Io): Command {
  return subcommand('serve', io)
    .description('serve the REST API (POST/GET /jobs, GET/DELETE /jobs/{id}) and the jobs page (/) on 127.0.0.1 over the local runtime')
    .option('--port <n>', 'the port (0: any free one)', parsePort, 8080)
    .option('--data-dir <dir>', "the local runtime's data folder (one per user by default)", dataDirDefault())
    .option('--exit-when-idle', `exit once no job is live and no command has called for a while ($${IDLE_EXIT_VARIABLE}, default ${DEFAULT_IDLE_EXIT_MS / 1000}); how relaunch run starts it`)
    .option('--chaos <file>', 'inject the faults of this chaos file into every job, to rehearse recovery')
    .action(async (options: ServeOptions) => exitWith(await serve(options, io)));
}

async function serve(options: ServeOptions, io: Io): Promise<ExitStatus> {
  try {
    // Read before anything is opened: a bad file ends the command with nothing started.
    const chaos = options.chaos === undefined ? NO_CHAOS : await readChaosFile(options.chaos);
    const idleMs = idleExitMs();
    // A folder another runtime owns is refused, naming it; a port in use fails in open,
    // which then closes the database it opened and lets the folder go.
    const runtime = await openServedRuntime(options, {
      port: options.port,
      chaos,
      onError: (error) => io.err(`relaunch: ${String(error)}`),
      onNotice: (message) => io.err(`relaunch: ${message}`),
    });
    // The handlers before the lines that say the API is up: a signal sent on reading them
    // (a supervisor, a test) ends the runtime cleanly, never the process outright.
    const stop = new AbortController();
    const onSignal = (): void => stop.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    io.out(`relaunch API on ${runtime.url} (data in ${runtime.dataDir}); Ctrl-C to stop`);
    io.out(`jobs page: ${runtime.url}/`);
    try {
      await (options.exitWhenIdle === true ? untilIdle(runtime, idleMs, stop.signal) : untilAborted(stop.signal));
    } finally {
      await cancelLiveJobs(runtime);
      await runtime.close();
    }
    return ExitStatus.OK;
  } catch (error) {
    return reportError(io, portInUse(error, options.port));
  }
}

/**
 * A listen that found the port taken, as bad input naming the port and the option that
 * picks another (exit 2); any other error as it was.
 */
export function portInUse(error: unknown, port: number): unknown {
  if ((error as NodeJS.ErrnoException | null)?.code !== 'EADDRINUSE') return error;
  return new InvalidInputError([
    { path: '--port', message: `expected a free port, but 127.0.0.1:${port} is in use by another program: give another with --port N (--port 0 takes any free one)` },
  ]);
}

function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

/**
 * Resolves when no job has been live, and no command has called the API, for `idleMs`
 * (or on a signal). Before it does, the runtime stops taking jobs and looks once more: a
 * job submitted meanwhile is never taken by a runtime about to exit, and one taken just
 * before keeps it up.
 */
async function untilIdle(runtime: LocalRuntime, idleMs: number, signal: AbortSignal): Promise<void> {
  const anyLive = async (): Promise<boolean> => (await listJobs(runtime.deps)).jobs.some((job) => !isTerminal(job.status));
  const pollMs = Math.max(50, Math.min(500, idleMs / 4));
  let idleSince = Date.now();
  while (!signal.aborted) {
    if (await anyLive()) idleSince = Date.now();
    else if (Date.now() - Math.max(idleSince, runtime.lastClientAt) >= idleMs) {
      const decidedAt = Date.now();
      await runtime.stopTakingJobs();
      // A command that called meanwhile (it found the runtime still serving) is answered first.
      if (!(await anyLive()) && runtime.lastClientAt < decidedAt) return;
      runtime.resumeTakingJobs();
      idleSince = Date.now();
    }
    await sleep(pollMs, undefined, { signal }).catch(() => undefined);
  }
}

/** Why a job that `relaunch serve` cancels as it stops ended: not the user's cancel. */
export const RUNTIME_STOPPED = 'cancelled because the local runtime was stopped (relaunch serve got SIGTERM or Ctrl-C)';

/** On shutdown, live jobs are cancelled and given a moment to end, so none is left half done. */
async function cancelLiveJobs(runtime: LocalRuntime): Promise<void> {
  const { jobs } = await listJobs(runtime.deps);
  const live = jobs.filter((job) => !isTerminal(job.status));
  await Promise.all(live.map((job) => cancelJob(job.jobId, runtime.deps, RUNTIME_STOPPED).catch(() => undefined)));
  // The timer is cleared once the jobs end: a pending one would keep the process up 5 s more.
  const patience = new AbortController();
  await Promise.race([
    Promise.all(live.map((job) => runtime.waitForJob(job.jobId).catch(() => undefined))),
    sleep(5_000, undefined, { signal: patience.signal }).catch(() => undefined),
  ]);
  patience.abort();
}

/** `--port`: 0-65535 (0: any free one); anything else is a usage error. */
export function parsePort(value: string): number {
  const n = Number(value);
  if (!/^[0-9]+$/.test(value) || n > 65_535) {
    throw new InvalidInputError([{ path: '--port', message: `expected a port 0-65535, got "${value}"` }]);
  }
  return n;
}
