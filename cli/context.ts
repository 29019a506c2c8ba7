// Which jobs a command talks to: `--api URL` / RELAUNCH_API_URL, else the local runtime of
// the data folder (by default one per user, local/data-dir.ts). Every `run` submits to one
// background runtime per folder (`relaunch serve --exit-when-idle`), started by whichever
// command needs it first and gone once idle, or to a `relaunch serve` the user started:
// any number of runs share it. Reading commands use that runtime's API when one serves the
// folder, else open the folder in this process for as long as they answer; with no folder
// at all they read an empty queue, and create nothing. One process owns a folder at a time
// (local/owner-lock.ts).

import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Option, type Command } from 'commander';
import { InvalidInputError, JobNotFoundError } from '../lib/errors.ts';
import type { LocalRuntime, LocalRuntimeOptions, LocalSubmitOptions } from '../local/runtime.ts';
import { assertWritableDataDir, defaultDataDir } from '../local/data-dir.ts';
import { DataDirInUseError } from '../local/owner-lock.ts';
import { findFolderOwner, takesNoJobsMessage, untrustedMessage, type FolderOwner, type ServerInfo } from '../local/server-info.ts';
import type { Io } from './exit.ts';
import { ApiError, HttpJobsClient, InProcessJobsClient, LOCAL_PACING, type JobsClient, type Pacing } from './jobs-client.ts';
import type { JobEvent } from '../lib/model.ts';
import type { SpecWarning } from '../lib/task-file/types.ts';
import type { JobSummary, JobView } from '../lib/views.ts';

/** The environment variable that names the data folder. */
export const DATA_DIR_VARIABLE = 'RELAUNCH_DATA_DIR';

/** Where a command's data folder was named: by the option, the environment, or neither (the default). */
export type DataDirSource = '--data-dir' | typeof DATA_DIR_VARIABLE | 'default';

/** The options every job command takes. */
export interface TargetOptions {
  readonly api?: string;
  readonly dataDir: string;
  /** Where `dataDir` came from (withTargetOptions sets it); absent: taken as named by `--data-dir`. */
  readonly dataDirFrom?: DataDirSource;
}

/** The data folder of a command that takes `--data-dir` without withTargetOptions: $RELAUNCH_DATA_DIR, else the user's. */
export function dataDirDefault(): string {
  const named = process.env[DATA_DIR_VARIABLE];
  return named === undefined || named === '' ? defaultDataDir() : named;
}

/** Adds `--api` and `--data-dir` to a command; the action's options say where the folder was named (`dataDirFrom`). */
export function withTargetOptions(command: Command): Command {
  return command
    .option('--api <url>', 'talk to this relaunch API instead of running locally (default: $RELAUNCH_API_URL)')
    .addOption(new Option('--data-dir <dir>', "the local runtime's data folder (one per user by default)").env(DATA_DIR_VARIABLE).default(defaultDataDir()))
    .hook('preAction', (self) => {
      const source = self.getOptionValueSource('dataDir');
      self.setOptionValue('dataDirFrom', source === 'cli' ? '--data-dir' : source === 'env' ? DATA_DIR_VARIABLE : 'default');
    });
}

/** A client, and how to let go of it. */
export interface Target {
  readonly client: JobsClient;
  /** The runtime when it runs in this process (jobs then live as long as it does). */
  readonly runtime: LocalRuntime | null;
  /** True for a local runtime (in this process or another), false for an API given by URL. */
  readonly local: boolean;
  /** Where the local runtime serves its jobs page; null when there is none. */
  readonly pageUrl: string | null;
  close(): Promise<void>;
}

/** The API URL the user configured, checked. */
export function configuredApi(options: TargetOptions): string | null {
  const url = options.api ?? process.env.RELAUNCH_API_URL;
  if (url === undefined || url === '') return null;
  const parsed = URL.canParse(url) ? new URL(url) : null;
  if (parsed === null || !['http:', 'https:'].includes(parsed.protocol) || parsed.host === '') {
    throw new InvalidInputError([{ path: options.api !== undefined ? '--api' : 'RELAUNCH_API_URL', message: `expected an http(s) URL, got "${url}"` }]);
  }
  return url;
}

