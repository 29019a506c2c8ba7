// `relaunch dashboard --api URL`: the jobs page for a deployed stack, served on this
// machine; its calls to the API are signed here, as every command signs them. Without an
// API it says where the local runtime of the data folder serves its own page.

import type { Command } from 'commander';
import { InvalidInputError } from '../../lib/errors.ts';
import { configuredApi, dataDirDefault, isLoopback } from '../context.ts';
import { DashboardProxy } from '../dashboard-proxy.ts';
import { HttpJobsClient } from '../jobs-client.ts';
import { exitWith, ExitStatus, reportError, subcommand, type Io } from '../exit.ts';
import { findLocalServer } from '../../local/server-info.ts';
import { parsePort, portInUse } from './serve.ts';

interface DashboardOptions {
  readonly api?: string;
  readonly port: number;
  readonly dataDir: string;
}

/** The `dashboard` subcommand. */
export function dashboardCommand(io: Io): Command {
  return subcommand('dashboard', io)
    .description("serve the jobs page on 127.0.0.1 for a deployed API, signing its calls with this machine's AWS credentials")
    .option('--api <url>', 'the deployed relaunch API (default: $RELAUNCH_API_URL)')
    .option('--port <n>', 'the port (0: any free one)', parsePort, 8090)
    .option('--data-dir <dir>', "without --api: the local runtime's data folder, whose page to point at", dataDirDefault())
    .action(async (options: DashboardOptions) => exitWith(await dashboard(options, io)));
}

async function dashboard(options: DashboardOptions, io: Io): Promise<ExitStatus> {
  try {
    const api = configuredApi(options);
    if (api === null) return pointAtLocalPage(options.dataDir, io);
    const client = new HttpJobsClient(api, { sign: !isLoopback(api) });
    const proxy = await DashboardProxy.start({ client, port: options.port, onError: (error) => io.err(`relaunch: ${String(error)}`) });
    // The handlers before the line that says the page is up: a signal sent on reading it stops the proxy cleanly.
    const stop = new AbortController();
    const onSignal = (): void => stop.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    io.out(`jobs page of ${api} on ${proxy.url}; Ctrl-C to stop`);
    try {
      await new Promise<void>((resolve) => stop.signal.addEventListener('abort', () => resolve(), { once: true }));
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      await proxy.close();
    }
    return ExitStatus.OK;
  } catch (error) {
    return reportError(io, portInUse(error, options.port));
  }
}

/** The page of the runtime serving the data folder (`relaunch serve`, or a `relaunch run` in progress). */
function pointAtLocalPage(dataDir: string, io: Io): ExitStatus {
  const server = findLocalServer(dataDir);
  if (server === null) {
    throw new InvalidInputError([
      {
        path: '--api',
        message: `expected the URL of a deployed relaunch API (or $RELAUNCH_API_URL); no local runtime serves ${dataDir} either (relaunch serve starts one, and its page)`,
      },
    ]);
  }
  io.out(`jobs page: ${server.url}/ (the local runtime of ${dataDir}, pid ${server.pid})`);
  return ExitStatus.OK;
}
