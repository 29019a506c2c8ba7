// Which jobs a command talks to: `--api URL` / RELAUNCH_API_URL, else the local runtime
// that already serves the data folder, else a runtime opened in this process.

import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { InvalidInputError } from '../lib/errors.ts';
import type { LocalRuntime, LocalRuntimeOptions } from '../local/runtime.ts';
import { assertWritableDataDir } from '../local/data-dir.ts';
import { findLocalServer } from '../local/server-info.ts';
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
    throw new InvalidInputError([{ path: '--api', message: `expected an http(s) URL, got "${url}"` }]);
  }
  return url;
}

/** Opens the local runtime; a data folder that cannot be one is bad input, named. */
async function openRuntime(options: TargetOptions, io: Io, runtimeOptions: Partial<LocalRuntimeOptions>): Promise<LocalRuntime> {
  assertWritableDataDir(options.dataDir);
  // Loaded only here: the runtime brings the CDK (to render the ASL) and dynalite, which
  // commands answered by a running server or a remote API never need.
  const { LocalRuntime } = await import('../local/runtime.ts');
  try {
    return await LocalRuntime.open({
      dataDir: options.dataDir,
      onError: (error) => io.err(`relaunch: ${error instanceof Error ? error.message : String(error)}`),
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

/**
 * Opens the target. A runtime opened here serves the API on 127.0.0.1 (its nodes' agents
 * reach it there), so `relaunch status` in another terminal reaches it too instead of
 * fighting over the database.
 */
export async function openTarget(options: TargetOptions, io: Io, runtimeOptions: Partial<LocalRuntimeOptions> = {}): Promise<Target> {
  const api = configuredApi(options);
  if (api !== null) return remote(new HttpJobsClient(api, { sign: !isLoopback(api) }));
  const server = findLocalServer(options.dataDir);
  if (server !== null) return remote(new HttpJobsClient(server.url, { dataDir: options.dataDir }));
  const runtime = await openRuntime(options, io, runtimeOptions);
  return { client: new InProcessJobsClient(runtime), runtime, close: () => runtime.close() };
}

/**
 * Makes sure a local runtime serves the data folder in the background (`relaunch serve
 * --exit-when-idle`, started detached when none runs), for `run --detach`.
 */
export async function backgroundTarget(options: TargetOptions): Promise<Target> {
  const api = configuredApi(options);
  if (api !== null) return remote(new HttpJobsClient(api, { sign: !isLoopback(api) }));
  let server = findLocalServer(options.dataDir);
  if (server === null) {
    // Said here: the background server's own refusal would go nowhere, and this would wait 15 s.
    assertWritableDataDir(options.dataDir);
    const bin = fileURLToPath(new URL('./bin.js', import.meta.url));
    // Any free port: serve's default (8080) may be taken, by another data folder's server too.
    const child = spawn(process.execPath, [bin, 'serve', '--data-dir', options.dataDir, '--port', '0', '--exit-when-idle'], {
      detached: true,
      stdio: 'ignore',
    });
    child.unref();
    for (let tries = 0; server === null && tries < 300; tries += 1) {
      await sleep(50);
      server = findLocalServer(options.dataDir);
    }
    if (server === null) throw new Error('the background runtime did not start within 15 s');
  }
  return remote(new HttpJobsClient(server.url, { dataDir: options.dataDir }));
}

function remote(client: JobsClient): Target {
  return { client, runtime: null, close: async () => undefined };
}

export function isLoopback(url: string): boolean {
  const host = new URL(url).hostname;
  return host === 'localhost' || host === '[::1]' || host.startsWith('127.');
}