/** Opens the local runtime; a data folder that cannot be one is bad input, named. */
async function openRuntime(options: TargetOptions, io: Io, runtimeOptions: Partial<LocalRuntimeOptions>): Promise<LocalRuntime> {
  assertWritableDataDir(options.dataDir);
  // Loaded only here: the runtime brings dynalite and the state machine's interpreter, which
  // commands answered by a running server or a remote API never need.
  const { LocalRuntime } = await import('../local/runtime.ts');
  try {
    return await LocalRuntime.open({
      dataDir: options.dataDir,
      onError: (error) => io.err(`relaunch: ${error instanceof Error ? error.message : String(error)}`),
      onNotice: (message) => io.err(`relaunch: ${message}`),
      ...runtimeOptions,
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' || code === 'ENOTDIR' || code === 'EACCES') {
      throw new InvalidInputError([{ path: '--data-dir', message: `expected a folder relaunch can write, got "${options.dataDir}" (${code})` }]);
    }
    throw error;
  }
}

/** How long a command waits for the folder's owner to say where it serves, or, when it cannot use that owner, to let the folder go. */
export const OWNER_WAIT_MS = 15_000;
/** How often it looks meanwhile. */
const OWNER_POLL_MS = 50;

/** What a command does with an owner it found serving the folder. */
type OwnerVerdict = 'use' | 'wait' | 'refuse';

/**
 * Uses the folder's owner when `verdict` says so, or becomes the owner by opening a
 * runtime once the folder is free. An owner it must wait for (one starting, or a short
 * command about to end) is waited for up to OWNER_WAIT_MS.
 *
 * @throws InvalidInputError at `--data-dir` naming the owner, when `verdict` refuses it or
 *   the wait runs out.
 */
async function useOrOwn(
  options: TargetOptions,
  verdict: (server: ServerInfo) => OwnerVerdict,
  open: () => Promise<LocalRuntime>,
): Promise<{ readonly server: ServerInfo } | { readonly runtime: LocalRuntime }> {
  const deadline = Date.now() + OWNER_WAIT_MS;
  for (;;) {
    const owner = trustedOwner(options.dataDir);
    if (owner.kind === 'serving') {
      const said = verdict(owner.server);
      if (said === 'use') return { server: owner.server };
      if (said === 'refuse') throw inUse(options.dataDir, owner);
    } else if (owner.kind === 'none') {
      try {
        return { runtime: await open() };
      } catch (error) {
        // Another command took the folder between the look and the open: look again.
        if (!(error instanceof DataDirInUseError)) throw error;
      }
    }
    if (Date.now() >= deadline) throw inUse(options.dataDir, trustedOwner(options.dataDir));
    await sleep(OWNER_POLL_MS);
  }
}

/**
 * The folder's owner (local/server-info.ts), when its lock can be trusted.
 *
 * @throws InvalidInputError at `--data-dir` naming the live owner whose lock file was
 *   removed or replaced, or whose lock is not held.
 */
function trustedOwner(dataDir: string): Exclude<FolderOwner, { kind: 'untrusted' }> {
  const owner = findFolderOwner(dataDir);
  if (owner.kind !== 'untrusted') return owner;
  throw new InvalidInputError([{ path: '--data-dir', message: untrustedMessage(dataDir, owner.server, owner.why) }]);
}

/** The refusal of a folder another process owns, naming that process and what to do. */
export function inUse(dataDir: string, owner: FolderOwner): InvalidInputError {
  const message =
    owner.kind === 'serving'
      ? owner.server.takesJobs
        ? `${dataDir} is already served at ${owner.server.url} by \`relaunch ${owner.server.command}\` (pid ${owner.server.pid})`
        : `${dataDir} is in use: ${takesNoJobsMessage(owner.server, owner.server.pid)}`
      : `${dataDir} is in use by another relaunch process, which has not said where it serves within ${OWNER_WAIT_MS / 1000} s: let it end, or give another --data-dir`;
  return new InvalidInputError([{ path: '--data-dir', message }]);
}

/** The commands that own a folder only for a moment (they end once they have answered). */
const SHORT_COMMANDS: ReadonlySet<string> = new Set(['status', 'logs', 'cancel', 'ssh']);

/**
 * Whether an owner that takes no jobs will let the folder go soon, so a command that
 * needs the folder waits for it: a short command, or a serve that stopped taking jobs
 * because it is about to exit.
 */
function passing(server: ServerInfo): boolean {
  return SHORT_COMMANDS.has(server.command) || (server.command === 'serve' && !server.takesJobs);
}

/**
 * Opens the target for a command that reads or cancels (`status`, `logs`, `cancel`): the
 * API given, the API of the runtime serving the folder, or a runtime opened in this
 * process for as long as the command answers (it takes no jobs from other commands). A
 * folder that does not exist is never made: the user's default one reads as an empty
 * queue, one named by `--data-dir` or RELAUNCH_DATA_DIR is bad input.
 */
export async function openTarget(
  options: TargetOptions,
  io: Io,
  usage: { readonly command: string; readonly runtime?: Partial<LocalRuntimeOptions> },
): Promise<Target> {
  const api = configuredApi(options);
  if (api !== null) return remote(new HttpJobsClient(api, { sign: !isLoopback(api) }));
  if (!existsSync(options.dataDir)) return noFolderYet(options);
  const found = await useOrOwn(
    options,
    // A background runtime that stopped taking jobs is about to close its API: waited out.
    (server) => (server.command === 'serve' && !server.takesJobs ? 'wait' : 'use'),
    () => openRuntime(options, io, { ...usage.runtime, role: { command: usage.command, takesJobs: false } }),
  );
  if ('server' in found) {
    const client = new RelocatingClient(served(found.server, options), () => openTarget(options, io, usage));
    return { client, runtime: null, local: true, pageUrl: found.server.url, close: () => client.close() };
  }
  const { runtime } = found;
  return { client: new InProcessJobsClient(runtime), runtime, local: true, pageUrl: runtime.url, close: () => runtime.close() };
}

/**
 * The client of a runtime another process serves, for a command that reads or cancels:
 * when nothing answers a call at all (the runtime exited between the look and the call, a
 * background runtime gone idle), it looks again (`reopen`) and makes the call once more
 * there, to the runtime serving the folder now or one opened in this process. Reads and a
 * cancel are safe to make twice.
 */
export class RelocatingClient implements JobsClient {
  constructor(
    private target: Target,
    private readonly reopen: () => Promise<Target>,
  ) {}

  get where(): string {
    return this.target.client.where;
  }

  get pacing(): Pacing {
    return this.target.client.pacing;
  }

  get dataDir(): string | null {
    return this.target.client.dataDir;
  }

  submit(body: string, options: LocalSubmitOptions): Promise<{ jobId: string; warnings: readonly SpecWarning[] }> {
    return this.target.client.submit(body, options);
  }

  getJob(jobId: string): Promise<JobView> {
    return this.call((client) => client.getJob(jobId));
  }

  listJobs(): Promise<JobSummary[]> {
    return this.call((client) => client.listJobs());
  }

  cancel(jobId: string): Promise<{ status: string }> {
    return this.call((client) => client.cancel(jobId));
  }

  listEvents(jobId: string): Promise<JobEvent[]> {
    return this.call((client) => client.listEvents?.(jobId) ?? Promise.resolve([]));
  }

  close(): Promise<void> {
    return this.target.close();
  }

  private async call<T>(make: (client: JobsClient) => Promise<T>): Promise<T> {
    try {
      return await make(this.target.client);
    } catch (error) {
      if (!(error instanceof ApiError) || error.statusCode !== 0) throw error;
      await this.target.close();
      this.target = await this.reopen();
      return make(this.target.client);
    }
  }
}

/**
 * The target of a reading command on a data folder that does not exist: the user's
 * default folder before the first `run` is an empty queue (nothing is made); a folder the
 * user named is a mistake worth saying.
 *
 * @throws InvalidInputError at `--data-dir` or RELAUNCH_DATA_DIR, naming the folder.
 */
function noFolderYet(options: TargetOptions): Target {
  const from = options.dataDirFrom ?? '--data-dir';
  if (from !== 'default') {
    throw new InvalidInputError([
      { path: from, message: `expected an existing data folder, got "${options.dataDir}", which does not exist (relaunch run makes one; this command only reads it)` },
    ]);
  }
  return { client: new EmptyQueue(options.dataDir), runtime: null, local: true, pageUrl: null, close: async () => undefined };
}

/** The jobs of a data folder that does not exist yet: none. */
class EmptyQueue implements JobsClient {
  readonly where = 'local';
  readonly pacing = LOCAL_PACING;
  constructor(readonly dataDir: string) {}

  submit(): Promise<never> {
    return Promise.reject(new Error(`no runtime serves ${this.dataDir}`));
  }

  getJob(jobId: string): Promise<never> {
    return Promise.reject(new JobNotFoundError(jobId));
  }

  listJobs(): Promise<never[]> {
    return Promise.resolve([]);
  }

  cancel(jobId: string): Promise<never> {
    return Promise.reject(new JobNotFoundError(jobId));
  }

  listEvents(): Promise<never[]> {
    return Promise.resolve([]);
  }
}

/**
 * Opens the folder for `relaunch serve`: refuses one another runtime that takes jobs
 * serves; waits out a short command that owns it, or a background runtime on its way out.
 */
export async function openServedRuntime(options: TargetOptions, runtimeOptions: Partial<LocalRuntimeOptions> & { readonly onError: (error: unknown) => void }): Promise<LocalRuntime> {
  const found = await useOrOwn(
    options,
    (server) => (passing(server) ? 'wait' : 'refuse'),
    async () => {
      assertWritableDataDir(options.dataDir);
      const { LocalRuntime } = await import('../local/runtime.ts');
      return LocalRuntime.open({ dataDir: options.dataDir, ...runtimeOptions, role: { command: 'serve', takesJobs: true } });
    },
  );
  if ('runtime' in found) return found.runtime;
  throw inUse(options.dataDir, { kind: 'serving', server: found.server });
}

/** How long a command waits for the background runtime it started (or found starting) to serve. */
export const RUNTIME_START_MS = 60_000;

/** The background runtime's own output (its start, and what it could not do), in its data folder. */
export const RUNTIME_LOG_FILE = 'runtime.log';

/**
 * The runtime a `run` submits to: the API given, else the runtime that takes jobs on the
 * data folder, started in the background (`relaunch serve --exit-when-idle`) when none
 * does. Of several commands starting one at once, one background runtime takes the folder
 * and every command uses it (the others exit, refused by its lock). A runtime stopping
 * (taking no more jobs) is waited out, and another started.
 */
export async function runtimeTarget(options: TargetOptions): Promise<Target> {
  const api = configuredApi(options);
  if (api !== null) return remote(new HttpJobsClient(api, { sign: !isLoopback(api) }));
  const deadline = Date.now() + RUNTIME_START_MS;
  let started: BackgroundRuntime | null = null;
  for (;;) {
    const owner = trustedOwner(options.dataDir);
    if (owner.kind === 'serving' && owner.server.takesJobs) return served(owner.server, options);
    if (owner.kind === 'serving' && !passing(owner.server)) throw inUse(options.dataDir, owner);
    if (owner.kind === 'none') {
      // The runtime this command started ended without serving, and nobody else serves: why is in its log.
      if (started?.exit !== null && started?.exit !== undefined && started.exit !== 0) throw started.failure();
      if (started === null || started.exit !== null) {
        // Said here: the background runtime's own refusal would go only to its log.
        assertWritableDataDir(options.dataDir);
        started = startBackgroundRuntime(options.dataDir);
      }
    }
    if (Date.now() >= deadline) {
      if (owner.kind === 'none') throw new Error(`the background runtime of ${options.dataDir} did not start within ${RUNTIME_START_MS / 1000} s (its log: ${path.join(options.dataDir, RUNTIME_LOG_FILE)})`);
      throw inUse(options.dataDir, owner);
    }
    await sleep(OWNER_POLL_MS);
  }
}

/** A background runtime this command started, and how it ended if it has. */
interface BackgroundRuntime {
  /** Its exit status once it has exited, else null. */
  readonly exit: number | null;
  /** The error of a start that failed, with the end of the runtime's log. */
  failure(): Error;
}

/** Starts `relaunch serve --exit-when-idle` on the folder, detached: it outlives this command; its output goes to runtime.log. */
function startBackgroundRuntime(dataDir: string): BackgroundRuntime {
  const bin = fileURLToPath(new URL('./bin.js', import.meta.url));
  mkdirSync(dataDir, { recursive: true });
  const logFile = path.join(dataDir, RUNTIME_LOG_FILE);
  const log = openSync(logFile, 'a', 0o600);
  let exit: number | null = null;
  try {
    // Any free port: serve's default (8080) may be taken, by another data folder's server too.
    const child = spawn(process.execPath, [bin, 'serve', '--data-dir', dataDir, '--port', '0', '--exit-when-idle'], {
      detached: true,
      stdio: ['ignore', log, log],
    });
    child.once('exit', (code, signal) => (exit = code ?? (signal === null ? 1 : 128)));
    child.once('error', () => (exit = 1));
    child.unref();
  } finally {
    closeSync(log);
  }
  return {
    get exit() {
      return exit;
    },
    failure: () => new Error(`the background runtime of ${dataDir} exited (status ${exit}) without serving: ${lastLines(logFile)}`),
  };
}

/** The last lines of a log, for a message. */
function lastLines(file: string): string {
  try {
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    return lines.slice(-3).join(' / ');
  } catch {
    return `(its log ${file} cannot be read)`;
  }
}

/** The client of a local runtime another process serves. */
function served(server: ServerInfo, options: TargetOptions): Target {
  const client = new HttpJobsClient(server.url, { dataDir: options.dataDir, local: { pid: server.pid } });
  return { client, runtime: null, local: true, pageUrl: server.url, close: async () => undefined };
}

function remote(client: JobsClient): Target {
  return { client, runtime: null, local: false, pageUrl: null, close: async () => undefined };
}

export function isLoopback(url: string): boolean {
  const host = new URL(url).hostname;
  return host === 'localhost' || host === '[::1]' || host.startsWith('127.');
}
