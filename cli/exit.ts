// Exit statuses of every relaunch command (DESIGN.md section 6), and how errors reach stderr.
import { constants as osConstants } from 'node:os';
import { Command, CommanderError } from 'commander';

import { InvalidInputError, InvalidTaskSpecError, JobNotFoundError, RelaunchError } from '../lib/errors.ts';
import { ApiError } from './jobs-client.ts';

/**
 * 0: job succeeded or command done; 1: job failed or was cancelled; 2: bad input or usage,
 * an API that cannot be reached or refuses the caller included (nothing ran: the fix is the caller's).
 */
export const ExitStatus = { OK: 0, JOB_FAILED: 1, USAGE: 2 } as const;
export type ExitStatus = (typeof ExitStatus)[keyof typeof ExitStatus];

/** Where a command writes; tests pass buffers, the binary passes the process streams. */
export interface Io {
  out(text: string): void;
  err(text: string): void;
}

/** The process's own streams. */
export const processIo: Io = {
  out: (text) => process.stdout.write(text.endsWith('\n') ? text : `${text}\n`),
  err: (text) => process.stderr.write(text.endsWith('\n') ? text : `${text}\n`),
};

/**
 * Maps an error to the message and exit status a user sees. Bad input (a bad file or
 * event, an unknown job) is 2; anything
 * relaunch raised on purpose is shown by its message; anything else is a bug, shown
 * briefly (no stack trace) with status 1.
 */
export function reportError(io: Io, error: unknown): ExitStatus {
  if (error instanceof InvalidTaskSpecError || error instanceof InvalidInputError || error instanceof JobNotFoundError) {
    io.err(`error: ${error.message.split('\n').join('\nerror: ')}`);
    return ExitStatus.USAGE;
  }
  const unreachable = apiSetupProblem(error);
  if (unreachable !== null) {
    io.err(`error: ${unreachable.message}\n  fix: ${unreachable.fix}`);
    return ExitStatus.USAGE;
  }
  if (error instanceof RelaunchError) {
    io.err(`error: ${error.message}`);
    return ExitStatus.JOB_FAILED;
  }
  const message = error instanceof Error ? error.message : String(error);
  io.err(`error: ${message}`);
  return ExitStatus.JOB_FAILED;
}

/** A command stopped by a signal exits as a shell reports one: 128 + its number (130 for SIGINT, 143 for SIGTERM). */
export function exitStatusOfSignal(signal: NodeJS.Signals): number {
  return 128 + (osConstants.signals[signal] ?? 0);
}

/** The CommanderError code that carries a command's own exit status up to `main`. */
export const EXIT_STATUS_CODE = 'relaunch.exitStatus';

/**
 * A subcommand wired like every other: usage errors become CommanderErrors (addCommand
 * does not pass exitOverride down) and help goes to the given streams.
 */
export function subcommand(name: string, io: Io): Command {
  return new Command(name)
    .exitOverride()
    .configureOutput({ writeOut: (text) => io.out(text), writeErr: (text) => io.err(text) });
}

/**
 * Ends an action with this status. Commander discards an action's return value, so a
 * non-zero status travels as a CommanderError that `main` turns into the exit status.
 */
export function exitWith(status: number): void {
  if (status !== ExitStatus.OK) throw new CommanderError(status, EXIT_STATUS_CODE, `exit status ${status}`);
}

/** What to tell a user whose command never reached a working API: the problem, and the fix `relaunch check` would give. */
export interface SetupProblem {
  readonly message: string;
  readonly fix: string;
}

/** HTTP statuses of an API that refused the caller rather than the request. */
const REFUSED_CALLER: ReadonlySet<number> = new Set([401, 403]);

/**
 * The problem when an error says the API was never reached, or refused the caller: no AWS
 * credentials to sign with, nothing answering at the URL, or credentials the API refuses.
 * null for any other error (a job's own failure stays 1).
 */
export function apiSetupProblem(error: unknown): SetupProblem | null {
  const checkAfter = 'then relaunch check (it checks the credentials, the region and the API)';
  if (error instanceof Error && error.name === 'CredentialsProviderError') {
    const profile = process.env.AWS_PROFILE;
    const which = profile === undefined || profile === '' ? 'the default chain: environment, ~/.aws/credentials and config, SSO, instance role' : `profile ${profile} (AWS_PROFILE)`;
    return {
      message: `no AWS credentials to sign the API's requests with (${which}): ${firstLine(error.message)}`,
      fix: `configure credentials (aws configure, aws sso login, or AWS_PROFILE) and check them with aws sts get-caller-identity; ${checkAfter}`,
    };
  }
  if (!(error instanceof ApiError)) return null;
  if (error.statusCode === 0) {
    return {
      message: firstLine(error.message),
      fix: `check the URL (--api, or RELAUNCH_API_URL: the stack's ApiUrl output, aws cloudformation describe-stacks) and the network; ${checkAfter}`,
    };
  }
  if (REFUSED_CALLER.has(error.statusCode)) {
    return {
      message: `${firstLine(error.message)} (the API refused these credentials)`,
      fix: `use credentials allowed execute-api:Invoke on this API (aws sts get-caller-identity says whose are in use); ${checkAfter}`,
    };
  }
  return null;
}

function firstLine(text: string): string {
  return text.split('\n')[0] ?? text;
}
