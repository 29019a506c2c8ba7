// Which jobs a command talks to: `--api URL` / RELAUNCH_API_URL, else the local runtime
// that owns the data folder (over its API), else a runtime opened in this process, which
// then owns the folder. One process owns a folder at a time (local/owner-lock.ts); a job
// is only ever submitted to an owner that takes jobs (`relaunch serve`), since any other
// closes its runtime when its own work is done.

import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { InvalidInputError } from '../lib/errors.ts';
import type { LocalRuntime, LocalRuntimeOptions } from '../local/runtime.ts';
import { assertWritableDataDir } from '../local/data-dir.ts';
import { DataDirInUseError } from '../local/owner-lock.ts';
import { findFolderOwner, takesNoJobsMessage, untrustedMessage, type FolderOwner, type ServerInfo } from '../local/server-info.ts';
import type { Io } from './exit.ts';
import { HttpJobsClient, InProcessJobsClient, type JobsClient } from './jobs-client.ts';

/** The options every job command takes. */
export interface TargetOptions {
  readonly api?: string;
  readonly dataDir: string;
}

/** Adds `--api` and `--data-dir` to a command. */
export function withTargetOptions(command: Command): Command {
  return command
    .option('--api <url>', 'talk to this relaunch API instead of running locally (default: $RELAUNCH_API_URL)')
    .option('--data-dir <dir>', 'the local runtime\'s data folder', process.env.RELAUNCH_DATA_DIR ?? '.relaunch');
}

/** A client, and how to let go of it. */
export interface Target {
  readonly client: JobsClient;
  /** The runtime when it runs in this process (jobs then live as long as it does). */
  readonly runtime: LocalRuntime | null;
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
const SHORT_COMMANDS: ReadonlySet<string> = new Set(['status', 'logs', 'cancel']);

/**
 * Whether an owner that takes no jobs will let the folder go soon, so a command that
 * needs the folder waits for it: a short command, or a serve that stopped taking jobs
 * because it is about to exit.
 */
function passing(server: ServerInfo): boolean {
  return SHORT_COMMANDS.has(server.command) || (server.command === 'serve' && !server.takesJobs);
}

/**
 * Opens the target for `command`. To read or cancel, any owner's API will do; to submit
 * (`submits`), only one that takes jobs: another `run`'s runtime is refused at once, a
 * short command's is waited out. A runtime opened here serves the API on 127.0.0.1 (its
 * nodes' agents reach it there) and takes no jobs from other commands.
 */
export async function openTarget(
  options: TargetOptions,
  io: Io,
  usage: { readonly command: string; readonly submits?: boolean; readonly runtime?: Partial<LocalRuntimeOptions> },
): Promise<Target> {
  const api = configuredApi(options);
  if (api !== null) return remote(new HttpJobsClient(api, { sign: !isLoopback(api) }));
  const found = await useOrOwn(
    options,
    (server) => (usage.submits !== true || server.takesJobs ? 'use' : passing(server) ? 'wait' : 'refuse'),
    () => openRuntime(options, io, { ...usage.runtime, role: { command: usage.command, takesJobs: false } }),
  );
  if ('server' in found) return remote(new HttpJobsClient(found.server.url, { dataDir: options.dataDir }));
  const { runtime } = found;
  return { client: new InProcessJobsClient(runtime), runtime, close: () => runtime.close() };
}

/**
 * Opens the folder for `relaunch serve`: refuses one another runtime that takes jobs, or
 * a `run`, serves; waits out a short command that owns it.
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

/**
 * Makes sure a local runtime that takes jobs serves the data folder in the background
 * (`relaunch serve --exit-when-idle`, started detached when the folder is free), for
 * `run --detach`. A folder a foreground `run` owns is refused.
 */
export async function backgroundTarget(options: TargetOptions): Promise<Target> {
  const api = configuredApi(options);
  if (api !== null) return remote(new HttpJobsClient(api, { sign: !isLoopback(api) }));
  const deadline = Date.now() + OWNER_WAIT_MS;
  let started = false;
  for (;;) {
    const owner = trustedOwner(options.dataDir);
    if (owner.kind === 'serving' && owner.server.takesJobs) return remote(new HttpJobsClient(owner.server.url, { dataDir: options.dataDir }));
    if (owner.kind === 'serving' && !passing(owner.server)) throw inUse(options.dataDir, owner);
    if (owner.kind === 'none' && !started) {
      // Said here: the background server's own refusal would go nowhere.
      assertWritableDataDir(options.dataDir);
      startBackgroundServer(options.dataDir);
      started = true;
    }
    if (Date.now() >= deadline) {
      if (owner.kind === 'none') throw new Error(`the background runtime did not start within ${OWNER_WAIT_MS / 1000} s`);
      throw inUse(options.dataDir, owner);
    }
    await sleep(OWNER_POLL_MS);
  }
}

/** Starts `relaunch serve --exit-when-idle` on the folder, detached: it outlives this command. */
function startBackgroundServer(dataDir: string): void {
  const bin = fileURLToPath(new URL('./bin.js', import.meta.url));
  // Any free port: serve's default (8080) may be taken, by another data folder's server too.
  const child = spawn(process.execPath, [bin, 'serve', '--data-dir', dataDir, '--port', '0', '--exit-when-idle'], {
    detached: true,
    stdio: 'ignore',
  });
  child.unref();
}

function remote(client: JobsClient): Target {
  return { client, runtime: null, close: async () => undefined };
}

export function isLoopback(url: string): boolean {
  const host = new URL(url).hostname;
  return host === 'localhost' || host === '[::1]' || host.startsWith('127.');
}
