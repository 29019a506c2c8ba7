// Exit statuses of every relaunch command (DESIGN.md section 6), and how errors reach stderr.
import { Command, CommanderError } from 'commander';

import { InvalidInputError, InvalidTaskSpecError, JobNotFoundError, RelaunchError } from '../lib/errors.ts';

/** 0: job succeeded or command done; 1: job failed or was cancelled; 2: bad input or usage. */
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
  if (error instanceof RelaunchError) {
    io.err(`error: ${error.message}`);
    return ExitStatus.JOB_FAILED;
  }
  const message = error instanceof Error ? error.message : String(error);
  io.err(`error: ${message}`);
  return ExitStatus.JOB_FAILED;
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
