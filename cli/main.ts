// The `relaunch` program: one commander root, one subcommand per file in cli/commands.

import { Command, CommanderError } from 'commander';
import packageJson from '../package.json' with { type: 'json' };
import { cancelCommand } from './commands/cancel.ts';
import { checkCommand } from './commands/check.ts';
import { dashboardCommand } from './commands/dashboard.ts';
import { logsCommand } from './commands/logs.ts';
import { runCommand } from './commands/run.ts';
import { serveCommand } from './commands/serve.ts';
import { simulateCommand } from './commands/simulate.ts';
import { reportCommand } from './commands/report.ts';
import { sshCommand } from './commands/ssh.ts';
import { statusCommand } from './commands/status.ts';
import { validateCommand } from './commands/validate.ts';
import { EXIT_STATUS_CODE, ExitStatus, processIo, reportError, type Io } from './exit.ts';

/**
 * Runs `relaunch` with process-style argv (`[node, script, ...args]`) and resolves to the
 * exit status. Commands end with a non-zero status by throwing a CommanderError that
 * carries it (commander ignores an action's return value); commander's own usage errors
 * are status 2, as DESIGN.md section 6 says.
 */
export async function main(argv: readonly string[], io: Io = processIo): Promise<number> {
  const program = new Command('relaunch')
    .description('Batch jobs on EC2 spot capacity that come back by themselves.')
    .version(packageJson.version, '--version', 'print the version')
    .exitOverride()
    .configureOutput({ writeOut: (text) => io.out(text), writeErr: (text) => io.err(text) });
  program.addCommand(runCommand(io));
  program.addCommand(statusCommand(io));
  program.addCommand(reportCommand(io));
  program.addCommand(logsCommand(io));
  program.addCommand(cancelCommand(io));
  program.addCommand(validateCommand(io));
  program.addCommand(simulateCommand(io));
  program.addCommand(serveCommand(io));
  program.addCommand(dashboardCommand(io));
  program.addCommand(checkCommand(io));
  program.addCommand(sshCommand(io));
  try {
    await program.parseAsync([...argv]);
    return ExitStatus.OK;
  } catch (error) {
    if (error instanceof CommanderError) return statusOf(error);
    return reportError(io, error);
  }
}

/** Help and version end well; any other commander error is a usage error. */
function statusOf(error: CommanderError): number {
  if (error.code === EXIT_STATUS_CODE) return error.exitCode;
  if (error.exitCode === 0) return ExitStatus.OK;
  return ExitStatus.USAGE;
}
